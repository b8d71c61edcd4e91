"""Fixtures for the SDK tests: a queue with a subscribed consumer, and the consumer twins.

``kind`` runs a test once per consumer twin (``"sync"``: :class:`pgque.Consumer`,
``"async"``: :class:`pgque.AsyncConsumer`); ``start`` runs consumers in
threads (see ``twins.py``) and stops them at teardown.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from twins import KINDS, Running

from _engine import make_queue, one


@pytest.fixture
def queue(conn: psycopg.Connection[Any]) -> str:
    """Queue ``q`` (every ``ticker()`` call ticks) with consumer ``c`` subscribed."""
    make_queue(conn, "q")
    one(conn, "select pgque.subscribe('q', 'c')")
    return "q"


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    """Which consumer twin the test runs against: ``"sync"`` or ``"async"``."""
    return str(request.param)


@pytest.fixture
def start() -> Iterator[Callable[[Any], Running]]:
    """Start consumers in threads; stop (at once) and join them all at teardown."""
    started: list[Running] = []

    def start(consumer: Any) -> Running:
        running = Running(consumer)
        started.append(running)
        return running

    yield start
    for running in started:
        running.stop(now=True)
    for running in started:
        running.thread.join(10)
        assert not running.thread.is_alive(), "a consumer did not stop within 10 s"


_EXPORTER: list[InMemorySpanExporter] = []  # one per process, see spans()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The spans of this test, through the global SDK tracer provider.

    One provider and one in-memory exporter serve the whole process, emptied
    before each test: a processor shut down at a teardown would stay in the
    provider and warn on every later span of the process.
    """
    if not _EXPORTER:
        provider = trace.get_tracer_provider()
        if not isinstance(provider, TracerProvider):
            trace.set_tracer_provider(TracerProvider())
            provider = trace.get_tracer_provider()
        assert isinstance(provider, TracerProvider)
        _EXPORTER.append(InMemorySpanExporter())
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER[0]))
    _EXPORTER[0].clear()
    yield _EXPORTER[0]
    _EXPORTER[0].clear()
