"""Fixtures for the differential tests against real PgQ (marker ``pgq``).

PgQ exists only as Debian's ``postgresql-15-pgq3``, so these tests run in the
PostgreSQL 15 run (``PGQUE_TEST_PG=15``). In a run on another server version they are
deselected, with one line in the terminal saying so; on PostgreSQL 15 without the
extension they fail, telling what to install. They are never skipped.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from pgqdiff_harness import Session
from pgqdiff_schedule import CONTROL

PGQ_MAJOR = 15
PGQ_PACKAGE = "postgresql-15-pgq3"
_DESELECTED = pytest.StashKey[str]()


def _run_server_major() -> int | None:
    """The major version the run's server will have, or None if unknown before it starts."""
    dsn = os.environ.get("PGQUE_TEST_DSN")
    if dsn:
        try:
            with psycopg.connect(dsn, connect_timeout=10) as conn:
                return conn.info.server_version // 10000
        except psycopg.Error:
            return None  # the pg_server fixture reports the problem
    try:
        return int(os.environ.get("PGQUE_TEST_PG") or "18")
    except ValueError:
        return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the ``pgq`` tests unless the run's server is PostgreSQL 15."""
    major = _run_server_major()
    if major is None or major == PGQ_MAJOR:
        return
    deselected = [item for item in items if item.get_closest_marker("pgq") is not None]
    if not deselected:
        return
    config.hook.pytest_deselected(items=deselected)
    items[:] = [item for item in items if item.get_closest_marker("pgq") is None]
    config.stash[_DESELECTED] = (
        f"pgq differential tests: {len(deselected)} deselected on PostgreSQL {major};"
        f" they run in the PostgreSQL {PGQ_MAJOR} run (PGQUE_TEST_PG={PGQ_MAJOR},"
        f" needs {PGQ_PACKAGE})"
    )


def pytest_report_collectionfinish(config: pytest.Config) -> str | list[str]:
    return config.stash.get(_DESELECTED, [])


@pytest.fixture
def pgq_db(db: str, conn: psycopg.Connection[Any]) -> str:
    """DSN of a fresh database with pgque installed and ``CREATE EXTENSION pgq`` done."""
    major = conn.info.server_version // 10000
    if major != PGQ_MAJOR:
        pytest.fail(
            f"the pgq differential tests need PostgreSQL {PGQ_MAJOR} (PGQUE_TEST_PG={PGQ_MAJOR});"
            f" this server is {major}",
            pytrace=False,
        )
    row = conn.execute("select 1 from pg_available_extensions where name = 'pgq'").fetchone()
    if row is None:
        pytest.fail(
            f"PostgreSQL {PGQ_MAJOR} has no pgq extension: apt-get install {PGQ_PACKAGE}",
            pytrace=False,
        )
    conn.execute("create extension pgq")
    return db


@pytest.fixture
def sessions(
    pgq_db: str, connect: Callable[..., psycopg.Connection[Any]]
) -> Iterator[Callable[[int], list[Session]]]:
    """Factory: ``sessions(n)`` opens the control session plus ``n`` producer sessions."""

    def open_sessions(producers: int) -> list[Session]:
        names = ["control"] + [f"producer{n}" for n in range(1, producers + 1)]
        opened = [Session(name, connect()) for name in names]
        assert opened[CONTROL].name == "control"
        return opened

    yield open_sessions
