"""Payload encoding (orjson when installed, the standard library otherwise: the same
text) and the clients' send_batch with its array bound in binary."""

from __future__ import annotations

import asyncio
import enum
import json
import math
import uuid
from typing import Any

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pgque
from _engine import make_queue, rows
from pgque import serializers
from pgque._send_plan import client_path

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


class Colour(enum.Enum):
    RED = "red"


def test_orjson_is_installed_by_the_test_extra() -> None:
    assert serializers.fast_json(), "orjson is missing: pip install -e '.[test]'"


@settings(max_examples=400, deadline=None)
@given(JSON_VALUES)
def test_orjson_and_the_standard_library_write_the_same_text(value: Any) -> None:
    text = serializers.dumps(value)
    assert text == serializers._STDLIB.encode(value)
    assert json.loads(text) == value


@pytest.mark.parametrize(
    "value",
    [1e-05, 5e-05, 1e-07, -2.5e-09, 1e16, 1e-300, 0.0001, [None, 1e-05], {"k": None}],
    ids=repr,
)
def test_texts_where_orjson_would_differ(value: Any) -> None:
    # orjson writes 0.00005 and 1e-7 where the standard library writes 5e-05 and 1e-07.
    assert serializers.dumps(value) == serializers._STDLIB.encode(value)
    assert " " not in serializers.dumps(value)


def test_compact_unicode_uuid_and_enum() -> None:
    u = uuid.UUID(int=7)
    assert serializers.dumps({"a": [1, "é"], "u": u, "c": Colour.RED}) == (
        f'{{"a":[1,"é"],"u":"{u}","c":"red"}}'
    )
    assert serializers.dumps({1: 2, None: 3}) == '{"1":2,"null":3}'  # orjson refuses
    assert serializers.dumps(2**70) == str(2**70)  # beyond orjson's 64 bits


@pytest.mark.parametrize("bad", [math.nan, [math.inf], {"x": -math.inf}], ids=repr)
def test_nan_and_infinity_are_refused_not_written_as_null(bad: Any) -> None:
    with pytest.raises(ValueError):
        serializers.dumps(bad)
    with pytest.raises(ValueError):
        serializers.JSON.encode(bad)


@pytest.mark.parametrize("bad", [{1, 2}, object(), b"x"], ids=repr)
def test_what_json_cannot_hold_is_a_type_error(bad: Any) -> None:
    with pytest.raises(TypeError):
        serializers.JSON.encode(bad)


def test_producer_batch_stores_the_compact_text(pgque_producer: pgque.Producer, conn: Any) -> None:
    make_queue(conn, "enc")
    payloads = [{"i": i, "f": 1e-05, "none": None, "s": "é"} for i in range(3)]
    pgque_producer.send_batch("enc", payloads)
    got = [r[0] for r in rows(conn, "select ev_data from pgque.event_template order by ev_id")]
    assert got == [serializers._STDLIB.encode(p) for p in payloads]
    assert got[0] == '{"i":0,"f":1e-05,"none":null,"s":"é"}'


def test_producer_sends_plain_values_as_one_array_and_stores_each_ones_text(
    pgque_producer: pgque.Producer, conn: Any
) -> None:
    make_queue(conn, "arr")
    payloads: list[Any] = [
        {"i": i, "f": [0.1, 1e16, 2.5e-3, -7], "s": "é\\\"'", "l": [[], {}, True, False]}
        for i in range(1000)
    ]
    # The whole batch goes as one JSON array the server splits (nothing refuses it)...
    assert pgque_producer._path.json_array(payloads) is not None
    ids = pgque_producer.send_batch("arr", payloads, type="t")
    got = rows(conn, "select ev_id, ev_data, ev_type from pgque.event_template order by ev_id")
    # ...and each event holds, in input order, the text a one-by-one encoding stores.
    assert [r[0] for r in got] == ids
    assert [r[1] for r in got] == [serializers._STDLIB.encode(p) for p in payloads]
    assert {r[2] for r in got} == {"t"}


@pytest.mark.parametrize(
    "odd",
    [None, {"k": None}, 1e-07, "already JSON text", {"f": 5e-05}],
    ids=repr,
)
def test_producer_batches_the_array_would_spell_otherwise_are_encoded_one_by_one(
    pgque_producer: pgque.Producer, conn: Any, odd: Any
) -> None:
    make_queue(conn, "odd")
    payloads = [{"a": 1}, odd, [1, 2]]
    assert pgque_producer._path.json_array(payloads) is None
    pgque_producer.send_batch("odd", payloads)
    got = [r[0] for r in rows(conn, "select ev_data from pgque.event_template order by ev_id")]
    expected = [odd if isinstance(odd, str) else serializers._STDLIB.encode(odd)]
    assert got == ['{"a":1}', *expected, "[1,2]"]


