"""Typed payloads, the send side: pydantic v2 models, dataclasses and msgspec Structs
given to ``send``/``send_batch``/``send_at`` (and a producer's ``batch()``) of
both producers and both clients are stored as their data: verbatim compact JSON by
the producers, canonical ``jsonb`` by the clients. What cannot be encoded is
refused before anything is sent, with the queue, the type and what to do.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import msgspec
import psycopg
import pydantic
import pytest

import pgque
from _engine import make_queue, one, rows
from pgque import serializers

Conn = psycopg.Connection[Any]
PLACED = datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
REF = uuid.UUID(int=42)


@dataclass
class Line:
    sku: str
    qty: int


@dataclass
class OrderDC:
    order_id: int
    lines: list[Line]
    note: str | None = None
    tags: list[str] = field(default_factory=list)


class OrderPD(pydantic.BaseModel):
    order_id: int
    placed: datetime
    ref: uuid.UUID
    lines: list[dict[str, int]]


class LineMS(msgspec.Struct):
    sku: str
    qty: int


class OrderMS(msgspec.Struct):
    order_id: int
    placed: datetime
    lines: list[LineMS]


class Opaque:
    """A class no serializer knows."""


@dataclass
class Stamped:
    order_id: int
    at: datetime


# Each payload and the JSON data it must be stored as.
CASES: list[tuple[Any, Any]] = [
    (
        OrderDC(1, [Line("a", 2)], tags=["x"]),
        {"order_id": 1, "lines": [{"sku": "a", "qty": 2}], "note": None, "tags": ["x"]},
    ),
    (
        OrderPD(order_id=2, placed=PLACED, ref=REF, lines=[{"n": 1}]),
        {"order_id": 2, "placed": "2024-01-02T03:04:05Z", "ref": str(REF), "lines": [{"n": 1}]},
    ),
    (
        OrderMS(3, PLACED, [LineMS("b", 5)]),
        {"order_id": 3, "placed": "2024-01-02T03:04:05Z", "lines": [{"sku": "b", "qty": 5}]},
    ),
    # A model inside an ordinary payload.
    ({"wrapped": Line("c", 7)}, {"wrapped": {"sku": "c", "qty": 7}}),
]
PAYLOADS = [payload for payload, _ in CASES]
EXPECTED = [data for _, data in CASES]


async def settle(value: Any) -> Any:
    """The value of a sync call, or of an async one awaited."""
    return await value if inspect.isawaitable(value) else value


def run_with(
    db: str, api: str, side: str, body: Callable[[Any], Awaitable[Any]], **options: Any
) -> Any:
    """Run ``body(target)`` with a producer or client (``api``) of the ``side`` twin."""

    async def main() -> Any:
        if api == "producer" and side == "sync":
            with pgque.Producer(db, **options) as producer:
                return await body(producer)
        if api == "producer":
            async with pgque.AsyncProducer(db, **options) as aproducer:
                return await body(aproducer)
        if side == "sync":
            with pgque.PgqueClient(psycopg.connect(db, autocommit=True), **options) as client:
                try:
                    return await body(client)
                finally:
                    client.conn.close()
        async with await psycopg.AsyncConnection.connect(db, autocommit=True) as aconn:
            return await body(pgque.AsyncPgqueClient(aconn, **options))

    return asyncio.run(main())


def send_batch(target: Any, queue: str, payloads: list[Any], type: str = "many") -> Any:
    """``send_batch`` in the client's order of arguments or the producer's."""
    if isinstance(target, (pgque.PgqueClient, pgque.AsyncPgqueClient)):
        return target.send_batch(queue, type, payloads)
    return target.send_batch(queue, payloads, type=type)


def stored(conn: Conn, ids: list[int]) -> list[tuple[str, str]]:
    """(type, text) of the events with these ids, in the ids' order."""
    query = "select ev_id, ev_type, ev_data from pgque.event_template where ev_id = any(%s)"
    found = {r[0]: (r[1], r[2]) for r in rows(conn, query, ids)}
    return [found[i] for i in ids]


@pytest.fixture
def models(conn: Conn) -> str:
    make_queue(conn, "models")
    one(conn, "select pgque.subscribe('models', 'reader')")
    return "models"


