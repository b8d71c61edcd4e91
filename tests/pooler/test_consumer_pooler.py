"""The consumers through a real PgBouncer in transaction mode (round robin).

With ``pooler=True`` (its in-process ticker in pooler mode too) a consumer
receives everything and retries what its handler nacks; without it the
pooler's first symptom ends ``start()`` with :class:`pgque.PgquePoolerError`
(never a dead letter), and a listener through the pooler that hears nothing
says so once, naming ``listen_dsn``.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

import psycopg
import pytest
from twins import handle, make

import pgque
from _engine import make_queue, one
from _wait import wait_for

N = 40


@pytest.fixture
def queue(conn: psycopg.Connection[Any]) -> str:
    """Queue ``q`` (every ``ticker()`` call ticks) with consumer ``c`` subscribed."""
    make_queue(conn, "q")
    one(conn, "select pgque.subscribe('q', 'c')")
    return "q"


def send(conn: psycopg.Connection[Any], n: int) -> None:
    """Send ``n`` events to queue q (directly: the producers' own tests go through)."""
    one(conn, "select count(*) from pgque.send_batch('q', 'default',"
              " array(select pg_catalog.to_jsonb(i)::text from generate_series(1, %s) i))",
        n)  # fmt: skip


def test_a_consumer_with_the_option_receives_everything(
    kind: str, pooled: str, queue: str, conn: psycopg.Connection[Any], start: Any
) -> None:
    got: list[int] = []
    consumer = make(kind, pooled, pooler=True, ticker=True, poll_interval=0.05)
    handle(consumer, lambda msg: got.append(msg.json()))
    running = start(consumer)
    send(conn, N)
    wait_for(lambda: len(got) >= N or not running.alive, timeout=30, what="every message")
    assert running.error is None
    assert sorted(got) == list(range(1, N + 1))
    send(conn, N)  # and again, once the ticker has gone round the pool's sessions
    wait_for(lambda: len(got) >= 2 * N or not running.alive, timeout=30, what="the second lot")
    assert running.error is None
    assert Counter(got) == Counter(list(range(1, N + 1)) * 2)


def test_nacks_through_the_pooler_are_retried_never_dead_lettered(
    kind: str, pooled: str, queue: str, conn: psycopg.Connection[Any], start: Any
) -> None:
    seen: Counter[int] = Counter()

    def fail_first(msg: pgque.Message) -> None:
        seen[msg.json()] += 1
        if seen[msg.json()] == 1:
            raise RuntimeError("first delivery fails")

    consumer = make(kind, pooled, pooler=True, ticker=True, poll_interval=0.05, retry_after=0)
    handle(consumer, fail_first)
    running = start(consumer)
    send(conn, N)
    wait_for(lambda: all(seen[i] >= 2 for i in range(1, N + 1)) or not running.alive,
             timeout=60, what="every message retried")  # fmt: skip
    assert running.error is None
    assert one(conn, "select count(*) from pgque.dead_letter") == 0


def test_without_the_option_start_raises_the_pooler_error(
    kind: str, pooled: str, queue: str, conn: psycopg.Connection[Any], start: Any
) -> None:
    consumer = make(kind, pooled, ticker=True, poll_interval=0.05, retry_after=0)

    def fail(msg: pgque.Message) -> None:
        raise RuntimeError("nacked")

    handle(consumer, fail)
    running = start(consumer)
    send(conn, N)
    error = running.outcome(30)
    assert isinstance(error, pgque.PgquePoolerError), repr(error)
    assert "pooler=True" in str(error) and "PgBouncer" in str(error)
    assert one(conn, "select count(*) from pgque.dead_letter") == 0


def test_a_listener_through_the_pooler_that_hears_nothing_warns_once(
    kind: str, db: str, pooled: str, queue: str, start: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="pgque")
    consumer = make(kind, db, listen_dsn=pooled, poll_interval=0.05)
    handle(consumer, lambda msg: None)
    running = start(consumer)

    def warnings() -> list[str]:
        return [r.getMessage() for r in caplog.records if "LISTEN" in r.getMessage()]

    wait_for(warnings, timeout=15, what="the listener's warning")
    assert running.alive
    assert "listen_dsn" in warnings()[0] and "pooler" in warnings()[0]
    running.stop()
    running.outcome(15)
    assert len(warnings()) == 1
