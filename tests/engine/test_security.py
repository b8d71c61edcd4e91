"""Roles, grants and SECURITY DEFINER hardening."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from _engine import make_queue, one, rows, tick

DENIED = psycopg.errors.InsufficientPrivilege  # SQLSTATE 42501


def test_every_definer_function_pins_search_path(conn: psycopg.Connection[Any]) -> None:
    unpinned = rows(
        conn,
        "select p.oid::regprocedure::text from pg_proc p"
        " where p.pronamespace = 'pgque'::regnamespace and p.prosecdef"
        " and not coalesce('search_path=pgque, pg_catalog, pg_temp' = any (p.proconfig), false)",
    )
    assert unpinned == []
    assert (
        one(
            conn,
            "select count(*) from pg_proc where pronamespace = 'pgque'::regnamespace and prosecdef",
        )
        > 20
    )


def test_public_can_execute_nothing(conn: psycopg.Connection[Any]) -> None:
    executable = rows(
        conn,
        "select p.oid::regprocedure::text from pg_proc p"
        " where p.pronamespace = 'pgque'::regnamespace"
        " and has_function_privilege('public', p.oid, 'execute')",
    )
    assert executable == []
    assert one(conn, "select has_schema_privilege('public', 'pgque', 'usage')") is False


@pytest.fixture
def roles(conn: psycopg.Connection[Any]) -> Iterator[dict[str, str]]:
    """Fresh NOLOGIN roles that are members of one pgque role each (dropped afterwards)."""
    suffix = uuid.uuid4().hex[:8]
    made = {kind: f"t_{kind}_{suffix}" for kind in ("reader", "writer", "admin", "nobody")}
    for kind, role in made.items():
        conn.execute(f'create role "{role}" nologin')
        if kind != "nobody":
            conn.execute(f'grant pgque_{kind} to "{role}"')
    try:
        yield made
    finally:
        conn.execute("reset role")
        for role in made.values():
            conn.execute(f'drop owned by "{role}"')
            conn.execute(f'drop role "{role}"')


def as_role(conn: psycopg.Connection[Any], role: str, query: str, *params: Any) -> Any:
    conn.execute(f'set role "{role}"')
    try:
        cur = conn.execute(query, params or None)
        return cur.fetchone()
    finally:
        conn.execute("reset role")


@pytest.fixture
def batch(conn: psycopg.Connection[Any]) -> int:
    make_queue(conn, "q")
    one(conn, "select pgque.register_consumer('q', 'c')")
    one(conn, "select pgque.insert_event('q', 't', 'x')")
    tick(conn, "q")
    return int(one(conn, "select pgque.next_batch('q', 'c')"))


ALLOWED = {
    "reader": [
        "select pgque.register_consumer('q', 'r')",
        "select pgque.next_batch('q', 'c')",
        "select count(*) from pgque.get_batch_events({batch})",
        "select pgque.event_retry({batch}, 1, 0)",
        "select * from pgque.get_queue_info('q')",
        "select * from pgque.get_consumer_info()",
        "select * from pgque.get_batch_info({batch})",
        "select pgque.version()",
        "select pgque.finish_batch({batch})",
        "select pgque.unregister_consumer('q', 'c')",
    ],
    "writer": [
        "select pgque.insert_event('q', 't', 'w')",
        "select pgque.insert_event('q', 't', 'w', '1', '2', '3', '4')",
    ],
    "admin": [
        "select pgque.create_queue('other')",
        "select pgque.set_queue_config('q', 'ticker_max_count', '10')",
        "select pgque.ticker('q')",
        "select pgque.maint()",
        "select pgque.batch_retry({batch}, 0)",
        "select pgque.insert_event('q', 't', 'a')",
        "select pgque.next_batch('q', 'c')",
        "select pgque.create_queue('other'), pgque.drop_queue('other')",
    ],
}

DENIED_CALLS = {
    "reader": [
        "select pgque.insert_event('q', 't', 'r')",
        "select pgque.create_queue('r')",
        "select pgque.ticker('q')",
        "select pgque.batch_retry({batch}, 0)",
        "select * from pgque.get_batch_cursor({batch}, 'c', 1)",
        "select pgque.maint()",
    ],
    "writer": [
        "select pgque.next_batch('q', 'c')",
        "select pgque.finish_batch({batch})",
        "select pgque.register_consumer('q', 'w')",
        "select pgque.create_queue('w')",
        "select count(*) from pgque.get_batch_events({batch})",
        "select pgque.event_retry({batch}, 1, 0)",
        "select count(*) from pgque.queue",
    ],
    "nobody": [
        "select pgque.version()",
        "select pgque.insert_event('q', 't', 'n')",
        "select pgque.next_batch('q', 'c')",
    ],
}


@pytest.mark.parametrize(("kind", "query"), [(k, q) for k, qs in ALLOWED.items() for q in qs])
def test_role_may(
    conn: psycopg.Connection[Any], roles: dict[str, str], batch: int, kind: str, query: str
) -> None:
    as_role(conn, roles[kind], query.format(batch=batch))


@pytest.mark.parametrize(("kind", "query"), [(k, q) for k, qs in DENIED_CALLS.items() for q in qs])
def test_role_may_not(
    conn: psycopg.Connection[Any], roles: dict[str, str], batch: int, kind: str, query: str
) -> None:
    with pytest.raises(DENIED):
        as_role(conn, roles[kind], query.format(batch=batch))


def test_reader_reads_tables_writer_does_not(
    conn: psycopg.Connection[Any], roles: dict[str, str], batch: int
) -> None:
    assert as_role(conn, roles["reader"], "select count(*) from pgque.event_1")[0] == 1
    with pytest.raises(DENIED):
        as_role(conn, roles["writer"], "select count(*) from pgque.event_1")
    with pytest.raises(DENIED):
        as_role(conn, roles["reader"], "delete from pgque.subscription")


def test_search_path_cannot_hijack_definer_functions(
    conn: psycopg.Connection[Any], roles: dict[str, str], batch: int
) -> None:
    """A non-superuser's schemas, temp objects and public cannot redirect pgque's functions."""
    attacker = roles["admin"]
    conn.execute(f'create schema evil authorization "{attacker}"')
    conn.execute(f'grant create on schema public to "{attacker}"')
    conn.execute(f'set role "{attacker}"')
    try:
        conn.execute("create table evil.hits (what text)")
        conn.execute("grant all on evil.hits to public")
        for schema in ("evil", "public"):
            for name, args in (
                ("quote_fqname", "text"),
                ("nextval", "regclass"),
                ("now", ""),
                ("pg_current_xact_id", ""),
                ("seq_getval", "text"),
                ("_tick", "integer, boolean"),
            ):
                conn.execute(
                    f"create function {schema}.{name}({args}) returns bigint language sql"
                    f" as $$ insert into evil.hits values ('{schema}.{name}') returning 1 $$"
                )
            conn.execute(f"create table {schema}.queue (queue_name text, queue_id int)")
            conn.execute(f"insert into {schema}.queue values ('q', 999)")
        conn.execute("create temp table queue (queue_name text, queue_id int)")
        conn.execute("insert into pg_temp.queue values ('q', 999)")
        conn.execute("set search_path = evil, pg_temp, public")
        ev_id = conn.execute("select pgque.insert_event('q', 't', 'safe')").fetchone()
        assert ev_id is not None
        conn.execute("select pgque.ticker('q')")
        conn.execute("select pgque.finish_batch(%s)", (batch,))
        hits = conn.execute("select * from evil.hits").fetchall()
    finally:
        conn.execute("reset role")
        conn.execute("reset search_path")
    assert hits == []
    assert one(conn, "select ev_data from pgque.event_1 where ev_id = %s", ev_id[0]) == "safe"


def test_every_public_function_is_documented(conn: psycopg.Connection[Any]) -> None:
    """COMMENT ON FUNCTION for every public routine: psql's \\df+ is a reference too."""
    undocumented = rows(
        conn,
        "select p.oid::regprocedure::text from pg_proc p"
        " where p.pronamespace = 'pgque'::regnamespace and p.proname not like '\\_%'"
        " and obj_description(p.oid, 'pg_proc') is null order by 1",
    )
    assert undocumented == []
