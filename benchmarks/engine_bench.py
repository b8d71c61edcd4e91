"""Engine benchmark: pgque's PL/pgSQL engine against PgQ 3.5 (C build) on one server.

Starts a throwaway PostgreSQL cluster (Debian's PostgreSQL 15 by default, where
``postgresql-15-pgq3`` provides PgQ), creates one database holding both
``CREATE EXTENSION pgq`` and pgque, and measures, with the two engines
interleaved and each measure repeated (3 runs by default):

* single-event insert per transaction (one client, autocommit,
  ``synchronous_commit=off`` per session);
* 1000 events per transaction (``insert_event`` called once per row);
* reading one batch of 100k events with ``get_batch_events`` (all rows fetched
  by the client).

Prints a Markdown report: events/s as median (min-max) per engine, the
pgque/PgQ ratio of the medians, the command line and the server version.
``--quick`` runs small sizes for a smoke test. Run as root or as a normal
user (as root the server runs as an unprivileged user; see pgque._cluster).

    python benchmarks/engine_bench.py            # full run, a few minutes
    python benchmarks/engine_bench.py --quick    # smoke run, seconds
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

try:
    import pgque
except ImportError:  # running from a source checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    import pgque
from pgque._cluster import TempCluster

Conn = psycopg.Connection[Any]

ENGINES = ("pgq", "pgque")  # schema names; PgQ first in odd runs, pgque first in even ones

# Durable defaults (TempCluster's own defaults trade durability for speed);
# each benchmark session turns synchronous_commit off for itself.
SERVER_SETTINGS: dict[str, object] = {
    "fsync": "on",
    "full_page_writes": "on",
    "synchronous_commit": "on",
    "shared_buffers": "256MB",
    "max_wal_size": "4GB",
    "checkpoint_timeout": "30min",
}


@dataclass
class Sizes:
    single: int = 2000  # single-event transactions per run
    tx_count: int = 20  # transactions of tx_size events per run
    tx_size: int = 1000
    batch: int = 100_000  # events in the batch that is read
    runs: int = 3


QUICK = Sizes(single=200, tx_count=3, tx_size=1000, batch=10_000, runs=3)


@dataclass
class Measure:
    name: str
    results: dict[str, list[float]] = field(default_factory=lambda: {e: [] for e in ENGINES})

    def row(self) -> str:
        cells = []
        for engine in ENGINES:
            r = self.results[engine]
            cells.append(f"{statistics.median(r):,.0f} ({min(r):,.0f}-{max(r):,.0f})")
        ratio = statistics.median(self.results["pgque"]) / statistics.median(self.results["pgq"])
        return f"| {self.name} | {cells[0]} | {cells[1]} | {ratio:.2f} |"


def one(conn: Conn, query: sql.Composed | str, *params: Any) -> Any:
    row = conn.execute(query, params or None).fetchone()
    assert row is not None
    return row[0]


def q(engine: str, text: str) -> sql.Composed:
    """``text`` with ``{s}`` replaced by the engine's schema, quoted."""
    return sql.SQL(text).format(s=sql.Identifier(engine))


class Bench:
    def __init__(self, dsn: str, sizes: Sizes, payload: str) -> None:
        self.dsn = dsn
        self.sizes = sizes
        self.payload = payload
        self.conns: dict[str, Conn] = {}
        self.read_batch: dict[str, int] = {}

    def conn(self, engine: str) -> Conn:
        if engine not in self.conns:
            conn = psycopg.connect(self.dsn, autocommit=True)
            conn.execute("set synchronous_commit = off")
            self.conns[engine] = conn
        return self.conns[engine]

    def create_queue(self, engine: str, queue: str) -> None:
        conn = self.conn(engine)
        one(conn, q(engine, "select {s}.create_queue(%s)"), queue)
        for param in ("ticker_max_lag", "ticker_idle_period"):
            one(conn, q(engine, "select {s}.set_queue_config(%s, %s, '0')"), queue, param)

    def setup(self, engine: str) -> None:
        """Queues for the insert measures; a consumer with one open batch of N events."""
        conn = self.conn(engine)
        self.create_queue(engine, "bench_single")
        self.create_queue(engine, "bench_tx")
        self.create_queue(engine, "bench_read")
        one(conn, q(engine, "select {s}.register_consumer('bench_read', 'reader')"))
        with conn.transaction():
            conn.execute(
                q(
                    engine,
                    "select {s}.insert_event('bench_read', 'bench', %s)"
                    " from generate_series(1, %s)",
                ),
                (self.payload, self.sizes.batch),
            )
        assert one(conn, q(engine, "select {s}.ticker('bench_read')")) is not None
        self.read_batch[engine] = one(
            conn, q(engine, "select {s}.next_batch('bench_read', 'reader')")
        )

    def insert_single(self, engine: str) -> float:
        conn = self.conn(engine)
        query = q(engine, "select {s}.insert_event('bench_single', 'bench', %s)")
        n = self.sizes.single
        start = time.perf_counter()
        for _ in range(n):
            conn.execute(query, (self.payload,), prepare=True)
        return n / (time.perf_counter() - start)

    def insert_tx(self, engine: str) -> float:
        conn = self.conn(engine)
        query = q(
            engine,
            "select count({s}.insert_event('bench_tx', 'bench', %s)) from generate_series(1, %s)",
        )
        start = time.perf_counter()
        for _ in range(self.sizes.tx_count):
            with conn.transaction():
                got = one(conn, query, self.payload, self.sizes.tx_size)
            assert got == self.sizes.tx_size
        return self.sizes.tx_count * self.sizes.tx_size / (time.perf_counter() - start)

    def read(self, engine: str) -> float:
        conn = self.conn(engine)
        start = time.perf_counter()
        rows = conn.execute(
            q(engine, "select * from {s}.get_batch_events(%s)"), (self.read_batch[engine],)
        ).fetchall()
        elapsed = time.perf_counter() - start
        assert len(rows) == self.sizes.batch, f"{engine}: {len(rows)} events in the batch"
        return len(rows) / elapsed

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()


