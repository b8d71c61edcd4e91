"""Fixtures for the SDK tests: a queue with a subscribed consumer."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from _engine import make_queue, one


@pytest.fixture
def queue(conn: psycopg.Connection[Any]) -> str:
    """Queue ``q`` (every ``ticker()`` call ticks) with consumer ``c`` subscribed."""
    make_queue(conn, "q")
    one(conn, "select pgque.subscribe('q', 'c')")
    return "q"
