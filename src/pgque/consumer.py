"""The :class:`Consumer`: a loop that receives batches and calls your handlers.

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
are decided on every (re)connection. The shared rules are in
:mod:`pgque._consumer_policy`.

Stopping (``stop()``, SIGTERM or SIGINT) ends the loop after the current
batch; a batch that does not finish within ``shutdown_timeout`` is rolled
back and comes again to the next consumer. A second signal stops at once,
rolling the batch back.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg
from opentelemetry import trace
from psycopg import sql
from psycopg_pool import ConnectionPool

from pgque import _consumer_policy as policy
from pgque import tracing
from pgque._consumer_policy import ConsumerGaveUp
from pgque._dispatch import Deadline, HandlerSpec, Outcome, RateLimiter, lanes
from pgque._queries import query
from pgque.client import PgqueClient
from pgque.errors import PgqueConnectionError, PgqueError
from pgque.message import Message
from pgque.otel import BATCH_MESSAGE_COUNT, CONSUMER_GROUP, MESSAGE_ID, error_type, telemetry

__all__ = ["Consumer", "ConsumerGaveUp"]

logger = logging.getLogger("pgque")

Handler = Callable[[Message], Any]
H = TypeVar("H", bound=Handler)

_ALL_MESSAGES = policy.ALL_MESSAGES
_WAIT_SLICE = 0.5


class _BatchAborted(Exception):
    """Raised inside the batch transaction to roll it back (shutdown past its timeout)."""


class _ConnectionAbandoned(Exception):
    """A transactional handler timed out: its connection was closed under it."""


class Consumer:
    """Receives a queue's batches and dispatches each message to a handler by type.

    The constructor only checks and stores its arguments; no database work
    happens until :meth:`start`. The consumer does not subscribe itself
    unless ``subscribe=True``: ``pgque subscribe QUEUE NAME`` first (in
    cooperative mode ``receive_coop`` registers the member).

    Args:
        dsn: Connection string, used as given; or a ``psycopg_pool.ConnectionPool``
            to take the batch connection from; or an autocommit
            ``psycopg.Connection`` of yours to run the batches on (never
            closed by the consumer; if it breaks, :meth:`start` raises
            :class:`~pgque.errors.PgqueConnectionError` instead of
            reconnecting). Pooled and given connections never listen: give
            ``listen_dsn`` for NOTIFY wakeups (and for the ticker), else it polls.
        queue: The queue to consume.
        name: The consumer (subscription) name.
        poll_interval: Longest wait between polls without a NOTIFY, in
            seconds. Defaults to 30.
        max_messages: Messages read per receive call; a larger batch is read
            to the end before the ack. Defaults to all of it.
        retry_after: Seconds before a failed message is retried, from 0 to
            3,110,400,000 (100 years, ``pgque.nack``'s bound). Defaults to 60.
        unknown_handler_policy: ``"nack"`` (default) retries messages without a
            handler; ``"ack"`` lets the batch ack cover them, with a warning.
        subconsumer: Join a cooperative consumer as this member
            (``receive_coop``); several processes then share ``name``'s stream.
        dead_interval: With ``subconsumer``, take over batches of members idle
            longer than this (a PostgreSQL interval such as ``"30 seconds"``).
        listen: Wait for NOTIFY wakeups (default). ``False`` polls only, for
            transaction-mode poolers.
        listen_dsn: Connection string for the listening connection (to listen
            past a pooler); defaults to ``dsn``.
        ticker: ``"auto"`` (default) runs an in-process :class:`~pgque.Ticker`
            unless ``pgque.config`` shows a scheduler (pg_cron, pg_timetable);
            ``True`` always, ``False`` never.
        concurrency: Handle up to this many messages of a batch at once, in
            threads; the batch is acked when all are done. Defaults to 1.
            Not with transactional handlers (they share the batch's connection).
        rate_limit: At most this many messages a second (a token bucket; the
            batch stays open while throttled). Defaults to no limit.
        max_batch_time: Seconds one batch may take; messages not yet handled
            by then are nacked and the batch is acked, so a slow batch never
            holds rotation forever. Defaults to no limit.
        shutdown_timeout: Seconds the current batch gets to finish after a
            stop; past it the batch is rolled back (and redelivered).
            Defaults to 30.
        retry_backoff: ``(base, cap)`` seconds: a failed message is retried
            after ``min(cap, base * 2 ** retry_count)`` instead of the fixed
            ``retry_after``. Defaults to off.
        max_abandoned: How many timed-out handler threads (which cannot be
            killed) the consumer tolerates before it exits with
            :class:`ConsumerGaveUp` for its supervisor to restart it.
            Defaults to 10.
        max_settle_failures: How many batches in a row may fail to settle (a
            dead letter or the ack refused by the server; each is rolled back
            and tried again after a growing pause) before :meth:`start`
            raises :class:`ConsumerGaveUp`. Defaults to 5.
        subscribe: Subscribe the consumer (or, with ``subconsumer``, the
            member) on every connection, if it is not yet. Defaults to False:
            a consumer that is not subscribed makes :meth:`start` raise
            :class:`~pgque.errors.PgqueConsumerNotFound`.
    """

    def __init__(
        self,
        dsn: str | ConnectionPool[Any] | psycopg.Connection[Any],
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
        self.dsn = dsn
        self._pool_source = dsn if isinstance(dsn, ConnectionPool) else None
        if not isinstance(dsn, str) and listen_dsn is None:
            listen = False  # a pooled or given connection never listens
        self.queue, self.name, self.poll_interval = queue, name, poll_interval
        self.max_messages, self.retry_after = max_messages, retry_after
        self.subconsumer, self.dead_interval = subconsumer, dead_interval
        self.listen, self.listen_dsn, self.ticker = listen, listen_dsn, ticker
        self.concurrency, self.max_batch_time = concurrency, max_batch_time
        self.shutdown_timeout, self.retry_backoff = shutdown_timeout, retry_backoff
        self.max_abandoned, self.max_settle_failures = max_abandoned, max_settle_failures
        self.subscribe = subscribe
        self._log = logging.getLogger(f"pgque.consumer.{name}")
        self._backoff = policy.Backoff()
        self._settles = policy.SettleFailures(max_settle_failures)
        # A pool lends the ticker one connection for as long as it runs.
        source = listen_dsn or dsn
        self._ticker = policy.TickerSwitch(
            None if isinstance(source, psycopg.Connection) else source, self._log, name
        )
        self._rate = RateLimiter(rate_limit) if rate_limit is not None else None
        self._policy = unknown_handler_policy
        self._handlers: dict[str, HandlerSpec] = {}
        self._stop = threading.Event()
        self._hard_stop = threading.Event()
        self._batch_deadline = Deadline()
        self._observed = (False, False)  # (tracing, metering), set per batch
        self._abandoned = 0
        #: Seconds since the epoch of the last poll that completed (None: none yet).
        self.last_poll_at: float | None = None
        #: How many times the consumer reconnected after a database error.
        self.reconnects = 0
        #: True while the LISTEN connection is up.
        self.listening = False

    # -- handlers --------------------------------------------------------------

    def on(
        self,
        type: str,
        *,
        transactional: bool = False,
        timeout: float | None = None,
        ordered_by: str | None = None,
    ) -> Callable[[H], H]:
        """Register the decorated function for messages of ``type`` (``"*"``: any other).

        The function is called with the :class:`~pgque.Message` (and, when
        ``transactional``, the batch's connection as second argument) and is
        returned unchanged.

        Args:
            type: The message type, or ``"*"`` for every type without a handler.
            transactional: Pass the batch's connection: the handler's writes
                commit with the ack, or roll back with a failure (exactly-once
                for work in the same database).
            timeout: Seconds the handler may run. A sync handler's thread
                cannot be killed: its message is nacked and the thread
                abandoned; a transactional handler's connection is closed
                (rolling the batch back) and the consumer reconnects.
            ordered_by: A message attribute (e.g. ``"extra1"``): messages with
                the same value are handled one after another, in order, even
                with ``concurrency``. A nacked message comes back after later
                messages of its key.
        """
        policy.check_handler(self.concurrency, transactional, timeout, ordered_by)

        def register(handler: H) -> H:
            self._handlers[type] = HandlerSpec(handler, transactional, timeout, ordered_by)
            return handler

        return register

    def _handler_for(self, msg: Message) -> HandlerSpec | None:
        return self._handlers.get(msg.type or "") or self._handlers.get("*")

    # -- running ---------------------------------------------------------------

    def stop(self, *, now: bool = False) -> None:
        """Ask the loop to stop (thread-safe); it acts within half a second.

        The current batch gets ``shutdown_timeout`` seconds to finish; with
        ``now=True`` it is rolled back at the next message.
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

    def start(self) -> None:
        """Consume until :meth:`stop` (or SIGTERM/SIGINT on the main thread).

        Raises:
            PgqueConsumerNotFound: Not subscribed (the message says what to run).
            PgqueQueueNotFound: The queue does not exist.
            PgqueNotInstalledError: pgque is not installed in the database.
            ConsumerGaveUp: See ``max_settle_failures`` and ``max_abandoned``.
            PgqueConnectionError: The connection you gave broke.
        """
        self._stop.clear()
        self._hard_stop.clear()
        self._backoff.reset()
        self._settles = policy.SettleFailures(self.max_settle_failures)
        with self._signals(), self._ticker, self._workers():
            while not self._stop.is_set():
                try:
                    self._session()
                except (psycopg.Error, PgqueError, _ConnectionAbandoned) as exc:
                    self._recover(exc)

    def _recover(self, exc: BaseException) -> None:
        """After a session ended with ``exc``: raise, or wait the reconnect pause."""
        given = isinstance(self.dsn, psycopg.Connection) and self.dsn.closed
        pause = policy.recover(exc, self._backoff, self._log, self.name, given_closed=given)
        self.reconnects += 1
        self.listening = False
        self._wait(pause)

    def _session(self) -> None:
        """One connection (and listener): poll, dispatch, wait, until stopped or an error."""
        with self._connection() as conn, self._setup_errors(conn):
            self._subscribe(conn)
            self._ticker.set(self._wants_ticker(conn))  # decided on every connection
            with self._listener() as listener:
                while not self._stop.is_set():
                    processed = self._poll_once(conn)
                    if processed:
                        continue  # more may be waiting: poll again at once
                    self._wait_for_work(listener)

    @contextmanager
    def _setup_errors(self, conn: psycopg.Connection[Any]) -> Iterator[None]:
        """Turn a setup error met inside (no subscription, no queue) into one saying what to do."""
        try:
            yield
        except (psycopg.Error, PgqueError) as exc:
            if (problem := policy.setup_problem(exc)) is None:
                raise
            exists = self._queue_exists(conn)
            raise policy.setup_error(problem, exc, self.queue, self.name, exists) from exc

    def _subscribe(self, conn: psycopg.Connection[Any]) -> None:
        """With ``subscribe=True``: subscribe (again) on this connection."""
        if self.subscribe and self.subconsumer is None:
            conn.execute(query("subscribe"), (self.queue, self.name))
        elif self.subscribe:
            conn.execute(query("subscribe_subconsumer"), (self.queue, self.name, self.subconsumer))

    def _queue_exists(self, conn: psycopg.Connection[Any]) -> bool | None:
        """Whether the queue exists (None: cannot tell), to word a setup error."""
        try:
            row = conn.execute(query("queue_exists"), (self.queue,)).fetchone()
        except psycopg.Error:
            return None
        return bool(row and row[0])

    def _poll_once(self, conn: psycopg.Connection[Any]) -> int | None:
        """Receive one batch, dispatch it, ack it; the number of messages (None: nothing).
        A batch not settled is rolled back and, after a pause, its count returned."""
        if self._stop.is_set():
            return None
        try:
            count = self._poll_batch(conn)
        except _BatchAborted:
            self._log.warning(
                "consumer %s: stopped mid-batch; the batch was rolled back for redelivery",
                self.name,
            )
            return None
        except policy.SettleFailed as failed:
            self._wait(self._settles.failed(failed.cause, self._log, self.name))
            return failed.handled
        finally:
            self.last_poll_at = time.time()
        self._backoff.reset()  # a healthy poll: the next reconnect pause starts small
        if count:
            self._settles.succeeded()
        return count

    def _poll_batch(self, conn: psycopg.Connection[Any]) -> int | None:
        client = PgqueClient(conn)
        if self.subconsumer is not None:
            # Taking a cooperative batch locks the group: in its own short
            # transaction, so other members are not held up while we work.
            subconsumer = self.subconsumer
            msgs = self._traced_receive(
                lambda: client.receive_coop(
                    self.queue, self.name, subconsumer,
                    max_messages=self.max_messages, dead_interval=self.dead_interval,
                )
            )  # fmt: skip
            if not msgs:
                return None
            with conn.transaction():
                return self._process(conn, client, msgs)
        with conn.transaction():
            msgs = self._traced_receive(
                lambda: client.receive(self.queue, self.name, self.max_messages)
            )
            if not msgs:
                return None
            return self._process(conn, client, msgs)

    def _traced_receive(self, receive: Callable[[], list[Message]]) -> list[Message]:
        """Run a receive call inside a ``receive`` span linked to the messages' traces."""
        tel = telemetry()
        with tel.operation("receive", self.queue, attributes={CONSUMER_GROUP: self.name}) as op:
            msgs = receive()
            if msgs:
                tel.record_consumed(self.queue, len(msgs), attributes={CONSUMER_GROUP: self.name})
            if msgs and op.span.is_recording():
                op.span.set_attribute(BATCH_MESSAGE_COUNT, len(msgs))
                for msg in msgs:
                    parent = tracing.extract(msg.extra1, msg.extra4)
                    if parent is not None:
                        op.span.add_link(trace.get_current_span(parent).get_span_context())
        return msgs

    def _process(
        self, conn: psycopg.Connection[Any], client: PgqueClient, msgs: list[Message]
    ) -> int:
        batch_id = msgs[0].batch_id
        tel = telemetry()
        # Looked up once a batch (not per message): OpenTelemetry may be configured later.
        self._observed = (tel.tracing, tel.metering)
        self._batch_deadline = Deadline()
        if self.max_batch_time is not None:
            self._batch_deadline.tighten(self.max_batch_time)
        if self._stop.is_set():
            self._batch_deadline.tighten(self.shutdown_timeout)
        count = 0
        try:
            while msgs:
                outcomes = self._run_handlers(conn, msgs)
                for msg, outcome in zip(msgs, outcomes, strict=True):
                    self._settle(conn, msg, outcome)
                count += len(msgs)
                # ack finishes the whole batch: first read what receive cut off.
                msgs = (
                    client.receive_rest(batch_id, msgs[-1].msg_id)
                    if len(msgs) >= self.max_messages and self.max_messages < _ALL_MESSAGES
                    else []
                )
            acked = self._ack(client, batch_id)
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

    def _ack(self, client: PgqueClient, batch_id: int) -> int:
        """Ack the batch; a refusal (not a lost connection) is a failed settle."""
        try:
            return self._traced_ack(client, batch_id)
        except (psycopg.Error, PgqueError) as exc:
            if policy.is_connection_error(exc):
                raise
            raise policy.SettleFailed(exc) from exc

    def _traced_ack(self, client: PgqueClient, batch_id: int) -> int:
        with telemetry().operation("ack", self.queue, attributes={CONSUMER_GROUP: self.name}):
            return client.ack(batch_id)

    # -- handlers at work --------------------------------------------------------

    def _run_handlers(self, conn: psycopg.Connection[Any], msgs: list[Message]) -> list[Outcome]:
        """An outcome per message, in message order."""
        results: dict[int, Outcome] = {}
        if self.concurrency == 1 or self._pool is None:
            for msg in msgs:
                results[id(msg)] = self._outcome(conn, msg)
            return [results[id(m)] for m in msgs]

        def run_lane(lane: list[Message]) -> None:
            for msg in lane:
                results[id(msg)] = self._outcome(None, msg)

        futures = [self._pool.submit(run_lane, lane) for lane in lanes(msgs, self._handler_for)]
        wait(futures)
        for future in futures:
            future.result()  # re-raises _BatchAborted from a lane
        return [results[id(m)] for m in msgs]

    def _outcome(self, conn: psycopg.Connection[Any] | None, msg: Message) -> Outcome:
        """Run the message's handler and say what became of the message."""
        if self._hard_stop.is_set() or (self._stop.is_set() and self._batch_deadline.passed()):
            raise _BatchAborted
        if self._batch_deadline.passed():
            return Outcome("nack", reason="max_batch_time exceeded")
        spec = self._handler_for(msg)
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
        if self._rate is not None:
            self._rate.acquire(self._hard_stop)
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
                    self._call(conn, spec, msg)
            else:  # nothing is created per message when nobody listens
                self._call(conn, spec, msg)
        except (_BatchAborted, _ConnectionAbandoned, ConsumerGaveUp):
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

    def _call(self, conn: psycopg.Connection[Any] | None, spec: HandlerSpec, msg: Message) -> None:
        """Call the handler as its options say."""
        if spec.transactional:
            assert conn is not None
            self._call_transactional(conn, spec, msg)
        elif spec.timeout is not None:
            self._call_with_timeout(spec, msg)
        else:
            spec.func(msg)

    def _call_transactional(
        self, conn: psycopg.Connection[Any], spec: HandlerSpec, msg: Message
    ) -> None:
        # A savepoint: a failing handler's writes go, the batch goes on.
        with conn.transaction():
            if spec.timeout is None:
                spec.func(msg, conn)
            elif not _in_thread(lambda: spec.func(msg, conn), msg, spec.timeout):
                self._log.error(
                    "transactional handler for msg_id=%s exceeded %ss; closing the batch's"
                    " connection (the batch rolls back) and reconnecting",
                    msg.msg_id, spec.timeout,
                )  # fmt: skip
                conn.cancel_safe()
                conn.close()
                raise _ConnectionAbandoned(f"handler for msg_id={msg.msg_id} timed out")

    def _call_with_timeout(self, spec: HandlerSpec, msg: Message) -> None:
        assert spec.timeout is not None
        if _in_thread(lambda: spec.func(msg), msg, spec.timeout):
            return
        self._abandoned += 1
        self._log.error(
            "handler for msg_id=%s exceeded %ss; its thread is abandoned (%d of %d allowed)",
            msg.msg_id, spec.timeout, self._abandoned, self.max_abandoned,
        )  # fmt: skip
        if self._abandoned > self.max_abandoned:
            raise policy.ConsumerGaveUp(
                f"{self._abandoned} handler threads timed out and are still running"
            )
        raise TimeoutError(f"handler exceeded {spec.timeout}s")

    def _settle(self, conn: psycopg.Connection[Any], msg: Message, outcome: Outcome) -> None:
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
            self._settle_in_db(conn, msg, delay, outcome.reason)
        except Exception as exc:
            reason = policy.settle_refused(exc, msg, delay, outcome.reason, self._log, self.name)
            try:
                self._settle_in_db(conn, msg, None, reason)
            except Exception as again:
                policy.settle_refused(again, msg, None, reason, self._log, self.name)

    def _settle_in_db(
        self, conn: psycopg.Connection[Any], msg: Message, delay: float | None, reason: str | None
    ) -> None:
        """Nack the message (retry after ``delay`` seconds), or dead-letter it (None)."""
        operation = "nack" if delay is not None else "dead_letter"
        with (
            _savepoint(conn),
            telemetry().operation(
                operation, self.queue, attributes={CONSUMER_GROUP: self.name}
            ) as op,
        ):
            op.set_message_id(msg.msg_id)
            if delay is None:
                conn.execute(query("dead_letter_event"), (msg.batch_id, msg.msg_id, reason))
            else:
                interval = policy.retry_interval(delay)
                conn.execute(query("nack_by_id"), (msg.batch_id, msg.msg_id, interval, reason))

    # -- waiting ---------------------------------------------------------------

    @contextmanager
    def _listener(self) -> Iterator[psycopg.Connection[Any] | None]:
        if not self.listen:
            yield None
            return
        dsn = self.listen_dsn or self.dsn
        assert isinstance(dsn, str)
        with psycopg.connect(dsn, autocommit=True) as listener:
            listener.execute(sql.SQL("listen {}").format(sql.Identifier(f"pgque_{self.queue}")))
            self.listening = True
            try:
                yield listener
            finally:
                self.listening = False

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        """The batch connection: a new one from the DSN, one borrowed from the pool, or yours."""
        if isinstance(self.dsn, psycopg.Connection):
            if self.dsn.closed:
                raise PgqueConnectionError(
                    f"consumer {self.name}: its connection is closed; give it a new one"
                )
            yield self.dsn
            return
        if self._pool_source is None:
            assert isinstance(self.dsn, str)
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                yield conn
            return
        with self._pool_source.connection() as conn:
            autocommit = conn.autocommit
            conn.autocommit = True  # transactions are explicit: conn.transaction()
            try:
                yield conn
            finally:
                if not conn.closed:
                    conn.autocommit = autocommit

    def _wait_for_work(self, listener: psycopg.Connection[Any] | None) -> None:
        """Return on a NOTIFY, after ``poll_interval``, or soon after :meth:`stop`."""
        deadline = time.monotonic() + self.poll_interval
        if listener is not None and any(True for _ in listener.notifies(timeout=0)):
            return  # wakeups arrived while we worked
        while not self._stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            step = min(left, _WAIT_SLICE)
            if listener is None:
                self._stop.wait(step)
            elif any(True for _ in listener.notifies(timeout=step, stop_after=1)):
                return

    def _wait(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self._stop.is_set() and (left := deadline - time.monotonic()) > 0:
            self._stop.wait(min(left, _WAIT_SLICE))

    # -- helpers ---------------------------------------------------------------

    @contextmanager
    def _signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

        def on_signal(signum: int, frame: object) -> None:
            if self._stop.is_set():
                self._log.warning("consumer %s: second signal, stopping now", self.name)
                self.stop(now=True)
                return
            self._log.info("consumer %s: signal %s, stopping after this batch", self.name, signum)
            self.stop()

        for sig in previous:
            signal.signal(sig, on_signal)
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    _pool: ThreadPoolExecutor | None = None

    @contextmanager
    def _workers(self) -> Iterator[None]:
        if self.concurrency == 1:
            yield
            return
        self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="pgque-worker")
        try:
            yield
        finally:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def _wants_ticker(self, conn: psycopg.Connection[Any]) -> bool:
        """The ``ticker`` option decided on ``conn`` (``"auto"`` reads pgque.config)."""
        if isinstance(self.ticker, bool):
            return self.ticker
        try:
            return policy.ticker_wanted(self.ticker, conn.execute(query("scheduler")).fetchone())
        except psycopg.Error as exc:
            return policy.config_unreadable(exc, self._log, self.name)


def _in_thread(call: Callable[[], Any], msg: Message, timeout: float) -> bool:
    """Run ``call`` in a daemon thread for up to ``timeout`` seconds: False if it still
    runs then (it cannot be killed), else True, or what it raised."""
    done = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:
            failure.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, name=f"pgque-handler-{msg.msg_id}", daemon=True).start()
    if not done.wait(timeout):
        return False
    if failure:
        raise failure[0]
    return True


@contextmanager
def _savepoint(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """A savepoint when a transaction is open (a failed nack must not abort the batch)."""
    if conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS:
        with conn.transaction():
            yield
    else:
        yield


Consumer.__module__ = "pgque"
ConsumerGaveUp.__module__ = "pgque"
