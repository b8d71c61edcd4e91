"""End-to-end latency at a fixed offered rate: producer commit to handler start.

A producer thread sends one 100 B event per transaction at 1,000 a second
and notes each commit time; the consumer, in the same process (same clock),
notes when its handler starts for that event. Each library has its own
database on PostgreSQL 15 (``synchronous_commit`` off there). Targets:

* ``pgque``: a queue from ``create_queue(name)``, SDK defaults: a decorated
  :class:`pgque.Consumer` with its in-process Ticker (``ticker="auto"``), no
  pg_cron;
* ``pgq-100ms``: PgQ 3.5, a ticker calling ``pgq.ticker(queue)`` every 100 ms
  (``ticker_max_lag`` 1 µs) and a consumer polling ``next_batch`` every 10 ms;
* ``pgqueuer (LISTEN/NOTIFY)``: a pgqueuer ``QueueManager`` with default
  settings, woken by its NOTIFY trigger;
* ``procrastinate (LISTEN/NOTIFY)``: procrastinate's worker, ``listen_notify``
  on, concurrency 10.

After the producer stops, the measure waits (up to :data:`DRAIN_LIMIT`) until
every event was handled, so a consumer that falls behind shows its queueing
delay. pgque and pgqueuer are measured at 10 and 10,000 msg/s too
(:data:`OTHER_RATES`; 10,000 from :data:`FAST_PRODUCERS` threads). The idle
Ticker's CPU (its thread and its backend) is a second workload.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pgqueuer import Job, QueueManager
from pgqueuer.db import SyncPsycopgDriver
from pgqueuer.queries import SyncQueries
from procrastinate import App, JobContext, PsycopgConnector, SyncPsycopgConnector

import pgque

from ..core import BenchmarkError, Context, Series, case, percentile
from ..fixtures import PAYLOAD_100, Conn, connect
from ..targets import target
from .workers import pgqueuer_queries, sync_commit_off

WORKLOAD = "latency at 1,000 msg/s offered, producer commit to handler start"
RATE_WORKLOAD = "latency at {rate:,} msg/s offered, producer commit to handler start"
OTHER_RATES = (10, 10_000)
FAST_PRODUCERS = 4
"""Producer threads at 10,000 msg/s (one send takes about 0.1 ms)."""
IDLE_WORKLOAD = "idle Ticker CPU"
RATE = 1000.0
DRAIN_LIMIT = 60.0
"""Seconds the measure waits after the producer for every event to be handled."""
PROCRASTINATE_CONCURRENCY = 10
PRODUCER_THREADS = 4
"""procrastinate's producer threads: one sync ``defer`` takes 1.5-2 ms (several round trips)."""

PGQUE = "pgque"
PGQ = "pgq-100ms"
PGQUEUER = "pgqueuer (LISTEN/NOTIFY)"
PROCRASTINATE = "procrastinate (LISTEN/NOTIFY)"

target(
    goal="latency at 1,000 msg/s: pgque p50 <= 1.0 ms",
    workload=WORKLOAD,
    subject=PGQUE,
    at_most=1.0,
)
target(
    goal="latency at 1,000 msg/s: pgque p99 <= 5 ms",
    workload=WORKLOAD,
    subject=PGQUE,
    at_most=5.0,
    metric="p99",
)
target(
    goal="latency at 1,000 msg/s: pgque p50 at or below pgqueuer's",
    workload=WORKLOAD,
    subject=PGQUE,
    baseline=PGQUEUER,
    at_least=1.0,
)
target(
    goal="latency at 1,000 msg/s: pgque p99 below pgqueuer's",
    workload=WORKLOAD,
    subject=PGQUE,
    baseline=PGQUEUER,
    at_least=1.0,
    metric="p99",
)
target(
    goal="idle Ticker: process and backend together <= 0.5% of a core",
    workload=IDLE_WORKLOAD,
    subject="idle Ticker process + backend",
    at_most=0.5,
)

Send = Callable[[], int]
"""Sends one event in its own transaction; its id."""


