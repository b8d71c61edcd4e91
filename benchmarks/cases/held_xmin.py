"""A held xmin horizon under sustained traffic: dead tuples, sizes and receive latency.

Each target gets a fresh PostgreSQL 15 database, a producer sending 2,000
events/s of 100 B (20 per transaction every 10 ms), a consumer reading up to
1000 events per call and a ticker. After a warm-up the queue's tables are
VACUUMed (the warm level); then a second session of the same database opens
``begin isolation level repeatable read; select pg_current_xact_id()`` and keeps it
for the hold while traffic goes on. At the end of the hold the dead tuples
(exact, ``pgstattuple``) and total sizes of the event and bookkeeping tables
are read, the holder commits, one VACUUM pass runs over the tables the
engine's own maintenance vacuums, and the bookkeeping dead tuples are read
again.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from threading import Event

from psycopg import sql

import pgque

from .. import skip_locked
from ..core import BenchmarkError, Context, Series, case
from ..fixtures import PAYLOAD_100, Conn, connect
from ..targets import target

BOOKKEEPING = "held xmin at 2,000 events/s: dead tuples, bookkeeping tables"
EVENTS = "held xmin at 2,000 events/s: dead tuples, event tables"
SIZES = "held xmin at 2,000 events/s: size of the queue's tables at the end of the hold"
LATENCY = "held xmin at 2,000 events/s: receive call latency during the hold (p50)"
BACKLOG = "held xmin at 2,000 events/s: backlog at the end of the hold"

LOOP = "pgque, ticker_loop"
SDK = "pgque, SDK Ticker"
PGQ = "PgQ 3.5, 100 ms ticker"
SKQ = "SKIP LOCKED queue"

QUEUE = "xmin_q"
CONSUMER = "c1"
RATE = 2000
"""Events per second the producer sends."""
PER_SEND = 20
"""Events per producer transaction (one every 10 ms)."""
RECEIVE_LIMIT = 1000
IDLE_SLEEP = 0.005
GROUPS = ("event", "tick", "subscription", "queue", "other")
BOOK_GROUPS = ("tick", "subscription", "queue")

HOLD = "select xid(pg_current_xact_id())::text"
"""The holder's statement (after ``begin isolation level repeatable read``): takes an xid."""

Stopper = Callable[[], None]
"""Stops a running ticker or traffic and waits for its threads."""

for _subject in (LOOP, SDK):
    target(
        goal=f"held xmin 22 s: {_subject} bookkeeping dead tuples <= 1.5x PgQ 3.5's",
        workload=BOOKKEEPING,
        subject=_subject,
        baseline=PGQ,
        at_least=1 / 1.5,
    )
    target(
        goal=f"held xmin 22 s: {_subject} event-table dead tuples = 0",
        workload=EVENTS,
        subject=_subject,
        at_most=0,
    )


# -- the targets ----------------------------------------------------------------


class Engine:
    """One target: its database, producer, consumer, ticker and tables."""

    pgq = False
    pgque_schema = True

    def setup(self, conn: Conn) -> None:
        """Create the queue and its consumer."""

    def send(self, conn: Conn, payloads: list[str]) -> None:
        """Send ``payloads`` in one transaction."""
        raise NotImplementedError

    def receive(self, conn: Conn) -> tuple[int, float]:
        """Take and finish one batch: (events, ms spent in the receive part)."""
        raise NotImplementedError

    def start_ticker(self, dsn: str, stop: Event, errors: list[str]) -> Stopper:
        """Start ticking; a function that stops the ticker and waits for it."""
        return lambda: None

    def check_ticker(self, name: str) -> None:
        """Raise when the ticker is not working (after the warm-up)."""

    def groups(self, conn: Conn) -> dict[str, list[str]]:
        """The measured tables by group (see :data:`GROUPS`)."""
        raise NotImplementedError

    def vacuumed(self, conn: Conn) -> list[str]:
        """The tables the engine's own maintenance VACUUMs."""
        raise NotImplementedError


def _event_tables(conn: Conn, schema: str) -> list[str]:
    row = conn.execute(
        f"select queue_data_pfx, queue_ntables from {schema}.queue where queue_name = %s",
        (QUEUE,),
    ).fetchone()
    if row is None:
        raise BenchmarkError(f"held_xmin: queue {QUEUE} missing in {schema}")
    return [f"{row[0]}_{i}" for i in range(row[1])]


