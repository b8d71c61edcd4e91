"""The suite's throwaway PostgreSQL servers and fresh databases on them.

PostgreSQL 15 (Debian's, where PgQ 3.5 is packaged) serves every comparison;
the embedded 18 serves pgque-only rows. Both keep the durability settings a
production server has (``fsync``, ``synchronous_commit`` and full page
writes on) unlike the test clusters; sessions turn ``synchronous_commit``
off where a row says so. PostgreSQL 15 also listens on 127.0.0.1 at a free
port for JDBC (Spark's baseline).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

import pgque
from pgque._cluster import TempCluster

SETTINGS: dict[str, str] = {
    "fsync": "on",
    "full_page_writes": "on",
    "synchronous_commit": "on",
    "shared_buffers": "256MB",
    "max_wal_size": "4GB",
    "checkpoint_timeout": "30min",
    "max_connections": "200",
}
"""Server settings of both clusters (recorded in the report with the rest)."""

REPORTED_SETTINGS = (
    "server_version", "shared_buffers", "fsync", "synchronous_commit", "full_page_writes",
    "wal_level", "max_wal_size", "checkpoint_timeout", "autovacuum", "autovacuum_naptime",
    "work_mem", "max_connections", "shared_preload_libraries",
)  # fmt: skip


class Clusters:
    """Starts each server on first use; stops them all on exit."""

    def __init__(self) -> None:
        self._servers: dict[int, TempCluster] = {}

    def server(self, version: int) -> TempCluster:
        """The running cluster of ``version`` (15 or 18), started on first use."""
        if version not in self._servers:
            settings = dict(SETTINGS)
            if version == 15:
                settings["shared_preload_libraries"] = "pg_stat_statements"
            self._servers[version] = TempCluster(version, settings=settings, tcp=version == 15)
            self._servers[version].start()
        return self._servers[version]

    def database(
        self, name: str, *, version: int = 15, pgq: bool = False, pgque_schema: bool = True
    ) -> str:
        """A fresh database ``name`` (dropped first if it exists); its DSN.

        Args:
            name: Database name.
            version: 15 or 18.
            pgq: Also ``CREATE EXTENSION pgq`` (15 only).
            pgque_schema: Install pgque into it.
        """
        server = self.server(version)
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            conn.execute(sql.SQL("drop database if exists {} with (force)").format(
                sql.Identifier(name)))  # fmt: skip
            conn.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
        dsn = server.dsn(name)
        with psycopg.connect(dsn, autocommit=True) as conn:
            if pgq:
                conn.execute("create extension pgq")
            if pgque_schema:
                pgque.install(conn)
        return dsn

    def settings(self) -> dict[str, dict[str, Any]]:
        """Per running server, the settings the report shows."""
        out: dict[str, dict[str, Any]] = {}
        for version, server in sorted(self._servers.items()):
            with psycopg.connect(server.dsn(), autocommit=True) as conn:
                rows = conn.execute(
                    "select name, current_setting(name) from pg_settings"
                    " where name = any(%s) order by name",
                    (list(REPORTED_SETTINGS),),
                ).fetchall()
            out[str(version)] = dict(rows)
        return out

    def close(self) -> None:
        """Stop every server."""
        for server in self._servers.values():
            server.stop()
        self._servers.clear()

    def __enter__(self) -> Clusters:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