class Run:
    """One measure: a producer at ``rate`` (:data:`RATE`) and the handler start times by id."""

    def __init__(self, name: str, seconds: float, rate: float = RATE) -> None:
        self.name, self.seconds, self.rate = name, seconds, rate
        self.committed: dict[int, float] = {}
        self.started: dict[int, float] = {}
        self.lock = threading.Lock()
        self.backlog = 0

    def handled(self, event_id: int) -> None:
        """Note the handler start for ``event_id`` (call first thing in the handler)."""
        self.started.setdefault(event_id, time.perf_counter())

    def produce(
        self, send: Send, backlog: Callable[[], int] | None = None, *, threads: int = 1
    ) -> None:
        """Send at ``rate`` for ``seconds``; then wait for every event to be handled.

        ``threads`` producer threads share the rate (``send`` must be thread-safe);
        ``backlog`` counts events not yet taken, read once when the producers stop.
        """
        start = time.perf_counter()

        def producer(offset: int) -> None:
            n = 0
            while (now := time.perf_counter()) - start < self.seconds:
                due = start + (n * threads + offset) / self.rate
                if due > now:
                    time.sleep(due - now)
                event_id = send()
                self.committed[event_id] = time.perf_counter()  # autocommit: committed
                n += 1

        if threads == 1:
            producer(0)
        else:
            pool = [threading.Thread(target=producer, args=(i,)) for i in range(threads)]
            for t in pool:
                t.start()
            for t in pool:
                t.join()
        if backlog is not None:
            self.backlog = backlog()
        deadline = time.perf_counter() + DRAIN_LIMIT
        while time.perf_counter() < deadline and not self.committed.keys() <= self.started.keys():
            time.sleep(0.05)
        time.sleep(0.1)

    def figures(self) -> dict[str, float]:
        """p50 (as ``value``), p95, p99 and max in milliseconds."""
        missing = len(self.committed.keys() - self.started.keys())
        if missing:
            raise BenchmarkError(
                f"latency: target {self.name!r}: {missing} of {len(self.committed)} events"
                f" not handled {DRAIN_LIMIT:g} s after the producer stopped"
            )
        ms = [(self.started[i] - t) * 1000 for i, t in self.committed.items()]
        return {
            "value": percentile(ms, 50),
            "p95": percentile(ms, 95),
            "p99": percentile(ms, 99),
            "max": max(ms),
            "backlog": float(self.backlog),
            "offered": len(self.committed) / self.seconds,
        }


def _sql_sender(conn: Conn, statement: str, queue: str) -> Send:
    def send() -> int:
        row = conn.execute(statement, (queue, PAYLOAD_100)).fetchone()
        assert row is not None
        return int(row[0])

    return send


def measure_pgque(
    dsn: str, queue: str, seconds: float, rate: float = RATE, threads: int = 1
) -> dict[str, float]:
    """SDK defaults: a decorated Consumer with its in-process Ticker."""
    with connect(dsn) as conn:
        conn.execute("select pgque.create_queue(%s)", (queue,))
        conn.execute("select pgque.subscribe(%s, 'bench')", (queue,))
        run = Run(PGQUE, seconds, rate)
        consumer = pgque.Consumer(dsn, queue=queue, name="bench")

        @consumer.on("bench")
        def handle(msg: pgque.Message) -> None:
            run.handled(msg.msg_id)

        thread = threading.Thread(target=consumer.start, daemon=True)
        thread.start()
        time.sleep(1.0)  # ticker leadership and LISTEN set up before the clock starts
        opened = [connect(dsn) for _ in range(threads)]
        senders = list(opened)
        local = threading.local()
        statement = "select pgque.send(%s, 'bench', %s::text)"

        def send() -> int:  # one connection per producer thread
            if not hasattr(local, "send"):
                local.send = _sql_sender(senders.pop(), statement, queue)
            return int(local.send())

        try:
            run.produce(send, threads=threads)
        finally:
            consumer.stop()
            thread.join(10)
            for c in opened:
                c.close()
        conn.execute("select pgque.unsubscribe(%s, 'bench')", (queue,))
        conn.execute("select pgque.drop_queue(%s)", (queue,))
    return run.figures()


