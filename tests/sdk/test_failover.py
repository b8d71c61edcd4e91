"""Failover: ``kill -9`` of a synchronous primary and ``pg_ctl promote`` of its standby,
under a Producer and both consumer twins on a multi-host connection string.

Four consumers of one queue (each twin with a transactional handler and with a
plain one, each in-process ticker ``"auto"``) and a Producer run on
``host=primary,standby ... target_session_attrs=read-write``. A few messages
fail their first try, so retries are on the way across the failover. After
the kill and the promotion: every message acknowledged to the producer is
handled by every consumer, transactional handlers exactly once (their writes
commit with the ack), plain ones at least once; each consumer handles a first
message on the new primary within ``RESUME_WITHIN`` seconds of the
promotion; no consumer's loop ended. docs/operations.md, "High availability",
quotes what this test measures (run it with ``-s`` to see the figures).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import Counter
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool
from twins import KINDS, handle, make

import pgque
from _db import PgServer
from _replication import ReplicatedPair
from _wait import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.concurrency]

RESUME_WITHIN = 1.0  # seconds from the promotion to each consumer's first delivery
FAIL_EVERY = 40  # a message whose id is a multiple fails its first try (retried)


class Tally:
    """One consumer's handler calls: (time, reconnects so far) per message id."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.calls: list[tuple[float, int, int]] = []  # (monotonic time, msg_id, reconnects)
        self.consumer: Any = None
        self.done: set[int] = set()  # calls that did not raise

    def call(self, msg: Any) -> None:
        """Count a call; raise on a message's first try when its id says so."""
        self.calls.append((time.monotonic(), msg.msg_id, self.consumer.reconnects))
        if msg.msg_id % FAIL_EVERY == 0 and not msg.retry_count:
            raise RuntimeError("first try fails")
        self.done.add(msg.msg_id)

    def first_after(self, reconnects: int) -> float | None:
        """When the first message was handled on a connection made after ``reconnects``."""
        return min((t for t, _, r in self.calls if r > reconnects), default=None)


def _states(tallies: dict[str, Tally]) -> str:
    """Each consumer's state, for a failure's message."""
    now = time.time()
    return "; ".join(
        f"{n}: {len(t.done)} done, reconnects {t.consumer.reconnects}, listening"
        f" {t.consumer.listening}, last poll {now - (t.consumer.last_poll_at or 0):.1f} s ago"
        for n, t in tallies.items()
    )


def _produce(dsn: str, stop: threading.Event, acked: list[tuple[float, int]]) -> None:
    """Send until ``stop``; record each send the server acknowledged (time, id)."""
    pool = {"check": ConnectionPool.check_connection}  # a dead connection is never lent
    with pgque.Producer(dsn, pool_kwargs=pool) as producer:
        while not stop.is_set():
            try:
                event_id = producer.send("q", {"k": 1})
            except (pgque.PgqueError, psycopg.Error):
                stop.wait(0.02)  # the failover: not acknowledged, try the next one
                continue
            acked.append((time.monotonic(), event_id))
            stop.wait(0.002)


