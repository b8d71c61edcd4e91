"""Latency harness: producer commit to handler start, at a fixed offered rate.

One throwaway Debian PostgreSQL 15 cluster holds pgque and PgQ. For each run
a producer thread sends one event per transaction at ``--rate`` messages a
second and records each event's commit time; a consumer records when its
handler starts for that event. Targets, interleaved, ``--runs`` times:

* ``pgque``: a queue from ``create_queue(name)``, SDK defaults: a decorated
  :class:`pgque.Consumer` with its in-process Ticker (``ticker="auto"``), no
  pg_cron;
* ``pgq-100ms``: PgQ 3.5 with a ticker calling ``pgq.ticker(queue)`` every
  100 ms (``ticker_max_lag`` 0, so each call with new events ticks) and a
  consumer polling ``next_batch`` every 10 ms (the anchor).

Prints p50/p95/p99/max in milliseconds per target as median (min-max) over
the runs, plus the idle Ticker's CPU use (its process and its backend), and
the command line that produced it.

    python benchmarks/latency.py                 # 3 runs x 10 s
    python benchmarks/latency.py --quick         # 1 run x 3 s (smoke)
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psycopg

try:
    import pgque
except ImportError:  # a source checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    import pgque
from pgque._cluster import TempCluster

Samples = list[float]


def percentile(values: Samples, q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


class Producer:
    """Sends one event per transaction at a fixed rate; remembers commit times by id."""

    def __init__(self, dsn: str, schema: str, queue: str, rate: float, seconds: float) -> None:
        self.dsn, self.schema, self.queue = dsn, schema, queue
        self.rate, self.seconds = rate, seconds
        self.committed: dict[int, float] = {}
        self.lock = threading.Lock()

    def run(self) -> None:
        statement = (
            "select pgque.send(%s, 'bench', %s::text)" if self.schema == "pgque"
            else "select pgq.insert_event(%s, 'bench', %s)"
        )  # fmt: skip
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("set synchronous_commit = off")
            start = time.perf_counter()
            n = 0
            while (now := time.perf_counter()) - start < self.seconds:
                due = start + n / self.rate
                if due > now:
                    time.sleep(due - now)
                row = conn.execute(statement, (self.queue, "x" * 100)).fetchone()
                committed = time.perf_counter()  # autocommit: the statement's commit is done
                assert row is not None
                with self.lock:
                    self.committed[int(row[0])] = committed
                n += 1


def run_pgque(dsn: str, rate: float, seconds: float, run: int) -> Samples:
    queue = f"lat_pgque_{run}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("select pgque.create_queue(%s)", (queue,))
        conn.execute("select pgque.subscribe(%s, 'bench')", (queue,))
    started: dict[int, float] = {}
    consumer = pgque.Consumer(dsn, queue=queue, name="bench", poll_interval=1)

    @consumer.on("bench")
    def handle(msg: pgque.Message) -> None:
        started.setdefault(msg.msg_id, time.perf_counter())

    thread = threading.Thread(target=consumer.start, daemon=True)
    thread.start()
    time.sleep(1.0)  # ticker leadership and LISTEN set up before the clock starts
    producer = Producer(dsn, "pgque", queue, rate, seconds)
    producer.run()
    time.sleep(1.0)  # let the tail drain
    consumer.stop()
    thread.join(10)
    return [started[i] - t for i, t in producer.committed.items() if i in started]


def run_pgq(dsn: str, rate: float, seconds: float, run: int) -> Samples:
    queue = f"lat_pgq_{run}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("select pgq.create_queue(%s)", (queue,))
        # Tick on every call that sees events: a tick every 100 ms under load.
        conn.execute("select pgq.set_queue_config(%s, 'ticker_max_lag', '0')", (queue,))
        conn.execute("select pgq.register_consumer(%s, 'bench')", (queue,))
    stop = threading.Event()
    started: dict[int, float] = {}

    def ticker() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            while not stop.wait(0.1):
                conn.execute("select pgq.ticker(%s)", (queue,))

    def consumer() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            while not stop.is_set():
                batch = conn.execute("select pgq.next_batch(%s, 'bench')", (queue,)).fetchone()
                if batch is None or batch[0] is None:
                    time.sleep(0.01)
                    continue
                now = time.perf_counter()
                for (ev_id,) in conn.execute(
                    "select ev_id from pgq.get_batch_events(%s)", (batch[0],)
                ).fetchall():
                    started.setdefault(int(ev_id), now)
                conn.execute("select pgq.finish_batch(%s)", (batch[0],))

    threads = [threading.Thread(target=f, daemon=True) for f in (ticker, consumer)]
    for t in threads:
        t.start()
    producer = Producer(dsn, "pgq", queue, rate, seconds)
    producer.run()
    time.sleep(1.0)
    stop.set()
    for t in threads:
        t.join(10)
    return [started[i] - t for i, t in producer.committed.items() if i in started]


def idle_ticker_cpu(dsn: str, seconds: float) -> tuple[float, float]:
    """CPU seconds per second of an idle Ticker: (this process, its database backend)."""
    ticker = pgque.Ticker(dsn).start()
    while not ticker.leading:
        time.sleep(0.05)
    with psycopg.connect(dsn, autocommit=True) as conn:
        pid = conn.execute(
            "select pid from pg_locks where locktype = 'advisory' and granted"
            " and objid = (pgque.ticker_lock_key() & 4294967295)::oid"
        ).fetchone()
    time.sleep(1.0)
    proc0 = time.process_time()
    backend0 = _backend_cpu(pid[0]) if pid else 0.0
    time.sleep(seconds)
    proc = (time.process_time() - proc0) / seconds
    backend = ((_backend_cpu(pid[0]) - backend0) / seconds) if pid else float("nan")
    ticker.stop()
    return proc, backend


def _backend_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime + stime
    return ticks / os.sysconf("SC_CLK_TCK")


def summary(runs: list[Samples]) -> dict[str, tuple[float, float, float]]:
    """Per statistic: median and min-max across runs, in milliseconds."""
    out: dict[str, tuple[float, float, float]] = {}
    for name, fn in (
        ("p50", lambda s: percentile(s, 50)),
        ("p95", lambda s: percentile(s, 95)),
        ("p99", lambda s: percentile(s, 99)),
        ("max", max),
    ):
        values = [fn(r) * 1000 for r in runs if r]
        out[name] = (statistics.median(values), min(values), max(values))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=1000.0, help="messages/s offered")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds per run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one 3 s run per target")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.runs = 3.0, 1
    targets: dict[str, Callable[[str, float, float, int], Samples]] = {
        "pgque": run_pgque, "pgq-100ms": run_pgq,
    }  # fmt: skip
    results: dict[str, list[Samples]] = {name: [] for name in targets}
    with TempCluster(15, settings={"max_connections": 50}) as cluster:
        admin = cluster.dsn()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("create database bench")
        dsn = cluster.dsn("bench")
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("create extension pgq")
            pgque.install(conn)
        for run in range(args.runs):
            order = list(targets) if run % 2 == 0 else list(reversed(targets))
            for name in order:
                samples = targets[name](dsn, args.rate, args.seconds, run)
                results[name].append(samples)
                print(f"run {run + 1} {name}: {len(samples)} delivered", file=sys.stderr)
        proc_cpu, backend_cpu = idle_ticker_cpu(dsn, 5.0 if not args.quick else 2.0)
        version = psycopg.connect(dsn).info.server_version
    print(f"## Latency: producer commit to handler start, {args.rate:g} msg/s offered\n")
    print(f"PostgreSQL {version // 10000}.{version % 10000}, {args.runs} run(s) x "
          f"{args.seconds:g} s, one event per transaction, 100 B payloads.\n")  # fmt: skip
    print("| target | p50 ms | p95 ms | p99 ms | max ms |")
    print("|---|---:|---:|---:|---:|")
    for name, runs in results.items():
        s = summary(runs)
        cells = " | ".join(f"{m:.1f} ({lo:.1f}-{hi:.1f})" for m, lo, hi in s.values())
        print(f"| {name} | {cells} |")
    print(f"\nIdle Ticker CPU: {proc_cpu * 100:.1f}% of a core in its process, "
          f"{backend_cpu * 100:.1f}% in its backend.")  # fmt: skip
    print(
        f"\nCommand: `python benchmarks/{Path(__file__).name} {shlex.join(argv or sys.argv[1:])}`"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