class Pgque(Engine):
    """pgque's modern API: send_batch, receive + ack; ticked by ``ticker_loop``."""

    def setup(self, conn: Conn) -> None:
        conn.execute("select pgque.create_queue(%s)", (QUEUE,))
        conn.execute("select pgque.subscribe(%s, %s)", (QUEUE, CONSUMER))

    def send(self, conn: Conn, payloads: list[str]) -> None:
        conn.execute("select pgque.send_batch(%s, 'bench', %s::text[])", (QUEUE, payloads))

    def receive(self, conn: Conn) -> tuple[int, float]:
        with conn.transaction():
            start = time.perf_counter()
            cur = conn.execute(
                "select * from pgque.receive(%s, %s, %s)", (QUEUE, CONSUMER, RECEIVE_LIMIT)
            )
            rows = cur.fetchall()
            ms = (time.perf_counter() - start) * 1000
            if rows:
                column = [c.name for c in cur.description or ()].index("batch_id")
                conn.execute("select pgque.ack(%s)", (rows[0][column],))
        return len(rows), ms

    def start_ticker(self, dsn: str, stop: Event, errors: list[str]) -> Stopper:
        def loop() -> None:
            with connect(dsn) as conn:
                while not stop.is_set():
                    conn.execute("call pgque.ticker_loop()")

        thread = _thread("ticker_loop", loop, stop, errors)
        return thread.join

    def groups(self, conn: Conn) -> dict[str, list[str]]:
        book = {"pgque.tick", "pgque.subscription", "pgque.queue"}
        other = [
            t for (t,) in conn.execute("select pgque.maint_tables_to_vacuum()") if t not in book
        ]
        return {
            "event": _event_tables(conn, "pgque"),
            "tick": ["pgque.tick"],
            "subscription": ["pgque.subscription"],
            "queue": ["pgque.queue"],
            "other": other,
        }

    def vacuumed(self, conn: Conn) -> list[str]:
        return [t for (t,) in conn.execute("select pgque.maint_tables_to_vacuum()")]


class PgqueSdk(Pgque):
    """pgque's modern API ticked by the SDK's ``pgque.Ticker`` (maintenance kept out)."""

    ticker: pgque.Ticker

    def start_ticker(self, dsn: str, stop: Event, errors: list[str]) -> Stopper:
        # Its maint() + VACUUM round runs once at start, then not within the run.
        self.ticker = pgque.Ticker(dsn, maint_interval=3600).start()
        return self.ticker.stop

    def check_ticker(self, name: str) -> None:
        if not self.ticker.leading:
            raise BenchmarkError(f"{name}: the SDK Ticker is not leading (see its log)")


class Pgq(Engine):
    """PgQ 3.5: insert_event per row, next_batch + get_batch_events + finish_batch."""

    pgq = True
    pgque_schema = False

    def setup(self, conn: Conn) -> None:
        conn.execute("select pgq.create_queue(%s)", (QUEUE,))
        conn.execute("select pgq.register_consumer(%s, %s)", (QUEUE, CONSUMER))

    def send(self, conn: Conn, payloads: list[str]) -> None:
        conn.execute(
            "select count(pgq.insert_event(%s, 'bench', d)) from unnest(%s::text[]) d",
            (QUEUE, payloads),
        )

    def receive(self, conn: Conn) -> tuple[int, float]:
        with conn.transaction():
            start = time.perf_counter()
            batch = conn.execute("select pgq.next_batch(%s, %s)", (QUEUE, CONSUMER)).fetchone()
            if batch is None or batch[0] is None:
                return 0, (time.perf_counter() - start) * 1000
            rows = conn.execute("select * from pgq.get_batch_events(%s)", batch).fetchall()
            ms = (time.perf_counter() - start) * 1000
            conn.execute("select pgq.finish_batch(%s)", batch)
        return len(rows), ms

    def start_ticker(self, dsn: str, stop: Event, errors: list[str]) -> Stopper:
        def loop() -> None:
            with connect(dsn) as conn:
                due = time.perf_counter()
                while not stop.is_set():
                    conn.execute("select pgq.ticker()")
                    due += 0.1
                    stop.wait(max(0.0, due - time.perf_counter()))

        thread = _thread("pgq ticker", loop, stop, errors)
        return thread.join

    def groups(self, conn: Conn) -> dict[str, list[str]]:
        return {
            "event": _event_tables(conn, "pgq"),
            "tick": ["pgq.tick"],
            "subscription": ["pgq.subscription"],
            "queue": ["pgq.queue"],
            "other": ["pgq.consumer", "pgq.retry_queue"],
        }

    def vacuumed(self, conn: Conn) -> list[str]:
        # PgQ 3.5's maint_tables_to_vacuum() lists none (it leaves them to autovacuum).
        return ["pgq.subscription", "pgq.consumer", "pgq.queue", "pgq.tick", "pgq.retry_queue"]