def test_failover_loses_nothing_acknowledged(
    pg_server: PgServer, start: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="pgque")
    with ReplicatedPair(pg_server.version) as pair:
        dsn = pair.dsn(connect_timeout=2)
        with psycopg.connect(dsn, autocommit=True) as conn:
            pgque.install(conn)
            conn.execute("select pgque.create_queue('q')")
            conn.execute("create table handled (consumer text, msg_id bigint)")
            for kind in KINDS:
                for mode in ("tx", "plain"):
                    conn.execute("select pgque.subscribe('q', %s)", (f"{kind}_{mode}",))
        tallies: dict[str, Tally] = {}
        running = []
        for kind in KINDS:
            for mode in ("tx", "plain"):
                name = f"{kind}_{mode}"
                tally = tallies[name] = Tally(name)
                consumer = tally.consumer = make(
                    kind, dsn, name=name, ticker="auto", retry_after=0,
                    poll_interval=1,
                )  # fmt: skip
                if mode == "tx":

                    def write(msg: Any, conn: Any, tally: Tally = tally) -> Any:
                        tally.call(msg)
                        insert = "insert into handled values (%s, %s)"
                        return conn.execute(insert, (tally.name, msg.msg_id))

                    handle(consumer, write, transactional=True)
                else:
                    handle(consumer, tally.call)
                running.append(start(consumer))
        acked: list[tuple[float, int]] = []
        stop = threading.Event()
        producer = threading.Thread(target=_produce, args=(dsn, stop, acked))
        producer.start()
        try:
            try:
                wait_for(lambda: all(len(t.done) >= 200 for t in tallies.values()),
                         timeout=60, what="200 messages handled by each consumer")  # fmt: skip
            except pytest.fail.Exception:
                pytest.fail(f"before the kill: {_states(tallies)}")
            before = {name: t.consumer.reconnects for name, t in tallies.items()}
            killed = time.monotonic()
            pair.kill_primary()
            pair.promote()
            promoted = time.monotonic()
            firsts = wait_for(lambda: all(t.first_after(before[n]) for n, t in tallies.items())
                              and {n: t.first_after(before[n]) for n, t in tallies.items()},
                              timeout=30, what="a delivery on the new primary, each")  # fmt: skip
            wait_for(lambda: sum(1 for t, _ in acked if t > promoted) >= 300, timeout=30,
                     what="300 sends acknowledged by the new primary")  # fmt: skip
        finally:
            stop.set()
            producer.join(30)
        ids = {event_id for _, event_id in acked}
        written_by = "select msg_id from handled where consumer = %s"
        with psycopg.connect(dsn, autocommit=True) as conn:
            for name, tally in tallies.items():
                if name.endswith("_tx"):  # what committed with the acks
                    done = lambda n=name: {r[0] for r in conn.execute(written_by, (n,))}  # noqa: E731
                else:
                    done = lambda t=tally: t.done  # noqa: E731
                wait_for(lambda d=done: ids <= d(), timeout=60,  # type: ignore[misc]
                         what=f"all {len(ids)} acknowledged messages handled ({name})")  # fmt: skip
        resumed = {n: first - promoted for n, first in firsts.items()}
        print(f"\npg_ctl promote returned {promoted - killed:.3f} s after the kill; first delivery"
              " on the new primary after the kill (s): "
              + ", ".join(f"{n} {first - killed:.3f}" for n, first in firsts.items()))  # fmt: skip
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert conn.info.host == str(pair.standby.socket_dir)  # type: ignore[union-attr]
            written = conn.execute("select consumer, msg_id, count(*) from handled"
                                   " group by 1, 2").fetchall()  # fmt: skip
        twice = [(c, m, n) for c, m, n in written if n != 1]
        assert not twice, f"transactional handlers' writes not exactly once: {twice[:10]}"
        for name, tally in tallies.items():
            if name.endswith("_plain"):
                again = Counter(m for _, m, _ in tally.calls)
                extra = sum(n - 1 for m, n in again.items() if m % FAIL_EVERY)
                print(f"{name}: {extra} duplicate deliveries")
        for run in running:
            assert run.alive, "a consumer's loop ended"
        failed_try = re.compile(r"handler failed for msg_id=(\d+), nacking")
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR
                  and not ((m := failed_try.match(r.getMessage()))
                           and int(m[1]) % FAIL_EVERY == 0)]  # fmt: skip
        assert not errors, f"errors logged across the failover: {errors[:5]}"
        slow = {n: s for n, s in resumed.items() if s > RESUME_WITHIN}
        assert not slow, f"deliveries resumed later than {RESUME_WITHIN} s after promote: {slow}"
        for run in running:
            run.stop()
            assert run.outcome(timeout=15) is None
