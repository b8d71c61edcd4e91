"""What every command shares: exit codes, the connection, errors, value types, output.

Commands are thin: they open a connection with :func:`connect`, check the
install with :func:`require_installed`, call one pgque SQL function or SDK
method, and print the result with :func:`emit_json` or a rich table. Every
failure becomes a :class:`CliError`, which :class:`PgqueGroup` prints as one
line on stderr and turns into the exit code of its kind.
"""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import json
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import click
import psycopg
from psycopg.conninfo import conninfo_to_dict
from rich.console import Console

from pgque.errors import (
    PgqueConnectionError,
    PgqueConsumerNotFound,
    PgqueError,
    PgqueInvalidArgument,
    PgqueMessageNotFound,
    PgqueNotInstalledError,
    PgqueQueueNotFound,
    from_database_error,
)
from pgque.installer import installed_version

__all__ = [
    "CliError",
    "Duration",
    "ExitCode",
    "KeyValue",
    "PgqueCommand",
    "PgqueGroup",
    "Settings",
    "command",
    "connect",
    "emit_json",
    "format_seconds",
    "json_option",
    "out",
    "require_installed",
    "require_queue",
    "settings",
]

F = TypeVar("F", bound=Callable[..., Any])


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


@dataclass
class Settings:
    """The group's options, shared by every command through the click context."""

    dsn: str | None = None
    debug: bool = False


def settings() -> Settings:
    """The :class:`Settings` of the running command."""
    ctx = click.get_current_context()
    obj = ctx.find_object(Settings)
    return obj if obj is not None else Settings()


# -- errors ---------------------------------------------------------------------------

_HINTS: dict[str, str] = {
    "consumers_attached": "unsubscribe its consumers first, or run again with --force",
    "scheduler_missing": "run `pgque ticker` instead (no pg_cron needed), or install pg_cron",
    "scheduler_too_old": "upgrade pg_cron, or run `pgque ticker` instead",
    "not_owner": "connect as the owner of schema pgque or a superuser",
    "ticker_paused": "resume it with `pgque resume QUEUE`",
}


def _where(dsn: str | None) -> str:
    """A short, password-free description of where a DSN points."""
    try:
        parts = conninfo_to_dict(dsn or "")
    except psycopg.Error:
        return "the given DSN"
    shown = [f"{k}={parts[k]}" for k in ("host", "port", "dbname", "user") if parts.get(k)]
    return ", ".join(shown) if shown else "the libpq defaults (PG* variables)"


def _first_line(text: str) -> str:
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return lines[0] if lines else str(text)


def cli_error(exc: BaseException, context: Mapping[str, Any] | None = None) -> CliError:
    """Translate an exception raised by a command into a :class:`CliError`."""
    if isinstance(exc, CliError):
        return exc
    if isinstance(exc, psycopg.OperationalError):
        return CliError(
            f"cannot reach PostgreSQL ({_first_line(str(exc))}):"
            " check --dsn / PGQUE_DSN or the PG* variables, and that the server runs",
            ExitCode.CONNECTION,
        )
    error = from_database_error(exc) if isinstance(exc, psycopg.Error) else exc
    if not isinstance(error, PgqueError):
        return CliError(_first_line(str(exc)) or type(exc).__name__)
    message = _first_line(str(error))
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
    hint = _HINTS.get(error.code or "")
    if hint is not None:
        return CliError(f"{message}: {hint}", ExitCode.REFUSED)
    if error.code is not None:
        return CliError(message, ExitCode.REFUSED)
    return CliError(message, ExitCode.FAILURE)