class SkipLocked(Engine):
    """``benchmarks/skip_locked.py``: send_batch, read 1000 + delete by ids; no ticker."""

    pgque_schema = False

    def setup(self, conn: Conn) -> None:
        skip_locked.create(conn)

    def send(self, conn: Conn, payloads: list[str]) -> None:
        skip_locked.send_batch(conn, payloads)

    def receive(self, conn: Conn) -> tuple[int, float]:
        with conn.transaction():
            start = time.perf_counter()
            rows = skip_locked.read(conn, RECEIVE_LIMIT)
            ms = (time.perf_counter() - start) * 1000
            if rows:
                skip_locked.delete(conn, [r[0] for r in rows])
        return len(rows), ms

    def groups(self, conn: Conn) -> dict[str, list[str]]:
        return {"event": ["public.skq"], "tick": [], "subscription": [], "queue": [], "other": []}

    def vacuumed(self, conn: Conn) -> list[str]:
        return ["public.skq"]


ENGINES: dict[str, Engine] = {LOOP: Pgque(), SDK: PgqueSdk(), PGQ: Pgq(), SKQ: SkipLocked()}


# -- traffic ---------------------------------------------------------------------


def _thread(name: str, fn: Callable[[], None], stop: Event, errors: list[str]) -> threading.Thread:
    """Run ``fn`` in a daemon thread; a failure lands in ``errors`` and stops the run."""

    def run() -> None:
        try:
            fn()
        except Exception as exc:  # reported by the measure
            errors.append(f"{name}: {exc}")
            stop.set()

    thread = threading.Thread(target=run, name=f"held_xmin {name}", daemon=True)
    thread.start()
    return thread


@dataclass
class Traffic:
    """The producer and consumer threads of one run and what they saw."""

    engine: Engine
    dsn: str
    stop: Event = field(default_factory=Event)
    errors: list[str] = field(default_factory=list)
    sent: int = 0
    received: int = 0
    batches: list[tuple[float, float]] = field(default_factory=list)
    """(monotonic time, ms) of each receive call that returned events."""
    empty: list[tuple[float, float]] = field(default_factory=list)
    """(monotonic time, ms) of each receive call that found nothing."""

    def start(self) -> Stopper:
        """Start ticker, consumer and producer; a function stopping them all."""
        stop_ticker = self.engine.start_ticker(self.dsn, self.stop, self.errors)
        threads = [
            _thread("consumer", self._consume, self.stop, self.errors),
            _thread("producer", self._produce, self.stop, self.errors),
        ]

        def stop_all() -> None:
            self.stop.set()
            for thread in threads:
                thread.join(10)
            stop_ticker()

        return stop_all

    def check(self, where: str) -> None:
        """Raise the first thread failure, if any."""
        if self.errors:
            raise BenchmarkError(f"{where}: {self.errors[0]}")

    def _produce(self) -> None:
        payloads = [PAYLOAD_100] * PER_SEND
        with connect(self.dsn) as conn:
            due = time.perf_counter()
            while not self.stop.is_set():
                self.engine.send(conn, payloads)
                self.sent += PER_SEND
                due += PER_SEND / RATE
                delay = due - time.perf_counter()
                if delay > 0:
                    self.stop.wait(delay)

    def _consume(self) -> None:
        with connect(self.dsn) as conn:
            while not self.stop.is_set():
                got, ms = self.engine.receive(conn)
                now = time.monotonic()
                if got:
                    self.received += got
                    self.batches.append((now, ms))
                else:
                    self.empty.append((now, ms))
                    self.stop.wait(IDLE_SLEEP)


# -- figures ---------------------------------------------------------------------


def _dead_and_size(conn: Conn, tables: list[str]) -> tuple[int, int]:
    """Dead tuples (exact, pgstattuple) and total relation size of ``tables``."""
    dead = size = 0
    for table in tables:
        row = conn.execute(
            "select (select dead_tuple_count from pgstattuple(%s::regclass)),"
            " pg_total_relation_size(%s::regclass)",
            (table, table),
        ).fetchone()
        assert row is not None
        dead, size = dead + row[0], size + row[1]
    return dead, size


def _figures(conn: Conn, groups: dict[str, list[str]]) -> dict[str, tuple[int, int]]:
    return {g: _dead_and_size(conn, groups[g]) for g in GROUPS}


