"""Cost per operation against size: queues, consumers per queue, backlog (PostgreSQL 15).

Each sweep grows one dimension in place and measures the same operations at
every size, pgque beside PgQ 3.5 where PgQ has the operation. The rows carry
their size in ``extra["size"]``; the report draws them as curves.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

from psycopg import sql

from ..core import Context, Series, case
from ..fixtures import PAYLOAD_100, Conn, connect
from ..targets import target

QUEUES = "queues"
CONSUMERS = "consumers on one queue"
BACKLOG = "backlog (100 B events)"
ACTIVE = 10
"""Queues with events in the ticker rounds of the queue sweep."""
BATCH = 10_000
"""Events per tick of the backlogs (so a batch is the same size at every backlog)."""
EAGER = "1 microsecond"
"""rotation_period: rotate whenever the consumers allow it."""


def workload(operation: str, dimension: str, size: int) -> str:
    """The row name of ``operation`` at ``size`` of ``dimension``."""
    return f"{operation} at {size:,} {dimension}"


CREATE = "create_queue"
FIRST_SEND = "first send in a new connection"
MEMORY = "backend memory after the first send, above a one-queue database"
STALL = "a send right after another connection's create_queue, above a plain send"
TICKER = f"ticker() round, {ACTIVE} queues with events"
MAINT = "maint() round"
FIRST_RUNS = 9
"""Fresh connections per engine and size for the first send: a figure of a few
milliseconds on a shared machine needs more than the usual three."""
CPU_WAIT_MS = 1.0
"""A first send whose backend waited longer than this for a CPU (other processes
running, which the CPU watch misses when they are other PostgreSQL servers of the
same OS user) is measured again, up to three times."""

for size in (1_000, 10_000):
    target(goal=f"create_queue at {size:,} queues <= 2x PgQ's",
           workload=workload(CREATE, QUEUES, size), subject="pgque", baseline="pgq",
           at_least=0.5)  # fmt: skip
    target(goal=f"first send in a new connection at {size:,} queues <= 5 ms",
           workload=workload(FIRST_SEND, QUEUES, size), subject="pgque", at_most=5.0)  # fmt: skip
    target(goal=f"backend memory after the first send at {size:,} queues <= 1 MB above one queue",
           workload=workload(MEMORY, QUEUES, size), subject="pgque", at_most=1.0)  # fmt: skip
    target(goal=f"another connection's create_queue adds <= 5 ms to a send, {size:,} queues",
           workload=workload(STALL, QUEUES, size), subject="pgque", at_most=5.0)  # fmt: skip
target(goal=f"ticker() at 10,000 queues ({ACTIVE} with events) <= 2x the round at {ACTIVE} queues",
       workload=workload(TICKER, QUEUES, 10_000), subject="pgque",
       baseline="pgque", baseline_workload=workload(TICKER, QUEUES, ACTIVE),
       at_least=0.5)  # fmt: skip


def _timed(conn: Conn, statement: str, *params: object) -> float:
    """Milliseconds the statement takes."""
    start = time.perf_counter()
    conn.execute(statement, params)
    return (time.perf_counter() - start) * 1000


def _value(conn: Conn, statement: str, *params: object) -> Any:
    """The first column of the statement's first row."""
    row = conn.execute(statement, params).fetchone()
    if row is None:
        raise RuntimeError(f"no row from {statement}")
    return row[0]


def _memory(conn: Conn) -> float:
    """The backend's memory contexts in MB (PostgreSQL 14+)."""
    row = conn.execute("select sum(total_bytes)::bigint from pg_backend_memory_contexts").fetchone()
    return float(row[0]) / 1e6 if row else 0.0


class _Sweep:
    """Rows of one sweep: per (workload, engine) the values measured at one size."""

    def __init__(self, ctx: Context, dimension: str) -> None:
        self.ctx, self.dimension = ctx, dimension

    def record(self, operation: str, size: int, unit: str, values: dict[str, list[float]],
               note: str = "") -> None:  # fmt: skip
        series = {engine: Series(values=v, extra={"size": [float(size)] * len(v)})
                  for engine, v in values.items() if v}  # fmt: skip
        self.ctx.record(workload(operation, self.dimension, size), series, unit,
                        higher_is_better=unit.endswith("/s"),
                        notes=dict.fromkeys(series, note))  # fmt: skip

    def record_series(self, operation: str, size: int, unit: str,
                      series: dict[str, Series]) -> None:  # fmt: skip
        """Record interleaved ``series`` (their reruns and disturbances kept) at ``size``."""
        for s in series.values():
            s.extra["size"] = [float(size)] * len(s.values)
        self.ctx.record(workload(operation, self.dimension, size), series, unit,
                        higher_is_better=unit.endswith("/s"))  # fmt: skip


