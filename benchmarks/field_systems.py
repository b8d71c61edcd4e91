"""The systems under the field's workload, each written as its documentation recommends.

* :class:`PgqueAsync`: ``pgque.AsyncConsumer(concurrency=W)`` with its
  in-process Ticker (``ticker="auto"``, no pg_cron) and an ``async def``
  handler; ``pgque.AsyncProducer.send_batch`` (``send`` when paced) on a
  queue made by ``create_queue`` with its defaults.
* :class:`PgqueThreaded`: ``pgque.Consumer(concurrency=W)`` (handler threads
  sleeping 1 ms) with its Ticker; ``pgque.Producer`` in a thread.
* :class:`HandLoop`: ``benchmarks.handloop``, the hand-written asyncio loop
  over pgque's SQL.
* :class:`Pgqueuer`: pgqueuer's ``QueueManager`` over asyncpg,
  ``run(batch_size=W // 2, max_concurrent_tasks=W)`` (its cap on jobs in
  flight, which must be at least twice the batch); ``Queries.enqueue``.
* :class:`Procrastinate`: procrastinate's worker,
  ``run_worker_async(concurrency=W)`` (LISTEN/NOTIFY on, its defaults
  otherwise); ``batch_defer_async`` / ``defer_async``.
* :class:`SkipLocked`: the suite's SKIP LOCKED table (``skip_locked.py``)
  read by an asyncio loop like the hand-written one: claim up to
  :data:`CLAIM` rows, gather the handlers under a semaphore, delete the
  rows; :data:`handloop.IDLE_PAUSE` after an empty claim.

Every system has its own database (``synchronous_commit`` off there, as in
every session of the suite) and starts each measure from an empty queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
from pgqueuer import Job, QueueManager
from pgqueuer.queries import Queries
from procrastinate import App, JobContext, PsycopgConnector

import pgque

from . import handloop, skip_locked
from .core import BenchmarkError
from .field_runs import (
    BATCH,
    DEPTH,
    PAYLOAD,
    PAYLOAD_TEXT,
    START_LIMIT,
    STOP_LIMIT,
    TOP_UP_PAUSE,
    WORK,
    AsyncSystem,
    Meter,
    Paced,
    Run,
    dead_tuples,
    quiesce,
    vacuum,
)
from .fixtures import connect

JOB = "job"
"""The jobs' type (pgque), entrypoint (pgqueuer) or task name (procrastinate)."""
CONSUMER = "bench"
CLAIM = 1_000
"""Rows the SKIP LOCKED worker claims per read."""

ASYNC_CONSUMER = "pgque AsyncConsumer"
CONSUMER_THREADED = "pgque Consumer (threads)"
HAND_LOOP = "hand-written loop over pgque's SQL"
PGQUEUER = "pgqueuer QueueManager"
PROCRASTINATE = "procrastinate worker"
SKIP_LOCKED = "SKIP LOCKED table, asyncio loop"


def pgqueuer_queries(dsn: str) -> Any:
    """``cases.workers.pgqueuer_queries`` (imported late: the cases package imports this module)."""
    from .cases.workers import pgqueuer_queries as queries

    return queries(dsn)


