"""The server restarts under a running producer and consumer: nothing is lost."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest

import pgque
from _db import PgServer
from pgque._cluster import TempCluster


def test_restart_loses_nothing(pg_server: PgServer) -> None:
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

        consumer = pgque.Consumer(dsn, queue="q", name="c", poll_interval=0.5, ticker=True)
        consumer.on("*")(lambda msg: handled.add(msg.msg_id))
        threads = [threading.Thread(target=produce), threading.Thread(target=consumer.start)]
        for t in threads:
            t.start()
        try:
            deadline = time.monotonic() + 20
            while len(handled) < 20:
                assert time.monotonic() < deadline, "nothing flowed before the restart"
                time.sleep(0.05)
            cluster._run("pg_ctl", "restart", "-w", "-m", "fast", "-l", str(cluster.log_file))
            after = len(sent)
            deadline = time.monotonic() + 30
            while len(sent) < after + 20:
                assert time.monotonic() < deadline, "the producer did not come back"
                time.sleep(0.05)
            stop.set()
            threads[0].join(10)
            deadline = time.monotonic() + 60
            while not sent <= handled:
                if time.monotonic() > deadline:
                    pytest.fail(f"{len(sent - handled)} committed messages never handled")
                time.sleep(0.1)
            assert consumer.reconnects >= 1
        finally:
            stop.set()
            consumer.stop()
            for t in threads:
                t.join(10)
