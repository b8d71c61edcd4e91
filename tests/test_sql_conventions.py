"""The SQL's written conventions (docs/development.md, "Writing SQL"), read from the catalog.

- Parameter names: ``i_`` for every parameter of pgque's own routines. The
  names PgQ and upstream PgQue gave their functions stay (callers may pass
  arguments by name), and so do the ``q`` of a few internal helpers, which
  ``CREATE OR REPLACE`` cannot rename on an installed database; both lists
  are closed: a new routine uses ``i_``.
- Built-in functions are called as ``pg_catalog.<name>(...)`` in every
  routine, outside string literals (dynamic SQL is qualified by hand, but
  for the multi-array ``unnest(a, b, ...)`` of a FROM clause, which exists
  only unqualified).
"""

from __future__ import annotations

import re
from typing import Any

import psycopg

from _engine import rows

Conn = psycopg.Connection[Any]


def names(text: str) -> set[str]:
    """The words of a text, as a set."""
    return set(text.split())


# Kept for compatibility: PgQ 3.5's names (x_*, ev_*, queue_name), upstream
# PgQue's (queue, consumer, payload, ...); the internal helpers' q.
KEPT_NAMES: dict[str, set[str]] = {
    "_batch_tables": names("q"),
    "_first_event_unticked": names("q"),
    "_event_table_name": names("q"),
    "_queue_relation": names("q"),
    "_spark_subscription": names("q"),
    "_unticked_since": names("q"),
    "assert_dlq_empty": names("queue"),
    "assert_empty": names("queue"),
    "batch_event_sql": names("x_batch_id"),
    "batch_event_tables": names("x_batch_id"),
    "current_event_table": names("x_queue_name"),
    "drop_queue": names("x_force x_queue_name"),
    "event_retry": names("x_batch_id x_event_id x_retry_seconds x_retry_time"),
    "event_retry_raw": names(
        "x_consumer x_ev_data x_ev_extra1 x_ev_extra2 x_ev_extra3 x_ev_extra4"
        " x_ev_id x_ev_retry x_ev_time x_ev_type x_queue x_retry_after"
    ),
    "finish_batch": names("x_batch_id"),
    "get_batch_events": names("x_batch_id"),
    "get_batch_info": names("x_batch_id"),
    "grant_perms": names("x_queue_name"),
    "insert_event": names("ev_data ev_extra1 ev_extra2 ev_extra3 ev_extra4 ev_type queue_name"),
    "insert_event_bulk": names("ev_data_list ev_type queue_name"),
    "insert_event_raw": names(
        "ev_data ev_extra1 ev_extra2 ev_extra3 ev_extra4"
        " ev_id ev_owner ev_retry ev_time ev_type queue_name"
    ),
    "latency_percentiles": names("consumer_name period queue_name"),
    "register_consumer": names("x_consumer_id x_queue_name"),
    "register_consumer_at": names("x_consumer_name x_queue_name x_tick_pos"),
    # schedule/unschedule take send's names (queue_name, type_name, payload).
    "schedule": names("cron payload queue_name schedule_name time_zone type_name"),
    "send": names("extra1 extra2 extra3 extra4 payload queue_name type_name"),
    "send_batch": names("extra1 extra2 extra3 extra4 payloads queue_name type_name type_names"),
    "set_queue_config": names("x_param_name x_param_value x_queue_name"),
    "set_tick_period_ms": names("p_period_ms"),
    "subscribe": names("consumer queue"),
    "test_consume": names("consumer expected_type queue"),
    "test_send": names("payload queue"),
    "unregister_consumer": names("x_consumer_name x_queue_name"),
    "unschedule": names("queue_name schedule_name"),
    "unsubscribe": names("consumer queue"),
}

# Names in pg_catalog that are SQL syntax where they are written here (or
# would be a type, not a call): never qualified.
SYNTAX = names(
    "coalesce nullif greatest least extract exists any all in values array row cast over"
    " filter position substring overlay trim left right grouping interval numeric timestamp"
    " time char varchar bit float text date"
)


def test_parameter_names(conn: Conn) -> None:
    found = rows(
        conn,
        "select p.proname, a.n from pg_catalog.pg_proc p,"
        " pg_catalog.unnest(p.proargnames) with ordinality a(n, k)"
        " where p.pronamespace = 'pgque'::regnamespace and a.n !~ '^i_'"
        " and (p.proargmodes is null or p.proargmodes[a.k] in ('i', 'b', 'v'))",
    )
    names: dict[str, set[str]] = {}
    for routine, name in found:
        names.setdefault(routine, set()).add(name)
    assert names == KEPT_NAMES
    unnamed = rows(
        conn,
        "select p.oid::regprocedure::text from pg_catalog.pg_proc p"
        " where p.pronamespace = 'pgque'::regnamespace and p.pronargs > 0"
        " and (p.proargnames is null or '' = any (p.proargnames))",
    )
    assert unnamed == []


def code_only(source: str) -> str:
    """A routine body without comments and string literals."""
    return re.sub(r"--[^\n]*|'(?:[^']|'')*'", "''", source)


def test_builtins_are_called_qualified(conn: Conn) -> None:
    builtins = {
        name
        for (name,) in rows(
            conn,
            "select distinct proname from pg_catalog.pg_proc"
            " where pronamespace = 'pg_catalog'::regnamespace",
        )
    } - SYNTAX
    call = re.compile(r"(?<![.\w\"$:])([a-z_][a-z0-9_]*)\s*\(")
    unqualified = [
        f"{routine}: {name}("
        for routine, source in rows(
            conn,
            "select p.oid::regprocedure::text, p.prosrc from pg_catalog.pg_proc p"
            " where p.pronamespace = 'pgque'::regnamespace",
        )
        for name in call.findall(code_only(source))
        if name in builtins
    ]
    assert unqualified == []


def test_the_check_sees_an_unqualified_call() -> None:
    source = "begin v := now() - x; perform pg_catalog.now(); raise 'now()'; end"
    assert re.findall(r"(?<![.\w\"$:])([a-z_][a-z0-9_]*)\s*\(", code_only(source)) == ["now"]