async def _until(halt: asyncio.Event, task: asyncio.Task[Any]) -> None:
    """Wait for ``halt`` or for ``task`` to end (a worker that failed)."""
    waiter = asyncio.create_task(halt.wait())
    try:
        await asyncio.wait({waiter, task}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()


async def _end(task: asyncio.Task[Any], stop: asyncio.Event, *, now: bool) -> None:
    """End a loop's ``task``: cancelled when ``now``, else by ``stop`` after its batch."""
    if now:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    else:
        stop.set()
        await task


class PgqueQueue:
    """A fresh pgque queue for every measure in the system's database."""

    prefix = "field"

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.queue = ""
        self._numbers = itertools.count()

    def create(self, conn: psycopg.Connection[Any]) -> None:
        """Create and subscribe :attr:`queue` (``create_queue``'s defaults)."""
        conn.execute("select pgque.create_queue(%s)", (self.queue,))
        conn.execute("select pgque.subscribe(%s, %s)", (self.queue, CONSUMER))

    def reset(self) -> None:
        quiesce(self.dsn)  # every session of the last measure ended
        with connect(self.dsn) as conn:
            if self.queue:
                conn.execute("select pgque.unsubscribe(%s, %s)", (self.queue, CONSUMER))
                conn.execute("select pgque.drop_queue(%s)", (self.queue,))
            self.queue = f"{self.prefix}_{next(self._numbers)}"
            self.create(conn)
        vacuum(self.dsn)

    def ready(self) -> None:
        """Wait until a session of this process leads the ticking (pgque's Ticker)."""
        deadline = time.monotonic() + START_LIMIT
        with connect(self.dsn) as conn:
            while conn.execute(
                "select 1 from pgque.ticker_leader() l join pg_stat_activity a using (pid)"
                " where l.active"
            ).fetchone() is None:  # fmt: skip
                if time.monotonic() > deadline:
                    raise BenchmarkError(f"no Ticker leads in {self.dsn} after {START_LIMIT:g} s")
                time.sleep(0.02)

    def dead_tuples(self) -> dict[str, int]:
        return dead_tuples(self.dsn)


class PgqueAsync(PgqueQueue, AsyncSystem):
    """``pgque.AsyncConsumer`` and ``pgque.AsyncProducer``."""

    name = ASYNC_CONSUMER
    ticker = True

    async def open_producer(self) -> None:
        self.producer = pgque.AsyncProducer(self.dsn)
        await self.producer.open()

    async def close_producer(self) -> None:
        await self.producer.close()

    async def send_batch(self, count: int) -> None:
        await self.producer.send_batch(self.queue, [PAYLOAD] * count, type=JOB)

    async def send_one(self) -> int:
        return await self.producer.send(self.queue, PAYLOAD, type=JOB)

    async def consume(
        self, concurrency: int, meter: Meter, halt: asyncio.Event, *, now: bool
    ) -> None:
        consumer = pgque.AsyncConsumer(
            self.dsn, queue=self.queue, name=CONSUMER, concurrency=concurrency
        )

        @consumer.on(JOB)
        async def handle(msg: pgque.Message) -> None:
            meter.begin(msg.msg_id)
            await asyncio.sleep(WORK)
            meter.done()

        task = asyncio.create_task(consumer.start())
        await _until(halt, task)
        consumer.stop(now=now)
        await task


class PgqueThreaded(PgqueQueue):
    """``pgque.Consumer`` (handler threads) and ``pgque.Producer`` in a producer thread."""

    name = CONSUMER_THREADED
    ticker = True

    def run(self, concurrency: int, meter: Meter, paced: Paced | None) -> Run:
        return ThreadRun(self, concurrency, meter, paced)


class ThreadRun:
    """A ``pgque.Consumer`` in one thread, a ``pgque.Producer`` loop in another."""

    def __init__(
        self, system: PgqueThreaded, concurrency: int, meter: Meter, paced: Paced | None
    ) -> None:
        self.system, self.meter, self.paced = system, meter, paced
        self.errors: list[BaseException] = []
        self.halt = threading.Event()
        self.done_producing = threading.Event()
        self.consumer = pgque.Consumer(
            system.dsn, queue=system.queue, name=CONSUMER, concurrency=concurrency
        )

        @self.consumer.on(JOB)
        def handle(msg: pgque.Message) -> None:
            meter.begin(msg.msg_id)
            time.sleep(WORK)
            meter.done()

        self.threads = [self._thread(self.consumer.start, "consumer"),
                        self._thread(self._produce, "producer")]  # fmt: skip

    def _thread(self, target: Callable[[], None], what: str) -> threading.Thread:
        def run() -> None:
            try:
                target()
            except BaseException as exc:  # raised again by stop()
                self.errors.append(exc)
                self.halt.set()
            finally:
                if what == "producer":
                    self.done_producing.set()

        return threading.Thread(target=run, name=f"field {self.system.name} {what}", daemon=True)

    def _produce(self) -> None:
        producer = pgque.Producer(self.system.dsn)
        queue, meter = self.system.queue, self.meter
        try:
            if self.paced is None:
                while not self.halt.is_set():
                    deficit = DEPTH - meter.waiting
                    if deficit <= 0:
                        time.sleep(TOP_UP_PAUSE)
                        continue
                    count = min(BATCH, deficit)
                    meter.sent += count
                    producer.send_batch(queue, [PAYLOAD] * count, type=JOB)
                return
            start, n = time.perf_counter(), 0
            while (
                not self.halt.is_set() and (now := time.perf_counter()) - start < self.paced.seconds
            ):
                due = start + n / self.paced.rate
                if due > now:
                    time.sleep(due - now)
                job_id = producer.send(queue, PAYLOAD, type=JOB)
                meter.committed[job_id] = time.perf_counter()
                meter.sent += 1
                n += 1
        finally:
            producer.close()

    def start(self) -> None:
        self.threads[0].start()

    def go(self) -> None:
        self.threads[1].start()

    def produced(self, timeout: float) -> bool:
        return self.done_producing.wait(timeout)

    def stop(self) -> None:
        self.halt.set()
        if self.threads[1].is_alive():
            self.threads[1].join(STOP_LIMIT)
        self.consumer.stop(now=self.paced is None)
        self.threads[0].join(STOP_LIMIT)
        if any(t.is_alive() for t in self.threads):
            raise BenchmarkError(f"{self.system.name}: did not stop in {STOP_LIMIT:g} s")
        if self.errors:
            raise self.errors[0]


class HandLoop(PgqueQueue, AsyncSystem):
    """``benchmarks.handloop``: receive, gather under a semaphore, ack; a ticker every 50 ms."""

    name = HAND_LOOP
    ticker = False
    prefix = "hand"

    def create(self, conn: psycopg.Connection[Any]) -> None:
        handloop.create(conn, self.queue, CONSUMER)

    def ready(self) -> None:
        pass  # its ticker statement runs from the start

    async def open_producer(self) -> None:
        self.conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)

    async def close_producer(self) -> None:
        await self.conn.close()

    async def send_batch(self, count: int) -> None:
        payloads = [PAYLOAD_TEXT] * count
        await handloop.send_batch(self.conn, self.queue, JOB, payloads)

    async def send_one(self) -> int:
        return await handloop.send(self.conn, self.queue, JOB, PAYLOAD_TEXT)

    async def consume(
        self, concurrency: int, meter: Meter, halt: asyncio.Event, *, now: bool
    ) -> None:
        async def handle(msg_id: int, payload: str) -> None:
            meter.begin(msg_id)
            await asyncio.sleep(WORK)
            meter.done()

        stop = asyncio.Event()
        task = asyncio.create_task(
            handloop.consume(self.dsn, self.queue, CONSUMER, concurrency, handle, stop)
        )
        await _until(halt, task)
        await _end(task, stop, now=now)


