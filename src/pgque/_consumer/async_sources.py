"""Where a consumer's batches come from: one batch source per mode.

A consumer works in one of three modes, each a :class:`AsyncBatchSource`:

* :class:`AsyncPlainSource`: the consumer's own batches (one process at a time
  per consumer name; a second one waits on the subscription row).
* :class:`AsyncCooperativeSource`: a member (``subconsumer=``) of a cooperative
  consumer: the members share one stream, each batch goes to one of them.
* :class:`AsyncSlotSource`: partition slots (``partitions=``): the worker holds
  leases on slots and works each held slot's share of the batch.

A source owns what differs between the modes: how the consumer subscribes, how a
batch is opened and read (in which transaction, with which tick), which lease its
settles go through, and how it is closed. The consumer hands it what is common
(running the handlers and settling each message) as the ``process`` callable,
which gets an :class:`OpenBatch`.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import psycopg

from pgque._async_executor import execute
from pgque._consumer.async_batch import AsyncBatchOpener, traced_receive
from pgque._consumer.async_slots import AsyncSlotLeases, SlotRef
from pgque._consumer.options import ConsumerOptions
from pgque.async_client import AsyncPgqueClient
from pgque.errors import PgqueFenced
from pgque.message import Message

__all__ = [
    "AsyncBatchSource",
    "AsyncCooperativeSource",
    "AsyncPlainSource",
    "AsyncSlotSource",
    "OpenBatch",
    "Process",
    "source_for",
    "tick_queue",
]


@dataclass
class OpenBatch:
    """A batch a source opened, inside its transaction: its first messages, and how
    it is settled and closed."""

    #: The client of the batch's connection (reads the rest, acks).
    client: AsyncPgqueClient
    #: The messages read so far (never empty).
    messages: list[Message]
    #: The partition slot whose lease every settle of the batch goes through.
    slot: SlotRef | None = None
    #: Acks the batch and commits its transaction in one round trip (None: the ack
    #: is a statement of its own, and the source's transaction commits).
    finish: Callable[[int], Awaitable[int]] | None = None


#: What a source hands an open batch to: runs the handlers, settles every message,
#: acks the batch; returns how many messages were handled.
Process = Callable[[OpenBatch], Awaitable[int]]


class AsyncBatchSource(Protocol):
    """Where a consumer's batches come from (one implementation per mode)."""

    #: The consumer's options the source was made for.
    options: ConsumerOptions

    async def subscribe(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Subscribe the consumer (``subscribe=True``) as this mode does."""
        ...

    async def poll(
        self, conn: psycopg.AsyncConnection[Any], tick: float | None, process: Process
    ) -> int | None:
        """Open the next batch on the autocommit ``conn`` (ticking the queue first
        with a ``tick``, as ``ticker_eager`` does with that ``max_wait`` in seconds),
        hand it to ``process`` and close it; how many messages were handled, or None
        when there was no batch."""
        ...


async def tick_queue(conn: psycopg.AsyncConnection[Any], queue: str, max_wait: float) -> None:
    """Tick ``queue`` as ``ticker_eager`` does, arming the wakeup (autocommit ``conn``)."""
    await execute(conn, "consumer_tick", (queue, f"{max_wait} seconds"))


class AsyncPlainSource:
    """The consumer's own batches. On an autocommit connection outside a transaction
    the tick, ``BEGIN`` and the receive go in one round trip, and the ack and
    ``COMMIT`` in one (:class:`~pgque._consumer.async_batch.AsyncBatchOpener`);
    inside a transaction of the caller's, the batch is a savepoint."""

    def __init__(self, options: ConsumerOptions) -> None:
        self.options = options
        self._opener = AsyncBatchOpener()

    async def subscribe(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """``pgque.subscribe(queue, name)``."""
        await execute(conn, "subscribe", (self.options.queue, self.options.name))

    async def poll(
        self, conn: psycopg.AsyncConnection[Any], tick: float | None, process: Process
    ) -> int | None:
        """See :meth:`AsyncBatchSource.poll`."""
        queue, name, limit = self.options.queue, self.options.name, self.options.max_messages
        client = AsyncPgqueClient(conn)
        if self._opener.fits(conn):
            async with self._opener.transaction(conn):  # BEGIN, receive (and tick): one trip
                msgs = await traced_receive(queue, name, functools.partial(
                    self._opener.receive, conn, queue, name, limit, tick=tick))  # fmt: skip
                if not msgs:
                    return None
                finish = functools.partial(self._opener.ack_commit, conn)
                return await process(OpenBatch(client, msgs, finish=finish))
        if tick is not None:
            await tick_queue(conn, queue, tick)
        async with conn.transaction():  # in the caller's transaction: a savepoint
            msgs = await traced_receive(
                queue, name, functools.partial(client.receive, queue, name, limit)
            )
            return await process(OpenBatch(client, msgs)) if msgs else None


class AsyncCooperativeSource:
    """A member of a cooperative consumer (``subconsumer=``). Taking a batch locks
    the group: it is taken in a short transaction of its own, so other members are
    not held up while this one works; the batch's work is a transaction of its own."""

    def __init__(self, options: ConsumerOptions) -> None:
        assert options.subconsumer is not None
        self.options = options
        self.member: str = options.subconsumer

    async def subscribe(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """``pgque.subscribe_subconsumer(queue, name, member)``."""
        params = (self.options.queue, self.options.name, self.member)
        await execute(conn, "subscribe_subconsumer", params)

    async def poll(
        self, conn: psycopg.AsyncConnection[Any], tick: float | None, process: Process
    ) -> int | None:
        """See :meth:`AsyncBatchSource.poll`."""
        options = self.options
        if tick is not None:
            await tick_queue(conn, options.queue, tick)
        client = AsyncPgqueClient(conn)
        msgs = await traced_receive(options.queue, options.name, functools.partial(
            client.receive_coop, options.queue, options.name, self.member,
            max_messages=options.max_messages, dead_interval=options.dead_interval))  # fmt: skip
        if not msgs:
            return None
        async with conn.transaction():
            return await process(OpenBatch(client, msgs))


class AsyncSlotSource:
    """Partition slots (``partitions=``): claims free slots, then works the first held
    slot with messages. Each receive renews that slot's lease, and the lease row stays
    locked until the batch commits, so no other worker takes the slot over in the
    middle of a batch; a slot taken over anyway (fenced) is dropped."""

    def __init__(self, options: ConsumerOptions, slots: AsyncSlotLeases) -> None:
        self.options = options
        self.slots = slots

    async def subscribe(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Subscribe the consumer and make its slots."""
        await self.slots.subscribe(AsyncPgqueClient(conn))

    async def poll(
        self, conn: psycopg.AsyncConnection[Any], tick: float | None, process: Process
    ) -> int | None:
        """See :meth:`AsyncBatchSource.poll`."""
        if tick is not None:
            await tick_queue(conn, self.options.queue, tick)
        client, slots = AsyncPgqueClient(conn), self.slots
        await slots.claim(client)
        for slot in slots.in_turn():
            try:
                async with conn.transaction():
                    msgs = await traced_receive(
                        self.options.queue, self.options.name,
                        functools.partial(slots.receive, client, slot),
                    )  # fmt: skip
                    if msgs:
                        slots.worked(slot)
                        return await process(OpenBatch(client, msgs, slot=slots.ref(slot)))
            except PgqueFenced:
                slots.lost(slot)
        return None


def source_for(options: ConsumerOptions, slots: AsyncSlotLeases | None) -> AsyncBatchSource:
    """The batch source of the consumer's mode (``slots``: its partition slot leases)."""
    if slots is not None:
        return AsyncSlotSource(options, slots)
    if options.subconsumer is not None:
        return AsyncCooperativeSource(options)
    return AsyncPlainSource(options)