@pytest.mark.parametrize("cursor", ["server", "client"])
def test_client_send_batch_binary_keeps_the_jsonb_contract(
    db: str, conn: psycopg.Connection[Any], cursor: str
) -> None:
    make_queue(conn, "b")
    factory = psycopg.ClientCursor if cursor == "client" else psycopg.Cursor
    with psycopg.connect(db, autocommit=True, cursor_factory=factory) as raw:
        client = pgque.PgqueClient(raw)
        ids = client.send_batch("b", "t", [{"z": 1, "a": [1, 2]}, '{"b":2,"a":1}', None] * 400)
        assert len(ids) == 1200 and ids == sorted(ids)
        stored = rows(conn, "select ev_data from pgque.event_template order by ev_id limit 3")
        # the jsonb[] overload: canonical text (key order, spaces), JSON null kept
        assert [s[0] for s in stored] == ['{"a": [1, 2], "z": 1}', '{"a": 1, "b": 2}', "null"]
        with pytest.raises(pgque.PgqueInvalidArgument, match=r"payloads\[2\] is not valid JSON"):
            client.send_batch("b", "t", ['{"ok":1}', "[1]", "{not json"])
        nul = client.send_batch("b", "t", ['{"a":"\\u0000"}', {"b": 1}])
        assert len(nul) == 2
    assert rows(conn, "select count(*) from pgque.event_template")[0][0] == 1202
    held = rows(conn, "select ev_data from pgque.event_template where ev_id = %s", nul[0])
    assert held[0][0] == '{"a":"\\u0000"}'  # jsonb cannot hold it: stored as sent


def test_async_client_send_batch_binary(db: str, conn: psycopg.Connection[Any]) -> None:
    make_queue(conn, "ab")

    async def main() -> None:
        async with await psycopg.AsyncConnection.connect(db, autocommit=True) as raw:
            client = pgque.AsyncPgqueClient(raw)
            ids = await client.send_batch("ab", "t", [{"y": 2, "x": 1}] * 10)
            assert len(ids) == 10
            with pytest.raises(pgque.PgqueInvalidArgument, match=r"payloads\[1\]"):
                await client.send_batch("ab", "t", ["1", "nope"])

    asyncio.run(main())
    assert rows(conn, "select distinct ev_data from pgque.event_template") == [
        ('{"x": 1, "y": 2}',)
    ]


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_the_clients_jsonb_encoding_is_the_same_json(value: Any) -> None:
    # The client's payloads are parsed by the server as jsonb: orjson's spelling is taken
    # (a str at the top is JSON text already, hence the list).
    assert json.loads(serializers._encode_json_for_jsonb([value])) == [value]


@pytest.mark.parametrize("bad", [math.nan, [1.0, math.inf], {"x": -math.inf}], ids=repr)
def test_the_clients_jsonb_encoding_refuses_nan(bad: Any) -> None:
    with pytest.raises(ValueError):  # orjson would write null
        serializers._encode_json_for_jsonb(bad)


def test_client_stores_what_the_standard_librarys_text_would(
    db: str, conn: psycopg.Connection[Any]
) -> None:
    make_queue(conn, "spell")
    payloads: list[Any] = [
        {"f": [1e-05, 5e-05, 1e-07, -2.5e-09, 1e16, 1e-300, 0.1, 2.0]},
        {"k": None, "f": 1e-07},  # null: the standard library writes it
        {"nul": "a\x00b", "f": 1e-07},  # a \u0000 escape: stored as written, the stdlib's
        [2**70, "é", {"z": 1, "a": 2}],
    ]
    with psycopg.connect(db, autocommit=True) as raw:
        ids = pgque.PgqueClient(raw).send_batch("spell", "t", payloads[:2] + payloads[3:])
        ids.append(pgque.PgqueClient(raw).send("spell", payloads[2]))
    got = [r[0] for r in rows(conn, "select ev_data from pgque.event_template order by ev_id")]
    exact = [serializers._STDLIB.encode(p) for p in payloads[:2] + payloads[3:]]
    assert got[:3] == [rows(conn, "select %s::jsonb::text", t)[0][0] for t in exact]
    assert got[3] == serializers._STDLIB.encode(payloads[2])
    assert len(ids) == 4


@pytest.mark.parametrize("cursor", ["server", "client"])
def test_client_batch_of_plain_values_goes_as_one_array(
    db: str, conn: psycopg.Connection[Any], cursor: str
) -> None:
    make_queue(conn, "arr")
    payloads: list[Any] = [
        {"i": i, "pad": "x" * (i % 7), "f": i / 3, "l": [i, True], "é": {"z": 1, "a": 2}}
        for i in range(1500)
    ] + [[1, 2], 5, 2.5, False]
    path = client_path(serializers.JSON)
    assert path.batch("arr", "t", payloads).name == "send_batch_json_array"  # type: ignore[union-attr]
    factory = psycopg.ClientCursor if cursor == "client" else psycopg.Cursor
    with psycopg.connect(db, autocommit=True, cursor_factory=factory) as raw:
        ids = pgque.PgqueClient(raw).send_batch("arr", "t", payloads)
    assert len(ids) == len(payloads) and ids == sorted(ids)
    got = rows(conn, "select ev_id, ev_type, ev_data from pgque.event_template order by ev_id")
    assert [r[0] for r in got] == ids and {r[1] for r in got} == {"t"}
    assert [json.loads(r[2]) for r in got] == payloads  # each in its place
    canonical = rows(conn, "select %s::jsonb::text", json.dumps(payloads[0]))[0][0]
    assert got[0][2] == canonical


@pytest.mark.parametrize(
    "payloads",
    [[{"a": None}], ['{"a": 1}'], [{"a": 1}, "2"], [uuid.UUID(int=1)], [{"s": "a\x00b"}], [2**70]],
    ids=repr,
)  # fmt: skip
def test_what_the_client_encodes_one_by_one(payloads: list[Any]) -> None:
    # null (maybe a NaN), JSON text, what orjson passes on, \u0000, big ints: one by one.
    statement = client_path(serializers.JSON).batch("q", "t", payloads)
    assert statement is not None
    assert statement.name in ("send_batch_binary", "send_batch_json_text_binary")
    assert client_path(serializers.JSON).batch("q", "t", []) is None
