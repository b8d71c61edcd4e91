"""The consumer: a loop that receives batches and calls your handlers.

Each poll is one transaction from receive to ack on the consumer's
connection: the subscription row stays locked meanwhile, so two processes
running the same consumer name never work on one batch (scale out with
``subconsumer=``), and a crash rolls the batch back for the next poll. A
handler that raises gets its message nacked (retried after
``retry_after`` seconds, dead-lettered after the queue's max retries); the
batch is acked when every message was handled or nacked.

Between polls the consumer waits for a NOTIFY on ``pgque_<queue>`` (sent by
every tick) on a separate listening connection, or ``poll_interval``
seconds at most. Connection errors never end the loop: it reconnects with
backoff (100 ms doubling to 30 s, with jitter, from 100 ms again after a
successful poll) and polls at once; a setup error (no subscription, no
queue) ends it at once. Whether to run a ticker, and whether to subscribe,
are decided on every (re)connection. The loop, the batch sources, the
handlers' running and the settling are in :mod:`pgque._consumer`; the options
are checked by :mod:`pgque._consumer.options`.

Stopping (``stop()``, SIGTERM or SIGINT) ends the loop after the current
batch; a batch that does not finish within ``shutdown_timeout`` is rolled
back and comes again to the next consumer. A second signal stops at once,
rolling the batch back.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import time
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from pgque._acompat import Event, wait_event
from pgque._async_executor import execute, fetch_all
from pgque._consumer.async_handlers import AsyncHandlers, BatchAborted
from pgque._consumer.async_runner import AsyncRunner, setup_errors
from pgque._consumer.async_settle import AsyncSettler
from pgque._consumer.async_slots import AsyncSlotLeases
from pgque._consumer.async_sources import AsyncBatchSource, OpenBatch, source_for, tick_queue
from pgque._consumer.dispatch import Deadline, HandlerSpec, RateLimiter
from pgque._consumer.every import EverySchedule, Periodic
from pgque._consumer.options import ALL_MESSAGES, ConsumerOptions, check_source
from pgque._consumer.settling import SettleFailed, SettleFailures
from pgque.errors import ConsumerGaveUp, PgqueError
from pgque.otel import telemetry

__all__ = ["AsyncConsumer", "ConsumerGaveUp"]


class AsyncConsumer(AsyncHandlers, Periodic):
    """Receives a queue's batches and dispatches each message to a handler by type.

    The constructor only checks and stores its arguments; no database work
    happens until :meth:`start`. The consumer does not subscribe itself
    unless ``subscribe=True``: ``pgque subscribe QUEUE NAME`` first (in
    cooperative mode ``receive_coop`` registers the member). Every option
    is an attribute too (``consumer.retry_after``), checked when set and frozen
    while the consumer runs.

    Args:
        dsn: Connection string, used as given; or a ``psycopg_pool.AsyncConnectionPool``
            to take the batch connection from; or an autocommit
            ``psycopg.AsyncConnection`` of yours to run the batches on (never
            closed by the consumer; if it breaks, :meth:`start` raises
            :class:`~pgque.errors.PgqueConnectionError` instead of
            reconnecting). Pooled and given connections never listen: give
            ``listen_dsn`` for NOTIFY wakeups (and for the ticker), else it polls.
        queue: The queue to consume.
        name: The consumer (subscription) name.
        poll_interval: Longest wait between polls without a NOTIFY, in seconds. Defaults to
            30.
        max_messages: Messages read per receive call; a larger batch is read to the end
            before the ack. Defaults to all of it.
        retry_after: Seconds before a failed message is retried, from 0 to 3,110,400,000
            (100 years, ``pgque.nack``'s bound). Defaults to 60.
        unknown_handler_policy: ``"nack"`` (default) retries messages without a handler;
            ``"ack"`` lets the batch ack cover them, with a warning.
        subconsumer: Join a cooperative consumer as this member (``receive_coop``); several
            processes then share ``name``'s stream.
        dead_interval: With ``subconsumer``, take over batches of members idle longer than
            this (a PostgreSQL interval such as ``"30 seconds"``).
        listen: Wait for NOTIFY wakeups (default). ``False`` polls only.
        listen_dsn: Connection string for the listening connection (to listen past a
            pooler); defaults to ``dsn`` (not with ``pooler``). It also feeds the in-process
            ticker.
        ticker: ``"auto"`` (default) runs an in-process :class:`~pgque.Ticker` unless
            ``pgque.config`` shows a scheduler (pg_cron, pg_timetable); ``True`` always,
            ``False`` never.
        concurrency: Handle up to this many messages of a batch at once, in tasks; the batch
            is acked when all are done. Defaults to 1. Not with transactional handlers (they
            share the batch's connection).
        rate_limit: At most this many messages a second (a token bucket with a burst of one
            second's worth; the batch stays open while throttled). Defaults to no limit.
        max_batch_time: Seconds one batch may take; messages not yet handled by then are
            nacked and the batch is acked, so a slow batch never holds rotation forever.
            Defaults to no limit.
        shutdown_timeout: Seconds the current batch gets to finish after a stop; past it the
            batch is rolled back (and redelivered). Defaults to 30.
        retry_backoff: ``(base, cap)`` seconds: a failed message is retried after ``min(cap,
            base * 2 ** retry_count)`` instead of the fixed ``retry_after``. Defaults to
            off.
        max_abandoned: How many handlers that outlive their ``timeout`` (a thread cannot be
            killed; a task that ignores its cancellation) the consumer tolerates before it
            exits with :class:`ConsumerGaveUp` for its supervisor to restart it. Defaults to
            10.
        max_settle_failures: How many batches in a row may fail to settle (a dead letter,
            the ack or its commit refused; each is rolled back and tried again after a
            growing pause) before :meth:`start` raises :class:`ConsumerGaveUp`. Defaults to
            5.
        subscribe: Subscribe the consumer (or, with ``subconsumer``, the member; with
            ``partitions``, every slot) on every connection, if it is not yet. Defaults to
            False: a consumer that is not subscribed makes :meth:`start` raise
            :class:`~pgque.errors.PgqueConsumerNotFound`.
        partitions: Consume as a partitioned consumer of this many slots
            (``pgque.subscribe_slot``): messages of one partition key are handled in order,
            different keys in parallel by the workers holding their slots. The consumer
            claims free slots by lease, renews them by working, and moves on when another
            worker holds a slot. Not with ``subconsumer`` or ``max_messages``.
        max_slots: With ``partitions``, the most slots this consumer holds at once:
            ``ceil(partitions / workers)`` spreads them over that many processes. Defaults
            to all.
        lease_ttl: With ``partitions``, seconds a slot stays leased without a call (a
            stopped worker's slots are taken over after it). The consumer polls at least
            every third of it. Defaults to 30.
        worker_id: With ``partitions``, this worker's id in the leases, unique per process.
            Defaults to ``host:pid:random``.
        pooler: ``dsn`` goes through a transaction-mode pooler (PgBouncer, Supavisor, RDS
            Proxy): no prepared statements (``prepare_threshold=None`` on the batch
            connection), no LISTEN through it (``listen_dsn`` listens past it, else the
            consumer polls every ``poll_interval``: lower it), and an in-process ticker that
            runs in pooler mode too unless ``listen_dsn`` feeds it. Without it a pooler's
            symptoms end :meth:`start` with :class:`~pgque.errors.PgquePoolerError`.
            Defaults to False.
    """

    def __init__(
        self,
        dsn: str | AsyncConnectionPool[Any] | psycopg.AsyncConnection[Any],
        *,
        # -- generated from ConsumerOptions by tools/consumer_options.py: do not edit --
        queue: str,
        name: str,
        poll_interval: float = 30,
        max_messages: int = ALL_MESSAGES,
        retry_after: float = 60,
        unknown_handler_policy: str = "nack",
        subconsumer: str | None = None,
        dead_interval: str | None = None,
        listen: bool = True,
        listen_dsn: str | None = None,
        ticker: bool | str = "auto",
        concurrency: int = 1,
        rate_limit: float | None = None,
        max_batch_time: float | None = None,
        shutdown_timeout: float = 30.0,
        retry_backoff: tuple[float, float] | None = None,
        max_abandoned: int = 10,
        max_settle_failures: int = 5,
        subscribe: bool = False,
        partitions: int | None = None,
        max_slots: int | None = None,
        lease_ttl: float = 30,
        worker_id: str | None = None,
        pooler: bool = False,
        # -- end of generated --
    ) -> None:
        check_source(dsn)
        self.dsn = dsn
        # A pooled or given connection never listens (it carries the batches), nor
        # does one through a pooler.
        listen = listen and (listen_dsn is not None or (isinstance(dsn, str) and not pooler))
        self.options = ConsumerOptions.of(locals())
        self._log = logging.getLogger(f"pgque.consumer.{name}")
        self._handlers: dict[str, HandlerSpec] = {}
        self._schedules: dict[str, EverySchedule] = {}  # by name, see every()
        self._stop = Event()
        self._hard_stop = Event()
        self._batch_deadline = Deadline()
        self._observed = (False, False)  # (tracing, metering), set per batch
        self._abandoned = 0
        self._settles = SettleFailures(max_settle_failures)
        self._rate: RateLimiter | None = None
        self._slots: AsyncSlotLeases | None = None
        self._source: AsyncBatchSource | None = None
        self._worker = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        #: Seconds since the epoch of the last poll that completed (None: none yet).
        self.last_poll_at: float | None = None
        #: How many times the consumer reconnected after a database error.
        self.reconnects = 0
        #: True while the LISTEN connection is up.
        self.listening = False
        self.reset()

    # -- running ---------------------------------------------------------------

    def stop(self, *, now: bool = False) -> None:
        """Ask the loop to stop; it acts within half a second.

        The current batch gets ``shutdown_timeout`` seconds to finish; with
        ``now=True`` it is rolled back at the next message. Call it from the
        consumer's own thread or event loop (a threaded consumer's also from
        any thread).
        """
        if not self._stop.is_set():
            self._batch_deadline.tighten(self.shutdown_timeout)
        self._stop.set()
        if now:
            self._hard_stop.set()
            self._batch_deadline.tighten(0)

    @property
    def stopping(self) -> bool:
        """True once :meth:`stop` was called."""
        return self._stop.is_set()

    def reset(self) -> None:
        """Forget an earlier :meth:`stop`, the count of failed settles and the partition
        slots held (the next poll claims them again, with the same worker id);
        :meth:`start` does this. Call it to drive the consumer again with :meth:`poll`,
        or after changing ``partitions`` and its options."""
        self._stop.clear()
        self._hard_stop.clear()
        self._settles = SettleFailures(self.max_settle_failures)
        self._rate = RateLimiter(self.rate_limit) if self.rate_limit is not None else None
        self._slots, self._source = None, None
        if self.partitions is not None:
            self._slots = AsyncSlotLeases(
                self.queue, self.name, self.partitions,
                max_slots=self.max_slots or self.partitions,
                worker=self.worker_id or self._worker, ttl=self.lease_ttl, log=self._log,
            )  # fmt: skip

    async def start(self) -> None:
        """Consume until :meth:`stop` (or SIGTERM/SIGINT on the main thread).

        Raises:
            PgqueConsumerNotFound: Not subscribed (the message says what to run).
            PgqueQueueNotFound: The queue does not exist.
            PgqueNotInstalledError: pgque is not installed in the database.
            ConsumerGaveUp: See ``max_settle_failures`` and ``max_abandoned``.
            PgqueConnectionError: The connection you gave broke.
            PgquePoolerError: A transaction-mode pooler is in front, and ``pooler``
                is not set.
        """
        self.reset()
        await AsyncRunner([self], stop=self._stop, owner=self).run()

    async def prepare(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Get ready to consume on a new connection: with ``subscribe=True``, subscribe.

        For loops of your own around :meth:`poll`; :meth:`start` calls it on every
        (re)connection. Also has the backend keep its heap between batches (queries.sql).

        Raises:
            PgqueError: A setup error, saying what to do (as :meth:`start`).
        """
        async with setup_errors(conn, self.queue, self.name):
            await execute(conn, "keep_backend_heap")
            if self.subscribe:
                await self._batch_source().subscribe(conn)
        for schedule in self._schedules.values():  # their errors say what to do already
            await self._schedule(conn, schedule)

    async def _schedule(self, conn: psycopg.AsyncConnection[Any], every: EverySchedule) -> None:
        """Upsert a schedule of :meth:`every`; a role that may not goes on when it exists
        as declared."""
        try:
            await execute(conn, "schedule", every.params(self.queue))
        except PgqueError as exc:
            if exc.sqlstate == "42501":  # insufficient_privilege
                rows = await fetch_all(conn, "schedules", (self.queue, self.queue))
                if not any(every.matches(row) for row in rows):
                    raise every.refused(self.queue, self.name, exc) from exc.__cause__
            elif exc.sqlstate == "P0001":  # raised by pgque: no queue, a bad cron or time zone
                raise every.failed(self.queue, self.name, exc) from exc.__cause__
            else:
                raise

    async def poll(
        self, conn: psycopg.AsyncConnection[Any], *, tick: float | None = None
    ) -> int | None:
        """Receive one batch on ``conn``, run its handlers, settle and ack it.

        ``conn`` is an autocommit connection (each batch is a transaction of
        its own). Returns how many messages were handled, or None when there
        was no batch (or the consumer is stopping). A batch that could not
        be settled is rolled back and, after a pause, its count returned;
        one stopped past ``shutdown_timeout`` is rolled back (None). ``tick``
        (a loop that leads the ticking): tick the queue first, as
        ``ticker_eager`` does with that ``max_wait`` in seconds.

        Raises:
            PgqueError: A setup error, saying what to do, or
                :class:`ConsumerGaveUp`; database errors as they come.
        """
        async with setup_errors(conn, self.queue, self.name):
            return await self._poll_once(conn, tick)

    async def _poll_once(
        self, conn: psycopg.AsyncConnection[Any], tick: float | None
    ) -> int | None:
        if self._stop.is_set():
            return None
        try:
            count = await self._poll_batch(conn, tick)
        except BatchAborted:
            self._log.warning(
                "consumer %s: stopped mid-batch; the batch was rolled back for redelivery",
                self.name,
            )
            return None
        except SettleFailed as failed:
            await wait_event(self._stop, self._settles.failed(failed.cause, self._log, self.name))
            return failed.handled
        finally:
            self.last_poll_at = time.time()
        if count:
            self._settles.succeeded()
        return count

    async def _poll_batch(
        self, conn: psycopg.AsyncConnection[Any], tick: float | None
    ) -> int | None:
        return await self._batch_source().poll(conn, tick, self._process)

    def _batch_source(self) -> AsyncBatchSource:
        """The batch source of the consumer's mode, made again when an option changed."""
        source = self._source
        if source is None or source.options is not self.options:
            source = self._source = source_for(self.options, self._slots)
        return source

    async def _tick(self, conn: psycopg.AsyncConnection[Any], max_wait: float) -> None:
        """Tick the queue as ``ticker_eager`` does, arming the wakeup (autocommit ``conn``)."""
        await tick_queue(conn, self.queue, max_wait)

    @property
    def wait_interval(self) -> float:
        """The longest wait between polls: ``poll_interval``, and with ``partitions`` at
        most a third of ``lease_ttl``, so that idle slots keep their leases."""
        if self._slots is None:
            return self.poll_interval
        return min(self.poll_interval, self.lease_ttl / 3)

    async def _process(self, batch: OpenBatch) -> int:
        """Run the handlers of an open batch, settle every message and ack it."""
        conn, client, msgs = batch.client.conn, batch.client, batch.messages
        batch_id = msgs[0].batch_id
        tel = telemetry()
        # Looked up once a batch (not per message): OpenTelemetry may be configured later.
        self._observed = (tel.tracing, tel.metering)
        self._batch_deadline = Deadline()
        if self.max_batch_time is not None:
            self._batch_deadline.tighten(self.max_batch_time)
        if self._stop.is_set():
            self._batch_deadline.tighten(self.shutdown_timeout)
        settler = AsyncSettler(self.queue, self.name, retry_after=self.retry_after,
                               retry_backoff=self.retry_backoff, log=self._log,
                               slot=batch.slot)  # fmt: skip
        count = 0
        try:
            while msgs:
                outcomes = await self._run_handlers(conn, msgs)
                for msg, outcome in zip(msgs, outcomes, strict=True):
                    await settler.settle(conn, msg, outcome)
                count += len(msgs)
                # ack finishes the whole batch: first read what receive cut off.
                msgs = (
                    await client.receive_rest(batch_id, msgs[-1].msg_id)
                    if len(msgs) >= self.max_messages and self.max_messages < ALL_MESSAGES
                    else []
                )
            await settler.ack(client, batch_id, batch.finish)
        except SettleFailed as failed:
            failed.handled = count + len(msgs)
            raise
        return count


AsyncConsumer.__module__ = "pgque"
