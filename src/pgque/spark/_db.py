"""Connections and SQL calls of the Spark connector.

Connections are opened where they are used (in ``read``, ``write``,
``commit`` and the driver-side callbacks) and closed before returning:
Spark pickles readers and writers, and a psycopg connection cannot be.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from pgque._executor import fetch_one, mapped_errors
from pgque.errors import PgqueConnectionError, PgqueError

__all__ = ["call", "connect", "mapped_errors"]

APPLICATION_NAME = "pgque-spark"


@contextmanager
def connect(dsn: str, *, autocommit: bool = True) -> Iterator[psycopg.Connection[Any]]:
    """Open a connection for one callback; closed (and committed) on leaving the block."""
    extra: dict[str, Any] = {}
    try:
        if "application_name" not in conninfo_to_dict(dsn):
            extra["application_name"] = APPLICATION_NAME
    except psycopg.ProgrammingError as exc:
        raise PgqueConnectionError(
            f"pgque: option 'dsn' is not a valid connection string: {exc}"
        ) from None
    try:
        conn = psycopg.connect(dsn, autocommit=autocommit, **extra)
    except psycopg.Error as exc:
        raise PgqueConnectionError(f"pgque: cannot connect with option 'dsn': {exc}") from exc
    try:
        with mapped_errors(), conn:
            yield conn
    finally:
        conn.close()


def call(dsn: str, name: str, *params: Any) -> Any:
    """Run the one-value statement ``name`` of queries.sql in its own autocommit
    connection; return the value."""
    with connect(dsn) as conn:
        row = fetch_one(conn, name, params or None)
    if row is None:
        raise PgqueError(f"no row from the statement {name!r}")
    return row[0]
