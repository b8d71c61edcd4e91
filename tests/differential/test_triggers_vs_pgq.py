"""pgque's CDC triggers against PgQ's C triggers (PostgreSQL 15 only, marker ``pgq``).

Each case creates the same tables in two schemas, ``pgq_side`` (triggers calling
``pgq.jsontriga`` etc. into PgQ's queue ``q``) and ``pgque_side`` (``pgque.jsontriga``
into pgque's queue ``q``), runs the same statements on both, and requires the same
outcome: per statement the same error text (or none), the same events (type, data,
extra1..4, in id order) and the same table contents afterwards. The schema name is the
only thing that legitimately differs (it is in ``ev_extra1``, the JSON ``table`` and
error texts); it is replaced by ``S`` before comparing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest
from psycopg import sql

pytestmark = pytest.mark.pgq

SIDES = {"pgq": "pgq_side", "pgque": "pgque_side"}
"""Engine schema -> the schema holding that engine's copy of the test tables."""

ALL_OPS = "after insert or update or delete"
ODD_TABLE = '"My ""Tab"""'


@dataclass(frozen=True)
class Case:
    """Tables, triggers and statements run identically against both engines.

    In ``triggers`` and ``statements``, ``{s}`` stands for the engine schema (``pgq``
    or ``pgque``) and, in ``statements``, ``{S}`` for the side's (quoted) schema. Every
    statement runs with ``search_path`` set to the side's schema, so table names are
    written unqualified. ``tables`` and ``setup`` run before the triggers exist.
    """

    name: str
    tables: Sequence[str]
    triggers: Sequence[str]
    statements: Sequence[str]
    setup: Sequence[str] = ()
    schema_suffix: str = ""


@dataclass
class Outcome:
    """What one side produced: per statement its error text or None, then the events."""

    errors: list[str | None] = field(default_factory=list)
    codes: list[tuple[str | None, str | None]] = field(default_factory=list)
    """SQLSTATE and DETAIL of each error, in order (not compared: see the sqlstate test)."""
    events: list[tuple[str | None, ...]] = field(default_factory=list)
    contents: dict[str, list[str]] = field(default_factory=dict)


def _normalize(value: str | None, schema: str) -> str | None:
    if value is None:
        return None
    return value.replace(schema, "S").replace(json.dumps(schema)[1:-1], "S")


def _run_side(conn: psycopg.Connection[Any], engine: str, case: Case) -> Outcome:
    schema = SIDES[engine] + case.schema_suffix
    quoted = sql.Identifier(schema).as_string(conn)
    conn.execute(f"create schema {quoted}")
    conn.execute(f"set search_path = {quoted}")
    for statement in [*case.tables, *case.setup]:
        conn.execute(statement)
    for statement in case.triggers:
        conn.execute(statement.replace("{s}", engine))
    outcome = Outcome()
    for statement in case.statements:
        try:
            conn.execute(statement.replace("{s}", engine).replace("{S}", quoted))
        except psycopg.Error as exc:
            text = exc.diag.message_primary or str(exc)
            outcome.errors.append(_normalize(text, schema))
            outcome.codes.append((exc.diag.sqlstate, exc.diag.message_detail))
        else:
            outcome.errors.append(None)
    conn.execute("reset all")
    prefix = conn.execute(
        f"select queue_data_pfx from {engine}.queue where queue_name = 'q'"
    ).fetchone()
    assert prefix is not None
    for row in conn.execute(
        "select ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4"
        f" from {prefix[0]} order by ev_id"
    ):
        outcome.events.append(tuple(_normalize(v, schema) for v in row))
    tables = conn.execute(
        "select tablename from pg_tables where schemaname = %s order by 1", (schema,)
    ).fetchall()
    for (table,) in tables:
        name = sql.Identifier(schema, table).as_string(conn)
        rows = conn.execute(f"select x::text from {name} x order by 1").fetchall()
        outcome.contents[table] = [r[0] for r in rows]
    return outcome


