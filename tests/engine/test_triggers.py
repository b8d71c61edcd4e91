"""pgque's CDC triggers (jsontriga, logutriga, sqltriga) with hand-written expectations.

The expected values are PgQ 3.5's output for the same statements (see
``tests/differential/test_triggers_vs_pgq.py`` for the exhaustive comparison, which
needs PgQ and so runs on PostgreSQL 15 only); these tests run on every version.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from _engine import one, rows

Event = tuple[str | None, ...]
"""ev_type, ev_data, ev_extra1 .. ev_extra4"""

ALL_OPS = "after insert or update or delete"


@pytest.fixture
def cdc(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    """``conn`` with queue ``q`` and the session in UTC / ISO dates."""
    assert one(conn, "select pgque.create_queue('q')") == 1
    conn.execute("set timezone = 'UTC'")
    conn.execute("set datestyle = 'ISO, MDY'")
    return conn


def events(conn: psycopg.Connection[Any], queue: str = "q") -> list[Event]:
    """All events of ``queue`` so far, in id order (ev_type, ev_data, ev_extra1..4)."""
    table = one(conn, "select queue_data_pfx from pgque.queue where queue_name = %s", queue)
    return [
        tuple(r)
        for r in rows(
            conn,
            "select ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4"
            f" from {table} order by ev_id",
        )
    ]


def trigger(
    conn: psycopg.Connection[Any],
    table: str,
    fmt: str,
    *args: str,
    when: str = ALL_OPS,
    level: str = "row",
    name: str | None = None,
) -> None:
    """Create a pgque ``{fmt}triga('q', args...)`` trigger on ``table``."""
    arglist = ", ".join(["'q'", *(f"'{a}'" for a in args)])
    conn.execute(
        f"create trigger {name or 'tg_' + fmt} {when} on {table} for each {level}"
        f" execute function pgque.{fmt}triga({arglist})"
    )


def error_of(conn: psycopg.Connection[Any], sql: str) -> str:
    """Run ``sql``, which must fail; return the primary error message."""
    with pytest.raises(psycopg.Error) as info:
        conn.execute(sql)
    return info.value.diag.message_primary or ""


def test_jsontriga_insert_update_delete(cdc: psycopg.Connection[Any]) -> None:
    cdc.execute(
        "create table t (id int primary key, name text, ok bool, amount numeric,"
        " at timestamptz, day date, n int8)"
    )
    trigger(cdc, "t", "json")
    cdc.execute(
        "insert into t values (1, 'a \"q\" \\ b', true, 1.50,"
        " '2009-09-19 11:59:48.599+03', '2009-09-19', -9223372036854775808)"
    )
    cdc.execute("update t set name = null, ok = false")
    cdc.execute("delete from t")
    typ = '{"op":"%s","table":["public","t"],"pkey":["id"]}'
    row = (
        '{"id":1,"name":%s,"ok":%s,"amount":"1.50","at":"2009-09-19T08:59:48.599+00:00",'
        '"day":"2009-09-19","n":-9223372036854775808}'
    )
    assert events(cdc) == [
        (typ % "INSERT", row % ('"a \\"q\\" \\\\ b"', "true"), "public.t", None, None, None),
        (typ % "UPDATE", row % ("null", "false"), "public.t", None, None, None),
        (typ % "DELETE", row % ("null", "false"), "public.t", None, None, None),
    ]


def test_logutriga_urlencodes(cdc: psycopg.Connection[Any]) -> None:
    cdc.execute('create table t (id int primary key, "sp ace" text, v text, b bool)')
    trigger(cdc, "t", "logu")
    cdc.execute("insert into t values (1, 'a b&c=d', 'ä€/~*-._', true), (2, null, '', null)")
    cdc.execute("update t set v = 'x' where id = 2")
    cdc.execute("delete from t where id = 1")
    assert events(cdc) == [
        (
            "I:id",
            "id=1&sp+ace=a+b%26c%3dd&v=%c3%a4%e2%82%ac%2f%7e%2a-._&b=t",
            "public.t",
            None,
            None,
            None,
        ),
        ("I:id", "id=2&sp+ace&v=&b", "public.t", None, None, None),
        ("U:id", "id=2&sp+ace&v=x&b", "public.t", None, None, None),
        (
            "D:id",
            "id=1&sp+ace=a+b%26c%3dd&v=%c3%a4%e2%82%ac%2f%7e%2a-._&b=t",
            "public.t",
            None,
            None,
            None,
        ),
    ]


def test_sqltriga_fragments(cdc: psycopg.Connection[Any]) -> None:
    cdc.execute('create table t (a int, "B" text, c text, d numeric, primary key (c, a))')
    trigger(cdc, "t", "sql")
    cdc.execute("insert into t values (1, 'it''s \\ here', 'k', null)")
    cdc.execute('update t set "B" = null, d = 2')
    cdc.execute("update t set d = 2.0")  # equal numerics: nothing changed
    cdc.execute("delete from t")
    assert [e[:2] for e in events(cdc)] == [
        ("I", "(a,\"B\",c,d) values ('1',E'it''s \\\\ here','k',null)"),
        ("U", "\"B\"=NULL,d='2' where a='1' and c='k'"),
        ("U", "a='1' where a='1' and c='k'"),
        ("D", "a='1' and c='k'"),
    ]


def trigger_all(conn: psycopg.Connection[Any], table: str, *args: str) -> None:
    for fmt in ("json", "logu", "sql"):
        trigger(conn, table, fmt, *args)


def test_backup_puts_old_row_in_extra2(cdc: psycopg.Connection[Any]) -> None:
    cdc.execute("create table t (id int primary key, v text)")
    trigger_all(cdc, "t", "backup")
    cdc.execute("insert into t values (1, 'a b')")
    cdc.execute("update t set v = 'c'")
    cdc.execute("delete from t")
    extra2 = [e[3] for e in events(cdc)]
    assert extra2 == [
        None,
        None,
        None,
        '{"id":1,"v":"a b"}',
        "id=1&v=a+b",
        "id=1&v=a+b",
        None,
        None,
        None,
    ]


def test_ignore_drops_columns_and_ignored_only_updates(cdc: psycopg.Connection[Any]) -> None:
    cdc.execute("create table t (id int primary key, v text, seen timestamptz)")
    trigger_all(cdc, "t", "ignore=seen")
    cdc.execute("insert into t values (1, 'a', now())")
    cdc.execute("update t set seen = seen + interval '1 hour'")  # no event
    cdc.execute("update t set v = v")  # nothing changed at all: events
    assert [e[:2] for e in events(cdc)] == [
        ('{"op":"INSERT","table":["public","t"],"pkey":["id"]}', '{"id":1,"v":"a"}'),
        ("I:id", "id=1&v=a"),
        ("I", "(id,v) values ('1','a')"),
        ('{"op":"UPDATE","table":["public","t"],"pkey":["id"]}', '{"id":1,"v":"a"}'),
        ("U:id", "id=1&v=a"),
        ("U", "id='1' where id='1'"),
    ]


def test_key_errors_and_pkey_argument(cdc: psycopg.Connection[Any]) -> None:
    cdc.execute("create table k (id int, v text)")
    cdc.execute("insert into k values (1, 'a')")
    trigger(cdc, "k", "json")
    assert error_of(cdc, "update k set v = 'b'") == "Update/Delete on table without pkey"
    assert error_of(cdc, "delete from k") == "Update/Delete on table without pkey"
    cdc.execute("drop trigger tg_json on k")
    trigger(cdc, "k", "logu", "pkey=v,id")
    cdc.execute("update k set id = id")
    assert error_of(cdc, "update k set id = 2") == "primary key update not allowed"
    assert events(cdc) == [("U:v,id", "id=1&v=a", "public.k", None, None, None)]


def test_deny(cdc: psycopg.Connection[Any]) -> None:
    cdc.execute("create table t (id int primary key)")
    trigger(cdc, "t", "json", "deny")
    trigger(cdc, "t", "sql", "deny", when="before truncate", level="statement")
    assert error_of(cdc, "insert into t values (1)") == (
        "Table 'public.t' to queue 'q': change not allowed (INSERT)"
    )
    assert error_of(cdc, "truncate t") == (
        "Table 'public.t' to queue 'q': change not allowed (TRUNCATE)"
    )
    assert events(cdc) == []


@pytest.mark.parametrize(
    ("when", "level", "args", "message"),
    [
        ("after insert", "row", (), "pgq trigger must have destination queue as argument"),
        ("after insert", "row", ("'q'", "'backup'", "'nonsense'"), "bad param to pgq trigger"),
        ("after insert", "row", ("'q'", "'skip'"), "bad param to pgq trigger"),
        ("after insert", "row", ("'q'", "'SKIP'"), "SKIP does not work in AFTER trigger."),
        (
            "after insert",
            "statement",
            ("'q'",),
            "pgq Ins/Upd/Del trigger must be fired FOR EACH ROW",
        ),
        ("after insert", "row", ("'q'", "'when=1'"), "when= query result must be boolean, got=23"),
        ("after insert", "row", ("'q'", "'when=null::bool'"), "when= should not be NULL"),
        (
            "after insert",
            "row",
            ("'q'", "'ev_type=generate_series(1, 2)'"),
            "Expect 1 row from override query, got 2",
        ),
        (
            "after truncate",
            "statement",
            ("'q'", "'when=true'"),
            "Custom expressions do not make sense for truncater trigger",
        ),
        (
            "after truncate",
            "statement",
            ("'q'", "'ignore=id'"),
            "Column ignore does not make sense for truncate trigger",
        ),
        (
            "after truncate",
            "statement",
            ("'q'", "'pkey=id'"),
            "Custom pkey_list does not make sense for truncate trigger",
        ),
        (
            "after truncate",
            "statement",
            ("'q'", "'backup'"),
            "Backup does not make sense for truncate trigger",
        ),
    ],
)
def test_setup_errors(
    cdc: psycopg.Connection[Any], when: str, level: str, args: tuple[str, ...], message: str
) -> None:
    cdc.execute("create table t (id int primary key)")
    cdc.execute(
        f"create trigger tg {when} on t for each {level}"
        f" execute function pgque.jsontriga({', '.join(args)})"
    )
    statement = "truncate t" if "truncate" in when else "insert into t values (1)"
    assert error_of(cdc, statement) == message


def test_skip_in_before_trigger(cdc: psycopg.Connection[Any]) -> None:
    cdc.execute("create table t (id int primary key)")
    trigger(cdc, "t", "logu", "SKIP", when="before insert")
    cdc.execute("insert into t values (1), (2)")
    assert one(cdc, "select count(*) from t") == 0
    assert [e[:2] for e in events(cdc)] == [("I:id", "id=1"), ("I:id", "id=2")]


def test_expression_arguments(cdc: psycopg.Connection[Any]) -> None:
    cdc.execute("create table t (id int primary key, v text, b bool)")
    trigger(
        cdc,
        "t",
        "json",
        "ev_type=v || ''!''",
        "ev_extra1=id + 1",
        "ev_extra2=b",
        "ev_extra4=array[id, 2]",
        "when=id > 1",
        "ev_type=ignored, the first one counts",
    )
    cdc.execute("insert into t values (1, 'a', true), (2, 'b', false), (3, null, null)")
    cdc.execute("delete from t where id = 2")  # expressions see the old row
    assert events(cdc) == [
        ("b!", '{"id":2,"v":"b","b":false}', "3", "f", None, "{2,2}"),
        (None, '{"id":3,"v":null,"b":null}', "4", None, None, "{3,2}"),
        ("b!", '{"id":2,"v":"b","b":false}', "3", "f", None, "{2,2}"),
    ]


def test_expression_is_a_single_expression(cdc: psycopg.Connection[Any]) -> None:
    cdc.execute("create table t (id int primary key)")
    trigger(cdc, "t", "json", "ev_type=(select 1 from pg_class where false)")
    cdc.execute("insert into t values (1)")
    assert events(cdc)[0][0] is None
    cdc.execute("drop trigger tg_json on t")
    cdc.execute(
        "create trigger tg after insert on t for each row execute function"
        " pgque.jsontriga('q', 'ev_type=1; truncate t; select 1')"
    )
    assert error_of(cdc, "insert into t values (2)") == 'syntax error at or near ";"'
    assert one(cdc, "select count(*) from t") == 1


def test_magic_columns(cdc: psycopg.Connection[Any]) -> None:
    cdc.execute(
        "create table t (id int primary key, v text, _pgq_ev_type text, _pgq_ev_extra1 int,"
        " _pgq_ev_extra3 text, _pgq_ev_data text)"
    )
    trigger(cdc, "t", "sql", "ev_extra3=''arg''")
    cdc.execute("insert into t values (1, 'v', 'TYPE', 42, 'col', 'DATA')")
    cdc.execute("update t set _pgq_ev_type = 'T2'")  # sqltriga: only magic changed, no event
    cdc.execute("insert into t values (2, 'w', 'TYPE', null, null, null)")
    assert events(cdc) == [
        ("TYPE", "DATA", "42", None, "arg", None),
        ("TYPE", None, None, None, "arg", None),
    ]


def test_magic_columns_left_out_of_data(cdc: psycopg.Connection[Any]) -> None:
    cdc.execute("create table t (id int primary key, _pgq_ev_type text, v text)")
    trigger_all(cdc, "t")
    cdc.execute("insert into t values (1, 'T', 'v')")
    assert [e[:2] for e in events(cdc)] == [
        ("T", '{"id":1,"v":"v"}'),
        ("T", "id=1&v=v"),
        ("T", "(id,v) values ('1','v')"),
    ]


def test_truncate(cdc: psycopg.Connection[Any]) -> None:
    cdc.execute("create table t (a int, b int, primary key (b, a))")
    for fmt in ("json", "logu", "sql"):
        trigger(cdc, "t", fmt, when="after truncate", level="statement")
    cdc.execute("truncate t")
    assert events(cdc) == [
        (
            '{"op":"TRUNCATE","table":["public","t"],"pkey":["b","a"]}',
            "{}",
            "public.t",
            None,
            None,
            None,
        ),
        ("R", "", "public.t", None, None, None),
        ("R", "", "public.t", None, None, None),
    ]


def test_session_replication_role(cdc: psycopg.Connection[Any]) -> None:
    cdc.execute("create table t (id int primary key)")
    trigger(cdc, "t", "json", "deny", "SKIP")
    trigger(cdc, "t", "logu", name="tg_always")
    cdc.execute("alter table t enable always trigger tg_always")
    cdc.execute("set session_replication_role = local")
    cdc.execute("insert into t values (1)")  # no event, no deny, no SKIP
    cdc.execute("set session_replication_role = replica")
    cdc.execute("insert into t values (2)")  # only the ALWAYS trigger fires
    cdc.execute("reset session_replication_role")
    assert one(cdc, "select count(*) from t") == 2
    assert [e[:2] for e in events(cdc)] == [("I:id", "id=2")]


TYPE_CASES = [
    # (type, value, jsontriga value, logutriga value, sqltriga value)
    ("int2", "-32768", "-32768", "-32768", "'-32768'"),
    (
        "int8",
        "9223372036854775807",
        "9223372036854775807",
        "9223372036854775807",
        "'9223372036854775807'",
    ),
    ("float8", "1e300", '"1e+300"', "1e%2b300", "'1e+300'"),
    ("real", "'NaN'", '"NaN"', "NaN", "'NaN'"),
    ("numeric", "-1.50", '"-1.50"', "-1.50", "'-1.50'"),
    ("bool", "false", "false", "f", "'f'"),
    ("bytea", "'\\x00ff27'", '"\\\\x00ff27"', "%5cx00ff27", "E'\\\\x00ff27'"),
    (
        "timestamp",
        "'2009-09-19 11:59:48.599'",
        '"2009-09-19T11:59:48.599"',
        "2009-09-19+11%3a59%3a48.599",
        "'2009-09-19 11:59:48.599'",
    ),
    ("date", "'infinity'", '"infinity"', "infinity", "'infinity'"),
    ("time", "'11:59:48.599'", '"11:59:48.599"', "11%3a59%3a48.599", "'11:59:48.599'"),
    ("interval", "'1 day 2 hours'", '"1 day 02:00:00"', "1+day+02%3a00%3a00", "'1 day 02:00:00'"),
    ("oid", "4294967295", '"4294967295"', "4294967295", "'4294967295'"),
    (
        "uuid",
        "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'",
        '"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"',
        "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
        "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'",
    ),
    (
        "json",
        "'{\"a\": [1, 2]}'",
        '"{\\"a\\": [1, 2]}"',
        "%7b%22a%22%3a+%5b1%2c+2%5d%7d",
        "'{\"a\": [1, 2]}'",
    ),
    ("box", "'((1,2),(3,4))'", '"(3,4),(1,2)"', "%283%2c4%29%2c%281%2c2%29", "'(3,4),(1,2)'"),
    ("int4[]", "array[1, null]", '"{1,NULL}"', "%7b1%2cNULL%7d", "'{1,NULL}'"),
    (
        "text[]",
        "array['a b', '\\']",
        '"{\\"a b\\",\\"\\\\\\\\\\"}"',
        "%7b%22a+b%22%2c%22%5c%5c%22%7d",
        'E\'{"a b","\\\\\\\\"}\'',
    ),
    ("d_int", "7", '"7"', "7", "'7'"),  # a domain is not a JSON number
    ("char(3)", "'x'", '"x  "', "x++", "'x  '"),
]


@pytest.mark.parametrize(
    ("sqltype", "value", "as_json", "as_url", "as_sql"),
    TYPE_CASES,
    ids=[c[0] for c in TYPE_CASES],
)
def test_value_encodings(
    cdc: psycopg.Connection[Any], sqltype: str, value: str, as_json: str, as_url: str, as_sql: str
) -> None:
    cdc.execute("create domain d_int as int4")
    cdc.execute(f"create table t (id int primary key, v {sqltype})")
    trigger_all(cdc, "t")
    cdc.execute(f"insert into t values (1, {value})")
    assert [e[1] for e in events(cdc)] == [
        f'{{"id":1,"v":{as_json}}}',
        f"id=1&v={as_url}",
        f"(id,v) values ('1',{as_sql})",
    ]


def test_control_characters(cdc: psycopg.Connection[Any]) -> None:
    cdc.execute("create table t (v text)")
    trigger_all(cdc, "t")
    cdc.execute("insert into t values (chr(1) || chr(8) || chr(9) || chr(10) || chr(127))")
    assert [e[1] for e in events(cdc)] == [
        '{"v":"\\u0001\\b\\t\\n\x7f"}',
        "v=%01%08%09%0a%7f",
        "(v) values ('\x01\x08\x09\x0a\x7f')",
    ]


def test_timestamptz_follows_session_zone(cdc: psycopg.Connection[Any]) -> None:
    cdc.execute("create table t (v timestamptz)")
    trigger(cdc, "t", "json")
    trigger(cdc, "t", "logu")
    cdc.execute("set timezone = 'Asia/Kolkata'")
    cdc.execute("set datestyle = 'SQL, DMY'")
    cdc.execute("insert into t values ('2009-09-19 11:59:48.599+03')")
    assert [e[1] for e in events(cdc)] == [
        '{"v":"2009-09-19T14:29:48.599+05:30"}',
        "v=19%2f09%2f2009+14%3a29%3a48.599+IST",
    ]


def test_key_change_uses_type_equality(cdc: psycopg.Connection[Any]) -> None:
    cdc.execute("create table t (id numeric primary key, b box)")
    trigger(cdc, "t", "sql")
    cdc.execute("insert into t values (1.0, '((0,0),(1,1))')")
    cdc.execute("update t set id = 1.00")  # equal: not a key change, nothing changed
    cdc.execute("update t set b = '((1,1),(2,2))'")  # box has no btree equality: changed
    assert [e[1] for e in events(cdc)][1:] == [
        "id='1.0' where id='1.0'",  # the key column set to its old value
        "b='(2,2),(1,1)' where id='1.00'",
    ]


def test_works_with_empty_search_path(cdc: psycopg.Connection[Any]) -> None:
    cdc.execute("create table public.t (id int primary key, v text)")
    trigger(cdc, "public.t", "json", "ev_extra3=pg_catalog.upper(v)", "backup")
    cdc.execute("set search_path = ''")
    cdc.execute("insert into public.t values (1, 'a')")
    cdc.execute("update public.t set v = 'b'")
    cdc.execute("reset search_path")
    assert [e[1:] for e in events(cdc)] == [
        ('{"id":1,"v":"a"}', "public.t", None, "A", None),
        ('{"id":1,"v":"b"}', "public.t", '{"id":1,"v":"a"}', "B", None),
    ]


@pytest.fixture
def dml_roles(cdc: psycopg.Connection[Any]) -> Iterator[tuple[str, str]]:
    """Two roles that may write table ``t``: one in pgque_writer, one not."""
    suffix = uuid.uuid4().hex[:8]
    writer, other = f"t_writer_{suffix}", f"t_other_{suffix}"
    cdc.execute("create table t (id int primary key)")
    trigger(cdc, "t", "json")
    for role in (writer, other):
        cdc.execute(f'create role "{role}" nologin')
        cdc.execute(f'grant insert on t to "{role}"')
    cdc.execute(f'grant pgque_writer to "{writer}"')
    try:
        yield writer, other
    finally:
        cdc.execute("reset role")
        for role in (writer, other):
            cdc.execute(f'drop owned by "{role}"')
            cdc.execute(f'drop role "{role}"')


def test_dml_user_needs_pgque_writer(
    cdc: psycopg.Connection[Any], dml_roles: tuple[str, str]
) -> None:
    writer, other = dml_roles
    cdc.execute(f'set role "{writer}"')
    cdc.execute("insert into t values (1)")
    cdc.execute(f'set role "{other}"')
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        cdc.execute("insert into t values (2)")
    cdc.execute("reset role")
    assert [e[1] for e in events(cdc)] == ['{"id":1}']
