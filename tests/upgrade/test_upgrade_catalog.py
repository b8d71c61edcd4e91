"""An upgrade leaves the catalog a fresh install has: nothing missing, nothing left over.

Each earlier build (``pgque-0.0.1.sql``, the first release with the modern
API; ``pgque-6e2ef03.sql``, a later development build) is installed into an
empty database with psql, a queue is created through its API, and the
current pgque is installed over it with ``pgque.install``. A fresh install
gets the same queue. The two catalogs must then agree on every routine (its
signature, argument names and defaults, result, kind, language, security,
configuration, volatility, owner, grants, body and comment), every relation
(kind, persistence, owner, grants, options, columns, constraints, indexes,
view definitions, sequences), the types, the schema, default privileges and
what each pgque role may do with each object. Routines an earlier build had
and this one does not are dropped by the install; routines something else
depends on are kept.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import psycopg
import pytest

import pgque
from _db import PgServer
from _engine import one, rows

HERE = Path(__file__).resolve().parent
FIXTURES = ["pgque-0.0.1.sql", "pgque-6e2ef03.sql"]
ROLES = ("pgque_reader", "pgque_writer", "pgque_admin")

Conn = psycopg.Connection[Any]

IN_PGQUE = "'pgque'::regnamespace"


def acl(column: str) -> str:
    """An ACL as sorted text: the order of its items depends on the order of the grants."""
    return (
        f"(select pg_catalog.array_agg(x::text order by x::text)"
        f" from pg_catalog.unnest({column}) x)"
    )


CATALOG = {
    "routines": (
        "select p.oid::regprocedure::text, p.prokind::text, l.lanname,"
        " pg_catalog.pg_get_function_arguments(p.oid), pg_catalog.pg_get_function_result(p.oid),"
        " p.prosecdef, p.proconfig::text, p.provolatile::text, p.proisstrict, p.proleakproof,"
        " p.proparallel::text, pg_catalog.pg_get_userbyid(p.proowner), " + acl("p.proacl") + ","
        " pg_catalog.md5(p.prosrc), pg_catalog.obj_description(p.oid, 'pg_proc')"
        " from pg_catalog.pg_proc p join pg_catalog.pg_language l on l.oid = p.prolang"
        f" where p.pronamespace = {IN_PGQUE}"
    ),
    "relations": (
        "select c.relname, c.relkind::text, c.relpersistence::text,"
        " pg_catalog.pg_get_userbyid(c.relowner), " + acl("c.relacl") + ", c.reloptions::text,"
        " pg_catalog.obj_description(c.oid, 'pg_class'),"
        " (select i.inhparent::regclass::text from pg_catalog.pg_inherits i"
        "   where i.inhrelid = c.oid)"
        f" from pg_catalog.pg_class c where c.relnamespace = {IN_PGQUE}"
    ),
    # By name, not position: a column added by an upgrade comes last.
    "columns": (
        "select c.relname, a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod),"
        " a.attnotnull, pg_catalog.pg_get_expr(d.adbin, d.adrelid), " + acl("a.attacl") + ","
        " a.attidentity::text, a.attgenerated::text"
        " from pg_catalog.pg_class c"
        " join pg_catalog.pg_attribute a on a.attrelid = c.oid and a.attnum > 0"
        "  and not a.attisdropped"
        " left join pg_catalog.pg_attrdef d on d.adrelid = c.oid and d.adnum = a.attnum"
        f" where c.relnamespace = {IN_PGQUE}"
    ),
    "constraints": (
        "select c.relname, k.conname, k.contype::text, pg_catalog.pg_get_constraintdef(k.oid)"
        " from pg_catalog.pg_constraint k join pg_catalog.pg_class c on c.oid = k.conrelid"
        f" where k.connamespace = {IN_PGQUE}"
    ),
    "indexes": (
        "select c.relname, pg_catalog.pg_get_indexdef(c.oid) from pg_catalog.pg_index i"
        " join pg_catalog.pg_class c on c.oid = i.indexrelid"
        f" where c.relnamespace = {IN_PGQUE}"
    ),
    "views": (
        "select c.relname, pg_catalog.pg_get_viewdef(c.oid) from pg_catalog.pg_class c"
        f" where c.relnamespace = {IN_PGQUE} and c.relkind in ('v', 'm')"
    ),
    "sequences": (
        "select c.relname, s.seqtypid::regtype::text, s.seqstart, s.seqincrement, s.seqmax,"
        " s.seqmin, s.seqcache, s.seqcycle"
        " from pg_catalog.pg_sequence s join pg_catalog.pg_class c on c.oid = s.seqrelid"
        f" where c.relnamespace = {IN_PGQUE}"
    ),
    "types": (
        "select t.typname, t.typtype::text, pg_catalog.pg_get_userbyid(t.typowner),"
        " " + acl("t.typacl") + ", pg_catalog.obj_description(t.oid, 'pg_type')"
        f" from pg_catalog.pg_type t where t.typnamespace = {IN_PGQUE}"
    ),
    "schema": (
        "select pg_catalog.pg_get_userbyid(n.nspowner), " + acl("n.nspacl") + ","
        " pg_catalog.obj_description(n.oid, 'pg_namespace')"
        " from pg_catalog.pg_namespace n where n.nspname = 'pgque'"
    ),
    "default privileges": (
        "select pg_catalog.pg_get_userbyid(d.defaclrole), d.defaclobjtype::text,"
        " " + acl("d.defaclacl") + " from pg_catalog.pg_default_acl d"
        f" where d.defaclnamespace = {IN_PGQUE}"
    ),
    "role memberships": (
        "select r.rolname, m.rolname from pg_catalog.pg_auth_members a"
        " join pg_catalog.pg_roles r on r.oid = a.roleid"
        " join pg_catalog.pg_roles m on m.oid = a.member"
        " where r.rolname like 'pgque\\_%' and m.rolname like 'pgque\\_%'"
    ),
    # What each role may do, memberships included (the ACLs alone do not say).
    "role privileges": (
        "select r.role, 'routine', p.oid::regprocedure::text,"
        " pg_catalog.has_function_privilege(r.role, p.oid, 'execute')::text"
        " from pg_catalog.pg_proc p, pg_catalog.unnest(%(roles)s::text[]) r(role)"
        f" where p.pronamespace = {IN_PGQUE}"
        " union all"
        " select r.role, 'relation', c.relname, pg_catalog.array_to_string(array("
        "   select x from pg_catalog.unnest(array['select', 'insert', 'update', 'delete',"
        "     'truncate', 'references', 'trigger']) x"
        "   where pg_catalog.has_table_privilege(r.role, c.oid, x)), ',')"
        " from pg_catalog.pg_class c, pg_catalog.unnest(%(roles)s::text[]) r(role)"
        f" where c.relnamespace = {IN_PGQUE} and c.relkind in ('r', 'p', 'v', 'm')"
        " union all"
        " select r.role, 'sequence', c.relname, pg_catalog.array_to_string(array("
        "   select x from pg_catalog.unnest(array['usage', 'select', 'update']) x"
        "   where pg_catalog.has_sequence_privilege(r.role, c.oid, x)), ',')"
        " from pg_catalog.pg_class c, pg_catalog.unnest(%(roles)s::text[]) r(role)"
        f" where c.relnamespace = {IN_PGQUE} and c.relkind = 'S'"
        " union all"
        " select r.role, 'schema', 'pgque', pg_catalog.array_to_string(array("
        "   select x from pg_catalog.unnest(array['usage', 'create']) x"
        "   where pg_catalog.has_schema_privilege(r.role, 'pgque', x)), ',')"
        " from pg_catalog.unnest(%(roles)s::text[]) r(role)"
    ),
}


def catalog(conn: Conn) -> dict[str, list[tuple[Any, ...]]]:
    """Everything the catalog says about schema pgque, part by part, sorted."""
    found = {}
    for part, query in CATALOG.items():
        params = {"roles": list(ROLES)} if "%(roles)s" in query else None
        result = conn.execute(query, params).fetchall()
        found[part] = sorted((tuple(r) for r in result), key=repr)
    return found


def assert_same_catalog(fresh: Conn, upgraded: Conn) -> None:
    expected, got = catalog(fresh), catalog(upgraded)
    problems = []
    for part in CATALOG:
        missing = [r for r in expected[part] if r not in got[part]]
        extra = [r for r in got[part] if r not in expected[part]]
        if missing or extra:
            problems.append(f"{part}:\n  missing {missing}\n  left over {extra}")
    assert not problems, "\n".join(problems)


def install_with_psql(pg_server: PgServer, fixture: Path, dsn: str) -> None:
    result = subprocess.run(
        [pg_server.psql(), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(fixture), "-d", dsn],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "ERROR" not in result.stderr, result.stderr


@pytest.mark.parametrize("fixture", FIXTURES)
def test_upgrade_gives_the_catalog_of_a_fresh_install(
    pg_server: PgServer, empty_db: str, db: str, connect_to: Any, fixture: str
) -> None:
    install_with_psql(pg_server, HERE / fixture, empty_db)
    old: Conn = connect_to(empty_db)
    assert one(old, "select pgque.create_queue('orders')") == 1
    assert pgque.install(old) == pgque.__version__

    fresh: Conn = connect_to(db)
    assert one(fresh, "select pgque.create_queue('orders')") == 1
    assert_same_catalog(fresh, old)
    # And an install over the upgraded one changes nothing.
    before = catalog(old)
    pgque.install(old)
    assert catalog(old) == before


def routines(conn: Conn, pattern: str) -> list[str]:
    found = rows(
        conn,
        "select p.oid::regprocedure::text from pg_catalog.pg_proc p"
        " where p.oid::regprocedure::text like %s order by 1",
        pattern,
    )
    return [r[0] for r in found]


def test_install_drops_routines_this_version_lacks(conn: Conn) -> None:
    # Stand-ins for what an earlier version had: an overload and a helper.
    conn.execute(
        "create function pgque.send(i_queue text, i_payload integer) returns bigint"
        " language sql as 'select 0::bigint'"
    )
    conn.execute("create function pgque._gone() returns int language sql as 'select 1'")
    conn.execute("create procedure pgque.gone_too() language sql as 'select 1'")
    # One in use by a user's trigger, one a user's view reads: kept (no CASCADE).
    conn.execute(
        "create function pgque.old_triga() returns trigger language plpgsql"
        " as 'begin return new; end'"
    )
    conn.execute("create table public.t (id int)")
    conn.execute(
        "create trigger t_old after insert on public.t for each row"
        " execute function pgque.old_triga()"
    )
    conn.execute("create function pgque._in_use() returns int language sql as 'select 1'")
    conn.execute("create view public.v as select pgque._in_use() as one")
    # Users' routines outside the schema, even with pgque's names, are theirs.
    conn.execute(
        "create function public.send(i_queue text, i_payload integer) returns bigint"
        " language sql as 'select 0::bigint'"
    )
    sends = routines(conn, "pgque.send(%")

    pgque.install(conn)

    assert "pgque.send(text,integer)" not in routines(conn, "pgque.send(%")
    assert len(routines(conn, "pgque.send(%")) == len(sends) - 1
    assert routines(conn, "pgque._gone(%") == routines(conn, "pgque.gone_too(%") == []
    assert routines(conn, "pgque.old_triga(%") == ["pgque.old_triga()"]
    assert routines(conn, "pgque._in_use(%") == ["pgque._in_use()"]
    assert routines(conn, "send(%") == ["send(text,integer)"]  # public's, on the search path
    conn.execute("insert into public.t values (1)")
    assert one(conn, "select one from public.v") == 1
