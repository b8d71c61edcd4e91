"""The field's workload, the part every system shares: producing, counting, measuring.

One system runs at a time, wholly in this process: its worker keeps ``W``
handlers in flight, each awaiting :data:`WORK` seconds (1 ms), and its
producer, in the same process, either holds :data:`DEPTH` jobs waiting
(sent and not yet handled) by sending batches of up to :data:`BATCH`
(:func:`throughput`), or sends one job per transaction at a fixed rate
(:func:`latency`: producer commit to handler start, then the dead tuples
each table was left with). A system (``benchmarks.field_systems``) provides
the worker and the producer through its own library; an asyncio system runs
both in one event loop in a thread of its own (:class:`AsyncRun`), while the
main thread measures.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import psycopg

from .core import BenchmarkError, percentile

DEPTH = 4_000
"""Jobs the producer keeps waiting (sent and not yet handled)."""
BATCH = 1_000
"""The most jobs the producer sends in one batch."""
WORK = 0.001
"""Seconds each handler awaits: the job's work."""
TOP_UP_PAUSE = 0.002
"""Seconds the producer sleeps while the depth is full."""
PAYLOAD: dict[str, Any] = {"pad": "x" * 89}
"""The job's payload: 100 bytes as JSON."""
PAYLOAD_TEXT = json.dumps(PAYLOAD)
START_LIMIT = 30.0
"""Seconds a system may take to start its worker or to become ready."""
FIRST_JOB_LIMIT = 20.0
"""Seconds after the producer's start by which the first job must be handled."""
DRAIN_MIN = 5.0
"""Seconds a paced run waits at least, after its producer stopped, for the jobs to be
handled (at most as long as the producer sent, and never less than this)."""
STOP_LIMIT = 60.0
"""Seconds a system may take to stop."""
EVENT_TABLE = re.compile(r"^pgque\.event_\d+(_\d+)?$")
EVENT_TABLES = "pgque event tables"


@dataclass(frozen=True)
class Timing:
    """How long each measure runs."""

    warmup: float
    """Throughput: seconds from the producer's start (and the first handled job) to the window."""
    window: float
    """Throughput: seconds over which handled jobs are counted."""
    settle: float
    """Latency: seconds the worker runs (and is ready) before the producer starts."""
    paced: float
    """Latency: seconds the paced producer sends."""


@dataclass(frozen=True)
class Paced:
    """A producer sending one job per transaction at ``rate`` a second for ``seconds``."""

    rate: float
    seconds: float


@dataclass
class Meter:
    """What a run counts: jobs sent and handled; for a paced run, times by job id."""

    sent: int = 0
    completed: int = 0
    committed: dict[int, float] = field(default_factory=dict)
    started: dict[int, float] = field(default_factory=dict)
    paced: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def waiting(self) -> int:
        """Jobs sent and not yet handled (in flight included)."""
        return self.sent - self.completed

    def begin(self, job_id: int) -> None:
        """A handler starts on ``job_id`` (call it first thing)."""
        if self.paced:
            self.started.setdefault(job_id, time.perf_counter())

    def done(self) -> None:
        """A handler finished (thread-safe)."""
        with self._lock:
            self.completed += 1


class Run(Protocol):
    """One system's worker and producer running in the background."""

    def start(self) -> None:
        """Start the worker; return once it runs."""

    def go(self) -> None:
        """Start the producer."""

    def produced(self, timeout: float) -> bool:
        """Wait until a paced producer has finished; whether it has."""

    def stop(self) -> None:
        """Stop the producer and the worker; raise what either raised."""


class System(Protocol):
    """A queue library (or a hand-written loop) under the workload."""

    name: str
    ticker: bool
    """Whether it runs pgque's Ticker threads (their CPU is then measured)."""

    def reset(self) -> None:
        """Before each measure: an empty queue, no session left on its database."""

    def ready(self) -> None:
        """After the worker's start: wait until it can take jobs at once."""

    def run(self, concurrency: int, meter: Meter, paced: Paced | None) -> Run:
        """A run of the worker with ``concurrency`` handlers and the producer (``paced`` or not)."""

    def dead_tuples(self) -> dict[str, int]:
        """Dead tuples per table once every session has ended."""


