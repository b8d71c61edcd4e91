"""Helpers of the console tests: a queue with consumers, events and dead letters."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
from starlette.testclient import TestClient

from pgque import PgqueClient
from pgque.web import RunningConsole

MakeConsole = Callable[..., TestClient]
ServeConsole = Callable[..., RunningConsole]


def tick(conn: psycopg.Connection[Any], queue: str) -> None:
    """Force a tick of ``queue`` now."""
    conn.execute("select pgque.force_tick(%s)", (queue,))
    conn.execute("select pgque.ticker(%s)", (queue,))


def seed_queue(
    conn: psycopg.Connection[Any],
    queue: str,
    *,
    consumer: str = "worker",
    events: int = 3,
    dead: int = 0,
) -> PgqueClient:
    """Create ``queue`` with ``consumer``, send ``events`` events of type ``order.created``
    (and ``dead`` more that end up dead-lettered, type ``order.failed``), and tick."""
    client = PgqueClient(conn)
    client.create_queue(queue)
    client.subscribe(queue, consumer)
    if dead:
        client.set_queue_config(queue, "max_retries", 0)
        for n in range(dead):
            client.send(queue, {"bad": n}, type="order.failed")
        tick(conn, queue)
        batch = client.receive(queue, consumer, 1000)
        for msg in batch:
            client.nack(msg.batch_id, msg, retry_after=0, reason=f"boom {msg.json()['bad']}")
        client.ack(batch[0].batch_id)
    for n in range(events):
        client.send(queue, {"order_id": n, "note": "<b>bold</b>"}, type="order.created")
    tick(conn, queue)
    return client
