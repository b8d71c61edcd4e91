"""A role with no pgque grant learns nothing from pgque, and each role keeps to its part."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from _engine import make_queue, one, tick

DENIED = psycopg.errors.InsufficientPrivilege


@pytest.fixture
def queue(conn: psycopg.Connection[Any]) -> str:
    make_queue(conn, "orders")
    one(conn, "select pgque.subscribe('orders', 'mailer')")
    one(conn, "select pgque.send('orders', 'card 4111')")
    return "orders"


@pytest.mark.parametrize(
    "statement",
    [
        "select * from pgque.queue",
        "select * from pgque.tick",
        "select pgque.version()",
        "select * from pgque.get_queue_info()",
        "select * from pgque.receive('orders', 'mailer', 10)",
        "select pgque.send('orders', 'x')",
    ],
)
def test_nobody_can_read_or_call(login_as: Any, queue: str, statement: str) -> None:
    with pytest.raises(DENIED):
        login_as("nobody").execute(statement)


def test_a_channel_carries_a_wakeup_and_nothing_else(
    conn: psycopg.Connection[Any], login_as: Any, queue: str
) -> None:
    # LISTEN takes no privilege in PostgreSQL: anyone who can connect and
    # guesses the queue's name hears its ticks; the payload is empty.
    outsider = login_as("nobody")
    outsider.execute('listen "pgque_orders"')
    tick(conn, "orders")
    heard = list(outsider.notifies(timeout=5, stop_after=1))
    assert [(n.channel, n.payload) for n in heard] == [("pgque_orders", "")]


@pytest.mark.parametrize(
    ("kind", "statement"),
    [
        ("writer", "select * from pgque.receive('orders', 'mailer', 10)"),
        ("writer", "select * from pgque.queue"),
        ("reader", "select pgque.send('orders', 'x')"),
        ("reader", "select pgque.create_queue('other')"),
        ("reader", "select * from pgque.idem"),
        ("admin", "select * from pgque.idem"),
        ("admin", "select pgque.uninstall()"),
    ],
)
def test_each_role_keeps_to_its_part(login_as: Any, queue: str, kind: str, statement: str) -> None:
    with pytest.raises(DENIED):
        login_as(kind).execute(statement)


def test_admin_manages_queues_through_functions(login_as: Any, queue: str) -> None:
    admin = login_as("admin")
    assert one(admin, "select pgque.create_queue('audit')") == 1
    assert one(admin, "select pgque.set_queue_config('audit', 'disable_insert', 'true')") == 1
    with pytest.raises(psycopg.errors.RaiseException, match="disallowed"):
        admin.execute("select pgque.send('audit', 'x')")
    assert one(admin, "select pgque.set_queue_config('audit', 'disable_insert', null)") == 1
    assert one(admin, "select pgque.send('audit', 'x')") > 0
    assert one(admin, "select pgque.drop_queue('audit')") == 1
