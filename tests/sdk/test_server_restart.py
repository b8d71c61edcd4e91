"""The server restarts under a running producer and consumer (each twin): nothing is lost."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
from twins import handle, make

import pgque
from _db import PgServer
from _wait import wait_for
from pgque._cluster import TempCluster


def test_restart_loses_nothing(kind: str, pg_server: PgServer, start: Any) -> None:
    with TempCluster(pg_server.version) as cluster:
        dsn = cluster.dsn()
        with psycopg.connect(dsn, autocommit=True) as conn:
            pgque.install(conn)
            conn.execute("select pgque.create_queue('q')")
            conn.execute("select pgque.subscribe('q', 'c')")
        sent: set[int] = set()
        handled: set[int] = set()
        stop = threading.Event()

        def produce() -> None:
            conn: psycopg.Connection[Any] | None = None
            while not stop.is_set():
                try:
                    if conn is None or conn.closed:
                        conn = psycopg.connect(dsn, autocommit=True)
                    row = conn.execute("select pgque.send('q', '{}'::jsonb)").fetchone()
                    assert row is not None
                    sent.add(int(row[0]))  # committed: it must be handled
                except psycopg.OperationalError:
                    conn = None
                    time.sleep(0.1)
                time.sleep(0.005)

        consumer = make(kind, dsn, poll_interval=0.5, ticker=True)
        handle(consumer, lambda msg: handled.add(msg.msg_id))
        producer = threading.Thread(target=produce)
        producer.start()
        running = start(consumer)
        try:
            wait_for(lambda: len(handled) >= 20, timeout=20, what="messages before the restart")
            cluster._run("pg_ctl", "restart", "-w", "-m", "fast", "-l", str(cluster.log_file))
            after = len(sent)
            wait_for(lambda: len(sent) >= after + 20, timeout=30, what="the producer back")
            stop.set()
            producer.join(10)
            wait_for(lambda: sent <= handled, timeout=60,
                     what=f"all {len(sent)} committed messages handled")  # fmt: skip
            assert consumer.reconnects >= 1
        finally:
            stop.set()
            running.stop()
            producer.join(10)
