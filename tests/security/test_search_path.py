"""A hostile schema first in the owner's search_path hijacks nothing of pgque's.

Another login role owns schema ``evil``, full of look-alikes of PostgreSQL's
operators, types and functions (``hostile.py``). The owner, a superuser,
puts it first in its search_path, even before pg_catalog, and runs what an
owner or a scheduler runs: the ticker-loop procedures (invoker rights, no
pinned path), the CDC triggers, and the common API. Not one look-alike may
run, and the role that owns them must not become a superuser.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from hostile import NoticeLog, install_hostile_schema, is_superuser

from _engine import make_queue, one


@pytest.fixture
def victim(
    conn: psycopg.Connection[Any], connect: Any, logins: dict[str, str]
) -> psycopg.Connection[Any]:
    """The owner's session with the hostile schema first in its search_path."""
    install_hostile_schema(conn, "evil", logins["nobody"])
    make_queue(conn, "q")
    one(conn, "select pgque.subscribe('q', 'c')")
    # The victim's own table, typed without looking anything up.
    conn.execute("create table public.orders (id pg_catalog.int4 primary key, v pg_catalog.text)")
    session: psycopg.Connection[Any] = connect()
    session.execute("set search_path = evil, pg_catalog, public")
    return session


CALLS = [
    "call pgque.ticker_loop_for(1)",
    "call pgque.ticker_loop()",
    "call pgque.run_maint()",
    "select pgque.send('q', 'x')",
    "select pgque.send_batch('q', array['a', 'b'])",
    "select pgque.force_tick('q')",
    "select pgque.ticker()",
    "select count(*) from pgque.receive('q', 'c', 10)",
    "select pgque.maint()",
    "select count(*) from pgque.maint_operations()",
    "select count(*) from pgque.get_queue_info()",
    "select count(*) from pgque.get_consumer_info()",
    "select pgque.create_queue('q2'); select pgque.drop_queue('q2')",
    "select count(*) from pgque.status()",
    "select pgque.version()",
    "select pgque.quote_fqname('a.b')",
    "select pgque.ticker_lock_key()",
]


@pytest.mark.parametrize("call", CALLS)
def test_owner_calls_run_no_lookalike(
    conn: psycopg.Connection[Any], victim: psycopg.Connection[Any],
    logins: dict[str, str], call: str,
) -> None:  # fmt: skip
    log = NoticeLog(victim)
    for statement in call.split("; "):
        victim.execute(statement)
    assert log.hits == []
    assert not is_superuser(conn, logins["nobody"])


@pytest.mark.parametrize("trigger", ["jsontriga", "logutriga", "sqltriga"])
def test_cdc_triggers_run_no_lookalike(
    conn: psycopg.Connection[Any], victim: psycopg.Connection[Any],
    logins: dict[str, str], trigger: str,
) -> None:  # fmt: skip
    conn.execute(
        f"create trigger cdc after insert or update or delete on public.orders"
        f" for each row execute function pgque.{trigger}('q')"
    )
    log = NoticeLog(victim)
    victim.execute("insert into public.orders values (1, 'a')")
    victim.execute("update public.orders set v = 'b'")
    victim.execute("delete from public.orders")
    assert log.hits == []
    assert not is_superuser(conn, logins["nobody"])
    # The trigger did its job: three events in the queue.
    one(conn, "select pgque.force_tick('q')")
    one(conn, "select pgque.ticker('q')")
    assert one(conn, "select count(*) from pgque.receive('q', 'c', 100)") == 3


def test_the_hostile_schema_does_hijack_unqualified_code(
    victim: psycopg.Connection[Any],
) -> None:
    # The control: the look-alikes work on code that is not written for a
    # hostile path, so the tests above prove something.
    for statement in (
        "select 1 < 2",
        "do $$ declare d interval; begin d := 2 * interval '1 s'; end $$",
        "select 'a'::text",
    ):
        log = NoticeLog(victim)
        victim.execute(statement)
        assert log.hits, statement
