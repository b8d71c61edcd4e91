"""Payloads and backlogs shared by the cases."""

from __future__ import annotations

from typing import Any

import psycopg

Conn = psycopg.Connection[Any]

PAYLOAD_100 = '{"pad": "' + "x" * 89 + '"}'
"""100 bytes of valid JSON."""

PAYLOAD_2K = '{"pad": "' + "x" * 2037 + '"}'
"""2 KiB of valid JSON."""

ENGINES = ("pgque", "pgq")
"""The two engines with PgQ's SQL API: pgque's schema and PgQ 3.5's."""


def connect(dsn: str, *, sync: bool = False) -> Conn:
    """An autocommit connection; ``synchronous_commit`` off unless ``sync``."""
    conn = psycopg.connect(dsn, autocommit=True)
    if not sync:
        conn.execute("set synchronous_commit = off")
    return conn


def eager_queue(conn: Conn, schema: str, queue: str) -> None:
    """Create ``queue`` in ``schema`` (pgque or pgq) ticking on every ticker call."""
    conn.execute(f"select {schema}.create_queue(%s)", (queue,))
    for param in ("ticker_max_lag", "ticker_idle_period"):
        conn.execute(f"select {schema}.set_queue_config(%s, %s, '1 microsecond')", (queue, param))


def preload(
    conn: Conn, schema: str, queue: str, total: int, per_tick: int, payload: str = PAYLOAD_100
) -> None:
    """Insert ``total`` events into ``queue``, one tick every ``per_tick`` events.

    Registered consumers then see ``total / per_tick`` batches of ``per_tick``.
    """
    for _ in range(total // per_tick):
        with conn.transaction():
            conn.execute(
                f"select count({schema}.insert_event(%s, 'bench', %s)) from generate_series(1, %s)",
                (queue, payload, per_tick),
            )
        conn.execute(f"select {schema}.ticker(%s)", (queue,))