def measure_pgq(dsn: str, queue: str, seconds: float) -> dict[str, float]:
    """PgQ 3.5: a 100 ms ticker thread and a consumer polling every 10 ms."""
    with connect(dsn) as conn:
        conn.execute("select pgq.create_queue(%s)", (queue,))
        # Tick on every call that sees events: a tick every 100 ms under load.
        conn.execute("select pgq.set_queue_config(%s, 'ticker_max_lag', '1 microsecond')", (queue,))
        conn.execute("select pgq.register_consumer(%s, 'bench')", (queue,))
        run = Run(PGQ, seconds)
        stop = threading.Event()

        def ticker() -> None:
            with connect(dsn) as tconn:
                while not stop.wait(0.1):
                    tconn.execute("select pgq.ticker(%s)", (queue,))

        def consume() -> None:
            with connect(dsn) as cconn:
                while not stop.is_set():
                    batch = cconn.execute("select pgq.next_batch(%s, 'bench')", (queue,)).fetchone()
                    if batch is None or batch[0] is None:
                        time.sleep(0.01)
                        continue
                    events = cconn.execute(
                        "select ev_id from pgq.get_batch_events(%s)", (batch[0],)
                    ).fetchall()
                    for (ev_id,) in events:
                        run.handled(int(ev_id))
                    cconn.execute("select pgq.finish_batch(%s)", (batch[0],))

        threads = [threading.Thread(target=f, daemon=True) for f in (ticker, consume)]
        for t in threads:
            t.start()
        try:
            run.produce(_sql_sender(conn, "select pgq.insert_event(%s, 'bench', %s)", queue))
        finally:
            stop.set()
            for t in threads:
                t.join(10)
        conn.execute("select pgq.unregister_consumer(%s, 'bench')", (queue,))
        conn.execute("select pgq.drop_queue(%s)", (queue,))
    return run.figures()


class AsyncWorker:
    """Runs a coroutine (a worker) in its own thread and event loop; cancels it to stop."""

    def __init__(self, work: Callable[[], Any]) -> None:
        self.work = work
        self.loop: asyncio.AbstractEventLoop | None = None
        self.task: asyncio.Task[Any] | None = None
        self.error: BaseException | None = None
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        async def main() -> None:
            self.loop = asyncio.get_running_loop()
            self.task = asyncio.ensure_future(self.work())
            self.ready.set()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task

        try:
            asyncio.run(main())
        except BaseException as exc:  # reported by stop()
            self.error = exc
        finally:
            self.ready.set()

    def start(self) -> None:
        self.thread.start()
        self.ready.wait(10)

    def stop(self, how: Callable[[], None] | None = None) -> None:
        """``how()`` in the loop (default: cancel the task); then wait for the thread."""
        if self.loop is not None and self.task is not None and not self.task.done():
            self.loop.call_soon_threadsafe(how or self.task.cancel)
        self.thread.join(30)
        if self.thread.is_alive():
            raise BenchmarkError("the worker did not stop within 30 s")
        if self.error is not None:
            raise self.error


def measure_pgqueuer(
    dsn: str, seconds: float, rate: float = RATE, threads: int = 1
) -> dict[str, float]:
    """A pgqueuer QueueManager (asyncpg, default settings); sync enqueue, one per transaction."""
    run = Run(PGQUEUER, seconds, rate)
    managers: list[QueueManager] = []

    async def work() -> None:
        async with pgqueuer_queries(dsn) as queries:
            qm = QueueManager(queries)
            managers.append(qm)

            @qm.entrypoint("lat")
            async def handle(job: Job) -> None:
                run.handled(int(job.id))

            await qm.run()

    worker = AsyncWorker(work)
    worker.start()
    time.sleep(1.0)  # LISTEN set up before the clock starts
    with connect(dsn) as conn:
        queries = SyncQueries(SyncPsycopgDriver(conn))
        payload = PAYLOAD_100.encode()
        opened = [connect(dsn) for _ in range(threads)]
        senders = [SyncQueries(SyncPsycopgDriver(c)) for c in opened]
        local = threading.local()

        def enqueue() -> int:  # one connection per producer thread
            if not hasattr(local, "queries"):
                local.queries = senders.pop()
            return int(local.queries.enqueue("lat", payload)[0])

        try:
            run.produce(
                enqueue,
                lambda: sum(s.count for s in queries.queue_size() if s.status == "queued"),
                threads=threads,
            )
        finally:
            worker.stop(managers[0].shutdown.set if managers else None)
            for c in opened:
                c.close()
    return run.figures()


