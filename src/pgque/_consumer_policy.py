"""The rules :class:`pgque.Consumer` and :class:`pgque.AsyncConsumer` share (no database I/O).

Their options and checks are in :mod:`pgque._consumer_options`.

* **Retry delays**: :func:`retry_delay` (the handler's choice, the backoff,
  or ``retry_after``).
* **Reconnecting**: :class:`Backoff` waits 100 ms doubling to 30 s (with 20 %
  jitter) and starts again after every successful poll.
* **Settling**: a nack the server refuses dead-letters the message with the
  cause (:func:`settle_refused`); a batch that still cannot be settled (a
  dead letter or the ack refused) is rolled back and tried again after a
  growing pause, and :class:`SettleFailures` raises :class:`ConsumerGaveUp`
  after ``max_settle_failures`` such batches in a row.
* **Setup errors** (no subscription, no queue, pgque not installed, no
  grant) are not transient: :func:`setup_problem` spots them and
  :func:`setup_error` says what to run; ``start()`` raises it at once.
  Connection errors (:func:`is_connection_error`) always mean reconnecting.
* **Ticking**: :func:`scheduler_absent` decides ``ticker="auto"`` on every
  (re)connection.
"""

from __future__ import annotations

import logging
import random
import re
import secrets
import shlex
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg_pool import ConnectionPool

from pgque.errors import (
    ConnectionAbandoned,
    ConsumerGaveUp,
    PgqueConnectionError,
    PgqueConsumerNotFound,
    PgqueError,
    PgqueInvalidArgument,
    PgqueNotInstalledError,
    PgquePoolerError,
    PgqueQueueNotFound,
    from_database_error,
    pooler_error,
    pooler_symptom,
)
from pgque.otel import error_type

if TYPE_CHECKING:
    from pgque._dispatch import Outcome
    from pgque.message import Message

__all__ = [
    "BACKOFF_CAP",
    "BACKOFF_START",
    "LISTEN_PROBE_WINDOW",
    "WAIT_SLICE",
    "Backoff",
    "ConnectionAbandoned",
    "ConsumerGaveUp",
    "ListenProbe",
    "SettleFailed",
    "SettleFailures",
    "TickerSwitch",
    "config_unreadable",
    "connection_lost",
    "describe",
    "handler_failed_reason",
    "is_connection_error",
    "recover",
    "retry_delay",
    "retry_interval",
    "scheduler_absent",
    "settle_refused",
    "setup_error",
    "setup_problem",
    "ticker_source",
    "ticker_wanted",
]

#: The first pause before reconnecting (or retrying a batch that was not settled).
BACKOFF_START = 0.1
#: The longest such pause.
BACKOFF_CAP = 30.0
#: The longest a wait goes without looking at the stop flag.
WAIT_SLICE = 0.5


class SettleFailed(Exception):
    """Raised inside a batch's transaction to roll it back: a message or the batch
    could not be settled. ``handled`` is how many messages were dispatched."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(describe(cause))
        self.cause = cause
        self.handled = 1


# -- retry delays ---------------------------------------------------------------


def retry_delay(
    msg: Message, outcome: Outcome, retry_after: float, backoff: tuple[float, float] | None
) -> float:
    """Seconds before a nacked message comes again: the handler's choice, else the
    backoff (for a handler that raised), else ``retry_after``."""
    if outcome.retry_after is not None:
        return outcome.retry_after
    if backoff is not None and outcome.error is not None:
        base, cap = backoff
        return float(min(cap, base * 2.0 ** min(msg.retry_count or 0, 64)))
    return retry_after


def retry_interval(seconds: float) -> timedelta:
    """The delay as the ``interval`` parameter of ``pgque.nack`` (exact, any size in range)."""
    return timedelta(seconds=seconds)


# -- reconnecting and settling ----------------------------------------------------


class Backoff:
    """Pauses that double from ``start`` to ``cap`` (20 % jitter) until :meth:`reset`."""

    def __init__(self, start: float = BACKOFF_START, cap: float = BACKOFF_CAP) -> None:
        self.start = start
        self.cap = cap
        self._next = start

    def pause(self) -> float:
        """The next pause, in seconds; the one after is twice as long, up to ``cap``."""
        pause = self._next * random.uniform(0.8, 1.2)
        self._next = min(self._next * 2, self.cap)
        return pause

    def reset(self) -> None:
        """Start again from ``start`` (after a healthy poll)."""
        self._next = self.start


class SettleFailures:
    """Batches in a row that could not be settled, and the pause before the next try."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0
        self._backoff = Backoff()

    def failed(self, cause: BaseException, log: logging.Logger, name: str) -> float:
        """Count one and log it; the pause before the batch comes again, or
        :class:`ConsumerGaveUp` at the limit."""
        self.count += 1
        if self.count >= self.limit:
            raise ConsumerGaveUp(
                f"consumer {name}: {self.count} batches in a row could not be settled"
                f" (the last: {describe(cause)}); see the logged errors, fix the cause"
                " and start it again"
            ) from cause
        pause = self._backoff.pause()
        log.error("consumer %s: the batch could not be settled (%s); rolled back, trying it"
                  " again in %.2fs (%d of %d failures in a row before giving up)",
                  name, describe(cause), pause, self.count, self.limit)  # fmt: skip
        return pause

    def succeeded(self) -> None:
        """A batch was acked: the count and the pause start again."""
        self.count = 0
        self._backoff.reset()