class PgqueCommand(click.Command):
    """A click command whose errors become :class:`CliError` (traceback with ``--debug``)."""

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command, translating pgque, psycopg and other errors."""
        obj = ctx.find_object(Settings)
        debug = obj is not None and obj.debug
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort):
            raise
        except click.ClickException as exc:
            if debug and exc.__cause__ is not None:
                traceback.print_exception(exc.__cause__)
            raise
        except Exception as exc:
            if debug:
                traceback.print_exc()
            raise cli_error(exc, ctx.params) from exc


class PgqueGroup(click.Group):
    """The ``pgque`` group: one line on stderr and a distinct exit code for every failure."""

    command_class = PgqueCommand

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the CLI; in standalone mode exit with an :class:`ExitCode`."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            result = super().main(args, prog_name or "pgque", complete_var, False, **extra)
        except click.exceptions.Abort:
            click.echo("pgque: interrupted", err=True)
            sys.exit(130)
        except click.UsageError as exc:
            where = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx is not None else ""
            click.echo(f"pgque: error: {exc.format_message()}{where}", err=True)
            sys.exit(ExitCode.USAGE)
        except click.ClickException as exc:
            click.echo(f"pgque: error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        sys.exit(result if isinstance(result, int) else ExitCode.OK)


# -- connection -----------------------------------------------------------------------


def connect(*, autocommit: bool = True) -> psycopg.Connection[Any]:
    """Open a connection from ``--dsn`` / ``PGQUE_DSN`` or the libpq variables."""
    dsn = settings().dsn or ""
    try:
        return psycopg.connect(dsn, autocommit=autocommit, connect_timeout=10)
    except psycopg.ProgrammingError as exc:  # an unparsable conninfo string
        raise CliError(
            f"invalid DSN ({_first_line(str(exc))}): give a libpq connection string or URI,"
            " e.g. -d postgresql://user@localhost/mydb",
            ExitCode.USAGE,
        ) from exc
    except psycopg.OperationalError as exc:
        raise CliError(
            f"cannot connect to PostgreSQL at {_where(dsn)}: {_first_line(str(exc))}:"
            " check --dsn / PGQUE_DSN or the PG* variables, and that the server runs",
            ExitCode.CONNECTION,
        ) from exc


def require_installed(conn: psycopg.Connection[Any]) -> str:
    """The installed pgque version; a NOT_INSTALLED error when pgque is missing."""
    version = installed_version(conn)
    if version is None:
        raise CliError(
            f"pgque is not installed in database {conn.info.dbname!r}: run `pgque install` first",
            ExitCode.NOT_INSTALLED,
        )
    return version


def require_queue(conn: psycopg.Connection[Any], queue: str) -> None:
    """Raise a NOT_FOUND error unless the queue exists (``pgque.get_queue_info``)."""
    row = conn.execute("select 1 from pgque.get_queue_info(%s)", (queue,)).fetchone()
    if row is None:
        raise CliError(
            f"no queue named {queue!r}: `pgque queues` lists the queues", ExitCode.NOT_FOUND
        )


@contextmanager
def session(*, need_install: bool = True) -> Iterator[psycopg.Connection[Any]]:
    """An autocommit connection (checked for a pgque install), closed afterwards."""
    conn = connect()
    try:
        if need_install:
            require_installed(conn)
        yield conn
    finally:
        conn.close()


def rows_as_dicts(cur: psycopg.Cursor[Any]) -> list[dict[str, Any]]:
    """The cursor's remaining rows as dicts keyed by column name."""
    names = [d.name for d in cur.description or ()]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def query_dicts(
    conn: psycopg.Connection[Any], statement: Any, params: Sequence[Any] | None = None
) -> list[dict[str, Any]]:
    """Run a statement and return its rows as dicts."""
    return rows_as_dicts(conn.execute(statement, params))


# -- value types ----------------------------------------------------------------------

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


if TYPE_CHECKING:
    _DurationBase = click.ParamType[float]  # type: ignore[type-arg, unused-ignore]
    _KeyValueBase = click.ParamType[tuple[str, str]]  # type: ignore[type-arg, unused-ignore]
else:  # ParamType is generic only in recent click
    _DurationBase = _KeyValueBase = click.ParamType


