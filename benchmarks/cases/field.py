"""The field's workload: W handlers of 1 ms in flight, a producer holding 4,000 jobs waiting.

The harness the field now compares PostgreSQL queues with, reproduced: one
process per system (this one, one system at a time); an asyncio worker keeps
W handlers in flight, each awaiting 1 ms (``asyncio.sleep(0.001)``; the
threaded ``pgque.Consumer`` sleeps in its handler threads); a producer in the
same process sends batches of up to 1,000 to keep 4,000 jobs waiting.
Figures: jobs handled per second at W = 4, 16, 64, 256 (``--quick``: 4 and
64, short windows); producer commit to handler start (p50, p95, p99) at a
fixed 200 jobs/s, one job per transaction, with W = 8; after that run, the
dead tuples per table (``pg_stat_user_tables.n_dead_tup``, the database
VACUUMed before the run and read once its sessions ended); the CPU share of
pgque's Ticker threads in the process. Systems (``benchmarks/field_systems.py``):
the hand-written asyncio loop over pgque's SQL (``benchmarks/handloop.py``,
the floor an SDK must beat, first in every table), ``pgque.AsyncConsumer``,
``pgque.Consumer``, pgqueuer's and procrastinate's workers, and a SKIP
LOCKED table worker, each in its own database on PostgreSQL 15
(``synchronous_commit`` off), interleaved as the suite does.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Callable

from ..core import Context, Series, case
from ..field_runs import DRAIN_MIN, System, Timing, latency, throughput
from ..field_systems import (
    ASYNC_CONSUMER,
    CLAIM,
    CONSUMER,
    CONSUMER_THREADED,
    HAND_LOOP,
    PGQUEUER,
    PROCRASTINATE,
    SKIP_LOCKED,
    HandLoop,
    PgqueAsync,
    PgqueThreaded,
    Pgqueuer,
    Procrastinate,
    SkipLocked,
)
from ..handloop import IDLE_PAUSE, TICK_EVERY
from ..targets import target
from .workers import sync_commit_off

THROUGHPUT = "field: jobs/s, W={w} handlers of 1 ms in flight, 4,000 jobs waiting"
LATENCY = "field: producer commit to handler start at 200 jobs/s, W=8"
DEAD = "field: dead tuples per table after the 200 jobs/s run"
TICKER = "field: pgque's Ticker threads, share of the process's CPU"
CONCURRENCY = (4, 16, 64, 256)
QUICK_CONCURRENCY = (4, 64)
RATE = 200.0
LATENCY_CONCURRENCY = 8
FULL = Timing(warmup=1.5, window=5.0, settle=1.0, paced=10.0)
QUICK = Timing(warmup=0.5, window=1.0, settle=0.3, paced=1.5)

for _w in CONCURRENCY:
    _at_least = 1.2 if _w >= 64 else 1.0
    target(
        goal=f"field W={_w}: AsyncConsumer >= {_at_least:g}x the hand-written loop's jobs/s",
        workload=THROUGHPUT.format(w=_w),
        subject=ASYNC_CONSUMER,
        baseline=HAND_LOOP,
        at_least=_at_least,
    )
    target(
        goal=f"field W={_w}: threaded Consumer >= 0.8x the hand-written loop's jobs/s",
        workload=THROUGHPUT.format(w=_w),
        subject=CONSUMER_THREADED,
        baseline=HAND_LOOP,
        at_least=0.8,
    )
target(
    goal="field at 200 jobs/s: AsyncConsumer p50 <= 2 ms",
    workload=LATENCY,
    subject=ASYNC_CONSUMER,
    at_most=2.0,
)
target(
    goal="field at 200 jobs/s: AsyncConsumer p99 <= 5 ms",
    workload=LATENCY,
    subject=ASYNC_CONSUMER,
    at_most=5.0,
    metric="p99",
)
target(
    goal="field W=256: the Ticker's threads <= 2% of the AsyncConsumer process's CPU",
    workload=TICKER,
    subject=f"{ASYNC_CONSUMER}, W=256",
    at_most=2.0,
)
target(
    goal="field at 200 jobs/s: AsyncConsumer's dead tuples <= the hand-written loop's",
    workload=DEAD,
    subject=ASYNC_CONSUMER,
    baseline=HAND_LOOP,
    at_least=1.0,
)

NOTES = {
    HAND_LOOP: "benchmarks/handloop.py: pgque.receive (the whole batch) in autocommit, one"
    " gather over a semaphore of W, pgque.ack; select pgque.ticker() every"
    f" {TICK_EVERY * 1000:g} ms (ticker_max_lag 1 µs); {IDLE_PAUSE * 1000:g} ms sleep after"
    " an empty receive; send_batch(text[]) bound in binary",
    ASYNC_CONSUMER: "AsyncConsumer(concurrency=W) with its in-process Ticker (ticker='auto'),"
    " async handler; AsyncProducer.send_batch of dicts (send when paced); create_queue"
    " defaults",
    CONSUMER_THREADED: "Consumer(concurrency=W), handler threads sleeping 1 ms, its Ticker;"
    " Producer.send_batch (send when paced) in a producer thread",
    PGQUEUER: "QueueManager over asyncpg, run(batch_size=W // 2, max_concurrent_tasks=W);"
    " Queries.enqueue of bytes",
    PROCRASTINATE: "run_worker_async(concurrency=W) (listen_notify on), PsycopgConnector"
    " defaults; batch_defer_async (defer_async when paced)",
    SKIP_LOCKED: f"skip_locked.py's table: claim up to {CLAIM:,} rows (FOR UPDATE SKIP LOCKED),"
    " gather over a semaphore of W, delete by id array;"
    f" {IDLE_PAUSE * 1000:g} ms sleep after an empty claim",
}

TICKER_NOTE = (
    "the pgque-ticker and pgque-maintenance threads' CPU (/proc/self/task/<tid>/schedstat)"
    " over the {window}, against the whole process's (handlers, producer, consumer)"
)


def _copy(s: Series, values: list[float]) -> Series:
    return Series(values=values, other_cpu=s.other_cpu, rerun=s.rerun, disturbed=s.disturbed)


@case(
    "field",
    "the field's workload: W handlers of 1 ms in flight, 4,000 jobs waiting (jobs/s); commit"
    " to handler and dead tuples at 200 jobs/s; pgque, a hand-written loop, pgqueuer,"
    " procrastinate, SKIP LOCKED (PG 15)",
)
def field(ctx: Context) -> None:
    # Throughput runs stop their consumer mid-batch on purpose: not worth a warning each.
    stop_warnings = logging.getLogger(f"pgque.consumer.{CONSUMER}")
    level = stop_warnings.level
    stop_warnings.setLevel(logging.ERROR)
    try:
        _field(ctx)
    finally:
        stop_warnings.setLevel(level)


def _field(ctx: Context) -> None:
    timing = QUICK if ctx.quick else FULL
    concurrencies = QUICK_CONCURRENCY if ctx.quick else CONCURRENCY
    makers: dict[str, Callable[[str], System]] = {
        "hand": HandLoop,
        "async": PgqueAsync,
        "threaded": PgqueThreaded,
        "pgqueuer": Pgqueuer,
        "procrastinate": Procrastinate,
        "skip_locked": SkipLocked,
    }
    systems: list[System] = []
    for key, make in makers.items():
        dsn = ctx.clusters.database(
            f"bench_field_{key}", pgque_schema=key in ("hand", "async", "threaded")
        )
        sync_commit_off(dsn)
        systems.append(make(dsn))
    ticker: dict[str, Series] = {}
    window = f"{timing.window:g} s window after {timing.warmup:g} s"
    for w in concurrencies:
        series = ctx.interleave(
            {s.name: (lambda s=s, w=w: throughput(s, w, timing)) for s in systems}
        )
        for name in (ASYNC_CONSUMER, CONSUMER_THREADED):
            ticker[f"{name}, W={w}"] = _copy(series[name], series[name].extra.pop("ticker_cpu"))
        notes = {
            name: f"{note}; {window}; cores: this process's CPU" for name, note in NOTES.items()
        }
        ctx.record(THROUGHPUT.format(w=w), series, "jobs/s", notes=notes)

    lat = ctx.interleave(
        {s.name: (lambda s=s: latency(s, LATENCY_CONCURRENCY, RATE, timing)) for s in systems}
    )
    dead: dict[str, Series] = {}
    lat_notes, dead_notes = {}, {}
    for name, s in lat.items():
        offered, unhandled = s.extra.pop("offered"), s.extra.pop("unhandled")
        dead[name] = _copy(s, s.extra.pop("dead"))
        tables = {k.removeprefix("dead:"): s.extra.pop(k) for k in list(s.extra)
                  if k.startswith("dead:")}  # fmt: skip
        medians = sorted(((statistics.median(v), t) for t, v in tables.items()), reverse=True)
        per_table = ", ".join(f"{t} {m:,.0f}" for m, t in medians if m > 0) or "none"
        dead_notes[name] = (f"median per table: {per_table}; n_dead_tup after a"
                            f" {timing.paced:g} s run, VACUUMed before it")  # fmt: skip
        lat_notes[name] = f"{NOTES[name]}; one job per transaction for {timing.paced:g} s"
        if min(offered) < 0.95 * RATE:
            lat_notes[name] += f"; the producer reached only {min(offered):,.0f} jobs/s"
        if max(unhandled):
            lat_notes[name] += (
                f"; saturated: up to {max(unhandled):,.0f} jobs not handled"
                f" {max(DRAIN_MIN, timing.paced):g} s after the producer stopped (counted"
                " as handled then: the figures are lower bounds)"
            )
    ctx.record(LATENCY, lat, "ms", higher_is_better=False, notes=lat_notes)
    ctx.record(DEAD, dead, "dead tuples", higher_is_better=False, notes=dead_notes)
    ctx.record(
        TICKER,
        ticker,
        "% of process CPU",
        higher_is_better=False,
        notes=dict.fromkeys(ticker, TICKER_NOTE.format(window=window)),
    )
