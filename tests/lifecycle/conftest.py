"""Fixtures for the lifecycle and observability tests.

The tests marked ``pg_cron`` need Debian's ``postgresql-15-cron`` (pg_cron 1.4.2) and
run in the PostgreSQL 15 run (``PGQUE_TEST_PG=15``) on their own throwaway clusters,
started once per session with pg_cron preloaded:

* ``cron_cluster``: pg_cron runs jobs in background workers
  (``cron.use_background_workers = on``);
* ``cron_cluster_libpq``: pg_cron opens a libpq connection per job, over TCP to
  127.0.0.1 (``cron.host``; the cluster also listens there).

pg_cron works in one database per cluster (``cron.database_name``), so each test
gets that database reset (jobs, run history, schemas) with pgque freshly installed.
In runs on another server version the ``pg_cron`` tests are deselected, with one
terminal line saying so; on PostgreSQL 15 without pg_cron they fail, saying what to
install. They are never skipped (the marker hook is the root conftest's).

Other fixtures: ``timetable`` installs a stand-in for pg_timetable's job API
(``lifecycle_helpers.TIMETABLE_STAND_IN``) into the test database; ``new_role`` makes
NOLOGIN roles that are dropped afterwards.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from lifecycle_helpers import CRON_DB, CronServer, NewRole, install_timetable
from psycopg import sql

from _db import VERSION_BOUND
from pgque._cluster import ClusterError, TempCluster, find_bin_dir

CRON_MAJOR = VERSION_BOUND["pg_cron"].major
CRON_PACKAGE = VERSION_BOUND["pg_cron"].package


# -- pg_cron clusters ---------------------------------------------------------


def _cron_library_missing() -> str:
    """Why pg_cron cannot be loaded into PostgreSQL 15 here ('' if it can)."""
    try:
        bin_dir = find_bin_dir(CRON_MAJOR)
    except ClusterError as exc:
        return str(exc)
    if not (bin_dir.parent / "lib" / "pg_cron.so").is_file():
        return (
            f"pg_cron is not installed for PostgreSQL {CRON_MAJOR}: apt-get install {CRON_PACKAGE}"
        )
    return ""


def _start_cron_server(mode: str) -> CronServer:
    reason = _cron_library_missing()
    if reason:
        pytest.fail(reason, pytrace=False)
    settings: dict[str, object] = {
        "shared_preload_libraries": "pg_cron",
        "cron.database_name": CRON_DB,
        "max_worker_processes": 32,
    }
    tcp = False
    if mode == "background workers":
        settings["cron.use_background_workers"] = True
    else:
        # pg_cron connects to cron.host at the server's port; 'localhost' may
        # resolve to ::1, on which the cluster does not listen.
        settings["cron.host"] = "127.0.0.1"
        tcp = True
    try:
        cluster = TempCluster(CRON_MAJOR, settings=settings, tcp=tcp).start()
    except ClusterError as exc:
        pytest.fail(
            f"cannot start PostgreSQL {CRON_MAJOR} with pg_cron ({exc});"
            f" is {CRON_PACKAGE} installed? apt-get install {CRON_PACKAGE}",
            pytrace=False,
        )
    try:
        with psycopg.connect(cluster.dsn(), autocommit=True) as admin:
            admin.execute(sql.SQL("create database {}").format(sql.Identifier(CRON_DB)))
        with psycopg.connect(cluster.dsn(CRON_DB), autocommit=True) as conn:
            conn.execute("create extension pg_cron")
    except BaseException:
        cluster.stop()
        raise
    return CronServer(cluster, mode)


@pytest.fixture(scope="session")
def cron_cluster() -> Iterator[CronServer]:
    """PostgreSQL 15 with pg_cron running jobs in background workers."""
    server = _start_cron_server("background workers")
    try:
        yield server
    finally:
        server.cluster.stop()


@pytest.fixture(scope="session")
def cron_cluster_libpq() -> Iterator[CronServer]:
    """PostgreSQL 15 with pg_cron running jobs over libpq connections (TCP)."""
    server = _start_cron_server("libpq")
    try:
        yield server
    finally:
        server.cluster.stop()


@pytest.fixture
def cron_db(cron_cluster: CronServer) -> str:
    """DSN of the pg_cron database of ``cron_cluster``, reset, with pgque installed."""
    return cron_cluster.reset()


# -- pg_timetable stand-in ----------------------------------------------------


@pytest.fixture
def timetable(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    """Install the pg_timetable stand-in into ``db``; return the ``conn`` it used."""
    install_timetable(conn)
    return conn


# -- roles and messages -------------------------------------------------------


@pytest.fixture
def new_role(conn: psycopg.Connection[Any]) -> Iterator[NewRole]:
    """Factory ``new_role(*member_of)``: a fresh NOLOGIN role, dropped after the test."""
    made: list[str] = []

    def make(*member_of: str) -> str:
        role = f"t_lc_{uuid.uuid4().hex[:10]}"
        conn.execute(sql.SQL("create role {} nologin").format(sql.Identifier(role)))
        made.append(role)
        for parent in member_of:
            conn.execute(
                sql.SQL("grant {} to {}").format(sql.Identifier(parent), sql.Identifier(role))
            )
        return role

    try:
        yield make
    finally:
        with contextlib.suppress(psycopg.Error):
            conn.execute("reset role")
        for role in made:
            with contextlib.suppress(psycopg.Error):
                conn.execute(sql.SQL("drop owned by {}").format(sql.Identifier(role)))
                conn.execute(sql.SQL("drop role {}").format(sql.Identifier(role)))
