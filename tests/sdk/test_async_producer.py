"""AsyncProducer against a real database (each test runs its own event loop)."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider, SpanKind
from psycopg_pool import AsyncConnectionPool, AsyncNullConnectionPool

import pgque
from _engine import one, rows, tick

ALL = 2**31 - 1


def received(conn: psycopg.Connection[Any], queue: str = "q") -> list[pgque.Message]:
    tick(conn, queue)
    client = pgque.PgqueClient(conn)
    msgs = client.receive(queue, "c", ALL)
    if msgs:
        client.ack(msgs[0].batch_id)
    return msgs


def test_send_batch_and_block(db: str, conn: psycopg.Connection[Any], queue: str) -> None:
    async def main() -> list[int]:
        # Opens on first use; stores no trace context, whatever the global tracer provider.
        producer = pgque.AsyncProducer(db, tracer_provider=NoOpTracerProvider())
        try:
            ids = [await producer.send("q", {"n": 0}, type="t", extras=("k", None, None, None))]
            ids += await producer.send_batch("q", [{"n": 1}, {"n": 2}], types=["u", None])
            assert await producer.send_batch("q", []) == []
            async with producer.batch("q", type="b") as batch:
                batch.send({"n": 3})
                batch.send({"n": 4}, type="c")
            ids += batch.ids
            with pytest.raises(RuntimeError):
                async with producer.batch("q") as failed:
                    failed.send({"n": -1})
                    raise RuntimeError("boom")
            assert failed.ids == []
        finally:
            await producer.close()
        assert producer.closed
        with pytest.raises(pgque.PgqueConnectionError, match="closed"):
            await producer.send("q", {})
        return ids

    ids = asyncio.run(main())
    msgs = received(conn)
    assert [m.msg_id for m in msgs] == ids
    assert [(m.type, m.json(), m.extra1) for m in msgs] == [
        ("t", {"n": 0}, "k"),
        ("u", {"n": 1}, None),
        ("default", {"n": 2}, None),
        ("b", {"n": 3}, None),
        ("c", {"n": 4}, None),
    ]


def test_tasks_share_one_producer(db: str, conn: psycopg.Connection[Any], queue: str) -> None:
    async def main() -> list[int]:
        async with pgque.AsyncProducer(db, pool_kwargs={"max_size": 3}) as producer:

            async def work(n: int) -> list[int]:
                mine = [await producer.send("q", {"task": n, "i": i}) for i in range(10)]
                return mine + await producer.send_batch("q", [{"task": n}] * 20)

            results = await asyncio.gather(*(work(n) for n in range(8)))
        return [i for ids in results for i in ids]

    ids = asyncio.run(main())
    assert len(ids) == len(set(ids)) == 8 * 30
    assert len(received(conn)) == 8 * 30


def test_conn_inside_a_transaction_that_rolls_back(
    db: str, conn: psycopg.Connection[Any], queue: str
) -> None:
    async def main() -> int:
        async with (
            pgque.AsyncProducer(db) as producer,
            await psycopg.AsyncConnection.connect(db) as app,
        ):
            await app.execute("create table orders (id int)")
            await app.commit()
            await app.execute("insert into orders values (1)")
            await producer.send("q", {"order": 1}, conn=app)
            await producer.send_batch("q", [{"order": 2}], conn=app)
            async with producer.batch("q", conn=app) as batch:
                batch.send({"order": 3})
            await producer.send_at("q", {"order": 4}, delay=timedelta(hours=1), conn=app)
            assert app.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
            await app.rollback()
            kept = await producer.send("q", {"order": 5}, conn=app)
            await app.commit()
            return kept

    kept = asyncio.run(main())
    assert one(conn, "select count(*) from orders") == 0
    assert one(conn, "select count(*) from pgque.delayed_events") == 0
    assert [m.msg_id for m in received(conn)] == [kept]


def test_send_at(db: str, conn: psycopg.Connection[Any], queue: str) -> None:
    async def main() -> tuple[int, int, int]:
        async with pgque.AsyncProducer(db) as producer:
            now = datetime.now(timezone.utc)
            later = await producer.send_at("q", {"at": 1}, at=now + timedelta(hours=1))
            delayed = await producer.send_at("q", {"d": 1}, delay=timedelta(minutes=5))
            due = await producer.send_at("q", {"due": 1}, at=now - timedelta(seconds=1))
            with pytest.raises(pgque.PgqueInvalidArgument, match="exactly one"):
                await producer.send_at("q", {})
            with pytest.raises(pgque.PgqueInvalidArgument, match="negative"):
                await producer.send_at("q", {}, delay=timedelta(seconds=-1))
            return later, delayed, due

    later, delayed, due = asyncio.run(main())
    assert [r[0] for r in rows(conn, "select de_id from pgque.delayed_events order by 1")] == [
        later, delayed,
    ]  # fmt: skip
    assert [m.msg_id for m in received(conn)] == [due]


def test_entry_points_and_errors(db: str, conn: psycopg.Connection[Any], queue: str) -> None:
    async def main() -> list[int]:
        ids: list[int] = []
        async with AsyncConnectionPool(db, min_size=1, max_size=2, open=False) as pool:
            producer = pgque.AsyncProducer(pool)
            ids.append(await producer.send("q", {"via": "pool"}))
            await producer.close()
            assert not pool.closed
        async with AsyncNullConnectionPool(
            db, max_size=1, kwargs={"autocommit": True, "prepare_threshold": None}, open=False
        ) as pool:
            ids += await pgque.AsyncProducer(pool).send_batch("q", [{"via": "null pool"}])
        async with await psycopg.AsyncConnection.connect(db, autocommit=True) as own:
            ids.append(await pgque.AsyncProducer(own).send("q", {"via": "connection"}))
            assert not own.closed
        async with await psycopg.AsyncConnection.connect(
            db, autocommit=True, cursor_factory=psycopg.AsyncClientCursor
        ) as own:
            ids += await pgque.AsyncProducer(own).send_batch("q", [{"via": "client cursor"}])
        with pytest.raises(pgque.PgqueConnectionError):
            await pgque.AsyncProducer("host=127.0.0.1 port=1 connect_timeout=2").open()
        async with pgque.AsyncProducer(db) as producer:
            with pytest.raises(pgque.PgqueQueueNotFound):
                await producer.send_batch("nope", [1])
            with pytest.raises(TypeError, match=r"payloads\[1\]"):
                await producer.send_batch("q", [1, object()])
            with pytest.raises(pgque.PgqueInvalidArgument, match="types"):
                await producer.send_batch("q", [1], types=["a", "b"])
        return ids

    ids = asyncio.run(main())
    assert [m.msg_id for m in received(conn)] == ids
    with pytest.raises(TypeError, match="source must be"):
        pgque.AsyncProducer(conn)  # type: ignore[arg-type]


def test_trace_goes_into_extra1(db: str, conn: psycopg.Connection[Any], queue: str) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    async def main() -> None:
        async with pgque.AsyncProducer(db, tracer_provider=provider) as producer:
            await producer.send("q", {})
            await producer.send_batch("q", [1, 2])

    asyncio.run(main())
    spans = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
    assert [(s.name, s.kind) for s in spans] == [
        ("send q", SpanKind.PRODUCER),
        ("create q", SpanKind.PRODUCER),
        ("create q", SpanKind.PRODUCER),
        ("send q", SpanKind.CLIENT),
    ]
    extra1 = [r[0] for r in rows(conn, "select ev_extra1 from pgque.event_template order by ev_id")]
    expected = [f"{s.context.trace_id:032x}-{s.context.span_id:016x}" for s in spans[:3]]
    assert [e.split("-", 1)[1][:49] for e in extra1] == expected