def _backend_times(pid: int) -> tuple[float, float]:
    """Milliseconds the (local) backend ``pid`` has run on a CPU and waited for one."""
    with open(f"/proc/{pid}/schedstat") as stats:
        ran, waited = stats.read().split()[:2]
    return int(ran) / 1e6, int(waited) / 1e6


def _first_sends(ctx: Context, dsn: str, size: int, runs: int) -> dict[str, Series]:
    """Per engine, the first send's milliseconds in fresh connections, the engines
    alternating and each run watched for other processes' CPU; extras: the MB of
    backend memory the send added (``memory``), the backend's CPU time and its wait
    for a CPU (a run that waited more than ``CPU_WAIT_MS`` is tried again)."""

    def measure(send: str) -> Callable[[], dict[str, float]]:
        run = iter(range(runs * 2 * 3))  # each try takes the next queue

        def one() -> dict[str, float]:
            for _ in range(3):
                queue = f"q{(next(run) * 7919) % size}"
                with connect(dsn) as fresh:
                    before = _memory(fresh)
                    cpu, wait = _backend_times(fresh.info.backend_pid)
                    ms = _timed(fresh, f"select {send}", queue)
                    cpu_after, wait_after = _backend_times(fresh.info.backend_pid)
                    result = {"value": ms, "memory": _memory(fresh) - before,
                              "server CPU ms": cpu_after - cpu,
                              "waited for a CPU ms": wait_after - wait}  # fmt: skip
                if result["waited for a CPU ms"] <= CPU_WAIT_MS:
                    break
            return result

        return one

    return ctx.interleave({"pgque": measure("pgque.send(%s, 'x')"),
                           "pgq": measure("pgq.insert_event(%s, 't', 'x')")},
                          runs=runs)  # fmt: skip


def _create_queues(conn: Conn, schema: str, first: int, last: int) -> None:
    """Queues ``q<n>`` for n in [first, last), 100 per transaction, ticked only when
    forced (max_lag and idle period of an hour), so that a ticker round ticks the
    queues that got events and no idle one."""
    for start in range(first, last, 100):
        names = [f"q{n}" for n in range(start, min(start + 100, last))]
        conn.execute(f"select {schema}.create_queue(n) from unnest(%s::text[]) n", (names,))
        _configure(conn, schema, names)


def _configure(conn: Conn, schema: str, names: list[str]) -> None:
    """Max lag and idle period of an hour for the queues ``names``."""
    conn.execute(
        f"select {schema}.set_queue_config(n, p, '1 hour')"
        " from unnest(%s::text[]) n, unnest(array['ticker_max_lag', 'ticker_idle_period']) p",
        (names,),
    )


def _queue_sweep(ctx: Context) -> None:
    sizes = [1, 10, 100, 1_000, 10_000] if not ctx.quick else [1, 10, 100]
    dsn = ctx.clusters.database("bench_scale_queues", pgq=True)
    conn = connect(dsn)
    sweep = _Sweep(ctx, QUEUES)
    runs = max(ctx.runs, 3)
    base_memory: dict[str, float] = {}
    have = 0
    for size in sizes:
        measured = min(runs, size)  # the last queues of this size, created one by one
        create_ms: dict[str, list[float]] = {}
        for schema in ("pgque", "pgq"):
            _create_queues(conn, schema, have, size - measured)
            create_ms[schema] = []
            for n in range(size - measured, size):
                create_ms[schema].append(_timed(conn, f"select {schema}.create_queue(%s)", f"q{n}"))
                _configure(conn, schema, [f"q{n}"])
        have = size
        sweep.record(CREATE, size, "ms", create_ms)

        first = _first_sends(ctx, dsn, size, max(runs, FIRST_RUNS))
        memory: dict[str, list[float]] = {}
        for schema, series in first.items():
            memory[schema] = series.extra.pop("memory")
            if size == 1:
                base_memory[schema] = statistics.median(memory[schema])
            memory[schema] = [m - base_memory[schema] for m in memory[schema]]
        sweep.record_series(FIRST_SEND, size, "ms", first)
        sweep.record(MEMORY, size, "MB", memory)

        stall: dict[str, list[float]] = {"pgque": [], "pgq": []}
        with connect(dsn) as sender:
            for schema, send in (("pgque", "pgque.send('q0', 'x')"),
                                 ("pgq", "pgq.insert_event('q0', 't', 'x')")):  # fmt: skip
                sender.execute(f"select {send}")
                for i in range(runs):
                    plain = _timed(sender, f"select {send}")
                    conn.execute(f"select {schema}.create_queue(%s)", (f"stall{size}.{i}",))
                    stall[schema].append(_timed(sender, f"select {send}") - plain)
        sweep.record(STALL, size, "ms", stall)

        ticker: dict[str, list[float]] = {}
        for schema in ("pgque", "pgq"):
            active = [f"q{n}" for n in range(min(ACTIVE, size))]
            # Every new queue's second tick (pgque ticks 1,000 per call); then all are idle.
            while _value(conn, f"select {schema}.ticker()") > ACTIVE:
                pass
            ticker[schema] = []
            for _ in range(runs):
                for name in active:
                    conn.execute(f"select {schema}.insert_event(%s, 't', 'x')", (name,))
                    conn.execute(f"select {schema}.force_tick(%s)", (name,))
                ticker[schema].append(_timed(conn, f"select {schema}.ticker()"))
        sweep.record(TICKER, size, "ms", ticker)
        maint = [_timed(conn, "select pgque.maint()") for _ in range(runs)]
        sweep.record(MAINT, size, "ms", {"pgque": maint})
    conn.close()