def _changes(conn: Conn, groups: dict[str, list[str]]) -> dict[str, int]:
    """Cumulative row changes of the bookkeeping tables (pg_stat_user_tables)."""
    conn.execute("select pg_stat_clear_snapshot()")
    out: dict[str, int] = {}
    for g in BOOK_GROUPS:
        for table in groups[g]:
            row = conn.execute(
                "select n_tup_ins, n_tup_upd, n_tup_hot_upd from pg_stat_user_tables"
                " where relid = %s::regclass",
                (table,),
            ).fetchone()
            assert row is not None
            out[f"ins_{g}"], out[f"upd_{g}"], out[f"hot_upd_{g}"] = row
    return out


def _vacuum(conn: Conn, table: str) -> None:
    schema, _, name = table.partition(".")
    conn.execute(sql.SQL("vacuum {}").format(sql.Identifier(schema, name)))


def _vacuum_figures(
    conn: Conn, groups: dict[str, list[str]], vacuumed: list[str]
) -> dict[str, tuple[int, int]]:
    """One VACUUM pass over ``vacuumed``; each measured table read right after its VACUUM."""
    for table in vacuumed:
        if not any(table in tables for tables in groups.values()):
            _vacuum(conn, table)
    out = {}
    for g in GROUPS:
        dead = size = 0
        for table in groups[g]:
            if table in vacuumed:
                _vacuum(conn, table)
            d, s = _dead_and_size(conn, [table])
            dead, size = dead + d, size + s
        out[g] = (dead, size)
    return out


def _await_horizon(conn: Conn, xid: str, timeout: float = 5.0) -> None:
    """Wait until no backend of the database still has a snapshot older than ``xid``'s commit.

    Statements started under the hold keep its xmin until they end (a
    ``ticker_loop`` sleeps in one for up to ``tick_period_ms``).
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = conn.execute(
            "select count(*) from pg_stat_activity where datname = current_database()"
            " and pid <> pg_backend_pid() and age(backend_xmin) >= age(%s::xid)",
            (xid,),
        ).fetchone()
        if row and row[0] == 0:
            return
        time.sleep(0.005)
    raise BenchmarkError(f"snapshots older than the released hold (xid {xid}) outlived {timeout} s")


def _p50(samples: list[tuple[float, float]], lo: float, hi: float) -> float:
    values = [ms for t, ms in samples if lo <= t < hi]
    return statistics.median(values) if values else float("nan")


def _hold(engine: Engine, dsn: str, name: str, warm_up: float, hold: float) -> dict[str, float]:
    """One target's run; every figure of every workload, by name."""
    traffic = Traffic(engine, dsn)
    stop = traffic.start()
    stats = connect(dsn)
    holder = connect(dsn)
    try:
        groups = engine.groups(stats)
        time.sleep(warm_up)
        traffic.check(name)
        engine.check_ticker(name)
        warm = _vacuum_figures(stats, groups, engine.vacuumed(stats))
        before = _changes(stats, groups)

        holder.execute("begin isolation level repeatable read")
        xid = holder.execute(HOLD).fetchone()
        since = holder.execute("select now()").fetchone()
        assert xid is not None and since is not None
        start = time.monotonic()
        sent0, received0 = traffic.sent, traffic.received
        time.sleep(hold)
        end = time.monotonic()
        sent, received = traffic.sent, traffic.received
        held = _figures(stats, groups)
        after_changes = _changes(stats, groups)
        ticks = _count_ticks(stats, engine, since[0])
        holder.execute("commit")

        _await_horizon(stats, xid[0])
        vacuumed = _vacuum_figures(stats, groups, engine.vacuumed(stats))
        traffic.check(name)
    finally:
        holder.close()
        stats.close()
        stop()
    traffic.check(name)

    batches = [(t - start, ms) for t, ms in traffic.batches if start <= t < end]
    if not batches:
        raise BenchmarkError(f"{name}: the consumer received nothing during the hold")
    per_second = [_p50(batches, s, s + 1) for s in range(int(hold))]
    out: dict[str, float] = {
        "book_dead": sum(held[g][0] for g in BOOK_GROUPS),
        "book_warm": sum(warm[g][0] for g in BOOK_GROUPS),
        "book_after_vacuum": sum(vacuumed[g][0] for g in BOOK_GROUPS),
        "event_dead": held["event"][0],
        "event_warm": warm["event"][0],
        "event_after_vacuum": vacuumed["event"][0],
        "size": sum(size for _, size in held.values()),
        "latency": statistics.median(ms for _, ms in batches),
        "first_2s_p50": _p50(batches, 0, 2),
        "last_2s_p50": _p50(batches, hold - 2, hold),
        "max_1s_p50": max((v for v in per_second if v == v), default=float("nan")),
        "empty_poll_p50": _p50([(t - start, ms) for t, ms in traffic.empty], 0, hold),
        "batches": len(batches),
        "backlog": sent - received,
        "sent_per_s": (sent - sent0) / (end - start),
        "received_per_s": (received - received0) / (end - start),
        "ticks": ticks,
    }
    for g in GROUPS:
        out[f"dead_{g}"] = held[g][0]
        out[f"after_vacuum_{g}"] = vacuumed[g][0]
        out[f"size_{g}"] = held[g][1]
    for key, value in after_changes.items():
        out[key] = value - before[key]
    return out