class Pgqueuer(AsyncSystem):
    """pgqueuer 1.6: ``QueueManager`` over asyncpg, ``Queries.enqueue``."""

    name = PGQUEUER

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn

        async def install() -> None:
            async with pgqueuer_queries(dsn) as queries:
                await queries.install()

        asyncio.run(install())

    def reset(self) -> None:
        quiesce(self.dsn)
        with connect(self.dsn) as conn:
            conn.execute("truncate pgqueuer, pgqueuer_log")
        vacuum(self.dsn)

    def ready(self) -> None:
        pass

    def dead_tuples(self) -> dict[str, int]:
        return dead_tuples(self.dsn)

    async def open_producer(self) -> None:
        self.stack = contextlib.AsyncExitStack()
        self.queries: Queries = await self.stack.enter_async_context(pgqueuer_queries(self.dsn))

    async def close_producer(self) -> None:
        await self.stack.aclose()

    async def send_batch(self, count: int) -> None:
        payloads: list[bytes | None] = [PAYLOAD_TEXT.encode() for _ in range(count)]
        await self.queries.enqueue([JOB] * count, payloads, [0] * count)

    async def send_one(self) -> int:
        return int((await self.queries.enqueue(JOB, PAYLOAD_TEXT.encode()))[0])

    async def consume(
        self, concurrency: int, meter: Meter, halt: asyncio.Event, *, now: bool
    ) -> None:
        async with pgqueuer_queries(self.dsn) as queries:
            qm = QueueManager(queries)

            @qm.entrypoint(JOB)
            async def handle(job: Job) -> None:
                meter.begin(int(job.id))
                await asyncio.sleep(WORK)
                meter.done()

            task = asyncio.create_task(
                qm.run(batch_size=max(1, concurrency // 2), max_concurrent_tasks=concurrency)
            )
            await _until(halt, task)
            qm.shutdown.set()
            await task


class Procrastinate(AsyncSystem):
    """procrastinate 3.10: its worker and ``batch_defer_async``, one ``App``."""

    name = PROCRASTINATE

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.app = App(connector=PsycopgConnector(conninfo=dsn))
        self.meter = Meter()

        @self.app.task(name=JOB, pass_context=True)
        async def job(context: JobContext, pad: str) -> None:
            assert context.job.id is not None
            self.meter.begin(context.job.id)
            await asyncio.sleep(WORK)
            self.meter.done()

        self.task = job

        async def install() -> None:
            async with self.app.open_async():
                await self.app.schema_manager.apply_schema_async()

        asyncio.run(install())

    def reset(self) -> None:
        quiesce(self.dsn)
        with connect(self.dsn) as conn:
            conn.execute("truncate procrastinate_jobs cascade")
        vacuum(self.dsn)

    def ready(self) -> None:
        pass

    def dead_tuples(self) -> dict[str, int]:
        return dead_tuples(self.dsn)

    async def open_producer(self) -> None:
        await self.app.open_async()

    async def close_producer(self) -> None:
        await self.app.close_async()

    async def send_batch(self, count: int) -> None:
        await self.task.batch_defer_async(*[PAYLOAD] * count)

    async def send_one(self) -> int:
        return await self.task.defer_async(**PAYLOAD)

    async def consume(
        self, concurrency: int, meter: Meter, halt: asyncio.Event, *, now: bool
    ) -> None:
        self.meter = meter
        task = asyncio.create_task(
            self.app.run_worker_async(concurrency=concurrency, install_signal_handlers=False)
        )
        await _until(halt, task)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class SkipLocked(AsyncSystem):
    """``skip_locked.py``'s table: claim, gather under a semaphore, delete."""

    name = SKIP_LOCKED

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        with connect(dsn) as conn:
            skip_locked.create(conn)

    def reset(self) -> None:
        quiesce(self.dsn)
        with connect(self.dsn) as conn:
            conn.execute("truncate skq restart identity")
        vacuum(self.dsn)

    def ready(self) -> None:
        pass

    def dead_tuples(self) -> dict[str, int]:
        return dead_tuples(self.dsn)

    async def open_producer(self) -> None:
        self.conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)

    async def close_producer(self) -> None:
        await self.conn.close()

    async def send_batch(self, count: int) -> None:
        await self.conn.execute(
            "insert into skq (message) select unnest(%b::text[])", ([PAYLOAD_TEXT] * count,)
        )

    async def send_one(self) -> int:
        cur = await self.conn.execute(
            "insert into skq (message) values (%s) returning msg_id", (PAYLOAD_TEXT,)
        )
        row = await cur.fetchone()
        assert row is not None
        return int(row[0])

    async def consume(
        self, concurrency: int, meter: Meter, halt: asyncio.Event, *, now: bool
    ) -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(self._loop(concurrency, meter, stop))
        await _until(halt, task)
        await _end(task, stop, now=now)

    async def _loop(self, concurrency: int, meter: Meter, stop: asyncio.Event) -> None:
        semaphore = asyncio.Semaphore(concurrency)

        async def one(msg_id: int, message: str) -> None:
            async with semaphore:
                meter.begin(msg_id)
                await asyncio.sleep(WORK)
                meter.done()

        async with await psycopg.AsyncConnection.connect(self.dsn, autocommit=True) as conn:
            while not stop.is_set():
                rows = await (await conn.execute(skip_locked.READ, (CLAIM,))).fetchall()
                if not rows:
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(stop.wait(), handloop.IDLE_PAUSE)
                    continue
                await asyncio.gather(*(one(msg_id, message) for msg_id, message in rows))
                await conn.execute(
                    "delete from skq where msg_id = any(%s)", ([r[0] for r in rows],)
                )
