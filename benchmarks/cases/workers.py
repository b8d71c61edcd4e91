"""SDK consumers and library workers draining a preloaded backlog with no-op handlers.

Each target is one worker process (this one) on PostgreSQL 15, each library
in its own database (``synchronous_commit`` off there, as in every session of
the suite): pgque's :class:`pgque.Consumer`, pgqueuer's ``QueueManager`` and
procrastinate's worker, each through its documented API. The backlog is
loaded untimed; the measure runs from the worker's start until it has handled
every job and stopped.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from pgqueuer import Job, QueueManager
from pgqueuer.domain.types import QueueExecutionMode
from pgqueuer.queries import Queries
from procrastinate import App, PsycopgConnector
from procrastinate.types import JSONDict
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

import pgque

from ..core import BenchmarkError, Context, case
from ..fixtures import PAYLOAD_100, connect, eager_queue, preload
from ..targets import target

WORKLOAD = "drain a backlog of 100 B jobs with no-op handlers, one worker process"
PGQUE = "pgque Consumer (no-op handlers)"
PGQUEUER = "pgqueuer worker, batch_size {}"
PROCRASTINATE = "procrastinate worker, concurrency {}"
TIMEOUT = 120.0
"""Seconds a worker may take to drain its backlog before the case fails."""

target(
    goal="workers: pgque Consumer >= 10x pgqueuer's worker (batch_size 100)",
    workload=WORKLOAD,
    subject=PGQUE,
    baseline=PGQUEUER.format(100),
    at_least=10.0,
)
target(
    goal="workers: pgque Consumer >= 10x procrastinate's worker (concurrency 10)",
    workload=WORKLOAD,
    subject=PGQUE,
    baseline=PROCRASTINATE.format(10),
    at_least=10.0,
)


def sync_commit_off(dsn: str) -> None:
    """Turn ``synchronous_commit`` off for every session of the DSN's database."""
    with connect(dsn) as conn:
        name = conn.info.dbname
        conn.execute(
            sql.SQL("alter database {} set synchronous_commit = off").format(sql.Identifier(name))
        )


class Pgque:
    """A ``pgque.Consumer`` draining a pre-ticked backlog, 1,000 events per batch."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.conn = connect(dsn)
        eager_queue(self.conn, "pgque", "workers_q")
        self.conn.execute("select pgque.subscribe('workers_q', 'bench')")

    def load(self, total: int) -> None:
        preload(self.conn, "pgque", "workers_q", total, 1000)

    def drain(self, total: int) -> float:
        consumer = pgque.Consumer(self.dsn, queue="workers_q", name="bench", ticker=False)
        seen = 0

        @consumer.on("bench")
        def handle(msg: pgque.Message) -> None:
            nonlocal seen
            seen += 1
            if seen == total:
                consumer.stop()

        thread = threading.Thread(target=consumer.start, daemon=True)
        start = time.perf_counter()
        thread.start()
        thread.join(TIMEOUT)
        elapsed = time.perf_counter() - start
        if thread.is_alive():
            consumer.stop(now=True)
            raise BenchmarkError(f"{PGQUE}: handled {seen} of {total} in {TIMEOUT:g} s")
        if seen != total:
            raise BenchmarkError(f"{PGQUE}: handled {seen} of {total}")
        return total / elapsed


@asynccontextmanager
async def pgqueuer_queries(dsn: str) -> AsyncIterator[Queries]:
    """pgqueuer's ``Queries`` over a fresh asyncpg connection (its documented driver)."""
    try:
        import asyncpg  # type: ignore[import-untyped]
        from pgqueuer.db import AsyncpgDriver
    except ImportError as exc:
        raise BenchmarkError(
            f"pgqueuer's targets need asyncpg (pip install asyncpg): {exc}"
        ) from exc
    params = conninfo_to_dict(dsn)
    params["database"] = params.pop("dbname")
    conn = await asyncpg.connect(**params)
    try:
        yield Queries(AsyncpgDriver(conn))
    finally:
        await conn.close()