# What the server answers a connection that cannot succeed until someone changes the
# DSN, a role or the server's configuration (a server that is away is transient).
_REFUSED = re.compile(
    r'database "[^"]*" does not exist|role "[^"]*" does not exist|password authentication'
    r" failed|no password supplied|no pg_hba\.conf entry|authentication failed|invalid"
    r" connection option|missing \"=\"|invalid (?:URI|integer value|port)"
)


def never_connects(exc: BaseException) -> bool:
    """True for a connection error that retrying cannot cure: no such database or role,
    a wrong password, no pg_hba.conf entry, an unparsable DSN."""
    if not isinstance(exc, (psycopg.OperationalError, psycopg.ProgrammingError)):
        return False
    return _REFUSED.search(str(exc)) is not None


def recover(
    exc: BaseException,
    backoff: Backoff,
    log: logging.Logger,
    name: str,
    *,
    given_closed: bool,
    connected: bool = True,
) -> float:
    """After a consumer's session ended with ``exc``: raise what ends ``start()`` (giving
    up, a setup error, a broken connection of the caller's, a first connection that
    can never succeed); else log it and return the pause before reconnecting."""
    if pooler_symptom(exc):
        raise pooler_error(exc) from exc
    if not connected and never_connects(exc):
        raise PgqueConnectionError(
            f"consumer {name}: cannot connect: {describe(exc)}: check the DSN (database,"
            " user, password) and the server's pg_hba.conf; not retried, since it cannot"
            " pass by itself"
        ) from exc
    if isinstance(exc, ConsumerGaveUp) or setup_problem(exc) is not None:
        raise exc
    if given_closed:
        raise PgqueConnectionError(
            f"consumer {name}: its connection broke ({exc}); a given connection is not reopened"
        ) from exc
    pause = backoff.pause()
    if is_connection_error(exc):
        log.warning("consumer %s: %s; reconnecting in %.2fs", name, describe(exc), pause)
    else:
        log.error("consumer %s: database error; reconnecting in %.2fs", name, pause, exc_info=exc)
    return pause


def settle_refused(
    exc: BaseException,
    msg: Message,
    delay: float | None,
    reason: str | None,
    log: logging.Logger,
    name: str,
) -> str:
    """After settling ``msg`` failed with ``exc``: re-raise a lost connection; for a
    refused nack (``delay`` given) log it and return the reason to dead-letter the
    message with; for a refused dead letter raise :class:`SettleFailed`. A pooler's
    symptom (:class:`PgquePoolerError`) is raised at once: never a dead letter."""
    if pooler_symptom(exc):
        raise pooler_error(exc) from exc
    if isinstance(exc, PgquePoolerError) or is_connection_error(exc):
        raise exc
    if delay is None:
        raise SettleFailed(exc) from exc
    log.error("consumer %s: nack of msg_id=%s refused (%s); dead-lettering it",
              name, msg.msg_id, describe(exc))  # fmt: skip
    text = f"nack failed: {describe(exc)}" + (f" (nack reason: {reason})" if reason else "")
    return text.replace("\x00", "")


_REASON_LIMIT = 1000
"""Characters of a handler's error kept in a dead letter's reason."""


def handler_failed_reason(exc: BaseException, msg: Message) -> str:
    """The reason a nack after a handler's error carries: the dead letter's reason once
    the message has used its retries (a nack that retries stores none), naming the
    error of the last attempt."""
    attempts = (msg.retry_count or 0) + 1
    error = f"{error_type(exc)}: {describe(exc)}"
    if len(error) > _REASON_LIMIT:
        error = error[: _REASON_LIMIT - 1] + "\u2026"
    text = f"max retries exceeded after {attempts} attempts; last error: {error}"
    return text.replace("\x00", "")


