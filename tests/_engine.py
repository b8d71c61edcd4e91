"""Small helpers shared by the engine tests: one-value queries and batch reads."""

from __future__ import annotations

from typing import Any

import psycopg


def one(conn: psycopg.Connection[Any], query: str, *params: Any) -> Any:
    """Run ``query`` and return the first column of its only row."""
    row = conn.execute(query, params or None).fetchone()
    assert row is not None, f"no row from {query!r}"
    return row[0]


def rows(conn: psycopg.Connection[Any], query: str, *params: Any) -> list[tuple[Any, ...]]:
    """Run ``query`` and return all rows."""
    return conn.execute(query, params or None).fetchall()


def make_queue(conn: psycopg.Connection[Any], name: str, *, eager: bool = True) -> None:
    """Create a queue; ``eager`` makes every ``ticker()`` call tick (max_lag, idle 1 µs)."""
    assert one(conn, "select pgque.create_queue(%s)", name) == 1
    if eager:
        one(conn, "select pgque.set_queue_config(%s, 'ticker_max_lag', '1 microsecond')", name)
        one(conn, "select pgque.set_queue_config(%s, 'ticker_idle_period', '1 microsecond')", name)


def tick(conn: psycopg.Connection[Any], queue: str) -> int:
    """Tick ``queue`` (in its own transaction on an autocommit connection); return the id."""
    tick_id = one(conn, "select pgque.ticker(%s)", queue)
    assert tick_id is not None, f"queue {queue} did not tick"
    return int(tick_id)


def consume(conn: psycopg.Connection[Any], queue: str, consumer: str) -> list[str] | None:
    """Open, read and finish one batch; return its ``ev_data`` values (None: no batch)."""
    batch_id = one(conn, "select pgque.next_batch(%s, %s)", queue, consumer)
    if batch_id is None:
        return None
    data = [r[0] for r in rows(conn, "select ev_data from pgque.get_batch_events(%s)", batch_id)]
    assert one(conn, "select pgque.finish_batch(%s)", batch_id) == 1
    return data