def run(bench: Bench, sizes: Sizes, log: Callable[[str], None]) -> list[Measure]:
    measures = [
        (Measure("insert, 1 event per transaction"), bench.insert_single),
        (Measure(f"insert, {sizes.tx_size} events per transaction"), bench.insert_tx),
        (Measure(f"read one batch of {sizes.batch:,} events"), bench.read),
    ]
    for engine in ENGINES:  # warm-up, not counted: plans, caches, buffers
        bench.insert_single(engine)
        bench.insert_tx(engine)
        bench.read(engine)
    for measure, fn in measures:
        for i in range(sizes.runs):
            order = ENGINES if i % 2 == 0 else ENGINES[::-1]
            for engine in order:
                rate = fn(engine)
                measure.results[engine].append(rate)
                log(f"{measure.name}, run {i + 1}, {engine}: {rate:,.0f} events/s")
    return [m for m, _ in measures]


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument(
        "--pg-version",
        type=int,
        default=15,
        help="major version of the throwaway server (PgQ: 15, Debian)",
    )
    parser.add_argument("--runs", type=int, help="runs per measure and engine (default 3)")
    parser.add_argument("--payload-bytes", type=int, default=200, help="size of ev_data")
    parser.add_argument("--verbose", "-v", action="store_true", help="print every run")
    args = parser.parse_args(argv)
    sizes = Sizes(**vars(QUICK)) if args.quick else Sizes()
    if args.runs:
        sizes.runs = args.runs
    log = (lambda text: print(text, file=sys.stderr)) if args.verbose else (lambda text: None)

    started = time.perf_counter()
    with TempCluster(args.pg_version, settings=SERVER_SETTINGS) as cluster:
        with psycopg.connect(cluster.dsn(), autocommit=True) as admin:
            admin.execute("create database bench")
        with psycopg.connect(cluster.dsn("bench"), autocommit=True) as conn:
            try:
                conn.execute("create extension pgq")
            except psycopg.errors.UndefinedFile as exc:
                print(
                    f"PgQ is not installed for PostgreSQL {args.pg_version}: {exc}"
                    f"\ninstall it: apt-get install postgresql-{args.pg_version}-pgq3",
                    file=sys.stderr,
                )
                return 2
            pgque.install(conn)
            server = one(conn, "select version()")
            pgq_version = one(conn, "select extversion from pg_extension where extname = 'pgq'")
            pgque_version = one(conn, "select pgque.version()")
        bench = Bench(cluster.dsn("bench"), sizes, "x" * args.payload_bytes)
        try:
            for engine in ENGINES:
                bench.setup(engine)
            measures = run(bench, sizes, log)
        finally:
            bench.close()
    elapsed = time.perf_counter() - started

    command = shlex.join(["python", os.path.relpath(sys.argv[0]), *(argv or sys.argv[1:])])
    print(f"## Engine benchmark, {dt.date.today().isoformat()}\n")
    print(f"- command: `{command}` ({elapsed:.0f} s)")
    print(f"- server: {server}")
    print(f"- engines: PgQ {pgq_version} (extension, C insert), pgque {pgque_version} (PL/pgSQL)")
    print(
        f"- machine: {cpu_model()}, {os.cpu_count()} CPUs, Python {platform.python_version()},"
        f" psycopg {psycopg.__version__}"
    )
    print(
        f"- {sizes.runs} runs per measure, engines interleaved, after one warm-up round;"
        f" ev_data {args.payload_bytes} bytes; client and server on one machine (Unix socket);"
        " fsync on, synchronous_commit off per session\n"
    )
    print(
        "| measure | PgQ events/s, median (min-max) | pgque events/s, median (min-max)"
        " | pgque/PgQ |"
    )
    print("|---|---:|---:|---:|")
    for measure in measures:
        print(measure.row())
    return 0


if __name__ == "__main__":
    sys.exit(main())
