"""Modern API benchmark: send_batch and receive + ack against PgQ and a SKIP LOCKED queue.

One throwaway Debian PostgreSQL 15 cluster holds pgque, PgQ 3.5 and a queue
table in PGMQ's style written for this benchmark (identity key, visibility
timestamp, a ``FOR UPDATE SKIP LOCKED`` read, delete by id array). Targets
are interleaved, each measure repeated (3 runs), reported as median (min-max)
with ratios against the same run's peers. Sessions use
``synchronous_commit = off`` (the CPU cost, not the disk's, is compared).

Sending, 1000 messages of 100 B per transaction:

* ``pgque send_batch text[]`` / ``jsonb[]``: one statement;
* ``pgque send x1000``: 1000 ``select pgque.send(...)`` round trips from Python;
* ``pgq insert_event x1000``: PgQ's insert per row, in one SQL statement;
* ``skip-locked insert``: one batched ``INSERT ... SELECT unnest(...)``.

Draining a preloaded 100k backlog (batches of 100 and of 1000):

* ``pgque receive+ack``; ``pgq next_batch+get_batch_events+finish_batch``;
* ``skip-locked read+delete``: claim N rows, then delete them by id.

    python benchmarks/api_bench.py            # full run
    python benchmarks/api_bench.py --quick    # smoke run
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

try:
    import pgque
except ImportError:  # a source checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    import pgque
from pgque._cluster import TempCluster

Conn = psycopg.Connection[Any]
PAYLOAD = '{"pad": "' + "x" * 89 + '"}'  # 100 bytes of valid JSON

SKIP_LOCKED_DDL = """
create table if not exists skq (
    msg_id bigint generated always as identity primary key,
    vt timestamptz not null default now(),
    read_ct integer not null default 0,
    enqueued_at timestamptz not null default now(),
    message text
);
"""


def rate(count: int, seconds: float) -> float:
    return count / seconds


def timed(fn: Callable[[], int]) -> float:
    start = time.perf_counter()
    count = fn()
    return rate(count, time.perf_counter() - start)


class Bench:
    def __init__(self, dsn: str, batches: int, backlog: int) -> None:
        self.conn: Conn = psycopg.connect(dsn, autocommit=True)
        self.conn.execute("set synchronous_commit = off")
        self.batches = batches
        self.backlog = backlog
        self.payloads = [PAYLOAD] * 1000
        self.conn.execute(SKIP_LOCKED_DDL)
        for name in ("send_q", "drain_q"):
            self.conn.execute("select pgque.create_queue(%s)", (name,))
            self.conn.execute("select pgq.create_queue(%s)", (name,))
        for schema in ("pgque", "pgq"):
            for param in ("ticker_max_lag", "ticker_idle_period"):
                self.conn.execute(f"select {schema}.set_queue_config('drain_q', %s, '0')", (param,))

    # -- sending -------------------------------------------------------------------

    def send_batch(self, kind: str) -> int:
        for _ in range(self.batches):
            self.conn.execute(
                f"select pgque.send_batch('send_q', 'bench', %s::{kind}[])", (self.payloads,)
            )
        return self.batches * 1000

    def send_each(self) -> int:
        for _ in range(self.batches):
            with self.conn.transaction():
                for p in self.payloads:
                    self.conn.execute("select pgque.send('send_q', 'bench', %s::text)", (p,))
        return self.batches * 1000

    def pgq_insert(self) -> int:
        for _ in range(self.batches):
            self.conn.execute(
                "select count(pgq.insert_event('send_q', 'bench', p)) from unnest(%s::text[]) p",
                (self.payloads,),
            )
        return self.batches * 1000

    def skip_locked_insert(self) -> int:
        for _ in range(self.batches):
            self.conn.execute(
                "insert into skq (message) select unnest(%s::text[])", (self.payloads,)
            )
        return self.batches * 1000

    # -- draining ------------------------------------------------------------------

    def preload(self, engine: str, per_batch: int) -> None:
        consumer = f"c{per_batch}_{time.monotonic_ns()}"
        if engine == "skip-locked":
            self.conn.execute("truncate skq")
            self.conn.execute(
                "insert into skq (message) select %s from generate_series(1, %s)",
                (PAYLOAD, self.backlog),
            )
            return
        schema = "pgque" if engine == "pgque" else "pgq"
        self.conn.execute(f"select {schema}.register_consumer('drain_q', %s)", (consumer,))
        self.consumer = consumer
        for _ in range(self.backlog // per_batch):
            with self.conn.transaction():
                self.conn.execute(
                    f"select count({schema}.insert_event('drain_q', 'bench', %s))"
                    " from generate_series(1, %s)",
                    (PAYLOAD, per_batch),
                )
            self.conn.execute(f"select {schema}.ticker('drain_q')")

    def drain(self, engine: str, per_batch: int) -> int:
        got = 0
        if engine == "pgque":
            while True:
                with self.conn.transaction():
                    rows = self.conn.execute(
                        "select * from pgque.receive('drain_q', %s, %s)",
                        (self.consumer, per_batch),
                    ).fetchall()
                    if not rows:
                        break
                    got += len(rows)
                    self.conn.execute("select pgque.ack(%s)", (rows[0][1],))
        elif engine == "pgq":
            while True:
                with self.conn.transaction():
                    batch = self.conn.execute(
                        "select pgq.next_batch('drain_q', %s)", (self.consumer,)
                    ).fetchone()
                    if batch is None or batch[0] is None:
                        break
                    rows = self.conn.execute(
                        "select * from pgq.get_batch_events(%s)", (batch[0],)
                    ).fetchall()
                    got += len(rows)
                    self.conn.execute("select pgq.finish_batch(%s)", (batch[0],))
        else:
            while True:
                with self.conn.transaction():
                    rows = self.conn.execute(
                        "with c as (select msg_id from skq where vt <= now() order by msg_id"
                        " limit %s for update skip locked)"
                        " update skq set vt = now() + interval '30 seconds', read_ct = read_ct + 1"
                        " from c where skq.msg_id = c.msg_id returning skq.msg_id, skq.message",
                        (per_batch,),
                    ).fetchall()
                    if not rows:
                        break
                    got += len(rows)
                    self.conn.execute(
                        "delete from skq where msg_id = any(%s)", ([r[0] for r in rows],)
                    )
        return got


def cell(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="small sizes, one run")
    args = parser.parse_args(argv)
    batches, backlog = (3, 10_000) if args.quick else (20, 100_000)
    runs = 1 if args.quick else args.runs
    send_targets = ["pgque send_batch text[]", "pgque send_batch jsonb[]",
                    "pgque send x1000 (round trips)", "pgq insert_event x1000",
                    "skip-locked insert"]  # fmt: skip
    send: dict[str, list[float]] = {t: [] for t in send_targets}
    drain: dict[tuple[str, int], list[float]] = {}
    with TempCluster(15, settings={"shared_buffers": "256MB"}) as cluster:
        with psycopg.connect(cluster.dsn(), autocommit=True) as admin:
            admin.execute("create database bench")
        dsn = cluster.dsn("bench")
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("create extension pgq")
            pgque.install(conn)
            version = conn.info.server_version
        bench = Bench(dsn, batches, backlog)
        actions: dict[str, Callable[[], int]] = {
            "pgque send_batch text[]": lambda: bench.send_batch("text"),
            "pgque send_batch jsonb[]": lambda: bench.send_batch("jsonb"),
            "pgque send x1000 (round trips)": bench.send_each,
            "pgq insert_event x1000": bench.pgq_insert,
            "skip-locked insert": bench.skip_locked_insert,
        }
        for run in range(runs):
            order = send_targets if run % 2 == 0 else list(reversed(send_targets))
            for name in order:
                send[name].append(timed(actions[name]))
            for per_batch in (100, 1000):
                engines = ["pgque", "pgq", "skip-locked"]
                for engine in engines if run % 2 == 0 else list(reversed(engines)):
                    bench.preload(engine, per_batch)
                    drain.setdefault((engine, per_batch), []).append(
                        timed(lambda e=engine, n=per_batch: bench.drain(e, n))  # type: ignore[misc]
                    )
    base = statistics.median(send["pgq insert_event x1000"])
    each = statistics.median(send["pgque send x1000 (round trips)"])
    skl = statistics.median(send["skip-locked insert"])
    print(f"## Sending 1000 x 100 B per transaction (messages/s), PostgreSQL "
          f"{version // 10000}.{version % 10000}, {runs} run(s)\n")  # fmt: skip
    print("| target | msg/s | vs PgQ insert_event | vs skip-locked | vs send round trips |")
    print("|---|---:|---:|---:|---:|")
    for name, values in send.items():
        m = statistics.median(values)
        print(f"| {name} | {cell(values)} | {m / base:.2f}x | {m / skl:.2f}x | {m / each:.2f}x |")
    print(f"\n## Draining a {backlog:,}-message backlog (messages/s)\n")
    print("| target | per batch | msg/s | vs PgQ | vs skip-locked |")
    print("|---|---:|---:|---:|---:|")
    for (engine, per_batch), values in sorted(drain.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        m = statistics.median(values)
        pgq = statistics.median(drain[("pgq", per_batch)])
        sk = statistics.median(drain[("skip-locked", per_batch)])
        print(f"| {engine} | {per_batch} | {cell(values)} | {m / pgq:.2f}x | {m / sk:.2f}x |")
    print(
        f"\nCommand: `python benchmarks/{Path(__file__).name} {shlex.join(argv or sys.argv[1:])}`"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
