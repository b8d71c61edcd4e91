"""Fixtures for the tests through a real PgBouncer in transaction mode (``_bouncer.py``).

``bouncer`` is the session's PgBouncer in front of the suite's server;
``pooled`` is the test database (``db``) reached through it, with three
server sessions open behind it, so that consecutive transactions of one
client land on different server sessions (``server_round_robin = 1``).
The SDK tests' twins (``tests/sdk/twins.py``) run the consumers.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "sdk"))

from _bouncer import Bouncer, running
from twins import KINDS, Running

from _db import PgServer


@pytest.fixture(scope="session")
def bouncer(pg_server: PgServer) -> Iterator[Bouncer]:
    """PgBouncer (transaction mode, round robin) in front of the session's server."""
    with running(pg_server.admin_dsn) as started:
        yield started


@pytest.fixture
def pooled(bouncer: Bouncer, db: str) -> str:
    """The test database through the bouncer, three server sessions behind it."""
    assert len(bouncer.spread(db, 3)) == 3
    return bouncer.dsn(db)


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    """Which twin the test runs against: ``"sync"`` or ``"async"``."""
    return str(request.param)


@pytest.fixture
def start() -> Iterator[Callable[[Any], Running]]:
    """Start consumers in threads; stop (at once) and join them all at teardown."""
    started: list[Running] = []

    def start(consumer: Any) -> Running:
        started.append(Running(consumer))
        return started[-1]

    yield start
    for one in started:
        one.stop(now=True)
    for one in started:
        one.thread.join(15)
