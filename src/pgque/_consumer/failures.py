"""What kind of error ended a consumer's work, and what to tell its user (no I/O).

Connection errors (:func:`is_connection_error`) always mean reconnecting; setup
errors (no subscription, no queue, pgque not installed, no grant, a pooler met
without ``pooler=True``) are not transient: :func:`setup_problem` spots them and
:func:`setup_error` says what to run, and ``start()`` raises it at once.
"""

from __future__ import annotations

import shlex

import psycopg

from pgque.errors import (
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

__all__ = [
    "connection_lost",
    "describe",
    "is_connection_error",
    "setup_error",
    "setup_problem",
]


def describe(exc: BaseException) -> str:
    """The first line of an error's text (its class name when it has none)."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


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


def connection_lost(exc: BaseException | None) -> BaseException:
    """What ends a batch whose connection broke under a handler (that raised ``exc``):
    ``exc`` itself when it says so, else a :class:`PgqueConnectionError`. The runner
    logs it as one warning and reconnects; the server rolled the batch back."""
    if exc is not None and is_connection_error(exc):
        return exc
    cause = f" ({describe(exc)})" if exc is not None else ""
    return PgqueConnectionError(f"the batch's connection was lost{cause}")


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
