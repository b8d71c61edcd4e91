"""Typed payloads (``model=`` on ``on`` and ``on_batch``): validated into ``msg.data``.

Every consumer test runs against both twins (the ``kind`` fixture) and
drives one batch with ``poll()`` after a forced tick. A payload that does
not validate is dead-lettered at once, never retried. The last test runs
mypy (strict) on a small handler module and reads what it reveals.
"""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path
from typing import Any, TypedDict

import msgspec
import psycopg
import pydantic
import pytest
from mypy import api as mypy_api
from test_batch_handlers import handle_batch, poll_once
from twins import batch_done, force_tick, handle, make

import pgque
from _engine import one, rows
from pgque._models import explain, validator

Conn = psycopg.Connection[Any]


class Order(pydantic.BaseModel):
    id: int
    total: float


@dataclasses.dataclass
class Line:
    sku: str
    qty: int = 1


@dataclasses.dataclass
class Cart:
    owner: str
    lines: list[Line]
    gift: Line | None = None


class Point(msgspec.Struct):
    x: int
    y: int


class Ping(TypedDict):
    at: str


def send(conn: Conn, payload: str, type: str = "t") -> int:
    return int(one(conn, "select pgque.send('q', %s, %s::jsonb)", type, payload))


def dead_letters(conn: Conn) -> list[tuple[Any, ...]]:
    return rows(conn, "select ev_id, dl_reason from pgque.dead_letter order by ev_id")


@pytest.mark.parametrize(
    ("model", "good", "expected", "bad", "says"),
    [
        (Order, '{"id": 1, "total": 9.5}', Order(id=1, total=9.5), '{"id": "x"}',
         "payload does not validate as Order: id: Input should be a valid integer, unable to"
         " parse string as an integer; total: Field required"),
        (Cart, '{"owner": "ann", "lines": [{"sku": "a", "qty": 2}], "gift": {"sku": "g"}}',
         Cart("ann", [Line("a", 2)], Line("g")), '{"owner": "ann"}',
         "payload does not validate as Cart: missing keys ['lines'] for Cart"),
        (Point, '{"x": 1, "y": 2}', Point(1, 2), '{"x": 1}',
         "payload does not validate as Point: Object missing required field `y`"),
        (Ping, '{"at": "noon"}', {"at": "noon"}, '{"when": "noon"}',
         "payload does not validate as Ping: missing keys ['at'] for Ping"),
        (int, "42", 42, '"many"',
         "payload does not validate as int: invalid literal for int() with base 10: 'many'"),
    ],
    ids=["pydantic", "dataclass", "msgspec", "typeddict", "callable"],
)  # fmt: skip
def test_on_validates_into_data_and_dead_letters_what_does_not(
    kind: str, db: str, conn: Conn, queue: str,
    model: Any, good: str, expected: Any, bad: str, says: str,
) -> None:  # fmt: skip
    consumer = make(kind, db, retry_after=0)
    seen: list[Any] = []
    handle(consumer, lambda msg: seen.append(msg.data), "t", model=model)
    send(conn, good)
    bad_id = send(conn, bad)
    force_tick(conn)
    assert poll_once(kind, consumer, db) == 2
    assert seen == [expected]  # the handler never saw the bad one
    assert dead_letters(conn) == [(bad_id, says)]
    assert one(conn, "select count(*) from pgque.retry_queue") == 0  # no retries
    assert batch_done(conn)


def test_on_batch_gets_the_valid_ones(kind: str, db: str, conn: Conn, queue: str) -> None:
    consumer = make(kind, db)
    calls: list[list[Order]] = []
    handle_batch(consumer, lambda msgs: calls.append([m.data for m in msgs]), "t", model=Order)
    send(conn, '{"id": 1, "total": 1}')
    bad_id = send(conn, '{"total": 2}')
    send(conn, '{"id": 3, "total": 3}')
    force_tick(conn)
    assert poll_once(kind, consumer, db) == 3
    assert calls == [[Order(id=1, total=1), Order(id=3, total=3)]]
    assert dead_letters(conn) == [
        (bad_id, "payload does not validate as Order: id: Field required")
    ]


def test_on_batch_with_none_valid_is_not_called(kind: str, db: str, conn: Conn, queue: str) -> None:
    consumer = make(kind, db)
    calls: list[int] = []
    handle_batch(consumer, lambda msgs: calls.append(len(msgs)), "t", model=Order)
    send(conn, "[]")
    force_tick(conn)
    assert poll_once(kind, consumer, db) == 1
    assert calls == []
    assert len(dead_letters(conn)) == 1
    assert batch_done(conn)


def test_transactional_handler_with_a_model(kind: str, db: str, conn: Conn, queue: str) -> None:
    consumer = make(kind, db)
    seen: list[tuple[Order, bool]] = []
    handle(
        consumer, lambda msg, c: seen.append((msg.data, c is not None)), "t",
        transactional=True, model=Order,
    )  # fmt: skip
    send(conn, '{"id": 7, "total": 0}')
    force_tick(conn)
    assert poll_once(kind, consumer, db) == 1
    assert seen == [(Order(id=7, total=0), True)]