@pytest.mark.parametrize("side", ["sync", "async"])
@pytest.mark.parametrize("api", ["producer", "client"])
def test_models_are_stored_as_their_data(
    db: str, conn: Conn, models: str, api: str, side: str
) -> None:
    async def body(target: Any) -> list[int]:
        ids = [await settle(target.send(models, p, type="one")) for p in PAYLOADS]
        ids += await settle(send_batch(target, models, PAYLOADS))
        for p in PAYLOADS:
            ids.append(await settle(target.send_at(models, p, delay=timedelta(0), type="at")))
        ids.append(await settle(target.send(models, pgque.Event(PAYLOADS[0], type="event"))))
        return ids

    ids = run_with(db, api, side, body)
    got = stored(conn, ids)
    assert [t for t, _ in got] == ["one"] * 4 + ["many"] * 4 + ["at"] * 4 + ["event"]
    expected = EXPECTED * 3 + EXPECTED[:1]
    if api == "producer":  # verbatim: the compact JSON the serializer wrote
        assert [text for _, text in got] == [serializers.dumps(e) for e in expected]
    else:  # validated as jsonb and stored canonically
        canonical = [one(conn, "select %s::jsonb::text", serializers.dumps(e)) for e in expected]
        assert [text for _, text in got] == canonical
        assert ", " in got[0][1]  # jsonb's spacing, not the serializer's


@pytest.mark.parametrize("side", ["sync", "async"])
def test_the_producers_batch_block_takes_models(
    db: str, conn: Conn, models: str, side: str
) -> None:
    async def body(producer: Any) -> list[int]:
        block = producer.batch(models, type="block")
        if side == "sync":
            with block:
                for p in PAYLOADS:
                    block.send(p)
        else:
            async with block:
                for p in PAYLOADS:
                    block.send(p)
        return list(block.ids)

    ids = run_with(db, "producer", side, body)
    assert [text for _, text in stored(conn, ids)] == [serializers.dumps(e) for e in EXPECTED]


@pytest.mark.parametrize("side", ["sync", "async"])
@pytest.mark.parametrize("api", ["producer", "client"])
def test_an_unknown_type_is_refused_with_what_to_do(
    db: str, conn: Conn, models: str, api: str, side: str
) -> None:
    async def body(target: Any) -> list[str]:
        messages = []
        for call in (
            lambda: target.send(models, Opaque()),
            lambda: send_batch(target, models, [PAYLOADS[0], {"x": Opaque()}]),
            lambda: target.send_at(models, Stamped(1, PLACED), delay=timedelta(0)),
        ):
            with pytest.raises(TypeError) as raised:
                await settle(call())
            messages.append(str(raised.value))
        return messages

    single, batch, nested = run_with(db, api, side, body)
    assert single.startswith(
        "payload for queue 'models' cannot be serialised: Object of type Opaque"
    )
    assert batch.startswith("payloads[1] for queue 'models' cannot be serialised:")
    assert "type Opaque" in batch
    assert "Object of type datetime is not JSON serializable" in nested
    for message in (single, batch, nested):
        assert "serializer=pgque.serializers.json_with(default=str)" in message
        assert "pydantic v2 models, dataclasses and msgspec Structs" in message
    assert one(conn, "select count(*) from pgque.event_template") == 0  # nothing sent


@pytest.mark.parametrize("side", ["sync", "async"])
@pytest.mark.parametrize("api", ["producer", "client"])
def test_json_with_default_sends_the_rest_of_a_model(
    db: str, conn: Conn, models: str, api: str, side: str
) -> None:
    async def body(target: Any) -> list[int]:
        first = await settle(target.send(models, Stamped(1, PLACED)))
        return [first, *await settle(send_batch(target, models, [Stamped(2, PLACED)]))]

    ids = run_with(db, api, side, body, serializer=serializers.json_with(default=str))
    got = [json.loads(text) for _, text in stored(conn, ids)]
    assert got == [{"order_id": n, "at": "2024-01-02 03:04:05+00:00"} for n in (1, 2)]


@pytest.mark.parametrize("api", ["producer", "client"])
def test_raw_text_refuses_a_model(db: str, conn: Conn, models: str, api: str) -> None:
    async def body(target: Any) -> None:
        refused = r"payload for queue 'models' cannot be serialised: RAW_TEXT sends str payloads"
        with pytest.raises(TypeError, match=refused + " verbatim; got Line"):
            await settle(target.send(models, Line("a", 1)))

    run_with(db, api, "sync", body, serializer=serializers.RAW_TEXT)
    assert one(conn, "select count(*) from pgque.event_template") == 0


def test_pydantic_and_msgspec_are_never_imported_by_pgque(db: str, conn: Conn, models: str) -> None:
    script = (
        "import sys, dataclasses, pgque\n"
        "@dataclasses.dataclass\n"
        "class Line:\n"
        "    sku: str\n"
        f"with pgque.Producer({db!r}) as p:\n"
        "    p.send('models', Line('a'))\n"
        "    p.send_batch('models', [Line('b'), {'n': 1}])\n"
        "assert 'pydantic' not in sys.modules and 'msgspec' not in sys.modules, sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    texts = [r[0] for r in rows(conn, "select ev_data from pgque.event_template order by ev_id")]
    assert texts == ['{"sku":"a"}', '{"sku":"b"}', '{"n":1}']