def _count_ticks(conn: Conn, engine: Engine, since: datetime) -> int:
    """Ticks inserted since ``since`` (0 for SKIP LOCKED)."""
    if isinstance(engine, SkipLocked):
        return 0
    schema = "pgq" if engine.pgq else "pgque"
    row = conn.execute(f"select count(*) from {schema}.tick where tick_time >= %s", (since,))
    return int(row.fetchone()[0])  # type: ignore[index]


def _pick(series: dict[str, Series], value: str, extras: dict[str, str]) -> dict[str, Series]:
    """Series whose primary value is the figure ``value`` and extras renamed from ``extras``."""
    out = {}
    for name, s in series.items():
        figures = {"value": s.extra[value], **{new: s.extra[old] for new, old in extras.items()}}
        out[name] = Series(
            values=figures.pop("value"),
            extra=figures,
            other_cpu=s.other_cpu,
            rerun=s.rerun,
            disturbed=s.disturbed,
        )
    return out


@case("held_xmin", "a 22 s held xmin under 2,000 events/s: dead tuples, sizes, receive latency")
def held_xmin(ctx: Context) -> None:
    warm_up = ctx.size(5, 1)
    hold = ctx.size(22, 3)
    dsns: dict[str, str] = {}

    def prepare(name: str) -> None:
        engine = ENGINES[name]
        dbname = "bench_xmin_" + "".join(c if c.isalnum() else "_" for c in name.lower())
        dsn = ctx.clusters.database(dbname[:60], pgq=engine.pgq, pgque_schema=engine.pgque_schema)
        with connect(dsn) as conn:
            conn.execute("create extension pgstattuple")
            engine.setup(conn)
        dsns[name] = dsn

    def measure(name: str) -> Callable[[], dict[str, float]]:
        def run() -> dict[str, float]:
            figures = _hold(ENGINES[name], dsns[name], name, warm_up, hold)
            return {"value": 0.0, **figures}

        return run

    series = ctx.interleave({name: measure(name) for name in ENGINES}, before=prepare)
    note = f"hold {hold} s after {warm_up} s of traffic; {RATE:,} events/s"
    notes = {name: note for name in series}
    book = {k: v for k, v in series.items() if k != SKQ}
    book_extras = {
        "warm": "book_warm",
        "after_vacuum": "book_after_vacuum",
        **{g: f"dead_{g}" for g in GROUPS if g != "event"},
        **{f"after_vacuum_{g}": f"after_vacuum_{g}" for g in BOOK_GROUPS},
        **{k: k for k in ("batches", "ticks", "ins_tick", "upd_subscription")},
        "hot_upd_subscription": "hot_upd_subscription",
    }
    ctx.record(
        BOOKKEEPING,
        _pick(book, "book_dead", book_extras),
        "tuples",
        higher_is_better=False,
        notes=notes,
    )
    ctx.record(
        EVENTS,
        _pick(series, "event_dead", {"warm": "event_warm", "after_vacuum": "event_after_vacuum"}),
        "tuples",
        higher_is_better=False,
        notes=notes,
    )
    ctx.record(
        SIZES,
        _pick(series, "size", {g: f"size_{g}" for g in GROUPS}),
        "bytes",
        higher_is_better=False,
        notes=notes,
    )
    ctx.record(
        LATENCY,
        _pick(
            series,
            "latency",
            {k: k for k in ("first_2s_p50", "last_2s_p50", "max_1s_p50", "empty_poll_p50")},
        ),
        "ms",
        higher_is_better=False,
        notes=notes,
    )
    ctx.record(
        BACKLOG,
        _pick(series, "backlog", {k: k for k in ("sent_per_s", "received_per_s")}),
        "events",
        higher_is_better=False,
        notes=notes,
    )
