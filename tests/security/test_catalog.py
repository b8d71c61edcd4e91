"""What the catalog says about pgque's privileges and routines.

Every rule of the security model that the catalog can show: no pgque role
may write, truncate, reference or put a trigger on any pgque table (event
tables included) or move a sequence; every routine either pins its
search_path or is one the hostile-path test runs; internal helpers that do
not pin it are reached only from routines that do.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest

from _engine import make_queue, rows

ROLES = ("pgque_reader", "pgque_writer", "pgque_admin")
PINNED = "search_path=pgque, pg_catalog, pg_temp"
# Invoker-rights routines that do not pin a path: the procedures COMMIT, and
# the trigger functions hand the caller's path to the trigger creator's own
# expressions. Every name in them is qualified, and test_search_path runs
# them on a hostile path.
PROVEN_BY_HOSTILE_PATH = {
    "pgque.ticker_loop_for(integer)",
    "pgque.ticker_loop()",
    "pgque.run_maint()",
    "pgque.jsontriga()",
    "pgque.logutriga()",
    "pgque.sqltriga()",
}


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize(
    "privilege", ["INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER"]
)
def test_no_pgque_role_may_change_a_table(
    conn: psycopg.Connection[Any], role: str, privilege: str
) -> None:
    make_queue(conn, "q")  # its event tables too
    allowed = rows(
        conn,
        "select c.oid::regclass::text from pg_class c"
        " where c.relnamespace = 'pgque'::regnamespace and c.relkind in ('r', 'p', 'v')"
        " and has_table_privilege(%s, c.oid, %s)",
        role,
        privilege,
    )
    assert allowed == []


@pytest.mark.parametrize("role", ROLES)
def test_no_pgque_role_may_move_a_sequence(conn: psycopg.Connection[Any], role: str) -> None:
    make_queue(conn, "q")
    allowed = rows(
        conn,
        "select c.oid::regclass::text from pg_class c"
        " where c.relnamespace = 'pgque'::regnamespace and c.relkind = 'S'"
        " and (has_sequence_privilege(%s, c.oid, 'UPDATE')"
        "      or has_sequence_privilege(%s, c.oid, 'USAGE'))",
        role,
        role,
    )
    assert allowed == []


def test_no_pgque_role_may_create_in_the_schema(conn: psycopg.Connection[Any]) -> None:
    for role in ROLES:
        assert rows(conn, "select has_schema_privilege(%s, 'pgque', 'CREATE')", role) == [(False,)]


def _routines(conn: psycopg.Connection[Any]) -> dict[str, tuple[bool, str, str]]:
    """Every pgque routine: signature -> (pins the path, name, source)."""
    found = rows(
        conn,
        "select p.oid::regprocedure::text, coalesce(%s = any (p.proconfig), false),"
        " p.proname, p.prosrc"
        " from pg_proc p where p.pronamespace = 'pgque'::regnamespace",
        PINNED,
    )
    return {
        (sig if sig.startswith("pgque.") else f"pgque.{sig}"): (pinned, name, src)
        for sig, pinned, name, src in found
    }


def test_every_routine_pins_its_path_or_is_proven(conn: psycopg.Connection[Any]) -> None:
    routines = _routines(conn)
    unpinned = {sig for sig, (pinned, _, _) in routines.items() if not pinned}
    public = {sig for sig in unpinned if not routines[sig][1].startswith("_")}
    # Public routines (and trigger functions) pin the path, but for the
    # procedures the hostile-path test runs.
    assert public == PROVEN_BY_HOSTILE_PATH
    # An internal helper that does not pin it is called only from routines
    # that do (or from other such helpers), never from the procedures.
    callers_of: dict[str, set[str]] = {}
    for sig, (_pinned, _name, src) in routines.items():
        for called in set(re.findall(r"pgque\.(_[a-z0-9_]+)\s*\(", src)):
            callers_of.setdefault(called, set()).add(sig)
    for sig in sorted(unpinned - public):
        name = routines[sig][1]
        callers = callers_of.get(name, set())
        assert callers, f"{sig} is called by no pgque routine"
        assert not callers & PROVEN_BY_HOSTILE_PATH, f"{sig} runs on the caller's path"


def test_definer_functions_qualify_or_pin(conn: psycopg.Connection[Any]) -> None:
    # Every SECURITY DEFINER function pins the path (trivially true above);
    # and none of them is executable by PUBLIC.
    leaks = rows(
        conn,
        "select p.oid::regprocedure::text from pg_proc p"
        " where p.pronamespace = 'pgque'::regnamespace and p.prosecdef"
        " and (not coalesce(%s = any (p.proconfig), false)"
        "      or has_function_privilege('public', p.oid, 'execute'))",
        PINNED,
    )
    assert leaks == []
