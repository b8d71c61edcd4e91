"""pgque's sessions leave the server log quiet under load: no WARNING, no ERROR.

A producer, a consumer that ticks its own queue (its in-process Ticker leads)
and a standby Ticker run for ``SECONDS`` at about ``RATE`` messages a second
per twin (each twin in a database of its own, so each one's ticker leads);
then every line of the server log written by a session of theirs (the log
line prefix names the application) must be below WARNING. The consumer's
tick round trip once logged ``WARNING: there is no transaction in progress``
on every poll.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import psycopg
import pytest
from twins import KINDS, handle, make

import pgque
from _db import PgServer
from _wait import wait_for
from pgque._cluster import TempCluster

pytestmark = [pytest.mark.slow, pytest.mark.concurrency]

SECONDS = 30.0
RATE = 1000  # messages a second, per twin
TOTAL = int(SECONDS * RATE)  # messages per twin
CHUNK = 20  # messages per send_batch
APP = "pgque-quiet"
LOUD = re.compile(r"\b(WARNING|ERROR|FATAL|PANIC):")


def _produce(dsn: str, stop: threading.Event, sent: list[int]) -> None:
    """Send ``TOTAL`` messages, ``RATE`` a second at most, in batches of ``CHUNK``
    (or until ``stop``). A loaded machine sends them more slowly, never fewer."""
    with pgque.Producer(f"{dsn} application_name={APP}-producer") as producer:
        started = time.monotonic()
        while not stop.is_set() and len(sent) < TOTAL:
            sent.extend(producer.send_batch("q", [{"n": i} for i in range(CHUNK)]))
            due = started + len(sent) / RATE  # pace by the schedule, not by a fixed sleep
            stop.wait(max(0.0, due - time.monotonic()))


def test_producer_consumer_and_ticker_log_nothing(pg_server: PgServer, start: Any) -> None:
    settings = {"log_line_prefix": "%m [%p] app=%a ", "log_min_messages": "warning"}
    with TempCluster(pg_server.version, settings=settings) as cluster:
        dsns: dict[str, str] = {}
        with psycopg.connect(cluster.dsn(), autocommit=True) as admin:
            for kind in KINDS:
                admin.execute(f"create database quiet_{kind}")
                dsns[kind] = cluster.dsn(f"quiet_{kind}")
                with psycopg.connect(dsns[kind], autocommit=True) as conn:
                    pgque.install(conn)
                    conn.execute("select pgque.create_queue('q')")
                    conn.execute("select pgque.subscribe('q', 'c')")
        handled: dict[str, set[int]] = {kind: set() for kind in KINDS}
        sent: dict[str, list[int]] = {kind: [] for kind in KINDS}
        running = []
        for kind in KINDS:
            dsn = f"{dsns[kind]} application_name={APP}-consumer"
            consumer = make(kind, dsn, ticker=True, poll_interval=1)
            handle(consumer, lambda msg, got=handled[kind]: got.add(msg.msg_id))
            running.append(start(consumer))
        stop = threading.Event()
        producers = [
            threading.Thread(target=_produce, args=(dsns[kind], stop, sent[kind])) for kind in KINDS
        ]
        for thread in producers:
            thread.start()
        standby: list[pgque.Ticker] = []
        try:
            for kind in KINDS:  # the consumer's own ticker leads by now: this one stands by
                wait_for(lambda k=kind: handled[k], what=f"a first delivery ({kind})")  # type: ignore[misc]
                standby.append(pgque.Ticker(f"{dsns[kind]} application_name={APP}-ticker").start())
            for thread in producers:  # about SECONDS; longer on a loaded machine
                thread.join(SECONDS * 10)
        finally:
            stop.set()
            for thread in producers:
                thread.join(10)
        for kind in KINDS:
            wait_for(lambda k=kind: handled[k] >= set(sent[k]), timeout=30,  # type: ignore[misc]
                     what=f"all {len(sent[kind])} messages handled ({kind})")  # fmt: skip
            assert len(sent[kind]) == TOTAL, f"the producer ({kind}) sent {len(sent[kind])}"
        for ticker in standby:
            ticker.stop()
        for consumer_run in running:
            consumer_run.stop()
            assert consumer_run.outcome(timeout=10) is None
        with psycopg.connect(f"{dsns['sync']} application_name={APP}-probe") as probe:
            probe.execute("do $$ begin raise log 'quiet-log probe'; end $$")  # the prefix works
        ours = [line for line in cluster.log_file.read_text(errors="replace").splitlines()
                if f"app={APP}-" in line]  # fmt: skip
        assert any("quiet-log probe" in line for line in ours), "no line names its application"
        loud = [line for line in ours if LOUD.search(line)]
        assert not loud, f"{len(loud)} loud lines from pgque's sessions, e.g.:\n" + "\n".join(
            loud[:5]
        )
