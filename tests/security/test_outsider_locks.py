"""No login can hold pgque's coordination hostage with a lock it is able to take.

Advisory lock keys are one namespace per database, open to every session,
and pg_locks shows every key held: pgque waits on none (its sessions
serialize on rows of its own tables, which only its owner may lock). These
tests take, as a login without a pgque role and as a reader and a writer,
every advisory key pgque or an earlier version of it used, and every lock
those roles can take on pgque's tables, and then run what must not wait:
ticks, the ticker loops' leadership, maintenance, queue DDL and the install.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import pgque
from _engine import make_queue, one, rows

Conn = psycopg.Connection[Any]

# The keys pgque's earlier versions waited on: the ticker lock ('pgqt'), the
# install lock ('pgqu'), the per-queue tick locks and router locks (class
# 'pgqv', queue ids and the negative router keys).
TICKER_KEY, INSTALL_KEY, TICK_CLASS = 1885827444, 1885827445, 1885827446
QUEUE_KEYS = range(-300, 64)

# What must finish while the outsiders hold their locks (statement_timeout
# makes a wait fail the test instead of hanging it).
STATEMENTS = [
    "select pgque.ticker()",
    "select pgque.ticker('held')",
    "select pgque.force_tick('held')",
    "select pgque.ticker_eager('held')",
    "select pgque.create_queue('made_while_held')",
    "select pgque.drop_queue('made_while_held')",
    "select pgque.ticker_lead('lead-while-held')",
    "call pgque.ticker_loop()",
    "call pgque.run_maint()",
]


def hold_advisory_keys(conn: Conn) -> None:
    """Take, for the session, every advisory key pgque ever waited on."""
    conn.execute("select pg_advisory_lock(%s::bigint), pg_advisory_lock(%s::bigint)",
                 (TICKER_KEY, INSTALL_KEY))  # fmt: skip
    conn.execute(
        "select pg_advisory_lock(%s::int, k) from generate_series(%s::int, %s::int) k",
        (TICK_CLASS, QUEUE_KEYS.start, QUEUE_KEYS.stop - 1),
    )


@pytest.fixture(params=["nobody", "reader", "writer"])
def held(conn: Conn, login_as: Any, request: pytest.FixtureRequest) -> Iterator[Conn]:
    """A queue, and a login of each kind in turn holding every advisory key."""
    make_queue(conn, "held")
    one(conn, "select pgque.subscribe('held', 'c')")
    holder = login_as(request.param)
    hold_advisory_keys(holder)
    conn.execute("set statement_timeout = '10s'")
    try:
        yield holder
    finally:
        conn.execute("reset statement_timeout")


@pytest.mark.parametrize("statement", STATEMENTS)
def test_advisory_keys_held_by_others_stall_nothing(conn: Conn, held: Any, statement: str) -> None:
    one(conn, "select pgque.send('held', 'x')")
    if "drop_queue" in statement:
        make_queue(conn, "made_while_held")
    conn.execute(statement)  # fails with QueryCanceled if it waited


def test_the_ticker_loop_leads_and_ticks_while_the_old_ticker_key_is_held(
    conn: Conn, held: Any
) -> None:
    before = one(conn, "select count(*) from pgque.tick")
    one(conn, "select pgque.force_tick('held')")
    conn.execute("call pgque.ticker_loop()")
    assert one(conn, "select count(*) from pgque.tick") > before


def test_the_install_does_not_wait_for_held_keys(conn: Conn, held: Any) -> None:
    assert pgque.install(conn) == pgque.__version__


def test_a_reader_reading_every_table_stalls_no_tick_ddl_or_install(
    conn: Conn, login_as: Any
) -> None:
    """A reader in an open transaction that has read every table it may read (which
    keeps an ACCESS SHARE lock on each): ticks, queue DDL, maintenance and the
    install go on."""
    make_queue(conn, "held")
    one(conn, "select pgque.subscribe('held', 'c')")
    reader = login_as("reader")
    tables = [
        r[0]
        for r in rows(
            conn,
            "select c.oid::regclass::text from pg_class c"
            " where c.relnamespace = 'pgque'::regnamespace and c.relkind in ('r', 'v')"
            " and c.relname !~ '^event_[0-9]' and has_table_privilege(%s, c.oid, 'select')",
            one(reader, "select current_user"),
        )
    ]
    assert "pgque.queue" in tables and "pgque.tick" in tables
    reader.execute("begin")
    for table in tables:
        reader.execute(f"lock table {table} in access share mode")
    conn.execute("set statement_timeout = '10s'")
    try:
        one(conn, "select pgque.send('held', 'x')")
        for statement in STATEMENTS:
            if "drop_queue" in statement:
                continue  # its event tables are not among those read here
            conn.execute(statement)
        conn.execute("select pgque.drop_queue('made_while_held')")
        assert pgque.install(conn) == pgque.__version__
    finally:
        conn.execute("reset statement_timeout")
        reader.execute("rollback")


@pytest.mark.parametrize("kind", ["nobody", "reader", "writer", "admin"])
@pytest.mark.parametrize("table", ["pgque.mutex", "pgque.tick_lock", "pgque.ticker_leader"])
def test_no_role_can_lock_the_coordination_rows(login_as: Any, kind: str, table: str) -> None:
    conn = login_as(kind)
    for statement in (
        f"select 1 from {table} for key share",
        f"lock table {table} in row share mode",
    ):
        with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
            conn.execute(statement)
