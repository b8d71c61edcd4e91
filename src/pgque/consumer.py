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
seconds at most. Database errors never end the loop: it reconnects with
backoff and polls at once.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg
from psycopg import sql

from pgque._queries import query
from pgque.client import PgqueClient
from pgque.errors import PgqueError
from pgque.message import Message

__all__ = ["Consumer"]

logger = logging.getLogger("pgque")

Handler = Callable[[Message], Any]
H = TypeVar("H", bound=Handler)

_ALL_MESSAGES = 2_147_483_647
_WAIT_SLICE = 0.5
_BACKOFF_START = 0.1
_BACKOFF_CAP = 30.0


class Consumer:
    """Receives a queue's batches and dispatches each message to a handler by type.

    The constructor only checks and stores its arguments; no database work
    happens until :meth:`start`. The consumer does not subscribe itself:
    ``subscribe`` first (in cooperative mode ``receive_coop`` registers).

    Args:
        dsn: Connection string, used as given.
        queue: The queue to consume.
        name: The consumer (subscription) name.
        poll_interval: Longest wait between polls without a NOTIFY, in
            seconds. Defaults to 30.
        max_messages: Messages read per receive call; a larger batch is read
            to the end before the ack. Defaults to all of it.
        retry_after: Seconds before a failed message is retried. Defaults to 60.
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
    """

    def __init__(
        self,
        dsn: str,
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
    ) -> None:
        if unknown_handler_policy not in ("nack", "ack"):
            raise ValueError(
                f"unknown_handler_policy must be 'nack' or 'ack', got {unknown_handler_policy!r}"
            )
        if dead_interval is not None and subconsumer is None:
            raise ValueError("dead_interval needs subconsumer= (it applies to cooperative members)")
        if poll_interval <= 0:
            raise ValueError(f"poll_interval must be > 0, got {poll_interval}")
        if max_messages < 1:
            raise ValueError(f"max_messages must be >= 1, got {max_messages}")
        if ticker not in (True, False, "auto"):
            raise ValueError(f"ticker must be True, False or 'auto', got {ticker!r}")
        self.dsn = dsn
        self.queue = queue
        self.name = name
        self.poll_interval = poll_interval
        self.max_messages = max_messages
        self.retry_after = retry_after
        self.subconsumer = subconsumer
        self.dead_interval = dead_interval
        self.listen = listen
        self.listen_dsn = listen_dsn
        self.ticker = ticker
        self._policy = unknown_handler_policy
        self._handlers: dict[str, Handler] = {}
        self._stop = threading.Event()
        self._log = logging.getLogger(f"pgque.consumer.{name}")

    # -- handlers --------------------------------------------------------------

    def on(self, type: str) -> Callable[[H], H]:
        """Register the decorated function for messages of ``type`` (``"*"``: any other).

        The function is called with the :class:`~pgque.Message` and returned unchanged.
        """

        def register(handler: H) -> H:
            self._handlers[type] = handler
            return handler

        return register

    def _handler_for(self, msg: Message) -> Handler | None:
        return self._handlers.get(msg.type or "") or self._handlers.get("*")

    # -- running ---------------------------------------------------------------

    def stop(self) -> None:
        """Ask the loop to stop (thread-safe); it acts within half a second."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        """True once :meth:`stop` was called."""
        return self._stop.is_set()

    def start(self) -> None:
        """Consume until :meth:`stop` (or SIGTERM/SIGINT on the main thread)."""
        self._stop.clear()
        with self._signals(), self._maybe_ticker():
            delay = _BACKOFF_START
            while not self._stop.is_set():
                try:
                    self._session()
                    delay = _BACKOFF_START
                except (psycopg.Error, PgqueError):
                    self._log.exception(
                        "consumer %s: database error; retrying in %.1fs", self.name, delay
                    )
                    logger.debug("consumer %s: reconnecting", self.name)
                    self._wait(delay)
                    delay = min(delay * 2, _BACKOFF_CAP)

    def _session(self) -> None:
        """One connection (and listener): poll, dispatch, wait, until stopped or an error."""
        with psycopg.connect(self.dsn, autocommit=True) as conn, self._listener() as listener:
            while not self._stop.is_set():
                processed = self._poll_once(conn)
                if processed:
                    continue  # more may be waiting: poll again at once
                self._wait_for_work(listener)

    def _poll_once(self, conn: psycopg.Connection[Any]) -> int | None:
        """Receive one batch, dispatch it, ack it; the number of messages (None: nothing)."""
        client = PgqueClient(conn)
        if self.subconsumer is not None:
            # Taking a cooperative batch locks the group: in its own short
            # transaction, so other members are not held up while we work.
            msgs = client.receive_coop(
                self.queue, self.name, self.subconsumer,
                max_messages=self.max_messages, dead_interval=self.dead_interval,
            )  # fmt: skip
            if not msgs:
                return None
            with conn.transaction():
                return self._process(conn, client, msgs)
        with conn.transaction():
            msgs = client.receive(self.queue, self.name, self.max_messages)
            if not msgs:
                return None
            return self._process(conn, client, msgs)

    def _process(
        self, conn: psycopg.Connection[Any], client: PgqueClient, msgs: list[Message]
    ) -> int:
        batch_id = msgs[0].batch_id
        settled = True
        count = 0
        while msgs:
            for msg in msgs:
                settled = self._dispatch(conn, client, msg) and settled
            count += len(msgs)
            # ack finishes the whole batch: first read what receive cut off.
            msgs = (
                client.receive_rest(batch_id, msgs[-1].msg_id)
                if len(msgs) >= self.max_messages and self.max_messages < _ALL_MESSAGES
                else []
            )
        if settled and client.ack(batch_id) == 0:
            self._log.warning(
                "pgque: ack batch %s returned 0 -- stale or double ack"
                " (batch already finished or not found)",
                batch_id,
            )
        return count

    def _dispatch(self, conn: psycopg.Connection[Any], client: PgqueClient, msg: Message) -> bool:
        """Handle one message; False when it could be neither handled nor nacked."""
        handler = self._handler_for(msg)
        if handler is None:
            if self._policy == "ack":
                self._log.warning(
                    "no handler for event type=%s ev_id=%s; acking", msg.type, msg.msg_id
                )
                return True
            self._log.warning(
                "no handler for event type=%s ev_id=%s; nacking", msg.type, msg.msg_id
            )
            return self._nack(conn, client, msg, f"no handler for type={msg.type}", unhandled=True)
        try:
            handler(msg)
        except Exception:
            self._log.exception("handler failed for msg_id=%s, nacking", msg.msg_id)
            return self._nack(conn, client, msg, None, unhandled=False)
        return True

    def _nack(
        self,
        conn: psycopg.Connection[Any],
        client: PgqueClient,
        msg: Message,
        reason: str | None,
        *,
        unhandled: bool,
    ) -> bool:
        try:
            with _savepoint(conn):
                client.nack(msg.batch_id, msg, retry_after=self.retry_after, reason=reason)
        except Exception:
            what = "unhandled msg_id" if unhandled else "msg_id"
            self._log.exception(
                "nack failed for %s=%s; skipping batch ack so PgQ redelivers", what, msg.msg_id
            )
            return False
        return True

    # -- waiting ---------------------------------------------------------------

    @contextmanager
    def _listener(self) -> Iterator[psycopg.Connection[Any] | None]:
        if not self.listen:
            yield None
            return
        with psycopg.connect(self.listen_dsn or self.dsn, autocommit=True) as listener:
            listener.execute(sql.SQL("listen {}").format(sql.Identifier(f"pgque_{self.queue}")))
            yield listener

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
            self._log.info("consumer %s: signal %s, stopping", self.name, signum)
            self.stop()

        for sig in previous:
            signal.signal(sig, on_signal)
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    @contextmanager
    def _maybe_ticker(self) -> Iterator[None]:
        if not self._wants_ticker():
            yield
            return
        from pgque.ticker import Ticker

        ticker = Ticker(self.dsn).start()
        try:
            yield
        finally:
            ticker.stop()

    def _wants_ticker(self) -> bool:
        if self.ticker is True or self.ticker is False:
            return self.ticker
        try:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                row = conn.execute(query("scheduler")).fetchone()
        except psycopg.Error as exc:
            self._log.warning(
                "consumer %s: cannot read pgque.config (%s); no ticker", self.name, exc
            )
            return False
        return row is None or (row[0] is None and row[1] is None and row[2] is None)


@contextmanager
def _savepoint(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """A savepoint when a transaction is open (a failed nack must not abort the batch)."""
    if conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS:
        with conn.transaction():
            yield
    else:
        yield


Consumer.__module__ = "pgque"