class Pgqueuer:
    """pgqueuer 1.6 over asyncpg: its schema, a batch-enqueued backlog, a draining worker."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn

        async def install() -> None:
            async with pgqueuer_queries(dsn) as queries:
                await queries.install()

        asyncio.run(install())

    def load(self, total: int) -> None:
        async def enqueue() -> None:
            async with pgqueuer_queries(self.dsn) as queries:
                for done in range(0, total, 10_000):
                    n = min(10_000, total - done)
                    await queries.enqueue(["noop"] * n, [PAYLOAD_100.encode()] * n, [0] * n)

        asyncio.run(enqueue())

    def drain(self, total: int, batch_size: int) -> float:
        seen = 0

        async def work() -> float:
            async with pgqueuer_queries(self.dsn) as queries:
                qm = QueueManager(queries)

                @qm.entrypoint("noop")
                async def noop(job: Job) -> None:
                    nonlocal seen
                    seen += 1

                start = time.perf_counter()
                await asyncio.wait_for(
                    qm.run(batch_size=batch_size, mode=QueueExecutionMode.drain), TIMEOUT
                )
                return time.perf_counter() - start

        elapsed = asyncio.run(work())
        if seen != total:
            raise BenchmarkError(f"{PGQUEUER.format(batch_size)}: handled {seen} of {total}")
        return total / elapsed


class Procrastinate:
    """procrastinate 3.10: its schema applied, a batch-deferred backlog, ``wait=False`` worker."""

    def __init__(self, dsn: str) -> None:
        self.app = App(connector=PsycopgConnector(conninfo=dsn))
        self.seen = 0

        @self.app.task(name="noop")
        async def noop(pad: str) -> None:
            self.seen += 1

        self.task = noop

        async def install() -> None:
            async with self.app.open_async():
                await self.app.schema_manager.apply_schema_async()

        asyncio.run(install())

    def load(self, total: int) -> None:
        job: JSONDict = {"pad": "x" * 89}

        async def defer() -> None:
            async with self.app.open_async():
                for done in range(0, total, 1_000):
                    n = min(1_000, total - done)
                    await self.task.batch_defer_async(*[job] * n)

        asyncio.run(defer())

    def drain(self, total: int, concurrency: int) -> float:
        self.seen = 0

        async def work() -> float:
            async with self.app.open_async():
                start = time.perf_counter()
                await asyncio.wait_for(
                    self.app.run_worker_async(
                        concurrency=concurrency, wait=False, install_signal_handlers=False
                    ),
                    TIMEOUT,
                )
                return time.perf_counter() - start

        elapsed = asyncio.run(work())
        if self.seen != total:
            raise BenchmarkError(
                f"{PROCRASTINATE.format(concurrency)}: handled {self.seen} of {total}"
            )
        return total / elapsed


@case("workers", "SDK consumers and library workers, no-op handlers, draining a backlog (PG 15)")
def workers(ctx: Context) -> None:
    sizes = {
        "pgque": ctx.size(100_000, 20_000),
        "pgqueuer": ctx.size(30_000, 10_000),
        "procrastinate": ctx.size(3_000, 500),
    }
    dsns = {
        peer: ctx.clusters.database(f"bench_workers_{peer}", pgque_schema=peer == "pgque")
        for peer in sizes
    }
    for dsn in dsns.values():
        sync_commit_off(dsn)
    pgq = Pgque(dsns["pgque"])
    pgqueuer = Pgqueuer(dsns["pgqueuer"])
    procrastinate = Procrastinate(dsns["procrastinate"])
    loaders = {"pgque": pgq.load, "pgqueuer": pgqueuer.load, "procrastinate": procrastinate.load}
    targets = {PGQUE: lambda: pgq.drain(sizes["pgque"])}
    for n in (10, 100):
        targets[PGQUEUER.format(n)] = lambda n=n: pgqueuer.drain(sizes["pgqueuer"], n)
    for n in (1, 10):
        targets[PROCRASTINATE.format(n)] = lambda n=n: procrastinate.drain(
            sizes["procrastinate"], n
        )

    def load(name: str) -> None:
        peer = name.split()[0]
        loaders[peer](sizes[peer])

    series = ctx.interleave(targets, before=load)
    notes = {
        PGQUE: f"backlog {sizes['pgque']:,} preloaded 1,000 per tick (eager_queue); Consumer"
        " defaults (whole batch per receive, concurrency 1, listen on) with ticker=False,"
        " one @consumer.on('bench') handler; tracing off",
    }
    for n in (10, 100):
        notes[PGQUEUER.format(n)] = (
            f"backlog {sizes['pgqueuer']:,} (batch enqueue; smaller than pgque's to fit the"
            " case's time budget); QueueManager over asyncpg"
            f" (AsyncpgDriver), run(batch_size={n}, mode=drain), async no-op entrypoint"
        )
    for n in (1, 10):
        notes[PROCRASTINATE.format(n)] = (
            f"backlog {sizes['procrastinate']:,} (batch_defer_async); PsycopgConnector,"
            f" run_worker_async(concurrency={n}, wait=False), async no-op task"
        )
    ctx.record(WORKLOAD, series, "jobs/s", notes=notes)
    pgq.conn.close()