class AsyncSystem:
    """A system whose worker and producer are coroutines (run by :class:`AsyncRun`)."""

    name = ""
    ticker = False

    async def open_producer(self) -> None:
        """Open what the producer needs."""

    async def close_producer(self) -> None:
        """Close it."""

    async def send_batch(self, count: int) -> None:
        """Send ``count`` jobs in one batch."""
        raise NotImplementedError

    async def send_one(self) -> int:
        """Send one job in its own transaction; its id (as the handler sees it)."""
        raise NotImplementedError

    async def consume(
        self, concurrency: int, meter: Meter, halt: asyncio.Event, *, now: bool
    ) -> None:
        """Run the worker until ``halt``; ``now``: without finishing the batch in progress."""
        raise NotImplementedError

    def run(self, concurrency: int, meter: Meter, paced: Paced | None) -> Run:
        """An :class:`AsyncRun` of this system."""
        return AsyncRun(self, concurrency, meter, paced)


async def hold_depth(send_batch: Any, meter: Meter, halt: asyncio.Event) -> None:
    """Keep :data:`DEPTH` jobs waiting with batches of up to :data:`BATCH`, until ``halt``."""
    while not halt.is_set():
        deficit = DEPTH - meter.waiting
        if deficit <= 0:
            await asyncio.sleep(TOP_UP_PAUSE)
            continue
        count = min(BATCH, deficit)
        meter.sent += count
        await send_batch(count)


async def send_paced(send_one: Any, meter: Meter, paced: Paced, halt: asyncio.Event) -> None:
    """One job per transaction at ``paced.rate`` for ``paced.seconds``; notes commit times."""
    start = time.perf_counter()
    n = 0
    while not halt.is_set() and (now := time.perf_counter()) - start < paced.seconds:
        due = start + n / paced.rate
        if due > now:
            await asyncio.sleep(due - now)
        job_id = await send_one()
        meter.committed[job_id] = time.perf_counter()
        meter.sent += 1
        n += 1


class AsyncRun:
    """Runs an :class:`AsyncSystem`'s worker and producer in one event loop, in a thread."""

    def __init__(
        self, system: AsyncSystem, concurrency: int, meter: Meter, paced: Paced | None
    ) -> None:
        self.system, self.concurrency, self.meter, self.paced = system, concurrency, meter, paced
        self.error: BaseException | None = None
        self._up = threading.Event()
        self._go = threading.Event()
        self._produced = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._halt: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name=f"field {system.name}", daemon=True)

    def start(self) -> None:
        self._thread.start()
        if not self._up.wait(START_LIMIT):
            raise BenchmarkError(f"{self.system.name}: did not start in {START_LIMIT:g} s")
        if self.error is not None:
            raise self.error

    def go(self) -> None:
        self._go.set()

    def produced(self, timeout: float) -> bool:
        return self._produced.wait(timeout)

    def stop(self) -> None:
        if self._loop is not None and self._halt is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed already
                self._loop.call_soon_threadsafe(self._halt.set)
        self._thread.join(STOP_LIMIT)
        if self._thread.is_alive():
            raise BenchmarkError(f"{self.system.name}: did not stop in {STOP_LIMIT:g} s")
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # raised again by stop() or start()
            self.error = exc
        finally:
            self._up.set()
            self._produced.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        halt = self._halt = asyncio.Event()
        await self.system.open_producer()
        try:
            worker = asyncio.create_task(self.system.consume(
                self.concurrency, self.meter, halt, now=self.paced is None))  # fmt: skip
            self._up.set()
            try:
                while not self._go.is_set() and not halt.is_set() and not worker.done():
                    await asyncio.sleep(0.01)
                if self.paced is None:
                    await hold_depth(self.system.send_batch, self.meter, halt)
                else:
                    await send_paced(self.system.send_one, self.meter, self.paced, halt)
                    self._produced.set()
                    await halt.wait()
            finally:
                halt.set()
                await worker
        finally:
            await self.system.close_producer()