def test_without_a_model_data_is_the_decoded_json(
    kind: str, db: str, conn: Conn, queue: str
) -> None:
    consumer = make(kind, db)
    seen: list[Any] = []
    handle(consumer, lambda msg: seen.append(msg.data))
    send(conn, '{"a": [1, 2]}')
    force_tick(conn)
    assert poll_once(kind, consumer, db) == 1
    assert seen == [{"a": [1, 2]}]


def test_message_stays_usable_unparametrized() -> None:
    msg = pgque.Message(1, 2, "t", '{"n": 1}')
    assert (msg.payload, msg.data, msg.json()) == ('{"n": 1}', {"n": 1}, {"n": 1})
    typed: pgque.Message[int] = pgque.Message(1, 2, "t", "5")
    typed.data = 5
    assert typed.data == 5 and typed.payload == "5"


def test_a_model_that_is_none_of_the_kinds_is_refused(kind: str) -> None:
    consumer = make(kind, "dbname=x")
    with pytest.raises(TypeError, match="model must be a pydantic model, a dataclass"):
        consumer.on("t", model=42)
    with pytest.raises(TypeError, match="model must be"):
        consumer.on_batch("t", model="Order")


def test_validator_details() -> None:
    assert validator(Line)({"sku": "a"}) == Line("a")
    with pytest.raises(TypeError, match=r"unexpected keys \['x'\] for Line"):
        validator(Line)({"sku": "a", "x": 1})
    with pytest.raises(TypeError, match="expected a JSON object for Line, got list"):
        validator(Line)([])
    assert explain(ValueError("one\n  two\n")) == "one; two"
    assert len(explain(ValueError("x" * 2000))) == 500


EXAMPLE = """
    from dataclasses import dataclass
    from typing import Any, TypedDict

    import msgspec
    import psycopg
    from pydantic import BaseModel

    import pgque


    class Order(BaseModel):
        id: int


    @dataclass
    class Invoice:
        number: str


    class Ping(TypedDict):
        at: str


    class Point(msgspec.Struct):
        x: int


    def parse(value: Any) -> int:
        return int(value)


    consumer = pgque.AsyncConsumer("dbname=x", queue="q", name="c")
    sync = pgque.Consumer("dbname=x", queue="q", name="c")


    @consumer.on("order", model=Order)
    async def order(msg: pgque.Message[Order]) -> None:
        reveal_type(msg.data)  # R1


    @consumer.on_batch("invoice", model=Invoice)
    async def invoices(msgs: list[pgque.Message[Invoice]]) -> None:
        reveal_type(msgs[0].data)  # R2


    @consumer.on("ping", model=Ping, transactional=True)
    async def ping(msg: pgque.Message[Ping], conn: psycopg.AsyncConnection[Any]) -> None:
        reveal_type(msg.data)  # R3


    @sync.on("point", model=Point)
    def point(msg: pgque.Message[Point]) -> None:
        reveal_type(msg.data)  # R4


    @sync.on_batch("n", model=parse)
    def numbers(msgs: list[pgque.Message[int]]) -> None:
        reveal_type(msgs[0].data)  # R5


    @sync.on("plain")
    def plain(msg: pgque.Message) -> None:
        reveal_type(msg.data)  # R6


    @consumer.on("wrong", model=Order)
    async def wrong(msg: pgque.Message[Invoice]) -> None:  # E1
        pass
"""


def test_type_checkers_see_data_as_the_model(tmp_path: Path) -> None:
    source = textwrap.dedent(EXAMPLE)
    (tmp_path / "handlers.py").write_text(source)
    out, err, status = mypy_api.run([
        "--strict", "--no-incremental", "--cache-dir", str(tmp_path / ".cache"),
        "--config-file", "", str(tmp_path / "handlers.py"),
    ])  # fmt: skip
    assert err == "", err
    lines = source.splitlines()

    def line_of(marker: str) -> int:
        return next(i for i, text in enumerate(lines, 1) if f"# {marker}" in text)

    revealed = {
        int(line.split(":")[1]): line.split('Revealed type is "')[1].rstrip('"')
        for line in out.splitlines()
        if "Revealed type is" in line
    }
    assert revealed == {
        line_of("R1"): "handlers.Order",
        line_of("R2"): "handlers.Invoice",
        line_of("R3"): "TypedDict(handlers.Ping, {'at': str})",
        line_of("R4"): "handlers.Point",
        line_of("R5"): "int",
        line_of("R6"): "Any",
    }, out
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert len(errors) == 1, out
    where = int(errors[0].split(":")[1])
    assert where in (line_of("E1") - 1, line_of("E1")), out  # the decorator's line or the def's
    assert "[arg-type]" in errors[0] and 'expected "Callable[[Message[Order]]' in errors[0]
    assert status == 1
