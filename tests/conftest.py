"""Fixtures giving every test a real PostgreSQL database (never a mock, never a skip).

Session: ``pg_server`` (see ``_db.py`` for how it is chosen) and
``template_db``, a database with pgque installed once. Per test: ``db``, a
fresh copy of the template (its DSN), ``empty_db`` without pgque, ``conn``
(autocommit), the ``connect`` factory for more connections to ``db``, and
``connect_to`` for connections to any database. Helpers: ``_db.sql_rows``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

import pgque
from _db import PgServer, ServerUnavailable, server_choice, start_server, unique_name

Connect = Callable[..., psycopg.Connection[Any]]
ConnectTo = Callable[..., psycopg.Connection[Any]]


def pytest_report_header(config: pytest.Config) -> str:
    """Say which server the session will use."""
    return f"pgque test server: {server_choice()}"


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """The session's PostgreSQL server; fails the tests (with what to install) if none."""
    try:
        server = start_server()
    except ServerUnavailable as exc:
        reason = str(exc)
    else:
        reason = ""
    if reason:  # failed outside the except block: one message, no chained tracebacks
        pytest.fail(f"no PostgreSQL server for the tests: {reason}", pytrace=False)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def template_db(pg_server: PgServer) -> Iterator[str]:
    """Name of a session-wide database with pgque installed (via ``pgque.install``)."""
    name = pg_server.create_database(unique_name("pgque_template"))
    try:
        with psycopg.connect(pg_server.dsn(name), autocommit=True) as conn:
            pgque.install(conn)
    except pgque.PgqueInstallError as exc:
        reason = str(exc)
    else:
        reason = ""
    if reason:
        pg_server.drop_database(name)
        pytest.fail(f"installing pgque into the template database failed: {reason}", pytrace=False)
    try:
        yield name
    finally:
        pg_server.drop_database(name)


@pytest.fixture
def db(pg_server: PgServer, template_db: str) -> Iterator[str]:
    """DSN of a fresh database with pgque installed, dropped after the test."""
    name = pg_server.create_database(template=template_db)
    try:
        yield pg_server.dsn(name)
    finally:
        pg_server.drop_database(name)


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
def connect(db: str, connect_to: ConnectTo) -> Connect:
    """Factory ``connect(autocommit=True, dsn=None)`` opening connections (to ``db`` by default).

    Every connection it opened is closed at teardown.
    """

    def connect(autocommit: bool = True, dsn: str | None = None) -> psycopg.Connection[Any]:
        return connect_to(dsn or db, autocommit)

    return connect


@pytest.fixture
def conn(connect: Connect) -> psycopg.Connection[Any]:
    """An autocommit connection to ``db``, closed after the test."""
    return connect()