def connection_lost(exc: BaseException | None) -> BaseException:
    """What ends a batch whose connection broke under a handler (that raised ``exc``):
    ``exc`` itself when it says so, else a :class:`PgqueConnectionError`. The runner
    logs it as one warning and reconnects; the server rolled the batch back."""
    if exc is not None and is_connection_error(exc):
        return exc
    cause = f" ({describe(exc)})" if exc is not None else ""
    return PgqueConnectionError(f"the batch's connection was lost{cause}")


def describe(exc: BaseException) -> str:
    """The first line of an error's text (its class name when it has none)."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


# -- classifying errors -------------------------------------------------------------


def is_connection_error(exc: BaseException) -> bool:
    """True for a lost or unusable connection (also a cancelled statement): reconnect."""
    return isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError,
                            PgqueConnectionError))  # fmt: skip


def _as_pgque(exc: BaseException) -> PgqueError | None:
    if isinstance(exc, PgqueError):
        return exc
    if isinstance(exc, psycopg.Error):
        return from_database_error(exc)
    return None


# No schema pgque, no such table, no such function.
_NOT_INSTALLED = ("3F000", "42P01", "42883")


def setup_problem(exc: BaseException) -> str | None:
    """``"no_queue"``, ``"not_subscribed"``, ``"not_installed"``, ``"denied"``,
    ``"pooler"`` (a transaction-mode pooler without ``pooler=True``), ``"invalid"`` (the
    SDK's :class:`~pgque.PgqueInvalidArgument`: a declaration refused), or None when
    ``exc`` is not a setup error (waiting and reconnecting may help then)."""
    if isinstance(exc, PgquePoolerError) or pooler_symptom(exc):
        return "pooler"
    if is_connection_error(exc):
        return None
    error = _as_pgque(exc)
    if error is None:
        return None
    if isinstance(error, PgqueQueueNotFound) or error.code == "queue_not_found":
        return "no_queue"
    if isinstance(error, PgqueConsumerNotFound) or error.code == "consumer_not_found":
        return "not_subscribed"
    if isinstance(error, PgqueNotInstalledError) or error.sqlstate in _NOT_INSTALLED:
        return "not_installed"
    if error.sqlstate == "42501":
        return "denied"
    if isinstance(exc, PgqueInvalidArgument):  # a declaration refused (an @every cron)
        return "invalid"
    return None


def setup_error(
    problem: str, cause: BaseException, queue: str, name: str, queue_exists: bool | None
) -> PgqueError:
    """The error ``start()`` raises for a setup problem, saying what to run."""
    if problem == "pooler":
        return cause if isinstance(cause, PgquePoolerError) else pooler_error(cause)
    if problem == "invalid" and isinstance(cause, PgqueError):
        return cause  # it says what is wrong
    if problem == "not_subscribed" and queue_exists is False:
        problem = "no_queue"  # an older pgque says "not subscriber" for a missing queue
    q, n = shlex.quote(queue), shlex.quote(name)
    error: PgqueError
    if problem == "no_queue":
        error = PgqueQueueNotFound(
            f"queue {queue!r} does not exist: create it (`pgque create-queue {q}`), or give"
            f" consumer {name!r} the name of an existing queue"
        )
    elif problem == "not_subscribed":
        error = PgqueConsumerNotFound(
            f"consumer {name!r} is not subscribed to queue {queue!r}: run `pgque subscribe"
            f" {q} {n}` (or select pgque.subscribe(...)), or pass subscribe=True to the"
            " consumer to subscribe when it connects"
        )
    elif problem == "not_installed":
        error = PgqueNotInstalledError(
            f"pgque is not installed in this database ({describe(cause)}): run `pgque install`"
            " (or pgque.install(conn)) with an owner role"
        )
    else:
        error = PgqueError(
            f"consumer {name!r} may not consume queue {queue!r} ({describe(cause)}): grant"
            " its role pgque_reader"
        )
    source = _as_pgque(cause)
    if source is not None:
        error.sqlstate, error.code, error.hint = source.sqlstate, source.code, source.hint
    return error


# -- listening ----------------------------------------------------------------------

#: Seconds the listener gets to hear the NOTIFY its consumer committed.
LISTEN_PROBE_WINDOW = 5.0


class ListenProbe:
    """Whether the LISTEN connection hears at all: on each new listener the runner
    LISTENs on a channel of its own (:meth:`start`) and NOTIFYs it from the batch
    connection, a commit of its own. A listener through a transaction-mode pooler
    never hears it (the pooler lends its session to others between statements): one
    WARNING (per consumer, not per poll) names ``listen_dsn``."""

    def __init__(self, log: logging.Logger, name: str) -> None:
        self._log = log
        self._name = name
        self.channel = f"pgque_probe_{secrets.token_hex(8)}"
        self._sent: float | None = None
        self.warned = False

    def start(self) -> str:
        """A new listener: the channel to LISTEN on and NOTIFY (the clock starts)."""
        self._sent = time.monotonic()
        return self.channel

    def heard(self, channel: str) -> bool:
        """Note a notification; True when it is the probe's (no work)."""
        if channel != self.channel:
            return False
        self._sent = None
        return True

    def check(self) -> None:
        """Warn once when the probe's notification is overdue."""
        sent = self._sent
        if sent is None or self.warned or time.monotonic() - sent < LISTEN_PROBE_WINDOW:
            return
        self.warned = True
        self._sent = None
        self._log.warning(
            "consumer %s: the LISTEN connection did not hear, within %.0f s, the NOTIFY this"
            " consumer committed: it seems to go through a transaction-mode pooler (PgBouncer,"
            " Supavisor, RDS Proxy), so wakeups never arrive and messages wait for"
            " poll_interval; give listen_dsn= a connection string that reaches PostgreSQL"
            " directly (see docs/operations.md, Poolers)",
            self._name, LISTEN_PROBE_WINDOW,
        )  # fmt: skip


# -- ticking ------------------------------------------------------------------------


class TickerSwitch:
    """A consumer's in-process :class:`~pgque.Ticker`, started or stopped as decided on
    each (re)connection (:meth:`set`), and stopped when the ``with`` block ends.

    ``source`` is what the Ticker connects with (a connection string or a
    pool); None when the consumer has neither (a given connection carries the
    batches): then it warns once instead of ticking.
    """

    def __init__(
        self, source: Any, log: logging.Logger, name: str, *, pooler: bool = False
    ) -> None:
        self.source = source
        self.pooler = pooler
        self.runner: Any = None
        self._log = log
        self._name = name
        self._warned = False

    def set(self, wanted: bool) -> None:
        """Run a ticker, or not."""
        if wanted == (self.runner is not None):
            return
        if self.runner is not None:
            self.runner.stop()
            self.runner = None
            return
        if self.source is None:
            if not self._warned:
                self._warned = True
                self._log.warning("consumer %s: no in-process ticker without a connection"
                                  " string or pool to give it: give listen_dsn, or run a"
                                  " Ticker", self._name)  # fmt: skip
            return
        from pgque.ticker import Ticker  # here: the ticker is needed only when it runs

        self.runner = Ticker(self.source, pooler=self.pooler).start()

    def check(self) -> None:
        """Raise what stopped the ticker on its own (a pooler met without ``pooler=True``)."""
        failure = getattr(self.runner, "failure", None)
        if failure is not None:
            raise failure

    def __enter__(self) -> TickerSwitch:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.set(False)


def config_unreadable(exc: BaseException, log: logging.Logger, name: str) -> bool:
    """pgque.config could not be read: re-raise a lost connection or a missing pgque,
    else warn and run no ticker (decided again on the next connection)."""
    if is_connection_error(exc) or setup_problem(exc) == "not_installed":
        raise exc
    log.warning("consumer %s: cannot read pgque.config (%s); no ticker", name, describe(exc))
    return False


def scheduler_absent(row: tuple[Any, ...] | None) -> bool:
    """Whether ``ticker="auto"`` runs a ticker, from the ``scheduler`` query's row:
    yes unless pgque.config shows a scheduler or its jobs."""
    return row is None or all(value is None for value in row[:3])


def ticker_source(source: object) -> Any:
    """What an in-process Ticker can connect with: a connection string or a (threaded)
    pool; None for an async pool or a connection (they carry the batches)."""
    return source if isinstance(source, (str, ConnectionPool)) else None


def ticker_wanted(setting: bool | str, row: tuple[Any, ...] | None) -> bool:
    """The ``ticker`` option decided: True/False as given, ``"auto"`` from the row."""
    return setting if isinstance(setting, bool) else scheduler_absent(row)
