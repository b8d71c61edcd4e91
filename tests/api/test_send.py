"""Publishing: send, send_batch, insert_event_bulk."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from _engine import make_queue, one, rows

RAISE = psycopg.errors.RaiseException


@pytest.fixture
def queue(conn: psycopg.Connection[Any]) -> str:
    make_queue(conn, "q")
    return "q"


def stored(conn: psycopg.Connection[Any], *ids: int) -> list[tuple[Any, ...]]:
    return rows(
        conn,
        "select ev_id, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4"
        " from pgque.event_template where ev_id = any(%s) order by ev_id",
        list(ids),
    )


def test_untyped_literal_is_stored_verbatim(conn: psycopg.Connection[Any], queue: str) -> None:
    ev_id = one(conn, "select pgque.send('q', '{\"b\":1,  \"a\":2}')")
    assert stored(conn, ev_id) == [(ev_id, "default", '{"b":1,  "a":2}', None, None, None, None)]
    not_json = one(conn, "select pgque.send('q', 'plain text, not JSON')")
    assert stored(conn, not_json)[0][2] == "plain text, not JSON"


def test_jsonb_is_validated_and_canonical(conn: psycopg.Connection[Any], queue: str) -> None:
    ev_id = one(conn, "select pgque.send('q', '{\"b\":1,  \"a\":2}'::jsonb)")
    assert stored(conn, ev_id)[0][2] == '{"a": 2, "b": 1}'
    typed = one(conn, "select pgque.send('q', 'order.created', '[1, 2]'::jsonb)")
    assert stored(conn, typed)[0][1:3] == ("order.created", "[1, 2]")
    with pytest.raises(psycopg.errors.InvalidTextRepresentation):
        conn.execute("select pgque.send('q', 'not json'::jsonb)")


def test_send_with_type_and_extras(conn: psycopg.Connection[Any], queue: str) -> None:
    a = one(conn, "select pgque.send('q', 't', 'x', 'e1', null, 'e3', 'e4')")
    b = one(conn, "select pgque.send('q', 't2', '{}'::jsonb, null, 'e2', null, null)")
    assert stored(conn, a, b) == [
        (a, "t", "x", "e1", None, "e3", "e4"),
        (b, "t2", "{}", None, "e2", None, None),
    ]


def test_send_batch_ids_in_input_order(conn: psycopg.Connection[Any], queue: str) -> None:
    ids = one(conn, "select pgque.send_batch('q', 't', array['a', null, 'c'])")
    assert len(ids) == 3
    assert stored(conn, *ids) == [
        (ids[0], "t", "a", None, None, None, None),
        (ids[1], "t", None, None, None, None, None),
        (ids[2], "t", "c", None, None, None, None),
    ]
    json_ids = one(conn, "select pgque.send_batch('q', array['{\"x\": 1}', '2']::jsonb[])")
    assert [r[1:3] for r in stored(conn, *json_ids)] == [("default", '{"x": 1}'), ("default", "2")]


def test_send_batch_with_types_and_extras(conn: psycopg.Connection[Any], queue: str) -> None:
    ids = one(
        conn,
        "select pgque.send_batch('q', array['t1', null], array['p1', 'p2'],"
        " array['a', 'b'], null, array[null, 'y'], null)",
    )
    assert stored(conn, *ids) == [
        (ids[0], "t1", "p1", "a", None, None, None),
        (ids[1], "default", "p2", "b", None, "y", None),
    ]


def test_send_batch_empty_and_null(conn: psycopg.Connection[Any], queue: str) -> None:
    # An empty array does not even look at the queue.
    assert one(conn, "select pgque.send_batch('no such queue', 't', '{}'::text[])") == []
    with pytest.raises(RAISE, match=r"^payloads must not be null\n"):
        conn.execute("select pgque.send_batch('q', 't', null::text[])")
    with pytest.raises(RAISE, match=r"^payloads must not be null\n"):
        conn.execute("select pgque.send_batch('q', 't', null::jsonb[])")


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("select pgque.send('nope', 'x')", "queue not found: nope"),
        ("select pgque.send_batch('nope', 't', array['x'])", "queue not found: nope"),
        (
            "select pgque.send_batch('q', array['t'], array['a', 'b'], null, null, null, null)",
            "send_batch: types has 1 elements, payloads has 2",
        ),
        (
            "select pgque.send_batch('q', null, array['a'], array['1', '2'], null, null, null)",
            "send_batch: extra1 has 2 elements, payloads has 1",
        ),
    ],
)
def test_failing_send_inserts_nothing(
    conn: psycopg.Connection[Any], queue: str, query: str, message: str
) -> None:
    with pytest.raises(RAISE, match=message):
        conn.execute(query)
    assert one(conn, "select count(*) from pgque.event_template") == 0


def test_invalid_json_in_batch_inserts_none(conn: psycopg.Connection[Any], queue: str) -> None:
    with pytest.raises(psycopg.errors.InvalidTextRepresentation):
        conn.execute("select pgque.send_batch('q', 't', array['{}', 'nope']::jsonb[])")
    assert one(conn, "select count(*) from pgque.event_template") == 0


def test_disabled_queue(conn: psycopg.Connection[Any], queue: str) -> None:
    conn.execute("update pgque.queue set queue_disable_insert = true")
    for query in (
        "select pgque.send('q', 'x')",
        "select pgque.send_batch('q', 't', array['x'])",
        "select pgque.insert_event_bulk('q', 't', array['x'])",
    ):
        with pytest.raises(RAISE, match=r"^Insert into queue disallowed\n"):
            conn.execute(query)


def test_insert_event_bulk_is_owner_only(conn: psycopg.Connection[Any], queue: str) -> None:
    assert len(one(conn, "select pgque.insert_event_bulk('q', 't', array['a', 'b'])")) == 2
    for role in ("pgque_admin", "pgque_writer"):
        assert (
            one(
                conn,
                "select has_function_privilege(%s,"
                " 'pgque.insert_event_bulk(text, text, text[])', 'execute')",
                role,
            )
            is False
        )


def test_batch_of_many_is_one_statement_in_order(conn: psycopg.Connection[Any], queue: str) -> None:
    payloads = [f"m{i}" for i in range(1000)]
    ids = one(conn, "select pgque.send_batch('q', 't', %s::text[])", payloads)
    assert ids == sorted(ids)
    got = rows(conn, "select ev_data from pgque.event_template order by ev_id")
    assert [r[0] for r in got] == payloads
