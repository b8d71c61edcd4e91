"""Reading what reached a queue, from a separate autocommit connection."""

from __future__ import annotations

from typing import Any

import psycopg

from pgque import PgqueClient


def received(
    conn: psycopg.Connection[Any], queue: str = "orders", consumer: str = "watch"
) -> list[Any]:
    """Tick ``queue`` and return the payloads of ``consumer``'s next batch (acked), in order."""
    conn.execute("select pgque.force_tick(%s)", (queue,))
    conn.execute("select pgque.ticker(%s)", (queue,))
    client = PgqueClient(conn)
    msgs = client.receive(queue, consumer, 1000)
    if msgs:
        client.ack(msgs[0].batch_id)
    return [m.json() for m in msgs]