def measure_procrastinate(dsn: str, seconds: float) -> dict[str, float]:
    """procrastinate's worker (listen_notify on, concurrency 10); sync defer, one per job."""
    run = Run(PROCRASTINATE, seconds)
    app = App(connector=PsycopgConnector(conninfo=dsn))

    @app.task(name="lat", pass_context=True)
    async def handle(context: JobContext, pad: str) -> None:
        assert context.job.id is not None
        run.handled(context.job.id)

    async def work() -> None:
        async with app.open_async():
            await app.run_worker_async(
                concurrency=PROCRASTINATE_CONCURRENCY,
                listen_notify=True,
                install_signal_handlers=False,
            )

    worker = AsyncWorker(work)
    worker.start()
    time.sleep(1.0)
    producer = App(connector=SyncPsycopgConnector(conninfo=dsn))
    with producer.open(), connect(dsn) as conn:
        deferrer = producer.configure_task("lat")

        def todo() -> int:
            row = conn.execute(
                "select count(*) from procrastinate_jobs where status = 'todo'"
            ).fetchone()
            return int(row[0]) if row else 0

        try:
            run.produce(lambda: deferrer.defer(pad="x" * 89), todo, threads=PRODUCER_THREADS)
        finally:
            worker.stop()
    return run.figures()


def idle_ticker_cpu(dsn: str, seconds: float) -> dict[str, float]:
    """Cores an idle Ticker takes: ``value`` its process (thread), ``backend`` its backend."""
    ticker = pgque.Ticker(dsn).start()
    try:
        deadline = time.monotonic() + 10
        while not ticker.leading:
            if time.monotonic() > deadline:
                raise BenchmarkError("latency: the idle Ticker did not take the lead in 10 s")
            time.sleep(0.05)
        with connect(dsn) as conn:
            row = conn.execute("select pid from pgque.ticker_leader() where active").fetchone()
        if row is None:
            raise BenchmarkError("latency: no backend leads through the ticker lease")
        time.sleep(1.0)
        proc0, backend0 = time.process_time(), _backend_cpu(row[0])
        time.sleep(seconds)
        proc = (time.process_time() - proc0) / seconds
        backend = (_backend_cpu(row[0]) - backend0) / seconds
    finally:
        ticker.stop()
    return {"value": proc * 100, "backend": backend * 100}


def _backend_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime + stime
    return ticks / os.sysconf("SC_CLK_TCK")


