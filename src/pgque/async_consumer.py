"""The asyncio twin of :class:`pgque.Consumer`: ``async def`` handlers.

Same options and rules as the threaded consumer (see :mod:`pgque.consumer`):
one transaction from receive to ack, a NOTIFY wakeup on a separate
connection, nack on handler errors (a refused nack dead-letters the message),
reconnect with backoff, setup errors raised at once, the ticker decided on
every connection, graceful stop; the shared rules are in
:mod:`pgque._consumer_policy`.
Differences that follow from asyncio: ``concurrency`` runs handlers as tasks,
and a handler ``timeout`` cancels the handler's task (nothing is abandoned).
Its OpenTelemetry spans and metrics are the threaded consumer's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import psycopg
from opentelemetry import trace
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from pgque import _consumer_policy as policy
from pgque import tracing
from pgque._dispatch import Deadline, HandlerSpec, Outcome, lanes
from pgque._queries import query
from pgque.errors import PgqueConnectionError, PgqueError, from_database_error
from pgque.message import Message
from pgque.otel import BATCH_MESSAGE_COUNT, CONSUMER_GROUP, MESSAGE_ID, error_type, telemetry

__all__ = ["AsyncConsumer"]

logger = logging.getLogger("pgque")

AsyncHandler = Callable[..., Awaitable[Any]]
AH = TypeVar("AH", bound=AsyncHandler)

_ALL_MESSAGES = policy.ALL_MESSAGES
_WAIT_SLICE = 0.5


class _BatchAborted(Exception):
    """Raised inside the batch transaction to roll it back."""


class AsyncConsumer:
    """Receives a queue's batches and awaits a handler per message.

    Arguments as :class:`pgque.Consumer`; handlers are coroutine functions,
    and ``dsn`` may be a connection string, a
    ``psycopg_pool.AsyncConnectionPool`` or an autocommit
    ``psycopg.AsyncConnection`` of yours (same rules as the threaded
    consumer's pool and connection; the in-process ticker then needs
    ``listen_dsn``). Run it with ``await consumer.start()`` and end it with
    ``consumer.stop()``.
    """

    def __init__(
        self,
        dsn: str | AsyncConnectionPool[Any] | psycopg.AsyncConnection[Any],
        *,
        queue: str,
        name: str,
        poll_interval: float = 30,
        max_messages: int = _ALL_MESSAGES,
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
    ) -> None:
        retry_backoff = policy.check_options(
            dsn, poll_interval=poll_interval, max_messages=max_messages,
            retry_after=retry_after, unknown_handler_policy=unknown_handler_policy,
            subconsumer=subconsumer, dead_interval=dead_interval, ticker=ticker,
            concurrency=concurrency, rate_limit=rate_limit, max_batch_time=max_batch_time,
            shutdown_timeout=shutdown_timeout, retry_backoff=retry_backoff,
            max_settle_failures=max_settle_failures, subscribe=subscribe,
        )  # fmt: skip
        if not isinstance(dsn, str) and listen_dsn is None:
            listen = False  # a pooled or given connection never listens
        self.dsn, self.queue, self.name = dsn, queue, name
        self.poll_interval, self.max_messages, self.retry_after = (
            poll_interval, max_messages, retry_after,
        )  # fmt: skip
        self.subconsumer, self.dead_interval = subconsumer, dead_interval
        self.listen, self.listen_dsn, self.ticker = listen, listen_dsn, ticker
        self.concurrency, self.max_batch_time = concurrency, max_batch_time
        self.shutdown_timeout, self.retry_backoff = shutdown_timeout, retry_backoff
        self.max_abandoned, self.max_settle_failures = max_abandoned, max_settle_failures
        self.subscribe = subscribe
        self.rate_limit = rate_limit
        self._policy = unknown_handler_policy
        self._handlers: dict[str, HandlerSpec] = {}
        self._stop = asyncio.Event()
        self._hard_stop = asyncio.Event()
        self._deadline = Deadline()
        self._observed = (False, False)  # (tracing, metering), set per batch
        self._next_token = 0.0
        self._log = logging.getLogger(f"pgque.consumer.{name}")
        self._backoff = policy.Backoff()
        self._settles = policy.SettleFailures(max_settle_failures)
        # The ticker is threaded: it needs a connection string.
        source = dsn if isinstance(dsn, str) else listen_dsn
        self._ticker = policy.TickerSwitch(source, self._log, name)
        #: Seconds since the epoch of the last poll that completed (None: none yet).
        self.last_poll_at: float | None = None
        #: How many times the consumer reconnected after a database error.
        self.reconnects = 0
        #: True while the LISTEN connection is up.
        self.listening = False

    def on(
        self,
        type: str,
        *,
        transactional: bool = False,
        timeout: float | None = None,
        ordered_by: str | None = None,
    ) -> Callable[[AH], AH]:
        """Register the decorated coroutine function for messages of ``type`` (``"*"``: any).

        Options as :meth:`pgque.Consumer.on`; a ``timeout`` cancels the handler.
        """
        policy.check_handler(self.concurrency, transactional, timeout, ordered_by)

        def register(handler: AH) -> AH:
            is_async = asyncio.iscoroutinefunction(handler)  # kept apart: no type narrowing
            if not is_async:
                raise TypeError(f"AsyncConsumer handlers must be async functions: {handler!r}")
            self._handlers[type] = HandlerSpec(handler, transactional, timeout, ordered_by)
            return handler

        return register

    def stop(self, *, now: bool = False) -> None:
        """Ask the loop to stop after the current batch (``now``: roll it back)."""
        if not self._stop.is_set():
            self._deadline.tighten(self.shutdown_timeout)
        self._stop.set()
        if now:
            self._hard_stop.set()
            self._deadline.tighten(0)

    @property
    def stopping(self) -> bool:
        """True once :meth:`stop` was called."""
        return self._stop.is_set()

    async def start(self) -> None:
        """Consume until :meth:`stop`; raises as :meth:`pgque.Consumer.start` does."""
        self._stop.clear()
        self._hard_stop.clear()
        self._backoff.reset()
        self._settles = policy.SettleFailures(self.max_settle_failures)
        with self._ticker:
            while not self._stop.is_set():
                try:
                    await self._session()
                except (psycopg.Error, PgqueError) as exc:
                    given = isinstance(self.dsn, psycopg.AsyncConnection) and self.dsn.closed
                    pause = policy.recover(
                        exc, self._backoff, self._log, self.name, given_closed=given
                    )
                    self.reconnects += 1
                    self.listening = False
                    await self._wait(pause)

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """The batch connection: a new one from the DSN, one borrowed from the pool, or yours."""
        if isinstance(self.dsn, psycopg.AsyncConnection):
            if self.dsn.closed:
                raise PgqueConnectionError(
                    f"consumer {self.name}: its connection is closed; give it a new one"
                )
            yield self.dsn
            return
        if isinstance(self.dsn, AsyncConnectionPool):
            async with self.dsn.connection() as conn:
                autocommit = conn.autocommit
                await conn.set_autocommit(True)  # transactions are explicit
                try:
                    yield conn
                finally:
                    if not conn.closed:
                        await conn.set_autocommit(autocommit)
            return
        conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
        try:
            yield conn
        finally:
            await conn.close()

    async def _wants_ticker(self, conn: psycopg.AsyncConnection[Any]) -> bool:
        """The ``ticker`` option decided on ``conn`` (``"auto"`` reads pgque.config)."""
        if isinstance(self.ticker, bool):
            return self.ticker
        try:
            cur = await conn.execute(query("scheduler"))
            return policy.ticker_wanted(self.ticker, await cur.fetchone())
        except psycopg.Error as exc:
            return policy.config_unreadable(exc, self._log, self.name)

    async def _session(self) -> None:
        async with self._connection() as conn:
            try:
                await self._subscribe(conn)
                self._ticker.set(await self._wants_ticker(conn))  # decided on every connection
                await self._session_on(conn)
            except (psycopg.Error, PgqueError) as exc:
                if (problem := policy.setup_problem(exc)) is None:
                    raise
                exists = await self._queue_exists(conn)
                raise policy.setup_error(problem, exc, self.queue, self.name, exists) from exc

    async def _subscribe(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """With ``subscribe=True``: subscribe (again) on this connection."""
        if self.subscribe and self.subconsumer is None:
            await conn.execute(query("subscribe"), (self.queue, self.name))
        elif self.subscribe:
            await conn.execute(
                query("subscribe_subconsumer"), (self.queue, self.name, self.subconsumer)
            )

    async def _queue_exists(self, conn: psycopg.AsyncConnection[Any]) -> bool | None:
        """Whether the queue exists (None: cannot tell), to word a setup error."""
        try:
            row = await (await conn.execute(query("queue_exists"), (self.queue,))).fetchone()
        except psycopg.Error:
            return None
        return bool(row and row[0])

    async def _session_on(self, conn: psycopg.AsyncConnection[Any]) -> None:
        listener = None
        try:
            if self.listen:
                dsn = self.listen_dsn or self.dsn
                assert isinstance(dsn, str)  # pooled and given connections never listen
                listener = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
                await listener.execute(
                    sql.SQL("listen {}").format(sql.Identifier(f"pgque_{self.queue}"))
                )
                self.listening = True
            while not self._stop.is_set():
                if await self._poll_once(conn):
                    continue
                await self._wait_for_work(listener)
        finally:
            self.listening = False
            if listener is not None:
                await listener.close()

    async def _call(self, conn: psycopg.AsyncConnection[Any], name: str, *params: Any) -> Any:
        try:
            cur = await conn.execute(query(name), params or None)
            return await cur.fetchall()
        except psycopg.Error as exc:
            raise from_database_error(exc) from exc

    async def _poll_once(self, conn: psycopg.AsyncConnection[Any]) -> int | None:
        """Receive one batch, dispatch it, ack it; the number of messages (None: nothing).
        A batch not settled is rolled back and, after a pause, its count returned."""
        if self._stop.is_set():
            return None
        try:
            count = await self._poll_batch(conn)
        except _BatchAborted:
            self._log.warning("consumer %s: stopped mid-batch; batch rolled back", self.name)
            return None
        except policy.SettleFailed as failed:
            await self._wait(self._settles.failed(failed.cause, self._log, self.name))
            return failed.handled
        finally:
            self.last_poll_at = time.time()
        self._backoff.reset()  # a healthy poll: the next reconnect pause starts small
        if count:
            self._settles.succeeded()
        return count

    async def _poll_batch(self, conn: psycopg.AsyncConnection[Any]) -> int | None:
        if self.subconsumer is not None:
            msgs = await self._traced_receive(
                conn, "receive_coop", self.queue, self.name, self.subconsumer,
                self.max_messages, self.dead_interval,
            )  # fmt: skip
            if not msgs:
                return None
            async with conn.transaction():
                return await self._process(conn, msgs)
        async with conn.transaction():
            msgs = await self._traced_receive(
                conn, "receive", self.queue, self.name, self.max_messages
            )
            if not msgs:
                return None
            return await self._process(conn, msgs)

    async def _traced_receive(
        self, conn: psycopg.AsyncConnection[Any], name: str, *params: Any
    ) -> list[Message]:
        """Run a receive query inside a ``receive`` span linked to the messages' traces."""
        tel = telemetry()
        with tel.operation("receive", self.queue, attributes={CONSUMER_GROUP: self.name}) as op:
            msgs = [Message(*r) for r in await self._call(conn, name, *params)]
            if msgs:
                tel.record_consumed(self.queue, len(msgs), attributes={CONSUMER_GROUP: self.name})
            if msgs and op.span.is_recording():
                op.span.set_attribute(BATCH_MESSAGE_COUNT, len(msgs))
                for msg in msgs:
                    parent = tracing.extract(msg.extra1, msg.extra4)
                    if parent is not None:
                        op.span.add_link(trace.get_current_span(parent).get_span_context())
        return msgs

    async def _process(self, conn: psycopg.AsyncConnection[Any], msgs: list[Message]) -> int:
        batch_id = msgs[0].batch_id
        tel = telemetry()
        # Looked up once a batch (not per message): OpenTelemetry may be configured later.
        self._observed = (tel.tracing, tel.metering)
        self._deadline = Deadline()
        if self.max_batch_time is not None:
            self._deadline.tighten(self.max_batch_time)
        if self._stop.is_set():
            self._deadline.tighten(self.shutdown_timeout)
        count = 0
        try:
            while msgs:
                outcomes = await self._run_handlers(conn, msgs)
                for msg, outcome in zip(msgs, outcomes, strict=True):
                    await self._settle(conn, msg, outcome)
                count += len(msgs)
                msgs = (
                    [Message(*r) for r in await self._call(
                        conn, "batch_rest", batch_id, batch_id, msgs[-1].msg_id)]
                    if len(msgs) >= self.max_messages and self.max_messages < _ALL_MESSAGES
                    else []
                )  # fmt: skip
            acked = await self._ack(conn, batch_id)
        except policy.SettleFailed as failed:
            failed.handled = count + len(msgs)
            raise
        if acked == 0:
            self._log.warning(
                "pgque: ack batch %s returned 0 -- stale or double ack"
                " (batch already finished or not found)",
                batch_id,
            )
        return count

    async def _ack(self, conn: psycopg.AsyncConnection[Any], batch_id: int) -> int:
        """Ack the batch; a refusal (not a lost connection) is a failed settle."""
        try:
            return await self._traced_ack(conn, batch_id)
        except PgqueError as exc:
            if policy.is_connection_error(exc):
                raise
            raise policy.SettleFailed(exc) from exc

    async def _traced_ack(self, conn: psycopg.AsyncConnection[Any], batch_id: int) -> int:
        attributes = {CONSUMER_GROUP: self.name}
        with telemetry().operation("ack", self.queue, attributes=attributes):
            return int((await self._call(conn, "ack", batch_id))[0][0])

    async def _run_handlers(
        self, conn: psycopg.AsyncConnection[Any], msgs: list[Message]
    ) -> list[Outcome]:
        results: dict[int, Outcome] = {}
        if self.concurrency == 1:
            for msg in msgs:
                results[id(msg)] = await self._outcome(conn, msg)
            return [results[id(m)] for m in msgs]
        slots = asyncio.Semaphore(self.concurrency)

        async def run_lane(lane: list[Message]) -> None:
            async with slots:
                for msg in lane:
                    results[id(msg)] = await self._outcome(None, msg)

        await asyncio.gather(*(run_lane(lane) for lane in lanes(msgs, self._handlers_get)))
        return [results[id(m)] for m in msgs]

    def _handlers_get(self, msg: Message) -> HandlerSpec | None:
        return self._handlers.get(msg.type or "") or self._handlers.get("*")

    async def _outcome(self, conn: psycopg.AsyncConnection[Any] | None, msg: Message) -> Outcome:
        if self._hard_stop.is_set() or (self._stop.is_set() and self._deadline.passed()):
            raise _BatchAborted
        if self._deadline.passed():
            return Outcome("nack", reason="max_batch_time exceeded")
        spec = self._handlers_get(msg)
        if spec is None:
            if self._policy == "ack":
                self._log.warning(
                    "no handler for event type=%s ev_id=%s; acking", msg.type, msg.msg_id
                )
                return Outcome("ack")
            self._log.warning(
                "no handler for event type=%s ev_id=%s; nacking", msg.type, msg.msg_id
            )
            return Outcome("nack", reason=f"no handler for type={msg.type}", unhandled=True)
        await self._throttle()
        tel = telemetry()
        traced, measured = self._observed
        started = time.perf_counter()
        failed: str | None = None
        try:
            if traced:
                # The message's creation context is the parent of its processing.
                with tel.span("process", self.queue,
                              context=tracing.extract(msg.extra1, msg.extra4), attributes={
                    MESSAGE_ID: str(msg.msg_id), CONSUMER_GROUP: self.name,
                }):  # fmt: skip
                    await self._call_handler(conn, spec, msg)
            else:  # nothing is created per message when nobody listens
                await self._call_handler(conn, spec, msg)
        except _BatchAborted:
            raise
        except Exception as exc:
            failed = error_type(exc)
            self._log.exception("handler failed for msg_id=%s, nacking", msg.msg_id)
            return Outcome("nack", error=exc)
        finally:
            if measured:
                tel.record_process(self.queue, time.perf_counter() - started, error=failed,
                                   attributes={CONSUMER_GROUP: self.name})  # fmt: skip
        if msg._decision is not None:
            action, retry_after, reason = msg._decision
            return Outcome("dead" if action == "dead" else "nack", retry_after, reason)
        return Outcome("ack")

    async def _call_handler(
        self, conn: psycopg.AsyncConnection[Any] | None, spec: HandlerSpec, msg: Message
    ) -> None:
        """Await the handler as its options say."""
        if spec.transactional:
            assert conn is not None
            async with conn.transaction():
                await asyncio.wait_for(spec.func(msg, conn), spec.timeout)
        else:
            await asyncio.wait_for(spec.func(msg), spec.timeout)

    async def _throttle(self) -> None:
        if self.rate_limit is None:
            return
        now = time.monotonic()
        self._next_token = max(self._next_token, now)
        wait = self._next_token - now
        self._next_token += 1 / self.rate_limit
        if wait > 0:
            await asyncio.sleep(wait)

    async def _settle(
        self, conn: psycopg.AsyncConnection[Any], msg: Message, outcome: Outcome
    ) -> None:
        """Apply an outcome on the batch's connection (in a savepoint); a refused nack
        dead-letters the message with the cause (see :func:`policy.settle_refused`)."""
        if outcome.action == "ack":
            return
        if outcome.action == "fail":
            raise policy.SettleFailed(PgqueError(f"msg_id={msg.msg_id} is not settled"))
        delay = None
        if outcome.action == "nack":
            delay = policy.retry_delay(msg, outcome, self.retry_after, self.retry_backoff)
        try:
            await self._settle_in_db(conn, msg, delay, outcome.reason)
        except Exception as exc:
            reason = policy.settle_refused(exc, msg, delay, outcome.reason, self._log, self.name)
            try:
                await self._settle_in_db(conn, msg, None, reason)
            except Exception as again:
                policy.settle_refused(again, msg, None, reason, self._log, self.name)

    async def _settle_in_db(
        self,
        conn: psycopg.AsyncConnection[Any],
        msg: Message,
        delay: float | None,
        reason: str | None,
    ) -> None:
        """Nack the message (retry after ``delay`` seconds), or dead-letter it (None)."""
        operation = "nack" if delay is not None else "dead_letter"
        attributes = {CONSUMER_GROUP: self.name}
        async with conn.transaction():
            with telemetry().operation(operation, self.queue, attributes=attributes) as op:
                op.set_message_id(msg.msg_id)
                if delay is None:
                    await self._call(conn, "dead_letter_event", msg.batch_id, msg.msg_id, reason)
                else:
                    interval = policy.retry_interval(delay)
                    await self._call(conn, "nack_by_id", msg.batch_id, msg.msg_id, interval, reason)

    async def _wait_for_work(self, listener: psycopg.AsyncConnection[Any] | None) -> None:
        deadline = time.monotonic() + self.poll_interval
        while not self._stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            step = min(left, _WAIT_SLICE)
            if listener is None:
                await self._wait(step)
                continue
            async for _ in listener.notifies(timeout=step, stop_after=1):
                return

    async def _wait(self, seconds: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)


AsyncConsumer.__module__ = "pgque"
