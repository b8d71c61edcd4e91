"""A consumer's backend keeps its heap between batches (glibc's malloc trim threshold).

A backend that never freed a large allocation keeps glibc's default trim
threshold (128 kB): after each batch it hands the memory the batch used back
to the kernel and faults it in again for the next one. The consumer
allocates and frees 1 MB once per connection (``keep_backend_heap`` in
queries.sql), which raises the threshold: measured here, 8-12 minor page
faults per batch of 1000 events against 123 without it (PostgreSQL 15 and
18). Counted from ``/proc/<pid>/stat`` of the consumer's backend (the tests
run on the server's machine), never timed.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo
from twins import handle, make

from _engine import one
from _wait import wait_for

BATCHES = 21
PER_BATCH = 1000
PAYLOAD = '{"pad": "' + "x" * 89 + '"}'  # 100 B


def _minor_faults(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[7])  # minflt


def test_the_backend_keeps_its_heap_between_batches(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, start: Any
) -> None:
    one(conn, "select pgque.set_queue_config('q', 'ticker_max_count', '100000000')")
    for _ in range(BATCHES):
        one(conn, "select count(pgque.send('q', 'bench', %s::text)) from generate_series(1, %s)",
            PAYLOAD, PER_BATCH)  # fmt: skip
        one(conn, "select pgque.force_next_tick('q')")
        one(conn, "select pgque.ticker('q')")
    handled = 0
    first_seen = threading.Event()
    go_on = threading.Event()

    def count(msg: Any) -> None:
        nonlocal handled
        if handled == 0:
            first_seen.set()
            assert go_on.wait(10), "the test did not let the consumer go on"
        handled += 1

    dsn = make_conninfo(db, application_name="heap_consumer")
    consumer = make(kind, dsn, max_messages=PER_BATCH)
    handle(consumer, count)
    start(consumer)
    assert first_seen.wait(10), "the consumer handled nothing"
    # Its first batch is open: the connection's setup and first read are behind it.
    pid = one(conn, "select pid from pg_stat_activity where application_name = 'heap_consumer'")
    before = _minor_faults(pid)
    go_on.set()
    wait_for(lambda: handled == BATCHES * PER_BATCH, what="every event handled", timeout=60)
    per_batch = (_minor_faults(pid) - before) / (BATCHES - 1)
    assert per_batch < 40, f"{per_batch:.0f} minor page faults per batch of {PER_BATCH}"
