"""The loop that runs consumers: connect, listen, poll by priority, wait, reconnect.

:class:`AsyncRunner` runs one consumer (``AsyncConsumer.start()``) or several
on one connection, highest priority first (``MultiQueueConsumer``), through
the consumers' public interface: ``prepare(conn)`` on every connection,
``poll(conn)`` for a batch, their options, ``reconnects`` and ``listening``.
It listens for every consumer's queue on one connection, runs the
in-process ticker (decided on every connection), installs the signal
handlers that stop its owner, and reconnects with backoff after database
errors; setup errors and giving up end it (:func:`pgque._consumer.reconnect.recover`).

While its in-process ticker leads (and the xmin horizon is not held), the
runner also has each consumer tick its queue in the round trip that opens
the batch (which arms the producers' wakeup), and listens for those
wakeups: a commit then wakes the consumer, which ticks and opens the batch
itself, without waiting for the ticker's round and its NOTIFY (see
docs/concepts.md, "Latency").
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol

import psycopg
from psycopg_pool import AsyncConnectionPool

from pgque._acompat import (
    Event,
    Interrupted,
    Interrupter,
    notifications,
    signal_handlers,
    wait_event,
)
from pgque._async_executor import execute, fetch_one
from pgque._consumer.failures import setup_error, setup_problem
from pgque._consumer.listen_probe import ListenProbe
from pgque._consumer.reconnect import Backoff, recover
from pgque._consumer.ticking import TickerSwitch, config_unreadable, ticker_source, ticker_wanted
from pgque.errors import PgqueConnectionError, PgqueError
from pgque.ticker import WAKE_CHANNEL

__all__ = ["AsyncRunner", "Runnable", "setup_errors"]

#: The longest a wait goes without looking at the stop flag.
WAIT_SLICE = 0.5


class Runnable(Protocol):
    """What a runner needs of a consumer (:class:`pgque.AsyncConsumer` is one): its
    options, its two counters, and the two steps of its loop."""

    #: Reconnections after a database error (the runner counts them).
    reconnects: int
    #: True while the LISTEN connection is up (the runner says).
    listening: bool
    #: True while a runner runs it (the runner says): its options are frozen then.
    running: bool

    @property
    def name(self) -> str:
        """The consumer's name."""

    @property
    def queue(self) -> str:
        """The queue it consumes."""

    @property
    def dsn(self) -> str | AsyncConnectionPool[Any] | psycopg.AsyncConnection[Any]:
        """Where its batch connection comes from."""

    @property
    def listen(self) -> bool:
        """Whether it waits on NOTIFY."""

    @property
    def listen_dsn(self) -> str | None:
        """Where its LISTEN connection goes (None: ``dsn``)."""

    @property
    def pooler(self) -> bool:
        """Whether ``dsn`` goes through a transaction-mode pooler."""

    @property
    def ticker(self) -> bool | str:
        """Its in-process ticker: True, False or ``"auto"``."""

    @property
    def shutdown_timeout(self) -> float:
        """Seconds a batch may take to finish after a stop."""

    @property
    def wait_interval(self) -> float:
        """The longest wait between polls."""

    @property
    def stopping(self) -> bool:
        """True once a stop was asked for."""

    async def prepare(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Get ready on a new connection."""

    async def poll(
        self, conn: psycopg.AsyncConnection[Any], *, tick: float | None = None
    ) -> int | None:
        """Receive, handle, settle and ack one batch (None: no batch)."""


class Owner(Protocol):
    """What a runner stops on a signal: a consumer, or several consumers together."""

    @property
    def stopping(self) -> bool:
        """True once a stop was asked for."""

    def stop(self, *, now: bool = False) -> None:
        """Ask for a stop (``now``: roll the batch back)."""


@asynccontextmanager
async def setup_errors(
    conn: psycopg.AsyncConnection[Any], queue: str, name: str
) -> AsyncIterator[None]:
    """Turn a setup error met inside (no subscription, no queue, no pgque, no grant) into
    one saying what to do; other errors pass as they are."""
    try:
        yield
    except (psycopg.Error, PgqueError) as exc:
        if (problem := setup_problem(exc)) is None:
            raise
        exists = await _queue_exists(conn, queue)
        raise setup_error(problem, exc, queue, name, exists) from exc


async def _queue_exists(conn: psycopg.AsyncConnection[Any], queue: str) -> bool | None:
    """Whether the queue exists (None: cannot tell), to word a setup error."""
    try:
        row = await fetch_one(conn, "queue_exists", (queue,))
    except PgqueError:
        return None
    return bool(row and row[0])


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class AsyncRunner:
    """Runs ``consumers`` (highest priority first) on one batch connection until ``stop``
    is set.

    The first consumer's connection source, ``listen``, ``listen_dsn`` and
    ``ticker`` options serve all; the wait between polls is the shortest
    ``poll_interval``. After every batch the next poll starts again from the
    first consumer.
    """

    def __init__(self, consumers: Sequence[Runnable], *, stop: Event, owner: Owner) -> None:
        self.consumers = list(consumers)
        self.lead = self.consumers[0]
        self.poll_interval = min(c.wait_interval for c in self.consumers)
        self._stop = stop
        self._owner = owner
        self._log = logging.getLogger(f"pgque.consumer.{self.lead.name}")
        self._backoff = Backoff()
        source = ticker_source(self.lead.listen_dsn or self.lead.dsn)
        # Through a pooler unless listen_dsn (past it) feeds the ticker.
        pooled = self.lead.pooler and self.lead.listen_dsn is None
        self._ticker = TickerSwitch(source, self._log, self.lead.name, pooler=pooled)
        self._probe = ListenProbe(self._log, self.lead.name)
        self._may_self_tick = False  # decided on every connection (_session)
        self._connected = False  # once connected, a refused connection is retried

    async def run(self) -> None:
        """Consume until the stop event is set; raises what ends consuming (see
        :meth:`pgque.Consumer.start`)."""
        self._interrupter = Interrupter()
        for consumer in self.consumers:
            consumer.running = True
        try:
            with signal_handlers(self._on_signal), self._ticker:
                while not self._stop.is_set():
                    try:
                        await self._session()
                    except (psycopg.Error, PgqueError) as exc:
                        await self._recover(exc)
        except Interrupted:
            if not self._interrupter.fired:
                raise
            self._interrupter.caught()
            self._log.warning(
                "consumer %s: stopped now; a batch in progress was rolled back (its"
                " connection closed): its messages are delivered again", self.lead.name,
            )  # fmt: skip
        finally:
            for consumer in self.consumers:
                consumer.running = False

    def _on_signal(self, signum: int) -> None:
        """The first SIGINT/SIGTERM stops after the batch in progress (saying how long
        that may take); the second stops now, interrupting the handler."""
        name = self.lead.name
        if self._interrupter.fired:
            return  # stopping now already
        if self._owner.stopping:
            self._log.warning(
                "consumer %s: second signal: stopping now, without waiting for the handler;"
                " the batch in progress is rolled back and its messages delivered again",
                name,
            )
            self._owner.stop(now=True)
            self._interrupter.interrupt()
            return
        wait = max(consumer.shutdown_timeout for consumer in self.consumers)
        self._log.warning(
            "consumer %s: %s: stopping once the batch in progress (if any) is done, waiting"
            " at most %g s (shutdown_timeout); press Ctrl-C again (or send the signal again)"
            " to stop now: the batch is then rolled back and its messages delivered again",
            name, _signal_name(signum), wait,
        )  # fmt: skip
        self._owner.stop()

    async def _recover(self, exc: BaseException) -> None:
        """After a session ended with ``exc``: raise, or wait the reconnect pause."""
        dsn = self.lead.dsn
        given = isinstance(dsn, psycopg.AsyncConnection) and dsn.closed
        pause = recover(exc, self._backoff, self._log, self.lead.name, given_closed=given,
                               connected=self._connected)  # fmt: skip
        for consumer in self.consumers:
            consumer.reconnects += 1
            consumer.listening = False
        await wait_event(self._stop, pause)

    async def _session(self) -> None:
        """One connection (and listener): poll, wait, until stopped or an error."""
        async with self._connection() as conn:
            self._connected = True
            for consumer in self.consumers:
                await consumer.prepare(conn)
            async with setup_errors(conn, self.lead.queue, self.lead.name):
                self._ticker.set(await self._wants_ticker(conn))  # decided on every connection
            self._may_self_tick = self._ticker.runner is not None and await self._may_tick(conn)
            async with self._listener() as listener:
                if listener is not None:  # a commit of ours that it must hear
                    channel = self._probe.start()
                    await execute(listener, "listen", identifiers=[channel])
                    await execute(conn, "notify", identifiers=[channel])
                while not self._stop.is_set():
                    self._ticker.check()  # it stopped on a pooler: say so
                    # What was announced so far, the ticks and polls below see:
                    # only what arrives from here on is worth waking for.
                    await self._take_notifies(listener)
                    polled = False
                    for consumer in self.consumers:
                        if await self._poll(consumer, conn):
                            polled = True
                            break  # start again from the highest priority
                    self._backoff.reset()  # a healthy poll: the next reconnect pause is short
                    if not polled:
                        await self._wait_for_work(listener)

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """The batch connection: a new one from the DSN, one borrowed from the pool, or yours."""
        dsn = self.lead.dsn
        pooler = self.lead.pooler  # nothing prepared through a pooler
        if isinstance(dsn, psycopg.AsyncConnection):
            if dsn.closed:
                raise PgqueConnectionError(
                    f"consumer {self.lead.name}: its connection is closed; give it a new one"
                )
            if pooler:
                dsn.prepare_threshold = None
            yield dsn
            return
        if isinstance(dsn, AsyncConnectionPool):
            async with dsn.connection() as conn:
                autocommit, threshold = conn.autocommit, conn.prepare_threshold
                await conn.set_autocommit(True)  # transactions are explicit: conn.transaction()
                conn.prepare_threshold = None if pooler else threshold
                try:
                    yield conn
                finally:
                    conn.prepare_threshold = threshold
                    if not conn.closed:
                        await conn.set_autocommit(autocommit)
            return
        kwargs: dict[str, Any] = {"prepare_threshold": None} if pooler else {}
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True, **kwargs) as conn:
            yield conn

    @asynccontextmanager
    async def _listener(self) -> AsyncIterator[psycopg.AsyncConnection[Any] | None]:
        """A connection LISTENing on every consumer's queue (None: poll only)."""
        dsn = self.lead.listen_dsn or self.lead.dsn
        if not self.lead.listen or not isinstance(dsn, str):
            yield None
            return
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as listener:
            channels = [f"pgque_{consumer.queue}" for consumer in self.consumers]
            if self._ticker.runner is not None:
                channels.append(WAKE_CHANNEL)  # acted on only while the ticker leads
            for channel in channels:
                await execute(listener, "listen", identifiers=[channel])
            self._set_listening(True)
            try:
                yield listener
            finally:
                self._set_listening(False)

    def _set_listening(self, listening: bool) -> None:
        for consumer in self.consumers:
            consumer.listening = listening

    def _ticking(self) -> Any:
        """The in-process Ticker while it leads and may tick eagerly, else None."""
        ticker = self._ticker.runner
        if not self._may_self_tick or ticker is None or not ticker.leading or ticker.held_xmin:
            return None
        return ticker

    async def _poll(self, consumer: Runnable, conn: psycopg.AsyncConnection[Any]) -> int | None:
        """One poll of ``consumer``, ticking its queue first while this process leads the
        ticking (the ticker leaves the queue to it until the poll ends)."""
        ticker = self._ticking()
        if ticker is None or consumer.stopping:
            return await consumer.poll(conn)
        ticker.note_self_tick(consumer.queue)
        try:
            return await consumer.poll(conn, tick=float(ticker.max_wait))
        finally:
            ticker.note_poll_done(consumer.queue)

    async def _may_tick(self, conn: psycopg.AsyncConnection[Any]) -> bool:
        """Whether this role may tick a queue itself (else the ticker's rounds do)."""
        row = await fetch_one(conn, "may_self_tick")
        if not (allowed := bool(row and row[0])):
            self._log.info("consumer %s: this role may not tick; the ticker's round does",
                           self.lead.name)  # fmt: skip
        return allowed

    def _wakes(self, channel: str) -> bool:
        """Whether a notification on ``channel`` is work: a tick of a consumer's queue,
        or a producer's commit while this process does the ticking (the listener's
        probe is not)."""
        if self._probe.heard(channel):
            return False
        return channel != WAKE_CHANNEL or self._ticking() is not None

    async def _take_notifies(self, listener: psycopg.AsyncConnection[Any] | None) -> bool:
        """Read the notifications that have arrived, without waiting; whether one is work.

        Each tick NOTIFYs, the consumer's own included: read before a poll, its
        notification does not wake the consumer for a second, empty poll."""
        woken = False
        if listener is not None:
            async for note in listener.notifies(timeout=0):
                woken = woken or self._wakes(note.channel)
            self._probe.check()
        return woken

    async def _wait_for_work(self, listener: psycopg.AsyncConnection[Any] | None) -> None:
        """Return on a NOTIFY, after ``poll_interval``, or soon after a stop."""
        deadline = time.monotonic() + self.poll_interval
        woken = False
        if await self._take_notifies(listener):
            return  # wakeups arrived while we worked
        while not self._stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            step = min(left, WAIT_SLICE)
            if listener is None:
                await wait_event(self._stop, step)
                continue
            for note in await notifications(listener, step):
                woken = woken or self._wakes(note.channel)
            self._probe.check()
            if woken:
                return

    async def _wants_ticker(self, conn: psycopg.AsyncConnection[Any]) -> bool:
        """The ``ticker`` option decided on ``conn`` (``"auto"`` reads pgque.config)."""
        if isinstance(self.lead.ticker, bool):
            return self.lead.ticker
        try:
            return ticker_wanted(self.lead.ticker, await fetch_one(conn, "scheduler"))
        except PgqueError as exc:
            return config_unreadable(exc, self._log, self.lead.name)