@pytest.fixture
def compare(
    pgq_db: str, connect: Callable[..., psycopg.Connection[Any]]
) -> Callable[[Case], Outcome]:
    """``compare(case)``: run the case on both engines, assert equal outcomes, return PgQ's."""
    setup = connect()
    setup.execute("select pgq.create_queue('q'), pgque.create_queue('q')")

    def compare(case: Case) -> Outcome:
        expected = _run_side(connect(), "pgq", case)
        actual = _run_side(connect(), "pgque", case)
        assert actual.errors == expected.errors, case.name
        assert actual.events == expected.events, case.name
        assert actual.contents == expected.contents, case.name
        return expected

    return compare


def _triggers(
    table: str,
    *args: str,
    formats: Sequence[str] = ("json", "logu", "sql"),
    when: str = ALL_OPS,
    level: str = "row",
) -> list[str]:
    """One trigger per format on ``table`` with the given (SQL-literal) arguments."""
    arglist = ", ".join(["'q'", *args])
    return [
        f"create trigger t_{fmt} {when} on {table} for each {level}"
        f" execute function {{s}}.{fmt}triga({arglist})"
        for fmt in formats
    ]


BASE_TABLE = "create table t (id int4 primary key, name text, flag bool, amount numeric)"
BASE_DML = [
    "insert into t values (1, 'a b&c=d', true, 1.50), (2, null, null, null)",
    "update t set name = 'x' where id = 1",
    "update t set name = 'x' where id = 1",  # no change at all: still an event
    "update t set name = null, amount = 1.5 where id = 1",  # 1.50 = 1.5: not a change
    "update t set flag = false",
    "delete from t where id = 2",
    "delete from t",
]