def _consumer_sweep(ctx: Context) -> None:
    sizes = [1, 10, 100, 1_000] if not ctx.quick else [1, 10, 100]
    dsn = ctx.clusters.database("bench_scale_consumers", pgq=True)
    conn = connect(dsn)
    sweep = _Sweep(ctx, CONSUMERS)
    for schema in ("pgque", "pgq"):
        conn.execute(f"select {schema}.create_queue('fan')")
        conn.execute(f"select {schema}.set_queue_config('fan', 'rotation_period', %s)", (EAGER,))
    have = 0
    for size in sizes:
        register: dict[str, list[float]] = {}
        read: dict[str, list[float]] = {}
        rotate: dict[str, list[float]] = {}
        for schema in ("pgque", "pgq"):
            start = time.perf_counter()
            conn.execute(f"select count({schema}.register_consumer('fan', 'c' || n))"
                         " from generate_series(%s::int, %s::int) n", (have, size - 1))  # fmt: skip
            added = max(size - have, 1)
            register[schema] = [(time.perf_counter() - start) * 1000 / added]
            # One batch of 100 events for every consumer: next_batch, events, finish.
            conn.execute(f"select count({schema}.insert_event('fan', 't', %s))"
                         " from generate_series(1, 100)", (PAYLOAD_100,))  # fmt: skip
            conn.execute(f"select {schema}.force_tick('fan')")
            conn.execute(f"select {schema}.ticker('fan')")
            start = time.perf_counter()
            for n in range(size):
                with conn.transaction():
                    batch = _value(conn, f"select {schema}.next_batch('fan', %s)", f"c{n}")
                    if batch is None:
                        raise RuntimeError(f"{schema}: c{n} got no batch, {size} consumers")
                    conn.execute(f"select count(*) from {schema}.get_batch_events(%s)", (batch,))
                    conn.execute(f"select {schema}.finish_batch(%s)", (batch,))
            read[schema] = [(time.perf_counter() - start) * 1000 / size]
            # Rotation: step 1 (a table switch) and step 2, which waits for the
            # slowest consumer to pass the switch (each has, having read its batch).
            step1 = _timed(conn, f"select {schema}.maint_rotate_tables_step1('fan')")
            rotate[schema] = [step1 + _timed(conn, f"select {schema}.maint_rotate_tables_step2()")]
        have = size
        sweep.record("register_consumer, per consumer", size, "ms", register)
        sweep.record("next_batch + events + finish_batch, per consumer", size, "ms", read)
        sweep.record("rotation steps 1 + 2", size, "ms", rotate)
    conn.close()