class Duration(_DurationBase):
    """A duration: ``500ms``, ``5s``, ``2m``, ``1h30m``, ``7d``; a bare number is seconds."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The duration in seconds, as a float."""
        if isinstance(value, (int, float)):
            return float(value)
        text = str(value).strip().lower().replace(" ", "")
        try:
            return float(text)
        except ValueError:
            pass
        pos, total = 0, 0.0
        for match in _DURATION_PART.finditer(text):
            if match.start() != pos:
                break
            total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
            pos = match.end()
        if not text or pos != len(text):
            self.fail(f"{value!r} is not a duration: write e.g. 30s, 5m, 1h30m or 7d", param, ctx)
        return total


class KeyValue(_KeyValueBase):
    """``key=value``, as a (key, value) pair of strings."""

    name = "key=value"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """Split at the first ``=``; the key must not be empty."""
        if isinstance(value, tuple):
            return value
        key, sep, text = str(value).partition("=")
        if not sep or not key.strip():
            self.fail(f"{value!r} is not key=value: write e.g. --option max_retries=3", param, ctx)
        return key.strip(), text


# -- output ---------------------------------------------------------------------------


def _width(stream: Any) -> int | None:
    """Rich's own width on a terminal or with COLUMNS set; else wide enough for the tables."""
    if os.environ.get("COLUMNS") or (hasattr(stream, "isatty") and stream.isatty()):
        return None
    return 120


def out() -> Console:
    """A rich console on the current stdout (colour only on a terminal)."""
    return Console(file=sys.stdout, highlight=False, width=_width(sys.stdout))


def err() -> Console:
    """A rich console on the current stderr."""
    return Console(file=sys.stderr, highlight=False, width=_width(sys.stderr))


def json_option(func: F) -> F:
    """The ``--json`` flag of a command: print machine-readable output instead of text."""
    return click.option(
        "--json", "as_json", is_flag=True, help="Print JSON (documented shape) instead of text."
    )(func)


def _json_default(value: Any) -> Any:
    if isinstance(value, dt.timedelta):
        return round(value.total_seconds(), 6)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def to_json(value: Any, *, indent: int | None = 2) -> str:
    """JSON text: intervals as seconds, timestamps as ISO 8601, numerics as numbers."""
    return json.dumps(value, default=_json_default, indent=indent, ensure_ascii=False)


def emit_json(value: Any, *, lines: bool = False) -> None:
    """Print a JSON document (``lines``: one compact line, for streams)."""
    click.echo(to_json(value, indent=None if lines else 2))
    if lines:
        sys.stdout.flush()


def seconds(value: Any) -> float | None:
    """Seconds of an interval (or None)."""
    if value is None:
        return None
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    return float(value)


def format_seconds(value: Any, *, empty: str = "-") -> str:
    """A compact duration for tables: ``850ms``, ``2.1s``, ``3m45s``, ``1h23m``, ``2d4h``."""
    secs = seconds(value)
    if secs is None:
        return empty
    if secs == 0:
        return "0s"
    if secs < 1:
        return f"{secs * 1000:.0f}ms"
    if secs < 60:
        return f"{secs:.1f}s"
    whole = int(secs)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d{whole % 86400 // 3600}h"


def format_rate(value: Any) -> str:
    """Events per second for tables: ``150/s``, ``0.4/s``."""
    if value is None:
        return "-"
    rate = float(value)
    return f"{rate:.0f}/s" if rate >= 10 or rate == 0 else f"{rate:.1f}/s"


STATUS_STYLE = {"ok": "green", "warning": "yellow", "critical": "bold red"}
STATUS_RANK = {"ok": 0, "warning": 1, "critical": 2}


def worst(statuses: Iterator[str] | Sequence[str]) -> str:
    """The worst of ok / warning / critical (``ok`` when there is none)."""
    result = "ok"
    for status in statuses:
        if STATUS_RANK.get(status, 0) > STATUS_RANK[result]:
            result = status
    return result


def styled(status: str) -> str:
    """``status`` in rich markup, coloured by health."""
    style = STATUS_STYLE.get(status)
    return f"[{style}]{status}[/]" if style else status


def command(name: str, **kwargs: Any) -> Callable[[Callable[..., Any]], click.Command]:
    """``click.command`` with the error translation of :class:`PgqueCommand`."""
    return click.command(name, cls=PgqueCommand, **kwargs)