@case("latency", "end-to-end latency at 1,000 msg/s offered, and the idle Ticker's CPU (PG 15)")
def latency(ctx: Context) -> None:
    seconds = 10.0 if not ctx.quick else 2.5
    dsns = {
        PGQUE: ctx.clusters.database("bench_lat_pgque"),
        PGQ: ctx.clusters.database("bench_lat_pgq", pgq=True, pgque_schema=False),
        PGQUEUER: ctx.clusters.database("bench_lat_pgqueuer", pgque_schema=False),
        PROCRASTINATE: ctx.clusters.database("bench_lat_procrastinate", pgque_schema=False),
    }
    for dsn in dsns.values():
        sync_commit_off(dsn)

    async def install() -> None:
        async with pgqueuer_queries(dsns[PGQUEUER]) as queries:
            await queries.install()
        app = App(connector=PsycopgConnector(conninfo=dsns[PROCRASTINATE]))
        async with app.open_async():
            await app.schema_manager.apply_schema_async()

    asyncio.run(install())
    queues = itertools.count()
    series = ctx.interleave(
        {
            PGQUE: lambda: measure_pgque(dsns[PGQUE], f"lat_pgque_{next(queues)}", seconds),
            PGQ: lambda: measure_pgq(dsns[PGQ], f"lat_pgq_{next(queues)}", seconds),
            PGQUEUER: lambda: measure_pgqueuer(dsns[PGQUEUER], seconds),
            PROCRASTINATE: lambda: measure_procrastinate(dsns[PROCRASTINATE], seconds),
        }
    )
    runs = f"{seconds:g} s per run, one 100 B event per transaction"
    notes = {
        PGQUE: f"create_queue defaults; Consumer() defaults with its in-process Ticker"
        f" (ticker='auto', no pg_cron), one @consumer.on handler; {runs}",
        PGQ: f"PgQ 3.5: pgq.ticker(queue) every 100 ms (ticker_max_lag 1 µs), next_batch polled"
        f" every 10 ms; {runs}",
        PGQUEUER: f"QueueManager over asyncpg, run() defaults (batch_size 10, LISTEN/NOTIFY"
        f" wakeups); SyncQueries.enqueue per job; {runs}",
        PROCRASTINATE: f"run_worker_async(concurrency={PROCRASTINATE_CONCURRENCY},"
        f" listen_notify=True); sync defer per job from {PRODUCER_THREADS} producer threads"
        f" (one defer takes 1.5-2 ms); {runs}",
    }
    for name, s in series.items():
        backlog, sent = s.extra.pop("backlog"), s.extra.pop("offered")
        if name in (PGQUEUER, PROCRASTINATE):
            saturated = "saturated: " if max(backlog) > RATE / 2 else ""
            notes[name] += (
                f"; {saturated}backlog grew to {max(backlog):,.0f} (at the producer's stop)"
            )
        if min(sent) < 0.95 * RATE:
            notes[name] += f"; the producer reached only {min(sent):,.0f} msg/s"
    ctx.record(WORKLOAD, series, "ms", higher_is_better=False, notes=notes)

    for rate in OTHER_RATES:
        threads = FAST_PRODUCERS if rate > RATE else 1
        by_rate = ctx.interleave(
            {
                PGQUE: lambda r=rate, t=threads: measure_pgque(
                    dsns[PGQUE], f"lat_pgque_{next(queues)}", seconds, r, t
                ),
                PGQUEUER: lambda r=rate, t=threads: measure_pgqueuer(dsns[PGQUEUER], seconds, r, t),
            }
        )
        producers = f"{threads} producer threads" if threads > 1 else "one producer"
        rate_notes = {name: notes[name] + f"; {producers}" for name in by_rate}
        for name, s in by_rate.items():
            backlog, sent = s.extra.pop("backlog"), s.extra.pop("offered")
            if min(sent) < 0.95 * rate:
                rate_notes[name] += f"; the producers reached only {min(sent):,.0f} msg/s"
            if name == PGQUEUER and max(backlog) > rate / 2:
                rate_notes[name] += f"; saturated: backlog grew to {max(backlog):,.0f}"
        ctx.record(RATE_WORKLOAD.format(rate=rate), by_rate, "ms", higher_is_better=False,
                   notes=rate_notes)  # fmt: skip

    with connect(dsns[PGQUE]) as conn:
        conn.execute("select pgque.create_queue('idle_q')")
        conn.execute("select pgque.subscribe('idle_q', 'bench')")
    idle = ctx.interleave({"idle Ticker": lambda: idle_ticker_cpu(dsns[PGQUE], seconds / 2)})
    s = idle["idle Ticker"]
    idle_series = {
        "idle Ticker process": Series(values=s.values, other_cpu=s.other_cpu,
                                      rerun=s.rerun, disturbed=s.disturbed),
        "idle Ticker backend": Series(values=s.extra["backend"], other_cpu=s.other_cpu,
                                      rerun=s.rerun, disturbed=s.disturbed),
        "idle Ticker process + backend": Series(
            values=[p + b for p, b in zip(s.values, s.extra["backend"], strict=True)],
            other_cpu=s.other_cpu, rerun=s.rerun, disturbed=s.disturbed),
    }  # fmt: skip
    note = f"pgque.Ticker() defaults, {seconds / 2:g} s; one idle queue with one consumer"
    ctx.record(
        IDLE_WORKLOAD,
        idle_series,
        "% of a core",
        higher_is_better=False,
        notes=dict.fromkeys(idle_series, note),
    )
