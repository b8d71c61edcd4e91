"""Fixtures for the differential tests against real PgQ (marker ``pgq``).

PgQ exists only as Debian's ``postgresql-15-pgq3``, so these tests run in the
PostgreSQL 15 run (``PGQUE_TEST_PG=15``). In a run on another server version they are
deselected, with one line in the terminal saying so; on PostgreSQL 15 without the
extension they fail, telling what to install. They are never skipped (the marker hook
is the root conftest's).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from pgqdiff_harness import Session
from pgqdiff_schedule import CONTROL

from _db import VERSION_BOUND

PGQ_MAJOR = VERSION_BOUND["pgq"].major
PGQ_PACKAGE = VERSION_BOUND["pgq"].package


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
