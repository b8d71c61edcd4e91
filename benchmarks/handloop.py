"""The floor any SDK must beat: a hand-written asyncio loop over pgque's SQL.

What a user writes without the SDK, and what the field runs for PgQ-style
queues: one connection in autocommit receives the consumer's next batch
(``pgque.receive``, every message of it), one ``asyncio.gather`` runs a
handler per message under a semaphore of ``concurrency``, then
``pgque.ack`` finishes the batch; when there is no batch it sleeps
:data:`IDLE_PAUSE`. A second connection runs ``select pgque.ticker()``
every :data:`TICK_EVERY` seconds; the queue ticks on every such call that
finds events (``ticker_max_lag`` and ``ticker_idle_period`` set to 1 µs
by :func:`create`). Nothing else: no LISTEN, no retries, no nack (a handler
that raises ends the loop), no batching cleverness.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg

AsyncConn = psycopg.AsyncConnection[Any]

TICK_EVERY = 0.05
"""Seconds between two ``pgque.ticker()`` statements."""
IDLE_PAUSE = 0.01
"""Seconds the loop sleeps after a receive that found no batch."""
MAX_RETURN = 1_000_000
"""``receive``'s limit: more than any batch, so the ack never covers an unread message."""

RECEIVE = "select msg_id, batch_id, type, payload from pgque.receive(%s, %s, %s)"
ACK = "select pgque.ack(%s)"
TICK = "select pgque.ticker()"
SEND = "select pgque.send(%s, %s, %s::text)"
SEND_BATCH = "select pgque.send_batch(%s, %s, %b::text[])"

Handler = Callable[[int, str], Awaitable[None]]
"""Called with a message's id and payload text."""


def create(conn: psycopg.Connection[Any], queue: str, consumer: str) -> None:
    """Create ``queue`` ticking on every ``ticker()`` call that finds events; subscribe."""
    conn.execute("select pgque.create_queue(%s)", (queue,))
    for param in ("ticker_max_lag", "ticker_idle_period"):
        conn.execute("select pgque.set_queue_config(%s, %s, '1 microsecond')", (queue, param))
    conn.execute("select pgque.subscribe(%s, %s)", (queue, consumer))


async def send(conn: AsyncConn, queue: str, type_: str, payload: str) -> int:
    """Send one message (its own transaction on an autocommit connection); its id."""
    cur = await conn.execute(SEND, (queue, type_, payload))
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def send_batch(conn: AsyncConn, queue: str, type_: str, payloads: list[str]) -> None:
    """Send many messages in one statement."""
    await conn.execute(SEND_BATCH, (queue, type_, payloads))


async def tick(dsn: str, stop: asyncio.Event) -> None:
    """``select pgque.ticker()`` every :data:`TICK_EVERY` seconds until ``stop``."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        while not stop.is_set():
            await conn.execute(TICK)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), TICK_EVERY)


async def consume(
    dsn: str, queue: str, consumer: str, concurrency: int, handler: Handler, stop: asyncio.Event
) -> None:
    """Receive, gather the handlers (``concurrency`` at a time), ack; until ``stop``.

    Runs the ticker beside itself; a batch in progress when ``stop`` is set
    is finished and acked first.
    """
    ticker = asyncio.create_task(tick(dsn, stop))
    semaphore = asyncio.Semaphore(concurrency)

    async def one(msg_id: int, payload: str) -> None:
        async with semaphore:
            await handler(msg_id, payload)

    try:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            while not stop.is_set():
                cur = await conn.execute(RECEIVE, (queue, consumer, MAX_RETURN))
                rows = await cur.fetchall()
                if not rows:
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(stop.wait(), IDLE_PAUSE)
                    continue
                await asyncio.gather(*(one(row[0], row[3]) for row in rows))
                await conn.execute(ACK, (rows[0][1],))
    finally:
        stop.set()
        await ticker
