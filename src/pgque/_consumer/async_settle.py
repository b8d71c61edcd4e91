"""Settling messages and batches: the one path of the consumers and ``pgque.testing``.

An :class:`~pgque._consumer.dispatch.Outcome` per message is applied on the batch's
connection, each nack or dead letter in a savepoint; a nack the server
refuses dead-letters the message with the cause, and a refused dead letter
or ack raises :class:`~pgque._consumer.settling.SettleFailed` (the batch is
rolled back), as :mod:`pgque._consumer.settling` states. Every settle makes
its OpenTelemetry span.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import psycopg

from pgque._async_executor import execute
from pgque._consumer.async_slots import SlotRef
from pgque._consumer.dispatch import Outcome
from pgque._consumer.failures import is_connection_error
from pgque._consumer.settling import SettleFailed, retry_delay, retry_interval, settle_refused
from pgque.async_client import AsyncPgqueClient
from pgque.errors import PgqueError
from pgque.message import Message
from pgque.otel import CONSUMER_GROUP, telemetry

__all__ = ["AsyncSettler"]


class AsyncSettler:
    """Settles one consumer's messages and batches.

    Args:
        queue: The queue.
        name: The consumer (the spans' consumer group).
        retry_after: Seconds before a nacked message comes again, unless the
            handler or the backoff says otherwise.
        retry_backoff: ``(base, cap)`` for messages whose handler raised, or None.
        log: Where refused settles are logged.
        slot: The partition slot whose batch is settled (the slot functions
            are used then), or None.
    """

    def __init__(
        self,
        queue: str,
        name: str,
        *,
        retry_after: float,
        retry_backoff: tuple[float, float] | None,
        log: logging.Logger,
        slot: SlotRef | None = None,
    ) -> None:
        self.queue = queue
        self.slot = slot
        self.name = name
        self.retry_after = retry_after
        self.retry_backoff = retry_backoff
        self._log = log
        self._attributes = {CONSUMER_GROUP: name}

    async def settle(
        self, conn: psycopg.AsyncConnection[Any], msg: Message, outcome: Outcome
    ) -> None:
        """Apply ``outcome`` to ``msg`` (an ack needs nothing until the batch's ack).

        Raises:
            SettleFailed: The message could be neither nacked nor dead-lettered.
        """
        if outcome.action == "ack":
            return
        if outcome.action == "fail":
            raise SettleFailed(PgqueError(f"msg_id={msg.msg_id} is not settled"))
        delay = None
        if outcome.action == "nack":
            delay = retry_delay(msg, outcome, self.retry_after, self.retry_backoff)
        try:
            await self._settle_in_db(conn, msg, delay, outcome.reason)
        except Exception as exc:
            reason = settle_refused(exc, msg, delay, outcome.reason, self._log, self.name)
            try:
                await self._settle_in_db(conn, msg, None, reason)
            except Exception as again:
                settle_refused(again, msg, None, reason, self._log, self.name)

    async def _settle_in_db(
        self,
        conn: psycopg.AsyncConnection[Any],
        msg: Message,
        delay: float | None,
        reason: str | None,
    ) -> None:
        """Nack the message (retry after ``delay`` seconds), or dead-letter it (None)."""
        slot = self.slot
        params: tuple[Any, ...]
        if delay is None and slot is not None:
            operation, statement = "dead_letter", "dead_letter_partitioned"
            params = (*_slot_args(slot), msg.msg_id, reason)
        elif delay is None:
            operation, statement = "dead_letter", "dead_letter_event"
            params = (msg.batch_id, msg.msg_id, reason)
        elif slot is not None:
            operation, statement = "nack", "nack_partitioned_by_id"
            params = (*_slot_args(slot), msg.msg_id, retry_interval(delay), reason)
        else:
            operation, statement = "nack", "nack_by_id"
            params = (msg.batch_id, msg.msg_id, retry_interval(delay), reason)
        with telemetry().operation(operation, self.queue, attributes=self._attributes) as op:
            op.set_message_id(msg.msg_id)
            async with _savepoint(conn):
                await execute(conn, statement, params)

    async def ack(
        self,
        client: AsyncPgqueClient,
        batch_id: int,
        finish: Callable[[int], Awaitable[int]] | None = None,
    ) -> int:
        """Ack the batch: 1, or 0 (logged) when it was not open. ``finish``: how to ack
        (and commit) instead of ``client.ack``.

        Raises:
            SettleFailed: The server refused the ack or its commit (a lost connection
                raises as is).
        """
        try:
            with telemetry().operation("ack", self.queue, attributes=self._attributes):
                if finish is not None:
                    acked = await finish(batch_id)
                elif self.slot is None:
                    acked = await client.ack(batch_id)
                else:
                    acked = await client.ack_partitioned(*_slot_args(self.slot))
        except (psycopg.Error, PgqueError) as exc:
            if is_connection_error(exc):
                raise
            raise SettleFailed(exc) from exc
        if acked == 0:
            self._log.warning(
                "pgque: ack batch %s returned 0 -- stale or double ack"
                " (batch already finished or not found)",
                batch_id,
            )
        return acked


def _slot_args(slot: SlotRef) -> tuple[str, str, int, int, str]:
    """The first five arguments of the slot functions."""
    return (slot.queue, slot.consumer, slot.slot, slot.n, slot.worker)


@asynccontextmanager
async def _savepoint(conn: psycopg.AsyncConnection[Any]) -> AsyncIterator[None]:
    """A savepoint when a transaction is open (a failed nack must not abort the batch)."""
    if conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS:
        async with conn.transaction():
            yield
    else:
        yield