def _load_backlog(conn: Conn, schema: str, queue: str, total: int, chunk: int) -> None:
    """``total`` 100 B events straight into the current table, a tick every ``chunk``."""
    table = sql.Identifier(
        *str(_value(conn, f"select {schema}.current_event_table(%s)", queue)).split(".")
    )
    for _ in range(total // chunk):
        conn.execute(
            sql.SQL(
                "insert into {} (ev_time, ev_type, ev_data)"
                " select now(), 't', %s from generate_series(1, %s::int)"
            ).format(table),
            (PAYLOAD_100, chunk),
        )
        conn.execute(f"select {schema}.force_tick(%s)", (queue,))
        conn.execute(f"select {schema}.ticker(%s)", (queue,))


def _drain(conn: Conn, schema: str, queue: str) -> int:
    """Every batch of consumer ``c``, counted on the server; the events read."""
    got = 0
    while True:
        with conn.transaction():
            batch = _value(conn, f"select {schema}.next_batch(%s, 'c')", queue)
            if batch is None:
                return got
            got += _value(conn, f"select count(*) from {schema}.get_batch_events(%s)", batch)
            conn.execute(f"select {schema}.finish_batch(%s)", (batch,))


def _send_stalls(dsn: str, queue: str, stop: threading.Event, out: list[float]) -> None:
    """Single sends in a loop until ``stop``; each one's milliseconds into ``out``."""
    with connect(dsn) as sender:
        while not stop.is_set():
            out.append(_timed(sender, "select pgque.send(%s, 'x')", queue))


def _send_window(dsn: str, queue: str, work: Callable[[], object]) -> list[float]:
    """Milliseconds of each single send another connection made while ``work`` ran."""
    stop = threading.Event()
    sends: list[float] = []
    thread = threading.Thread(target=_send_stalls, args=(dsn, queue, stop, sends))
    thread.start()
    try:
        time.sleep(0.2)
        work()
        time.sleep(0.2)
    finally:
        stop.set()
        thread.join()
    if not sends:
        raise RuntimeError(f"no send completed on {queue}")
    return sends


def _rotate(conn: Conn, queue: str, switches: int) -> None:
    """``switches`` table switches of pgque queue ``queue``: each is step 1, step 2,
    then a tick its consumer reads, so that the next switch may follow."""
    table = "select queue_cur_table from pgque.queue where queue_name = %s"
    for _ in range(switches):
        before = _value(conn, table, queue)
        for _ in range(50):  # a sender's open transaction can hold a switch back a moment
            conn.execute("select pgque.maint_rotate_tables_step1(%s)", (queue,))
            switched = _value(conn, table, queue) != before
            conn.execute("select pgque.maint_rotate_tables_step2()")
            conn.execute("select pgque.force_tick(%s)", (queue,))
            conn.execute("select pgque.ticker(%s)", (queue,))
            _drain(conn, "pgque", queue)
            if switched:
                break
        else:
            raise RuntimeError(f"queue {queue} did not rotate")


def _backlog_sweep(ctx: Context) -> None:
    sizes = [10**5, 10**6, 10**7, 10**8] if not ctx.quick else [10**5]
    dsn = ctx.clusters.database("bench_scale_backlog", pgq=True)
    conn = connect(dsn)
    sweep = _Sweep(ctx, BACKLOG)
    for size in sizes:
        # PgQ beside pgque up to 10^7 events; the 10^8 point (about 15 GB per
        # engine) runs for pgque alone.
        engines = ("pgque", "pgq") if size <= 10**7 else ("pgque",)
        drain: dict[str, list[float]] = {}
        quiet: list[float] = []
        busy: list[float] = []
        for schema in engines:
            queue = f"b{size}"
            conn.execute(f"select {schema}.create_queue(%s)", (queue,))
            conn.execute(f"select {schema}.set_queue_config(%s, 'rotation_period', %s)",
                         (queue, EAGER))  # fmt: skip
            conn.execute(f"select {schema}.register_consumer(%s, 'c')", (queue,))
            _load_backlog(conn, schema, queue, size, BATCH)
            start = time.perf_counter()
            got = _drain(conn, schema, queue)
            drain[schema] = [got / (time.perf_counter() - start)]
            if schema == "pgque":
                # The slowest send while nothing rotates, then while the
                # queue rotates three times: the last TRUNCATEs the full table.
                quiet = _send_window(dsn, queue, lambda: time.sleep(2.0))
                busy = _send_window(dsn, queue, lambda q=queue: _rotate(conn, q, 3))
            conn.execute(f"select {schema}.unregister_consumer(%s, 'c')", (queue,))
            conn.execute(f"select {schema}.drop_queue(%s)", (queue,))
        sweep.record("drain rate", size, "events/s", drain)
        sweep.record("slowest single send, over 2 s without rotation", size, "ms",
                     {"pgque": [max(quiet)]})  # fmt: skip
        sweep.record("slowest single send while the drained tables rotate and TRUNCATE", size,
                     "ms", {"pgque": [max(busy)]})  # fmt: skip
    conn.close()


@case("scale", "cost per operation as queues (1 to 10,000), consumers per queue (1 to 1,000) "
      "and the backlog (10^5 to 10^8 events) grow, pgque beside PgQ (PostgreSQL 15)")  # fmt: skip
def scale(ctx: Context) -> None:
    _queue_sweep(ctx)
    _consumer_sweep(ctx)
    _backlog_sweep(ctx)