def _thread_cpu(tid: int) -> float:
    """Seconds of CPU thread ``tid`` of this process ran (schedstat: nanoseconds)."""
    try:
        return int(Path(f"/proc/self/task/{tid}/schedstat").read_text().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ticker_threads_cpu() -> dict[int, float]:
    """CPU seconds of each of pgque's Ticker threads (ticking and maintenance), by thread id."""
    out: dict[int, float] = {}
    for thread in threading.enumerate():
        if thread.name.startswith(("pgque-ticker", "pgque-maintenance")) and thread.native_id:
            with contextlib.suppress(OSError):
                out[thread.native_id] = _thread_cpu(thread.native_id)
    return out


def throughput(system: System, concurrency: int, timing: Timing) -> dict[str, float]:
    """Jobs handled per second over the window, with the depth held; and the CPU taken.

    ``value`` jobs/s; ``cores`` this process's CPU; for systems with pgque's
    Ticker, ``ticker_cpu``: its threads' share of this process's CPU, in %.
    """
    system.reset()
    meter = Meter()
    run = system.run(concurrency, meter, None)
    run.start()
    try:
        system.ready()
        run.go()
        first = time.perf_counter() + FIRST_JOB_LIMIT
        time.sleep(timing.warmup)
        while meter.completed == 0:
            if time.perf_counter() > first:
                raise BenchmarkError(f"{system.name}: no job handled in {FIRST_JOB_LIMIT:g} s")
            time.sleep(0.05)
        done0, t0, cpu0, ticker0 = meter.completed, time.perf_counter(), time.process_time(), \
            ticker_threads_cpu()  # fmt: skip
        time.sleep(timing.window)
        done1, t1, cpu1, ticker1 = meter.completed, time.perf_counter(), time.process_time(), \
            ticker_threads_cpu()  # fmt: skip
    finally:
        run.stop()
    if done1 == done0:
        raise BenchmarkError(f"{system.name}: no job handled in the {timing.window:g} s window")
    out = {"value": (done1 - done0) / (t1 - t0), "cores": (cpu1 - cpu0) / (t1 - t0)}
    if system.ticker:
        ticker = sum(ticker1[t] - ticker0[t] for t in ticker1.keys() & ticker0.keys())
        out["ticker_cpu"] = 100 * ticker / max(cpu1 - cpu0, 1e-9)
    return out


def latency(system: System, concurrency: int, rate: float, timing: Timing) -> dict[str, float]:
    """Producer commit to handler start at ``rate`` jobs/s, and the dead tuples left.

    ``value`` p50 in ms, ``p95``, ``p99``, ``max``; ``offered`` the rate the
    producer reached; ``unhandled`` jobs not handled by the end of the wait
    after the producer (a saturated system: their latency counts as that
    wait's end, so the percentiles are then lower bounds); ``dead`` dead
    tuples in every table after the run and ``dead:<table>`` per table (the
    tables VACUUMed before it).
    """
    system.reset()
    meter = Meter(paced=True)
    run = system.run(concurrency, meter, Paced(rate, timing.paced))
    run.start()
    try:
        system.ready()
        time.sleep(timing.settle)
        run.go()
        if not run.produced(timing.paced + START_LIMIT):
            raise BenchmarkError(f"{system.name}: the paced producer did not finish")
        deadline = time.perf_counter() + max(DRAIN_MIN, timing.paced)
        while len(meter.started) < len(meter.committed) and time.perf_counter() < deadline:
            time.sleep(0.02)
        waited = time.perf_counter()
    finally:
        run.stop()
    if not meter.started:
        raise BenchmarkError(f"{system.name}: none of {len(meter.committed)} jobs handled")
    started = {i: meter.started.get(i, waited) for i in meter.committed}
    ms = [(started[i] - t) * 1000 for i, t in meter.committed.items()]
    dead = system.dead_tuples()
    return {
        "value": percentile(ms, 50),
        "p95": percentile(ms, 95),
        "p99": percentile(ms, 99),
        "max": max(ms),
        "offered": len(meter.committed) / timing.paced,
        "unhandled": float(len(meter.committed.keys() - meter.started.keys())),
        "dead": float(sum(dead.values())),
        **{f"dead:{table}": float(n) for table, n in dead.items()},
    }


def quiesce(dsn: str, limit: float = 15.0) -> None:
    """Wait until no other client session is connected to the DSN's database."""
    deadline = time.monotonic() + limit
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            rows = conn.execute(
                "select pid, application_name, state, left(query, 60) from pg_stat_activity"
                " where datname = current_database() and backend_type = 'client backend'"
                " and pid <> pg_backend_pid()"
            ).fetchall()
            if not rows:
                return
            if time.monotonic() > deadline:
                raise BenchmarkError(f"sessions still connected {limit:g} s after the run: {rows}")
            time.sleep(0.05)


def vacuum(dsn: str) -> None:
    """VACUUM the database once every session has ended (dead tuples start from 0)."""
    quiesce(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("vacuum")


def dead_tuples(dsn: str) -> dict[str, int]:
    """``n_dead_tup`` per table once every session has ended (and flushed its statistics).

    pgque's event tables, one set per queue, are summed under :data:`EVENT_TABLES`.
    """
    quiesce(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "select schemaname || '.' || relname, n_dead_tup from pg_stat_user_tables order by 1"
        ).fetchall()
    out: dict[str, int] = {}
    for table, dead in rows:
        key = EVENT_TABLES if EVENT_TABLE.match(table) else table
        out[key] = out.get(key, 0) + int(dead)
    return out