CASES = [
    Case("base", [BASE_TABLE], _triggers("t"), BASE_DML),
    Case("backup", [BASE_TABLE], _triggers("t", "'backup'"), BASE_DML),
    Case(
        "deny",
        [BASE_TABLE],
        _triggers("t", "'deny'", formats=("json",)),
        ["insert into t values (1, 'a', true, 1)", "update t set name = 'b'", "delete from t"],
        setup=["insert into t values (5, 'z', false, 0)"],
    ),
    Case(
        "deny-truncate",
        [BASE_TABLE],
        _triggers("t", "'deny'", when="after truncate", level="statement"),
        ["truncate t"],
        setup=["insert into t values (5, 'z', false, 0)"],
    ),
    Case(
        "ignore",
        [BASE_TABLE],
        _triggers("t", "'ignore=amount,flag'", "'backup'"),
        [
            "insert into t values (1, 'a', true, 1)",
            "update t set amount = 2",  # ignored columns only: no event
            "update t set flag = false, amount = 3",  # ignored columns only: no event
            "update t set amount = 4, name = 'b'",
            "update t set name = name",  # nothing changed: an event
            "delete from t",
        ],
    ),
    Case(
        "ignore-spelling",
        ['create table t (id int primary key, v int, w int, " v" int, "v " int, "a b" int)'],
        [
            f"create trigger t_{n} after insert on t for each row"
            f" execute function {{s}}.logutriga('q', 'ignore={lst}')"
            for n, lst in enumerate(
                [
                    "v",
                    "v ",
                    " v",
                    "v, w",
                    "v\t,w",
                    "xv,v",
                    "v;w",
                    '"v"',
                    "V",
                    "a b",
                    "a",
                    "w, v",
                    ",v",
                    "v x",
                    "",
                ]
            )
        ],
        ["insert into t values (1, 1, 2, 3, 4, 5)"],
    ),
    Case(
        "pkey",
        ['create table t (id int, "k 2" text, v text, w text)'],
        _triggers("t", "'pkey=k 2,id'", "'backup'"),
        [
            "insert into t values (1, 'x y', 'v', 'w')",
            "update t set v = 'v2'",
            "update t set v = 'v2'",
            "update t set id = 2",  # a key column: error
            "delete from t",
        ],
    ),
    Case(
        "pkey-odd",
        [
            "create table t (a int, b int, c int, primary key (c, a))",
            'create table u ("a,b" int primary key, a int, b int)',
            "create table w (id int, v text, primary key (id) include (v))",
        ],
        [*_triggers("t", "'ignore=a'"), *_triggers("u"), *_triggers("w")],
        [
            "insert into t values (1, 2, 3)",
            "update t set b = 6",
            "update t set b = 6",
            "delete from t",
            "insert into u values (1, 2, 3)",
            "update u set a = 5",  # 'a' is in the key list 'a,b': error
            "delete from u",
            "insert into w values (1, 'a')",
            "update w set v = 'b'",  # INCLUDE columns are key columns too
            "create trigger t_k after insert or update on w for each row"
            " execute function {s}.jsontriga('q', 'pkey=v, id,,')",
            "insert into w values (2, 'c')",
            "update w set v = 'd' where id = 2",
        ],
    ),
    Case(
        "keyless",
        ["create table t (id int, v text)"],
        _triggers("t"),
        ["insert into t values (1, 'a')", "update t set v = 'b'", "delete from t"],
    ),
    Case(
        "pkey-empty-or-missing",
        ["create table t (id int, v text, w text)"],
        [
            "create trigger t_a after update on t for each row"
            " execute function {s}.logutriga('q', 'pkey=')",
            "create trigger t_b after update on t for each row"
            " execute function {s}.jsontriga('q', 'pkey=nosuch')",
            "create trigger t_c after update on t for each row"
            " execute function {s}.sqltriga('q', 'pkey=nosuch,id')",
        ],
        [
            "update t set v = 'b'",
            "drop trigger t_a on t",
            "update t set v = 'c'",
            "drop trigger t_c on t",
            "create trigger t_d after update on t for each row"
            " execute function {s}.sqltriga('q', 'pkey=w')",
            "update t set v = 'd'",
        ],
        setup=["insert into t values (1, 'a', null)"],
    ),
    Case(
        "key-update",
        [BASE_TABLE],
        _triggers("t", formats=("sql",)),
        ["update t set id = 3", "update t set id = id * 1", "update t set id = 3, name = 'q'"],
        setup=["insert into t values (1, 'a', true, 1)"],
    ),
    Case(
        "key-update-equal-values",
        ["create table t (id numeric primary key, b box)"],
        _triggers("t"),
        [
            "insert into t values (1.0, '((0,0),(1,1))')",
            "update t set id = 1.00",  # equal numerics: no key change, nothing changed
            "update t set b = '((1,1),(2,2))'",  # box has no btree equality: a change
            "update t set id = 2",
        ],
    ),
    Case(
        "expressions",
        ["create table t (id int primary key, v text, b bool)"],
        _triggers(
            "t",
            "'ev_type=v || ''!'''",
            "'ev_extra1=id + 1'",
            "'ev_extra2=b'",
            "'ev_extra3=array[id, 2]'",
            "'ev_extra4=(select count(*) from pg_class where false)'",
        ),
        [
            "insert into t values (1, 'a', true), (2, null, null)",
            "update t set v = 'c' where id = 1",
            "delete from t where id = 2",
        ],
    ),
    Case(
        "ev_data",
        ["create table t (id int primary key, v text)"],
        _triggers("t", "'ev_data=v'", "'ev_data=1/0'", "'ev_type=id'", "'ev_type=id/0'"),
        ["insert into t values (1, 'a')", "update t set v = null"],
    ),
    Case(
        "when",
        ["create table t (id int primary key, v text, b bool)"],
        [
            *_triggers("t", "'when=id > 1'", "'when=false'"),
            "create trigger t_w after insert on t for each row"
            " execute function {s}.jsontriga('q', 'when=b')",
        ],
        [
            "insert into t values (1, 'a', true)",
            "insert into t values (2, 'b', false)",
            "update t set v = 'c'",
            "insert into t values (3, 'c', null)",  # when=b is NULL: error
            "delete from t",
        ],
    ),
    Case(
        "expression-errors",
        ["create table t (id int primary key, v text)"],
        [],
        [
            *[
                f"create or replace trigger t_x after insert on t for each row"
                f" execute function {{s}}.jsontriga('q', '{arg}'); insert into t values ({n})"
                for n, arg in enumerate(
                    [
                        "when=1",
                        "when=null",
                        "when=(select true where false)",
                        "when=",
                        "ev_type=generate_series(1, 2)",
                        "ev_type=generate_series(1, 0)",
                        "ev_type=nosuch",
                        "ev_type=t.v",
                        "when=1 = 1 -- comment",
                        "ev_type=",
                        "ev_extra1=''a''::int",
                    ]
                )
            ],
        ],
    ),
    Case(
        "expression-calls-function",
        [
            "create table t (id int primary key)",
            "create table log (x int)",
            "create function note(i int) returns int language sql"
            " as 'insert into log values (i) returning i * 10'",
        ],
        _triggers("t", "'ev_type=note(id)'", "'ev_extra1=current_setting(''search_path'')'"),
        ["insert into t values (1)", "delete from t"],
    ),
    Case(
        "magic-columns",
        [
            "create table m (id int primary key, v text, _pgq_ev_type text, _pgq_ev_extra1 int,"
            " _pgq_ev_extra2 text, _pgq_ev_extra3 text, _pgq_ev_extra4 text, _pgq_ev_data text)",
            "create table n (id int primary key, v text, _pgq_ev_type text, w text)",
            "create table o (id int primary key, v text, _pgq_ev_extra3 text)",
        ],
        [
            *_triggers("m", "'backup'"),
            *_triggers("n", "'ignore=w'", "'backup'"),
            *[s.replace("t_", "o_") for s in _triggers("o", "'ev_extra3=''arg'''")],
        ],
        [
            "insert into m values (1, 'v', 'TYP', 42, 'x2', 'x3', 'x4', 'DATA')",
            "insert into m values (2, 'v', null, null, null, null, null, null)",
            "update m set v = 'w' where id = 1",
            "delete from m where id = 1",
            "insert into n values (1, 'a', 'T', 'w')",
            "update n set _pgq_ev_type = 'T2'",  # only a magic column: no event
            "update n set w = 'w2'",
            "update n set w = 'w3', v = 'b'",
            "update n set id = id",
            "delete from n",
            "insert into o values (1, 'v', 'col')",
            "update o set _pgq_ev_extra3 = 'x'",  # sqltriga only drops this one
        ],
    ),
    Case(
        "truncate",
        [
            "create table t (id int primary key, v text)",
            "create table k (v text)",
            "create table c (a int, b int, c int, primary key (c, a))",
        ],
        [
            *_triggers("t", when="after truncate", level="statement"),
            *[
                s.replace("t_", "k_")
                for s in _triggers("k", when="after truncate", level="statement")
            ],
            *[
                s.replace("t_", "c_")
                for s in _triggers("c", when="before truncate", level="statement")
            ],
        ],
        ["truncate t", "truncate k", "truncate c", "truncate t, k"],
        setup=["insert into t values (1, 'a')"],
    ),
    Case(
        "truncate-bad-args",
        ["create table t (id int primary key, v text)"],
        [],
        [
            f"create or replace trigger t_x after truncate on t for each statement"
            f" execute function {{s}}.jsontriga('q', {args}); truncate t"
            for args in [
                "'backup'",
                "'pkey=v'",
                "'ignore=v'",
                "'when=true'",
                "'ev_data=1'",
                "'SKIP'",
                "'backup', 'SKIP', 'deny', 'pkey=v'",
                "'pkey=v', 'ignore=v'",
                "'when=true', 'ignore=v'",
                "'deny', 'bad'",
            ]
        ],
    ),
    Case(
        "skip",
        ["create table t (id int primary key, v text)", "create table k (id int, v text)"],
        [
            "create trigger t_b before insert or update or delete on t for each row"
            " execute function {s}.jsontriga('q', 'SKIP', 'ignore=v', 'backup')",
            "create trigger k_a after update on k for each row"
            " execute function {s}.logutriga('q', 'SKIP')",
        ],
        [
            "insert into t values (1, 'a')",  # event, but the row is not inserted
            "insert into k values (1, 'a')",
            "update k set v = 'b'",  # keyless before SKIP-in-AFTER
            "create trigger k_b before insert on k for each row"
            " execute function {s}.sqltriga('q', 'SKIP', 'when=false')",
            "insert into k values (2, 'b')",
        ],
        setup=["insert into t values (5, 'x')"],
    ),
    Case(
        "argument-errors",
        ["create table t (id int primary key, v text)"],
        [],
        [
            f"create or replace trigger t_x {when} on t for each {level}"
            f" execute function {{s}}.jsontriga({args}); insert into t values ({n})"
            for n, (when, level, args) in enumerate(
                [
                    ("after insert", "row", ""),
                    ("after insert", "row", "'q', 'nonsense'"),
                    ("after insert", "row", "'q', 'skip'"),
                    ("after insert", "row", "'q', ' backup'"),
                    ("after insert", "row", "'q', 'Ignore=v'"),
                    ("after insert", "row", "'q', 'ev_extra5=1'"),
                    ("after insert", "row", "'q', 'SKIP'"),
                    ("after insert", "row", "'q', 'deny', 'SKIP'"),
                    ("after insert", "statement", "'q'"),
                    ("after insert", "statement", ""),
                    ("after insert", "row", "'q', 'backup', 'backup', 'pkey=id', 'pkey=v'"),
                    ("after insert", "row", "'q', 'ignore=id', 'ignore=v'"),
                ]
            )
        ],
    ),
    Case(
        "replication-role",
        [BASE_TABLE],
        [
            *_triggers("t", "'deny'", "'SKIP'", formats=("json",)),
            "create trigger t_stmt after insert on t for each statement"
            " execute function {s}.logutriga('q')",
            "create trigger t_a after insert on t for each row execute function {s}.sqltriga('q')",
            "alter table t enable always trigger t_a",
        ],
        [
            "set session_replication_role = local",
            "insert into t values (1, 'a', true, 1)",  # deny, SKIP, bad setup: all ignored
            "update t set name = 'b'",
            "set session_replication_role = replica",
            "insert into t values (2, 'b', true, 1)",  # only the ALWAYS trigger fires
            "reset session_replication_role",
            "insert into t values (3, 'c', true, 1)",
        ],
    ),
    Case(
        "partitioned",
        [
            "create table p (id int, part int, v text, primary key (id, part))"
            " partition by list (part)",
            "create table p1 partition of p for values in (1)",
            "create table p2 partition of p for values in (2)",
        ],
        [s.replace("t_", "p_") for s in _triggers("p", "'backup'")],
        [
            "insert into p values (1, 1, 'a'), (2, 2, 'b')",
            "update p set v = 'c'",
            "update p set part = 2 where id = 1",  # moves the row: a key update
            "delete from p",
        ],
    ),
    Case(
        "instead-of-view",
        ["create table t (id int primary key, v text)", "create view vw as select * from t"],
        [
            "create trigger vw_a instead of insert or update or delete on vw for each row"
            " execute function {s}.jsontriga('q')",
            "create trigger vw_b instead of insert on vw for each row"
            " execute function {s}.logutriga('q', 'SKIP')",
        ],
        ["insert into vw values (1, 'a')", "update vw set v = 'b'", "delete from vw"],
        setup=["insert into t values (7, 'x')"],
    ),
    Case(
        "dropped-generated-columns",
        [
            "create table t (id int primary key, gone text, v text,"
            " g text generated always as (v || '!') stored)",
            "alter table t drop column gone",
            "alter table t add column late int default 5",
        ],
        [
            *_triggers("t", "'backup'"),
            "create trigger t_before before insert or update on t for each row"
            " execute function {s}.jsontriga('q')",
        ],
        ["insert into t (id, v) values (1, 'a')", "update t set v = 'b'", "delete from t"],
    ),
    Case(
        "empty-search-path",
        ["create table t (id int primary key, v text)"],
        _triggers("t", "'ev_extra3=upper(v)'", "'backup'"),
        [
            "set search_path = ''",
            "insert into {S}.t values (1, 'a')",
            "update {S}.t set v = 'b'",
            "delete from {S}.t",
        ],
    ),
    Case(
        "unchanged-values",
        [
            "create type pair_n as (x int, y text)",
            "create table t (id int primary key, big json, ia int[], pa pair_n, ja json[],"
            " ts timestamptz)",
        ],
        _triggers("t", formats=("sql",)),
        [
            "insert into t select 1, json_build_object('a', string_agg(md5(i::text), ''))::json,"
            " array[1, null], row(null, null), array['{}'::json, null], '2009-01-01 00:00+00'"
            " from generate_series(1, 3000) i",
            "update t set big = big::text::json",
            "update t set ia = array[1, null], pa = row(null, null), ja = array['{}'::json, null]",
            "update t set ja = array['{ }'::json, null]",
            "update t set ts = '2009-01-01 02:00+02'",
            "update t set pa = row(1, null)",
        ],
    ),
    Case(
        "equality-semantics",
        [
            "create type pair_num as (x numeric, y numeric[])",
            "create domain d_num as numeric",
            "create table t (id int primary key, i interval, j jsonb, na numeric[],"
            " p pair_num, tz timetz, f float8, c char(3), r real[], d d_num, nr numrange)",
        ],
        _triggers("t", formats=("sql",)),
        [
            "insert into t values (1, '1 day', '{\"a\": 1.0}', '{1.0}', row(1.0, '{1.0}'),"
            " '12:00+01', 0.1, 'a', '{0.1}', 1.0, '[1.0,2)')",
            "update t set i = '24 hours'",  # equal intervals
            "update t set j = '{\"a\": 1.00}'",  # equal jsonb
            "update t set p = row(1.00, '{1.00}')",  # equal records (arrays inside too)
            "update t set d = 1.00, nr = '[1.00,2)'",  # equal domain values, ranges
            "update t set na = '{1.00}'",  # array columns are compared by their text
            "update t set tz = '11:00+00'",  # the same instant, another zone: a change
            "update t set c = 'a  '",
            "set extra_float_digits = 0",  # float output rounds: text no longer decides
            "update t set f = 0.1::float8 + 0.2::float8",
            "update t set f = 0.3",
            "update t set r = array[0.1::real + 0.0000001::real]",
            "reset extra_float_digits",
            "update t set f = 0.1::float8 + 0.2::float8",
        ],
    ),
    Case(
        "many-rows-many-columns",
        [
            "create table t (id int primary key, "
            + ", ".join(f"c{i} int default {i}" for i in range(120))
            + ")"
        ],
        _triggers("t", "'ignore=c7'"),
        [
            "insert into t (id) select generate_series(1, 5)",
            "update t set c5 = c5 + id",
            "update t set c7 = 0",
            "delete from t where id > 3",
        ],
    ),
    Case(
        "quoting",
        [
            f'create table {ODD_TABLE} ("Id" int primary key, "sp ace" text, "ä" text,'
            ' "select" int, "q""x" text)',
        ],
        _triggers(ODD_TABLE, "'backup'"),
        [
            f"insert into {ODD_TABLE} values (1, 'a', 'b', 3, 'z')",
            f'update {ODD_TABLE} set "sp ace" = \'c\', "select" = null',
            f"delete from {ODD_TABLE}",
        ],
        schema_suffix=' Odd"Sch',
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_same_events_as_pgq(compare: Callable[[Case], Outcome], case: Case) -> None:
    compare(case)


@pytest.fixture
def both(
    pgq_db: str, connect: Callable[..., psycopg.Connection[Any]]
) -> Callable[[Case], dict[str, Outcome]]:
    """``both(case)``: run the case on both engines; return their outcomes, uncompared."""
    connect().execute("select pgq.create_queue('q'), pgque.create_queue('q')")
    return lambda case: {engine: _run_side(connect(), engine, case) for engine in SIDES}


def _expression_case(expression: str, when: str) -> Case:
    return Case(
        f"expression {expression}",
        ["create table t (id int primary key)"],
        [
            f"create trigger t_x {when} insert on t for each row"
            f" execute function {{s}}.jsontriga('q', 'ev_type={expression}')"
        ],
        ["insert into t values (1), (2)"],
    )


Expected = tuple[list[str | None], list[str | None]]
"""A side's expected (errors per statement, ev_type per event)."""

# Intended or accepted differences, pinned: each must still be exactly as described.
DEVIATIONS: list[tuple[str, str, str, Expected, Expected]] = [
    # PgQ's C trigger evaluates expressions with the statement's snapshot: it sees none
    # of the statement's own rows. pgque's PL/pgSQL evaluates them in a later command,
    # which sees the rows the statement changed so far.
    (
        "after-trigger-snapshot",
        "(select count(*) from t)",
        "after",
        ([None], ["0", "0"]),
        ([None], ["2", "2"]),
    ),
    (
        "before-trigger-snapshot",
        "(select count(*) from t)",
        "before",
        ([None], ["0", "0"]),
        ([None], ["0", "1"]),
    ),
    # pgque evaluates the expression with the row as parameter $1; PgQ has no parameters.
    ("dollar-one", "$1", "after", (["there is no parameter $1"], []), ([None], ["(1)", "(2)"])),
    # PgQ runs 'select <expr>', so a FROM clause fits in; pgque's query has its own FROM.
    (
        "from-clause",
        "1 from pg_class limit 1",
        "after",
        ([None], ["1", "1"]),
        (['syntax error at or near "from"'], []),
    ),
    # An expression that is only a comment: PgQ's query has no column (NULL result);
    # pgque's query has nothing to name.
    (
        "comment-only",
        "-- nothing",
        "after",
        ([None], [None, None]),
        (['table "_q" has 0 columns available but 1 columns specified'], []),
    ),
]


@pytest.mark.parametrize(
    ("expression", "when", "pgq", "pgque"),
    [d[1:] for d in DEVIATIONS],
    ids=[d[0] for d in DEVIATIONS],
)
def test_known_expression_deviations(
    both: Callable[[Case], dict[str, Outcome]],
    expression: str,
    when: str,
    pgq: Expected,
    pgque: Expected,
) -> None:
    outcomes = both(_expression_case(expression, when))
    for engine, (errors, types) in (("pgq", pgq), ("pgque", pgque)):
        assert outcomes[engine].errors == errors, engine
        assert [e[0] for e in outcomes[engine].events] == types, engine


def test_known_deviation_sqlstate(both: Callable[[Case], dict[str, Outcome]]) -> None:
    """Same error texts, but PgQ's C raises XX000 (internal_error), pgque P0001 + DETAIL."""
    outcomes = both(
        Case(
            "sqlstate",
            ["create table t (id int)"],
            [
                *_triggers("t", formats=("json",)),
                "create trigger t_deny before insert on t for each row"
                " execute function {s}.logutriga('q', 'deny')",
            ],
            ["delete from t", "insert into t values (1)"],
            setup=["insert into t values (1)"],
        )
    )
    assert (
        outcomes["pgq"].errors
        == outcomes["pgque"].errors
        == [
            "Update/Delete on table without pkey",
            "Table 'S.t' to queue 'q': change not allowed (INSERT)",
        ]
    )
    assert outcomes["pgq"].codes == [("XX000", None)] * 2
    assert outcomes["pgque"].codes == [
        ("P0001", "pgque:trigger_no_pkey"),
        ("P0001", "pgque:trigger_denied"),
    ]


ALL_ASCII = "(select string_agg(chr(i), '' order by i) from generate_series(1, 127) i)"

TYPES: list[tuple[str, str, str]] = [
    # (type, value 1, value 2) as SQL expressions: PgQ's type test and then some
    ("text", r"'q''s \ b " "d" " ä€😀 +&=%'", ALL_ASCII),
    ("varchar(9)", "'a b'", r"E'\\\\'"),
    ("char(3)", "'x'", "' y'"),
    ('"char"', "'x'", r"'\'"),
    ("name", "'nm'", "'N M'"),
    ("bytea", r"'\x00ff27'", "decode('5c00', 'hex')"),
    ("bool", "true", "false"),
    ("timestamptz", "'2009-09-19 11:59:48.599+03'", "'0099-01-01 11:59:48.599+00 BC'"),
    ("timestamptz", "'infinity'", "'1900-01-01 12:00+01'"),
    ("timestamp", "'2009-09-19 11:59:48.599'", "'-infinity'"),
    ("timestamp", "'294276-12-31 23:59:59.999999'", "'0099-01-01 11:59:48 BC'"),
    ("date", "'2009-09-19'", "'0099-01-01 BC'"),
    ("date", "'infinity'", "'5874897-12-31'"),
    ("time", "'11:59:48.599'", "'24:00'"),
    ("timetz", "'11:59:48.599+02'", "'00:00-15:59'"),
    ("interval", "'1 day 2 hours'", "'-1 year 3 mons 00:00:01.5'"),
    ("int2", "-32768", "32767"),
    ("int4", "-2147483648", "2147483647"),
    ("int8", "-9223372036854775808", "9223372036854775807"),
    ("oid", "4294967295", "0"),
    ("xid", "'123'", "'4294967295'"),
    ("real", "1.5", "'-0'"),
    ("float8", "1e300", "'NaN'"),
    ("float8", "'-Infinity'", "0.1"),
    ("numeric", "-1.50", "'NaN'"),
    ("numeric(10, 3)", "1.5", "1.50"),
    ("box", "'((1,2),(3,4))'", "'((0,0),(2,2))'"),  # equal area: still a change
    ("point", "'(1,2)'", "'(-0,0)'"),
    ("uuid", "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'", "'00000000-0000-0000-0000-000000000000'"),
    ("json", """'{"a": [1, 2]}'""", """'{"a":[1,2]}'"""),
    ("jsonb", r"""'{"a": [1, "x\\y"]}'""", "'[]'"),
    ("inet", "'10.0.0.1'", "'10.0.0.1/8'"),
    ("cidr", "'10.0.0.0/8'", "'::1'"),
    ("macaddr", "'08:00:2b:01:02:03'", "'08-00-2b-01-02-04'"),
    ("bit(3)", "'101'", "'010'"),
    ("varbit", "'1'", "''"),
    ("money", "12.5", "-0.01"),
    ("tsvector", "'a fat cat'", "$$'x y':1$$"),
    ("int4range", "'[1,5)'", "'empty'"),
    ("xml", "'<a>&amp;</a>'", "'<b/>'"),
    ("d_int", "1", "2"),
    ("d_bool", "true", "false"),
    ("d_ts", "'2009-09-19 11:59:48.599+03'", "'infinity'"),
    ("mood", "'ok'", "'very bad'"),
    ("pair", "row(1, 'a b')", "row(null, null)"),
    ("pair_j", "row(1, '{}')", "row(1, '{ }')"),
]
TYPE_SETUP = [
    "create domain d_int as int4",
    "create domain d_bool as bool",
    "create domain d_ts as timestamptz",
    "create type mood as enum ('ok', 'very bad')",
    "create type pair as (x int, y text)",
    "create type pair_j as (x int, j json)",
]
STYLES = {
    "default": [],
    "styled": [
        "set datestyle = 'SQL, DMY'",
        "set timezone = 'Asia/Kolkata'",
        "set intervalstyle = 'sql_standard'",
        "set extra_float_digits = 0",
        "set bytea_output = 'escape'",
    ],
}


@pytest.mark.parametrize("style", list(STYLES))
@pytest.mark.parametrize(
    ("sqltype", "value1", "value2"), TYPES, ids=[f"{t[0]}-{n}" for n, t in enumerate(TYPES)]
)
def test_type_encoding_same_as_pgq(
    compare: Callable[[Case], Outcome], sqltype: str, value1: str, value2: str, style: str
) -> None:
    v1, v2 = f"({value1})::{sqltype}", f"({value2})::{sqltype}"
    outcome = compare(
        Case(
            f"type {sqltype}",
            [*TYPE_SETUP, f"create table t (id int primary key, v {sqltype}, va {sqltype}[])"],
            _triggers("t", "'backup'"),
            [
                *STYLES[style],
                f"insert into t values (1, {v1}, array[{v1}, null]), (2, null, null)",
                f"update t set v = {v2}, va = array[{v2}, {v1}] where id = 1",
                f"update t set v = {v2}, va = array[{v2}, {v1}] where id = 1",
                f"update t set v = {v1}, va = '{{}}' where id = 2",
                "delete from t",
            ],
        )
    )
    assert set(outcome.errors) == {None}
    assert len(outcome.events) == 3 * 7  # 2 inserts, 3 updates, 2 deletes, in 3 formats
