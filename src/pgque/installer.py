"""Install, upgrade and remove the pgque schema.

The schema ships as one generated SQL file, ``pgque/sql/pgque.sql``. It holds
its own ``begin; ... commit;`` and takes an advisory lock, so installing is
idempotent, atomic, and safe to run concurrently: the same file also works
with ``psql -f``.
"""

from __future__ import annotations

import contextlib
from importlib import resources
from typing import Any, cast

import psycopg
from psycopg.pq import TransactionStatus

from pgque.errors import PgqueConnectionError, PgqueInstallError

__all__ = ["install", "installed_version", "sql_text", "uninstall", "uninstall_sql_text"]

_INSTALL_FILE = "pgque.sql"
_UNINSTALL_FILE = "pgque_uninstall.sql"

# One catalog lookup, which cannot fail when the schema or function is missing.
_HAS_VERSION_FUNCTION = (
    "select exists (select 1 from pg_catalog.pg_proc p"
    " join pg_catalog.pg_namespace n on n.oid = p.pronamespace"
    " where n.nspname = 'pgque' and p.proname = 'version' and p.pronargs = 0)"
)


def _read_sql(name: str) -> str:
    return (resources.files("pgque") / "sql" / name).read_text(encoding="utf-8")


def sql_text() -> str:
    """Return the install SQL (the packaged ``pgque.sql``) as text."""
    return _read_sql(_INSTALL_FILE)


def uninstall_sql_text() -> str:
    """Return the uninstall SQL (the packaged ``pgque_uninstall.sql``) as text."""
    return _read_sql(_UNINSTALL_FILE)


def install(conn: psycopg.Connection[Any]) -> str:
    """Install or upgrade the pgque schema in the connection's database.

    Installing again over an existing install is safe and keeps the data. The
    connection must not be inside a transaction; its autocommit setting is
    restored afterwards.

    Args:
        conn: An open psycopg connection, idle (no transaction in progress).

    Returns:
        The installed version, as reported by ``pgque.version()``.

    Raises:
        PgqueConnectionError: The connection is closed.
        PgqueInstallError: The connection is inside a transaction, or the SQL
            failed (the server's message is included; nothing was changed).

    Example:
        >>> with psycopg.connect(dsn) as conn:  # doctest: +SKIP
        ...     pgque.install(conn)
        '0.1.0'
    """
    version = _run_script(conn, sql_text(), "install", want_version=True)
    if version is None:
        raise PgqueInstallError("pgque install ran, but pgque.version() is missing afterwards")
    return version


def uninstall(conn: psycopg.Connection[Any]) -> None:
    """Drop the pgque schema and everything in it from the connection's database.

    The cluster-wide roles ``pgque_reader``, ``pgque_writer`` and
    ``pgque_admin`` are kept: other databases may use them.

    Args:
        conn: An open psycopg connection, idle (no transaction in progress).

    Raises:
        PgqueConnectionError: The connection is closed.
        PgqueInstallError: The connection is inside a transaction, or the SQL failed.
    """
    _run_script(conn, uninstall_sql_text(), "uninstall", want_version=False)


def installed_version(conn: psycopg.Connection[Any]) -> str | None:
    """Return the installed pgque version, or None when pgque is not installed.

    "Not installed" means schema ``pgque`` or function ``pgque.version()`` is
    missing; that is checked in the catalog, so no error is provoked.

    Args:
        conn: An open psycopg connection.
    """
    row = conn.execute(_HAS_VERSION_FUNCTION).fetchone()
    if row is None or not row[0]:
        return None
    row = conn.execute("select pgque.version()::text").fetchone()
    return None if row is None else cast("str | None", row[0])


def _run_script(
    conn: psycopg.Connection[Any], text: str, action: str, *, want_version: bool
) -> str | None:
    """Run a multi-statement script that manages its own transaction."""
    if conn.closed:
        raise PgqueConnectionError(f"cannot {action} pgque: the connection is closed")
    status = conn.info.transaction_status
    if status != TransactionStatus.IDLE:
        state = {
            TransactionStatus.INTRANS: "inside a transaction",
            TransactionStatus.INERROR: "inside a failed transaction",
            TransactionStatus.ACTIVE: "busy running a command",
        }.get(status, "not usable")
        raise PgqueInstallError(
            f"cannot {action} pgque: the connection is {state};"
            " commit or roll back first (the script runs its own transaction)"
        )
    saved_autocommit = conn.autocommit
    conn.autocommit = True
    try:
        # Without parameters psycopg sends the whole text through the simple
        # query protocol, which accepts many statements in one string.
        conn.execute(text, prepare=False)
        return installed_version(conn) if want_version else None
    except psycopg.Error as exc:
        if not conn.closed and conn.info.transaction_status in (
            TransactionStatus.INERROR,
            TransactionStatus.INTRANS,
        ):
            # If the connection broke, the server discards the transaction anyway.
            with contextlib.suppress(psycopg.Error):
                conn.execute("rollback")
        sqlstate = f" [{exc.sqlstate}]" if exc.sqlstate else ""
        raise PgqueInstallError(f"pgque {action} failed{sqlstate}: {exc}") from exc
    finally:
        if not conn.closed and conn.info.transaction_status == TransactionStatus.IDLE:
            conn.autocommit = saved_autocommit
