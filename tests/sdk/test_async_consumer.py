"""AsyncConsumer: the asyncio twin of Consumer, on a real database."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import psycopg
import pytest

import pgque
from _engine import one, rows


def tick(conn: psycopg.Connection[Any]) -> None:
    one(conn, "select pgque.force_next_tick('q')")
    one(conn, "select pgque.ticker('q')")


async def until(condition: Any, timeout: float = 10.0) -> None:
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.02)

    await asyncio.wait_for(poll(), timeout)


def test_same_options_as_the_threaded_consumer() -> None:
    sync = inspect.signature(pgque.Consumer.__init__).parameters
    aio = inspect.signature(pgque.AsyncConsumer.__init__).parameters
    assert [(p.name, p.kind, p.default) for p in sync.values()] == [
        (p.name, p.kind, p.default) for p in aio.values()
    ]
    for method in ("on", "stop", "start"):
        assert list(inspect.signature(getattr(pgque.Consumer, method)).parameters) == list(
            inspect.signature(getattr(pgque.AsyncConsumer, method)).parameters
        )


def test_async_handlers_settle_and_ack(db: str, conn: psycopg.Connection[Any], queue: str) -> None:
    consumer = pgque.AsyncConsumer(db, queue="q", name="c", poll_interval=0.2, ticker=False,
                                   retry_after=0, concurrency=2)  # fmt: skip
    seen: list[Any] = []

    @consumer.on("t", ordered_by="extra1")
    async def handle(msg: pgque.Message) -> None:
        await asyncio.sleep(0)
        seen.append(msg.json())
        if msg.json() == 1:
            raise RuntimeError("retry me")
        if msg.json() == 2:
            msg.dead_letter("bad")

    with pytest.raises(TypeError, match="must be async"):
        consumer.on("x")(lambda msg: None)  # type: ignore[arg-type, return-value]
    for i in range(4):
        one(conn, "select pgque.send('q', 't', %s::jsonb, 'k')", str(i))
    tick(conn)

    async def main() -> None:
        task = asyncio.create_task(consumer.start())
        await until(
            lambda: (
                len(seen) >= 4
                and one(
                    conn, "select sub_batch is null and sub_last_tick > 1 from pgque.subscription"
                )
            )
        )
        consumer.stop()
        await asyncio.wait_for(task, 5)

    asyncio.run(main())
    assert seen == [0, 1, 2, 3]  # one key: in order, even with concurrency
    assert rows(conn, "select ev_data from pgque.retry_queue") == [("1",)]
    assert rows(conn, "select ev_data, dl_reason from pgque.dead_letter") == [("2", "bad")]


def test_timeout_cancels_the_handler(db: str, conn: psycopg.Connection[Any], queue: str) -> None:
    consumer = pgque.AsyncConsumer(db, queue="q", name="c", poll_interval=0.2, ticker=False)
    cancelled: list[bool] = []

    @consumer.on("t", timeout=0.1)
    async def slow(msg: pgque.Message) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    one(conn, "select pgque.send('q', 't', '{}'::jsonb)")
    tick(conn)

    async def main() -> None:
        task = asyncio.create_task(consumer.start())
        await until(lambda: one(conn, "select count(*) from pgque.retry_queue") == 1)
        consumer.stop()
        await asyncio.wait_for(task, 5)

    asyncio.run(main())
    assert cancelled == [True]


def test_notify_wakeup(db: str, conn: psycopg.Connection[Any], queue: str) -> None:
    consumer = pgque.AsyncConsumer(db, queue="q", name="c", poll_interval=30, ticker=False)
    got: list[int] = []

    @consumer.on("*")
    async def handle(msg: pgque.Message) -> None:
        got.append(msg.msg_id)

    async def main() -> None:
        task = asyncio.create_task(consumer.start())
        await until(lambda: consumer.listening)
        one(conn, "select pgque.send('q', '{}'::jsonb)")
        tick(conn)
        await until(lambda: got != [], timeout=5)
        consumer.stop()
        await asyncio.wait_for(task, 5)

    asyncio.run(main())


def test_takes_a_pool_or_your_connection(
    db: str, conn: psycopg.Connection[Any], queue: str
) -> None:
    from psycopg_pool import AsyncConnectionPool

    async def consume(source: Any) -> list[int]:
        consumer = pgque.AsyncConsumer(source, queue="q", name="c", poll_interval=0.2)
        assert consumer.listen is False  # pooled and given connections never listen
        got: list[int] = []

        @consumer.on("*")
        async def handle(msg: pgque.Message) -> None:
            got.append(msg.msg_id)

        one(conn, "select pgque.send('q', '{}'::jsonb)")
        tick(conn)
        task = asyncio.create_task(consumer.start())  # ticker "auto": none without a DSN
        await until(
            lambda: (
                got != []
                and one(conn, "select count(*) from pgque.subscription where sub_batch is not null")
                == 0
            )
        )
        consumer.stop()
        await asyncio.wait_for(task, 5)
        return got

    async def main() -> None:
        async with AsyncConnectionPool(db, min_size=1, max_size=1, open=False) as pool:
            assert len(await consume(pool)) == 1
            async with pool.connection() as borrowed:
                assert borrowed.autocommit is False  # given back as it was lent
        own = await psycopg.AsyncConnection.connect(db, autocommit=True)
        assert len(await consume(own)) == 1
        assert not own.closed  # used, never closed by the consumer
        broken = pgque.AsyncConsumer(own, queue="q", name="c", poll_interval=0.2, ticker=False)
        await own.close()
        with pytest.raises(pgque.PgqueConnectionError, match="closed"):
            await broken.start()
        not_autocommit = await psycopg.AsyncConnection.connect(db)
        with pytest.raises(ValueError, match="autocommit"):
            pgque.AsyncConsumer(not_autocommit, queue="q", name="c")
        await not_autocommit.close()

    asyncio.run(main())
