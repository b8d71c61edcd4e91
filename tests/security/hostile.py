"""A hostile schema: look-alikes of PostgreSQL's operators, types and functions.

Another role that owns a schema earlier in a victim's ``search_path`` can
shadow what an unqualified name means: an operator of an exact argument
type match (``*(integer, interval)`` wins over pg_catalog's
``*(float8, interval)`` even when pg_catalog is searched first), a domain
named like a built-in type whose CHECK calls its code, or a function of a
built-in's name and signature. Each look-alike here, when it runs, sends a
NOTICE starting with :data:`HIJACKED` and makes its owner a superuser (which
succeeds when the victim is one), so a test sees both the call and its
effect.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

HIJACKED = "pgque-hijacked"

# Types the engine's expressions use (and a few neighbours).
TYPES = (
    "int2", "int4", "int8", "numeric", "float8", "text", "interval", "timestamptz",
    "bool", "oid", "xid8", "name", "jsonb",
)  # fmt: skip
COMPARISONS = ("=", "<>", "<", ">", "<=", ">=")
ARITHMETIC = ("+", "-", "*", "/", "%", "||", "&", "|", "<<", ">>")
NUMBERS = {"int2", "int4", "int8", "numeric", "float8"}
# Built-in functions an invoker routine might call unqualified: (name, args, result).
FUNCTIONS = (
    ("now", "", "timestamptz"),
    ("clock_timestamp", "", "timestamptz"),
    ("pg_sleep", "float8", "void"),
    ("pg_backend_pid", "", "int4"),
    ("current_database", "", "name"),
    ("pg_try_advisory_lock", "int8", "bool"),
    ("pg_advisory_unlock", "int8", "bool"),
    ("date_part", "text, interval", "float8"),
    ("jsonb_build_object", "text, text", "jsonb"),
    ("format", "text", "text"),
    ("format", "text, text", "text"),
    ("quote_ident", "text", "text"),
    ("quote_literal", "text", "text"),
    ("upper", "text", "text"),
    ("lower", "text", "text"),
    ("length", "text", "int4"),
    ("array_length", "anyarray, int4", "int4"),
    ("to_json", "text", "json"),
    ("to_jsonb", "text", "jsonb"),
    ("row_to_json", "record", "json"),
    ("txid_current", "", "int8"),
    ("pg_current_xact_id", "", "xid8"),
    ("set_config", "text, text, bool", "text"),
    ("current_setting", "text", "text"),
    ("nextval", "regclass", "int8"),
)
# Built-in type names a declaration or cast might use unqualified.
DOMAINS = ("text", "timestamptz", "int4", "int8", "jsonb", "name", "oid", "regclass", "numeric")


def _result(op: str, left: str, right: str) -> str:
    if op in COMPARISONS:
        return "bool"
    if "interval" in (left, right) and ({left, right} & NUMBERS):
        return "interval"
    if left == "timestamptz" and right == "timestamptz" and op == "-":
        return "interval"
    return left


def _hit_body(what: str, role: str, result: str) -> str:
    # Runs as whoever calls it: report, then try to keep the victim's rights.
    ret = "return;" if result == "void" else "return null;"
    return (
        f"begin raise notice '{HIJACKED}: %', {_literal(what)}; "
        f"execute 'alter role {_ident(role)} superuser'; {ret} end"
    )


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def hostile_schema_sql(schema: str, role: str) -> str:
    """SQL that fills ``schema`` (owned by ``role``) with look-alikes."""
    s = _ident(schema)
    out: list[str] = []
    made: set[tuple[str, str, str]] = set()
    for left in TYPES:
        for right in TYPES:
            for op in COMPARISONS + ARITHMETIC:
                result = _result(op, left, right)
                fn = f"hit_{result}"
                if (fn, left, right) not in made:
                    made.add((fn, left, right))
                    out.append(
                        f"create function {s}.{fn}(pg_catalog.{left}, pg_catalog.{right})"
                        f" returns pg_catalog.{result} language plpgsql as $h$"
                        f"{_hit_body(f'operator on {left}, {right}', role, result)}$h$;"
                    )
                out.append(
                    f"create operator {s}.{op} (leftarg = pg_catalog.{left},"
                    f" rightarg = pg_catalog.{right}, function = {s}.{fn});"
                )
    for name, args, result in FUNCTIONS:
        pseudo = ("anyarray", "record", "regclass")
        words = [a.strip() for a in args.split(",") if a.strip()]
        typed = ", ".join(a if a in pseudo else f"pg_catalog.{a}" for a in words)
        rtype = "void" if result == "void" else f"pg_catalog.{result}"
        out.append(
            f"create function {s}.{_ident(name)}({typed}) returns {rtype} language plpgsql"
            f" as $h${_hit_body(f'function {name}', role, result)}$h$;"
        )
    out.append(
        f"create function {s}.domain_check(pg_catalog.text) returns pg_catalog.bool"
        f" language plpgsql as $h${_hit_body('domain check', role, 'bool')}$h$;"
    )
    for name in DOMAINS:
        out.append(
            f"create domain {s}.{_ident(name)} as pg_catalog.{name}"
            f" check ({s}.domain_check(value::pg_catalog.text) is null);"
        )
    return "\n".join(out)


def install_hostile_schema(admin: psycopg.Connection[Any], schema: str, role: str) -> None:
    """Create ``schema`` owned by ``role`` and fill it with look-alikes, as ``role``."""
    admin.execute(sql.SQL("create schema {} authorization {}").format(
        sql.Identifier(schema), sql.Identifier(role)))  # fmt: skip
    admin.execute(sql.SQL("set role {}").format(sql.Identifier(role)))
    try:
        admin.execute(hostile_schema_sql(schema, role).encode())
    finally:
        admin.execute("reset role")


class NoticeLog:
    """Collects the hijack notices a connection receives."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.hits: list[str] = []
        conn.add_notice_handler(self._on_notice)

    def _on_notice(self, diag: psycopg.errors.Diagnostic) -> None:
        message = diag.message_primary or ""
        if message.startswith(HIJACKED):
            self.hits.append(message)


def is_superuser(conn: psycopg.Connection[Any], role: str) -> bool:
    """Whether ``role`` is a superuser now (asked with a pinned search_path)."""
    row = conn.execute(
        "select r.rolsuper from pg_catalog.pg_roles r where r.rolname operator(pg_catalog.=) %s",
        (role,),
    ).fetchone()
    assert row is not None
    return bool(row[0])
