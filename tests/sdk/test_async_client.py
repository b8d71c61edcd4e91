"""AsyncPgqueClient against a real database: the sync client's behaviours, awaited."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from opentelemetry.sdk.trace import TracerProvider

import pgque
from pgque.serializers import RAW_TEXT


async def tick(client: pgque.AsyncPgqueClient, queue: str = "q") -> None:
    await client.conn.commit()
    await client.force_next_tick(queue)
    await client.ticker(queue)
    await client.conn.commit()


def test_connect_and_close(db: str) -> None:
    async def main() -> None:
        with pytest.raises(pgque.PgqueConnectionError):
            await pgque.connect_async("host=127.0.0.1 port=1 connect_timeout=2")
        client = await pgque.connect_async(db, autocommit=True)
        assert client.conn.autocommit is True
        await client.close()
        await client.close()
        assert client.conn.closed
        async with await pgque.connect_async(db) as owned:
            assert not owned.conn.closed
        assert owned.conn.closed
        raw = await psycopg.AsyncConnection.connect(db)
        await pgque.AsyncPgqueClient(raw).close()
        assert not raw.closed
        await raw.close()

    asyncio.run(main())


def test_round_trip(db: str, queue: str) -> None:
    async def main() -> None:
        async with await pgque.connect_async(db) as client:
            first = await client.send("q", {"hello": "world"}, type="greet")
            await client.send("q", pgque.Event({"n": 1}, type="order.created"))
            ids = await client.send_batch("q", "t", [{"i": i} for i in range(5)])
            assert ids == sorted(ids) and ids[0] > first
            await tick(client)
            msgs = await client.receive("q", "c", 3)
            assert [m.type for m in msgs] == ["greet", "order.created", "t"]
            assert msgs[0].json() == {"hello": "world"}
            rest = await client.receive_rest(msgs[0].batch_id, msgs[-1].msg_id)
            assert [m.json() for m in rest] == [{"i": i} for i in range(1, 5)]
            await client.nack(msgs[0].batch_id, msgs[2], retry_after=0, reason="again")
            assert await client.ack(msgs[0].batch_id) == 1
            await client.conn.commit()
            assert await client.receive("q", "c") == []
            assert await client.ack(msgs[0].batch_id) == 0
            assert await client.subscribe("q", "c2") == 1
            assert await client.unsubscribe("q", "c2") == 1
            assert await client.ticker_all() >= 0
            assert isinstance(await client.force_tick("q"), int)

    asyncio.run(main())


def test_errors_are_mapped(db: str, queue: str) -> None:
    async def main() -> None:
        async with await pgque.connect_async(db) as client:
            with pytest.raises(pgque.PgqueQueueNotFound) as info:
                await client.send("nope", {})
            assert isinstance(info.value.__cause__, psycopg.Error)
            await client.conn.rollback()
            with pytest.raises(pgque.PgqueConsumerNotFound):
                await client.receive("q", "nobody")
            await client.conn.rollback()
            with pytest.raises(pgque.PgqueError):
                await client.send("q", "not json")
            await client.conn.rollback()
            with pytest.raises(TypeError, match="bytes payloads"):
                await client.send("q", b"\x00")

    asyncio.run(main())


def test_raw_text_and_trace(db: str, conn: psycopg.Connection[Any], queue: str) -> None:
    tracer = TracerProvider().get_tracer("test")

    async def main() -> int:
        aconn = await psycopg.AsyncConnection.connect(db, autocommit=True)
        client = pgque.AsyncPgqueClient(aconn, serializer=RAW_TEXT)
        await client.send("q", "a,b", type="csv")
        await client.send_batch("q", "csv", ["1,2"])
        with tracer.start_as_current_span("produce") as span:
            await client.send("q", "traced")
        await aconn.close()
        return span.get_span_context().trace_id

    trace_id = asyncio.run(main())
    got = conn.execute("select ev_data, ev_extra1 from pgque.event_template order by ev_id")
    data = got.fetchall()
    assert [d[0] for d in data] == ["a,b", "1,2", "traced"]
    assert data[2][1].split("-")[1] == format(trace_id, "032x")


def test_cooperative_methods(db: str, queue: str) -> None:
    async def main() -> None:
        async with await pgque.connect_async(db, autocommit=True) as client:
            assert await client.subscribe_subconsumer("q", "g", "s1") == 1
            await client.send_batch("q", "t", [{"a": 1}])
            await client.force_next_tick("q")
            await client.ticker("q")
            msgs = await client.receive_coop("q", "g", "s1", max_messages=10)
            assert [m.json() for m in msgs] == [{"a": 1}]
            assert await client.touch_subconsumer("q", "g", "s1") == 1
            n = await client.unsubscribe_subconsumer("q", "g", "s1", batch_handling=1)
            assert n == 1

    asyncio.run(main())
