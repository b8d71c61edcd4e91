"""Arrow straight from PostgreSQL: the readers' connections through ADBC.

``adbc-driver-postgresql`` runs a query as binary ``COPY`` and decodes it
into Arrow record batches in C++, with no Python step per row (measured
against psycopg's binary ``COPY`` and pyarrow's CSV reader in
benchmarks/findings.md). Its errors carry the server's fields; they are
raised as pgque errors, the ``pgque:<code>`` of the DETAIL choosing the class
as for psycopg's errors.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import adbc_driver_postgresql.dbapi as adbc  # type: ignore[import-untyped,unused-ignore]
import psycopg
from adbc_driver_manager import Error as AdbcError  # type: ignore[import-untyped,unused-ignore]
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgque.errors import PgqueConnectionError, PgqueError, from_error_fields

__all__ = ["arrow_connect", "mapped_adbc_errors"]

APPLICATION_NAME = "pgque-spark"


def _field(exc: Any, name: bytes) -> str | None:
    for key, value in getattr(exc, "details", None) or ():
        if key == name:
            return bytes(value).decode("utf-8", "replace")
    return None


def pgque_error(exc: Exception) -> PgqueError:
    """The pgque error for an ADBC error (mapped by :func:`pgque.errors.from_error_fields`)."""
    return from_error_fields(
        _field(exc, b"PG_DIAG_MESSAGE_PRIMARY") or str(exc).strip(),
        detail=_field(exc, b"PG_DIAG_MESSAGE_DETAIL"),
        sqlstate=getattr(exc, "sqlstate", None),
        hint=_field(exc, b"PG_DIAG_MESSAGE_HINT"),
    )


@contextmanager
def mapped_adbc_errors() -> Iterator[None]:
    """Raise ADBC errors as pgque errors (chained)."""
    try:
        yield
    except AdbcError as exc:
        raise pgque_error(exc) from exc


@contextmanager
def arrow_connect(dsn: str) -> Iterator[Any]:
    """An ADBC connection inside a transaction (autocommit off); rolled back and closed
    on leaving the block (the readers only read)."""
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise PgqueConnectionError(
            f"pgque: option 'dsn' is not a valid connection string: {exc}"
        ) from None
    if "application_name" not in params:
        dsn = make_conninfo(dsn, application_name=APPLICATION_NAME)
    try:
        conn = adbc.connect(dsn)
    except AdbcError as exc:
        raise PgqueConnectionError(f"pgque: cannot connect with option 'dsn': {exc}") from exc
    try:
        with mapped_adbc_errors():
            yield conn
    finally:
        with suppress(AdbcError):  # a connection that is gone: closing still frees it
            conn.rollback()
        conn.close()
