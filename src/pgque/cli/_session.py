"""The database of a command: a connection from ``--dsn`` / ``PGQUE_DSN`` and a client on it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from pgque._executor import fetch_one
from pgque.cli._command import settings
from pgque.cli._errors import CliError, ExitCode, first_line
from pgque.client import PgqueClient
from pgque.installer import installed_version

__all__ = ["connect", "require_installed", "require_queue", "session"]


def _where(dsn: str | None) -> str:
    """A short, password-free description of where a DSN points."""
    try:
        parts = conninfo_to_dict(dsn or "")
    except psycopg.Error:
        return "the given DSN"
    shown = [f"{k}={parts[k]}" for k in ("host", "port", "dbname", "user") if parts.get(k)]
    return ", ".join(shown) if shown else "the libpq defaults (PG* variables)"


def connect(*, autocommit: bool = True) -> psycopg.Connection[Any]:
    """Open a connection from ``--dsn`` / ``PGQUE_DSN`` or the libpq variables."""
    dsn = settings().dsn or ""
    try:
        return psycopg.connect(dsn, autocommit=autocommit, connect_timeout=10)
    except psycopg.ProgrammingError as exc:  # an unparsable conninfo string
        raise CliError(
            f"invalid DSN ({first_line(str(exc))}): give a libpq connection string or URI,"
            " e.g. -d postgresql://user@localhost/mydb",
            ExitCode.USAGE,
        ) from exc
    except psycopg.OperationalError as exc:
        raise CliError(
            f"cannot connect to PostgreSQL at {_where(dsn)}: {first_line(str(exc))}:"
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


def require_queue(client: PgqueClient, queue: str) -> None:
    """Raise a NOT_FOUND error unless the queue exists."""
    row = fetch_one(client.conn, "queue_exists", (queue,))
    if not (row and row[0]):
        raise CliError(
            f"no queue named {queue!r}: `pgque queues` lists the queues", ExitCode.NOT_FOUND
        )


@contextmanager
def session(*, need_install: bool = True) -> Iterator[PgqueClient]:
    """A client on an autocommit connection (checked for a pgque install), closed afterwards."""
    conn = connect()
    try:
        if need_install:
            require_installed(conn)
        yield PgqueClient(conn)
    finally:
        conn.close()
