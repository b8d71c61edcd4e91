"""Fixtures giving every test a real PostgreSQL database (never a mock, never a skip).

The suite runs on pgque's own pytest plugin (:mod:`pgque.testing`), as a
user's suite does: its session server (``pgque_server``), its template
database with pgque installed (``pgque_template``) and a fresh copy per test
(``pgque_db``). The suite's names for them: ``pg_server`` (the plugin's
server, with version, binaries and psql: ``_db.PgServer``), ``template_db``,
``db`` (the copy's DSN), ``conn`` (an autocommit connection to it), the
``connect`` factory for more, ``connect_to`` for connections to any
database, and ``empty_db``, a fresh database without pgque. Helpers:
``_db.sql_rows``, ``_wait.wait_for``.

One marker hook: the tests marked with a marker of ``_db.VERSION_BOUND``
(``pgq``, ``pg_cron``) run on that server version only and are deselected
elsewhere, with one line saying so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from _db import VERSION_BOUND, PgServer, run_server_major, server_choice
from pgque.testing import PgqueTestDatabase, PgqueTestServer

Connect = Callable[..., psycopg.Connection[Any]]
ConnectTo = Callable[..., psycopg.Connection[Any]]

_DESELECTED = pytest.StashKey[list[str]]()


def pytest_configure(config: pytest.Config) -> None:
    """Load pgque's plugin if pip did not register it, and declare the version markers."""
    if not config.pluginmanager.has_plugin("pgque"):
        config.pluginmanager.import_plugin("pgque.testing")
    for marker, bound in VERSION_BOUND.items():
        config.addinivalue_line(
            "markers", f"{marker}: needs {bound.package} (PGQUE_TEST_PG={bound.major})"
        )


def pytest_report_header(config: pytest.Config) -> str:
    """Say which server the session will use."""
    return f"pgque test server: {server_choice()}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the tests of another server version's markers (``VERSION_BOUND``)."""
    major = run_server_major()
    if major is None:
        return
    notes: list[str] = []
    for marker, bound in VERSION_BOUND.items():
        if major == bound.major:
            continue
        deselected = [item for item in items if item.get_closest_marker(marker) is not None]
        if not deselected:
            continue
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if item.get_closest_marker(marker) is None]
        notes.append(
            f"{bound.what}: {len(deselected)} deselected on PostgreSQL {major};"
            f" they run in the PostgreSQL {bound.major} run (PGQUE_TEST_PG={bound.major},"
            f" needs {bound.package})"
        )
    config.stash[_DESELECTED] = notes


def pytest_report_collectionfinish(config: pytest.Config) -> list[str]:
    """One line per group of deselected version-bound tests."""
    return config.stash.get(_DESELECTED, [])


@pytest.fixture(scope="session")
def pg_server(pgque_server: PgqueTestServer) -> PgServer:
    """The session's PostgreSQL server (the plugin's), with version, binaries and psql."""
    return PgServer(pgque_server)


@pytest.fixture(scope="session")
def template_db(pgque_template: str) -> str:
    """Name of the session's database with pgque installed (via ``pgque.install``)."""
    return pgque_template


@pytest.fixture
def db(pgque_db: PgqueTestDatabase) -> str:
    """DSN of a fresh database with pgque installed, dropped after the test."""
    return pgque_db.dsn


@pytest.fixture
def empty_db(pg_server: PgServer) -> Iterator[str]:
    """DSN of a fresh database without pgque, dropped after the test."""
    name = pg_server.create_database()
    try:
        yield pg_server.dsn(name)
    finally:
        pg_server.drop_database(name)


@pytest.fixture
def connect_to() -> Iterator[ConnectTo]:
    """Factory ``connect_to(dsn, autocommit=True)`` for any database; closes all at teardown."""
    opened: list[psycopg.Connection[Any]] = []

    def connect_to(dsn: str, autocommit: bool = True) -> psycopg.Connection[Any]:
        conn = psycopg.connect(dsn, autocommit=autocommit)
        opened.append(conn)
        return conn

    try:
        yield connect_to
    finally:
        for conn in opened:
            conn.close()


@pytest.fixture
def connect(pgque_db: PgqueTestDatabase, connect_to: ConnectTo) -> Connect:
    """Factory ``connect(autocommit=True, dsn=None)`` opening connections (to ``db`` by default).

    Every connection it opened is closed at teardown.
    """

    def connect(autocommit: bool = True, dsn: str | None = None) -> psycopg.Connection[Any]:
        if dsn is None:
            return pgque_db.connect(autocommit=autocommit)
        return connect_to(dsn, autocommit)

    return connect


@pytest.fixture
def conn(pgque_conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    """An autocommit connection to ``db``, closed after the test."""
    return pgque_conn
