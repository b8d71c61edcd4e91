"""Exit codes, and every failure of a command turned into one line and the code of its kind."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

import click
import psycopg

from pgque.errors import (
    PgqueConnectionError,
    PgqueConsumerNotFound,
    PgqueError,
    PgqueInvalidArgument,
    PgqueMessageNotFound,
    PgqueNotInstalledError,
    PgqueOperationRefused,
    PgqueQueueNotFound,
    from_database_error,
)

__all__ = ["CliError", "ExitCode", "cli_error", "first_line"]


class ExitCode(enum.IntEnum):
    """The exit codes of ``pgque``; scripts and probes may rely on them."""

    OK = 0
    """Success (for ``status``: no check worse than the ``--fail-on`` level)."""
    FAILURE = 1
    """The database refused or failed the operation for another reason."""
    USAGE = 2
    """Bad command line: unknown option, unparsable value, missing ``--force``."""
    CONNECTION = 3
    """No connection: wrong DSN, server down, authentication failed."""
    NOT_INSTALLED = 4
    """pgque is not installed in the database (run ``pgque install``)."""
    NOT_FOUND = 5
    """The queue (or consumer, or dead letter) does not exist."""
    REFUSED = 6
    """The state forbids it, e.g. ``drop-queue`` of a queue that has consumers."""
    UNHEALTHY = 7
    """``status``: a health check is critical (or a warning, with ``--fail-on warning``)."""
    TIMEOUT = 8
    """``drain``: the queue was not empty before the timeout."""


class CliError(click.ClickException):
    """A failure to report as one line on stderr, with the exit code of its kind."""

    def __init__(self, message: str, code: ExitCode = ExitCode.FAILURE) -> None:
        super().__init__(message)
        self.exit_code = int(code)  # type: ignore[misc, unused-ignore]  # per error, not per class


_HINTS: dict[str, str] = {
    "consumers_attached": "unsubscribe its consumers first (`pgque unsubscribe QUEUE CONSUMER`),"
    " or run again with --force",
    "scheduler_missing": "run `pgque ticker` instead (no pg_cron needed), or install pg_cron",
    "scheduler_too_old": "upgrade pg_cron, or run `pgque ticker` instead",
    "not_owner": "connect as the owner of schema pgque or a superuser",
    "ticker_paused": "resume it with `pgque resume QUEUE`",
}


def first_line(text: str) -> str:
    """The first non-empty line of ``text``, stripped."""
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return lines[0] if lines else str(text)


def _first_sentence(text: str) -> str:
    """The first sentence of a message, without its full stop (where a hint follows)."""
    head, _, _ = text.partition(". ")
    return head.rstrip(".")


def cli_error(exc: BaseException, context: Mapping[str, Any] | None = None) -> CliError:
    """Translate an exception raised by a command into a :class:`CliError`."""
    if isinstance(exc, CliError):
        return exc
    if isinstance(exc, PgqueConnectionError) and isinstance(
        exc.__cause__, psycopg.OperationalError
    ):
        exc = exc.__cause__  # the connection broke during a client call: said as before
    if isinstance(exc, psycopg.OperationalError):
        return CliError(
            f"cannot reach PostgreSQL ({first_line(str(exc))}):"
            " check --dsn / PGQUE_DSN or the PG* variables, and that the server runs",
            ExitCode.CONNECTION,
        )
    error = from_database_error(exc) if isinstance(exc, psycopg.Error) else exc
    if not isinstance(error, PgqueError):
        return CliError(first_line(str(exc)) or type(exc).__name__)
    message = first_line(str(error))
    queue = (context or {}).get("queue")
    if isinstance(error, PgqueConnectionError):
        return CliError(
            f"{message}: check --dsn / PGQUE_DSN or the PG* variables", ExitCode.CONNECTION
        )
    if isinstance(error, PgqueNotInstalledError):
        return CliError(f"{message}: run `pgque install` first", ExitCode.NOT_INSTALLED)
    if isinstance(error, PgqueQueueNotFound):
        what = f"no queue named {queue!r}" if queue else message
        return CliError(f"{what}: `pgque queues` lists the queues", ExitCode.NOT_FOUND)
    if isinstance(error, (PgqueConsumerNotFound, PgqueMessageNotFound)):
        return CliError(f"{message}: `pgque consumers` lists the consumers", ExitCode.NOT_FOUND)
    if isinstance(error, PgqueInvalidArgument):
        return CliError(f"invalid argument: {message}", ExitCode.USAGE)
    if error.sqlstate == "42501":
        return CliError(
            f"{message}: this role lacks the privilege (grant it pgque_admin)", ExitCode.FAILURE
        )
    # A refusal is the state forbidding the operation; corruption, a failed
    # ticker or maintenance run and internal errors are failures.
    code = ExitCode.REFUSED if isinstance(error, PgqueOperationRefused) else ExitCode.FAILURE
    hint = _HINTS.get(error.code or "")
    # The hint replaces whatever advice the server's message gives after its
    # first sentence: one message, one piece of advice.
    if hint is not None:
        return CliError(f"{_first_sentence(message)}: {hint}", code)
    return CliError(message, code)
