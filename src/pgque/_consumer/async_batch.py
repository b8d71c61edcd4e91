"""Opening a consumer's batch in one round trip: tick, ``BEGIN`` and ``receive``,
and closing it in one: ack and ``COMMIT``; the ``receive`` span around every
way of opening one.

A consumer whose process leads the ticking ticks its own queue before each
poll (see docs/concepts.md, "Latency"). The tick must commit on its own,
before the batch's transaction begins: ticks are serialized per queue, and
a tick left uncommitted while the handlers run would hold up every other
ticker of the queue. One simple-protocol query carries the steps (the
statements of a query string run in order: ``BEGIN``, the tick and ``COMMIT``,
then the batch's ``BEGIN``), so the handlers start one round trip after the
wakeup instead of three. The tick's transaction begins explicitly: a
``COMMIT`` ending the implicit transaction of a query string makes the server
log a warning (there is no transaction in progress). The simple protocol
has no parameters: the values go in as literals composed by
:mod:`psycopg.sql`; the statements are in ``queries.sql``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from opentelemetry import trace
from psycopg import sql

from pgque import tracing
from pgque._async_executor import execute_text
from pgque._queries import query
from pgque._text import check_text
from pgque.message import Message
from pgque.otel import BATCH_MESSAGE_COUNT, CONSUMER_GROUP, telemetry

__all__ = ["AsyncBatchOpener", "traced_receive"]

_IDLE = psycopg.pq.TransactionStatus.IDLE

_Key = tuple[str, str, str, int, "float | None"]


class AsyncBatchOpener:
    """Opens a consumer's batches on an autocommit connection (the statements are
    composed once per queue, consumer, limit and tick)."""

    def __init__(self) -> None:
        self._statements: dict[_Key, bytes] = {}

    @staticmethod
    def fits(conn: psycopg.AsyncConnection[Any]) -> bool:
        """Whether a batch may be opened this way on ``conn``: an autocommit connection
        outside a transaction (inside one, a framework's say, the batch takes a
        savepoint instead)."""
        return conn.autocommit and conn.info.transaction_status == _IDLE

    @asynccontextmanager
    async def transaction(self, conn: psycopg.AsyncConnection[Any]) -> AsyncIterator[None]:
        """The batch's transaction, begun by :meth:`receive` inside the block: committed
        when the block ends, rolled back when it raises."""
        try:
            yield
        except BaseException:
            if not conn.closed:
                await conn.rollback()  # nothing to do when no transaction began
            raise
        await conn.commit()

    async def receive(
        self,
        conn: psycopg.AsyncConnection[Any],
        queue: str,
        consumer: str,
        max_messages: int,
        *,
        tick: float | None = None,
    ) -> list[Message]:
        """Begin the batch's transaction and read up to ``max_messages`` messages of the
        consumer's open or next batch (an empty list: none); call it inside
        :meth:`transaction`.

        ``tick``: first tick the queue, in a transaction of its own, as
        ``ticker_eager`` does, letting a batch grow for up to ``tick`` seconds
        (None: do not tick). The tick also arms the producers' wakeup.
        """
        statement = self._statement(conn, (queue, consumer, max_messages, tick))
        cur = await execute_text(conn, statement, prepare=False)
        while cur.nextset():
            pass  # the receive's rows are the last result
        return [Message(*row) for row in await cur.fetchall()]

    async def ack_commit(self, conn: psycopg.AsyncConnection[Any], batch_id: int) -> int:
        """Ack the batch :meth:`receive` opened and commit its transaction, in one round
        trip: 1, or 0 when the batch was not open. The batch's :meth:`transaction`
        then has nothing left to commit."""
        statement = sql.SQL(query("batch_ack_commit")).format(batch_id=sql.Literal(batch_id))
        cur = await execute_text(conn, statement, prepare=False)
        row = await cur.fetchone()  # the ack's result comes first
        return int(row[0]) if row else 0

    def _statement(
        self, conn: psycopg.AsyncConnection[Any], args: tuple[str, str, int, float | None]
    ) -> bytes:
        key: _Key = (conn.info.encoding, *args)
        if (statement := self._statements.get(key)) is not None:
            return statement
        queue, consumer, max_messages, tick = args
        check_text(queue=queue, consumer=consumer)
        parts = [
            sql.SQL(query("batch_begin_receive")).format(
                queue=sql.Literal(queue),
                consumer=sql.Literal(consumer),
                max_messages=sql.Literal(max_messages),
            )
        ]
        if tick is not None:
            ticking = sql.SQL(query("batch_tick")).format(
                queue=sql.Literal(queue), max_wait=sql.Literal(f"{tick} seconds")
            )
            parts.insert(0, ticking)
        if len(self._statements) >= 16:  # options changed on the way: start again
            self._statements.clear()
        statement = self._statements[key] = sql.SQL(";\n").join(parts).as_bytes(conn)
        return statement


async def traced_receive(
    queue: str, consumer: str, receive: Callable[[], Awaitable[list[Message]]]
) -> list[Message]:
    """Run a receive call inside a ``receive`` span linked to the messages' traces, and
    count the messages consumed."""
    tel = telemetry()
    with tel.operation("receive", queue, attributes={CONSUMER_GROUP: consumer}) as op:
        msgs = await receive()
        if msgs:
            tel.record_consumed(queue, len(msgs), attributes={CONSUMER_GROUP: consumer})
        if msgs and op.span.is_recording():
            op.span.set_attribute(BATCH_MESSAGE_COUNT, len(msgs))
            for msg in msgs:
                parent = tracing.extract(msg.extra1, msg.extra4)
                if parent is not None:
                    op.span.add_link(trace.get_current_span(parent).get_span_context())
    return msgs
