"""Soak test of the pgque engine: many sessions at once, then an exact audit.

Producer threads (one connection each) insert batches of 1..50 events in
transactions that commit, roll back, or roll back savepoints, and record what
they committed. Two ticker threads call ``ticker()`` / ``ticker(queue)`` in
lockstep so that they race. A fast consumer takes every batch as it appears,
a lagging one sleeps and then catches up, and a late one registers part-way.
With ``--rotate`` (the default when the functions exist) a thread rotates the
event tables (step 1, then step 2 in a later transaction). At the end every
thread stops, a last tick is taken, all consumers drain, and the audit checks
per consumer: no duplicate (ev_id, ev_retry), every committed event delivered
exactly once (for the late consumer: exactly those its registration tick does
not see), no rolled-back event delivered, and tick snapshots never going back.

Run by hand (the database needs pgque installed, or pass ``--install``)::

    python tests/soak.py --dsn "host=/tmp/devpg port=5499 dbname=soak" --seconds 300
    python tests/soak.py --temp-pg 18 --seconds 300   # on a throwaway server

or import it: ``run_soak(dsn, SoakConfig(seconds=20))`` returns a
:class:`SoakReport` or raises :class:`SoakFailure`. Note that the
no-argument ``ticker()`` ticks every queue of the database.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import sys
import threading
import time
import uuid
from array import array
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import psycopg

Conn = psycopg.Connection[Any]


class SoakFailure(AssertionError):
    """The soak found an invariant broken (or a worker thread failed)."""


@dataclass
class SoakConfig:
    """What the soak runs; the defaults are the hand-run defaults."""

    seconds: float = 300.0
    producers: int = 4
    max_events: int = 50
    rollback_ratio: float = 0.15
    savepoint_ratio: float = 0.25
    linger_ratio: float = 0.05  # transactions kept open (sleeping) across ticks
    tick_pause: float = 0.05  # tickers pause up to this long between racing calls
    lag_pause: tuple[float, float] = (0.5, 3.0)  # the lagging consumer's naps
    late_consumer: bool = True
    rotate: bool | None = None  # None: rotate when the functions exist
    rotate_pause: float = 0.3
    seed: int | None = None
    install: bool = False


@dataclass(frozen=True)
class Snapshot:
    """A ``pg_snapshot`` (xmin:xmax:xip) with PostgreSQL's visibility rule."""

    xmin: int
    xmax: int
    xip: frozenset[int]

    @classmethod
    def parse(cls, text: str) -> Snapshot:
        xmin, xmax, xip = text.split(":")
        return cls(int(xmin), int(xmax), frozenset(int(x) for x in xip.split(",") if x))

    def visible(self, txid: int) -> bool:
        return txid < self.xmin or (txid < self.xmax and txid not in self.xip)

    def sees_all_of(self, earlier: Snapshot) -> bool:
        """Everything visible in ``earlier`` is visible here."""
        return (
            self.xmin >= earlier.xmin
            and self.xmax >= earlier.xmax
            and all(x in earlier.xip for x in self.xip if x < earlier.xmax)
        )


class Ledger:
    """What the producers did: event states by id, committed transactions."""

    NONE, COMMITTED, ROLLED_BACK = 0, 1, 2

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.state = bytearray()
        self.committed_txns: list[tuple[int, array[int]]] = []  # (txid, ev_ids)
        self.txid_of: dict[str, int] = {}  # "producer:txn" -> txid, committed only
        self.counts: Counter[str] = Counter()

    def _mark(self, ids: list[int], state: int) -> None:
        top = max(ids, default=-1)
        if top >= len(self.state):
            self.state.extend(bytes(top + 1 - len(self.state) + 4096))
        for i in ids:
            assert self.state[i] == self.NONE, f"ev_id {i} recorded twice"
            self.state[i] = state

    def committed(self, key: str, txid: int, kept: list[int], lost: list[int]) -> None:
        with self.lock:
            self._mark(kept, self.COMMITTED)
            self._mark(lost, self.ROLLED_BACK)
            self.committed_txns.append((txid, array("q", kept)))
            self.txid_of[key] = txid
            self.counts.update(
                txns_committed=1, events_committed=len(kept), events_savepoint_rolled_back=len(lost)
            )

    def rolled_back(self, ids: list[int]) -> None:
        with self.lock:
            self._mark(ids, self.ROLLED_BACK)
            self.counts.update(txns_rolled_back=1, events_rolled_back=len(ids))


@dataclass
class ConsumerLog:
    """What one consumer received."""

    name: str
    seen: bytearray = field(default_factory=bytearray)  # first deliveries, count by ev_id
    retried: Counter[tuple[int, int]] = field(default_factory=Counter)  # (ev_id, ev_retry)
    txid_of: dict[str, int] = field(default_factory=dict)  # "producer:txn" -> ev_txid
    batches: int = 0
    empty_batches: int = 0
    events: int = 0
    registered_at: Snapshot | None = None
    registered_tick: int | None = None
    problems: list[str] = field(default_factory=list)

    def record(self, ev_id: int, retry: int | None, txid: int, data: str) -> None:
        if retry is not None:
            self.retried[(ev_id, retry)] += 1
        else:
            if ev_id >= len(self.seen):
                self.seen.extend(bytes(ev_id + 1 - len(self.seen) + 4096))
            self.seen[ev_id] = min(self.seen[ev_id] + 1, 255)
        key = data.rsplit(":", 1)[0]
        if self.txid_of.setdefault(key, txid) != txid:
            self.problems.append(f"{self.name}: events of transaction {key} carry two txids")
        self.events += 1


@dataclass
class SoakReport:
    """Numbers of a finished soak; :meth:`summary` says them in one paragraph."""

    seconds: float
    seed: int
    server_version: str
    producers: int
    counts: dict[str, int]
    ticks: int
    ticker_calls: int
    rotations: int | None
    consumers: dict[str, ConsumerLog]

    def summary(self) -> str:
        c = self.counts
        per_consumer = "; ".join(
            f"{log.name} {log.batches} batches ({log.empty_batches} empty), {log.events} events"
            + (f", registered at tick {log.registered_tick}" if log.registered_tick else "")
            for log in self.consumers.values()
        )
        rotation = "rotation off" if self.rotations is None else f"{self.rotations} table rotations"
        return (
            f"Soak of {self.seconds:.0f} s (seed {self.seed}) on PostgreSQL"
            f" {self.server_version}:"
            f" {self.producers} producers committed {c['txns_committed']} transactions"
            f" with {c['events_committed']} events"
            f" ({c['events_committed'] / self.seconds:.0f} events/s,"
            f" {c['txns_committed'] / self.seconds:.0f} tx/s), rolled back"
            f" {c['txns_rolled_back']} transactions ({c['events_rolled_back']} events) and"
            f" {c['events_savepoint_rolled_back']} events in rolled-back savepoints; two racing"
            f" tickers made {self.ticks} ticks in {self.ticker_calls} calls"
            f" ({self.ticks / self.seconds:.1f} ticks/s); {rotation}; consumers: {per_consumer}."
            " Every committed event reached every consumer exactly once, no rolled-back event"
            " was delivered, and tick snapshots never went backwards."
        )


def rotation_available(conn: Conn) -> bool:
    row = conn.execute(
        "select to_regprocedure('pgque.maint_rotate_tables_step1(text)') is not null"
        " and to_regprocedure('pgque.maint_rotate_tables_step2()') is not null"
    ).fetchone()
    return bool(row and row[0])


class Soak:
    """One soak run against one database; see the module docstring."""

    def __init__(self, dsn: str, config: SoakConfig) -> None:
        self.dsn = dsn
        self.cfg = dataclasses.replace(config)  # setup() settles rotate=None
        self.seed = config.seed if config.seed is not None else random.randrange(1 << 30)
        self.queue = f"soak_{uuid.uuid4().hex[:8]}"
        self.ledger = Ledger()
        self.logs: dict[str, ConsumerLog] = {}
        self.errors: list[BaseException] = []
        self.stop_producing = threading.Event()
        self.stop_all = threading.Event()
        self.tick_barrier = threading.Barrier(2)
        self.tick_ids: list[int] = []
        self.ticker_calls = 0
        self.rotations = 0
        self.counter_lock = threading.Lock()
        self.queue_id = 0
        self.first_tick = 0

    # -- plumbing ----------------------------------------------------------

    def connect(self, autocommit: bool = True) -> Conn:
        return psycopg.connect(self.dsn, autocommit=autocommit, application_name="pgque-soak")

    def _guard(self, fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except threading.BrokenBarrierError:
                if not self.stop_all.is_set():
                    self.errors.append(RuntimeError("ticker barrier broke"))
            except BaseException as exc:
                self.errors.append(exc)
                self.stop_producing.set()
                self.stop_all.set()
                self.tick_barrier.abort()

        return run

    @contextmanager
    def threads(self, targets: dict[str, Callable[[], None]]) -> Iterator[None]:
        started = [
            threading.Thread(target=self._guard(fn), name=name, daemon=True)
            for name, fn in targets.items()
        ]
        for t in started:
            t.start()
        try:
            yield
        finally:
            self.stop_producing.set()
            for t in started:
                if t.name.startswith("producer"):
                    t.join()
            self.stop_all.set()
            self.tick_barrier.abort()
            for t in started:
                t.join()

    def _wait(self, seconds: float) -> bool:
        """Nap (workload pacing only); True when the run is stopping."""
        return self.stop_all.wait(seconds)

    # -- setup ---------------------------------------------------------------

    def setup(self, conn: Conn) -> None:
        if self.cfg.install:
            import pgque  # only needed here; the soak itself talks SQL

            pgque.install(conn)
        if self.cfg.rotate is None:
            self.cfg.rotate = rotation_available(conn)
        elif self.cfg.rotate and not rotation_available(conn):
            raise SoakFailure("--rotate: pgque.maint_rotate_tables_step1/2 are not installed")
        conn.execute("select pgque.create_queue(%s)", (self.queue,))
        settings = {"ticker_max_lag": "1 microsecond", "ticker_idle_period": "1 microsecond"}
        if self.cfg.rotate:
            settings["rotation_period"] = "1 microsecond"
        for param, value in settings.items():
            conn.execute("select pgque.set_queue_config(%s, %s, %s)", (self.queue, param, value))
        row = conn.execute(
            "select queue_id from pgque.queue where queue_name = %s", (self.queue,)
        ).fetchone()
        assert row is not None
        self.queue_id = row[0]
        self.first_tick = self.last_tick(conn)
        for name in ("fast", "lagging"):
            self.register(conn, name)

    def register(self, conn: Conn, name: str) -> ConsumerLog:
        conn.execute("select pgque.register_consumer(%s, %s)", (self.queue, name))
        row = conn.execute(
            "select t.tick_id, t.tick_snapshot::text from pgque.subscription s"
            " join pgque.consumer c on c.co_id = s.sub_consumer"
            " join pgque.tick t on t.tick_queue = s.sub_queue and t.tick_id = s.sub_last_tick"
            " where s.sub_queue = %s and c.co_name = %s",
            (self.queue_id, name),
        ).fetchone()
        assert row is not None
        log = ConsumerLog(name, registered_tick=row[0], registered_at=Snapshot.parse(row[1]))
        self.logs[name] = log
        return log

    def last_tick(self, conn: Conn) -> int:
        row = conn.execute(
            "select max(tick_id) from pgque.tick where tick_queue = %s", (self.queue_id,)
        ).fetchone()
        assert row is not None and row[0] is not None
        return int(row[0])

    # -- workers -------------------------------------------------------------

    def producer(self, index: int) -> None:
        rng = random.Random(self.seed * 1000 + index)
        cfg = self.cfg
        with self.connect(autocommit=False) as conn:
            conn.execute("set synchronous_commit = off")  # queue-style producers; more load
            conn.commit()
            txn = 0
            while not self.stop_producing.is_set():
                txn += 1
                key = f"p{index}:{txn}"
                size = rng.randint(1, cfg.max_events)
                cuts = sorted(rng.sample(range(1, size), min(rng.randint(0, 3), size - 1)))
                kept: list[int] = []
                lost: list[int] = []
                for lo, hi in zip([0, *cuts], [*cuts, size], strict=True):
                    in_savepoint = rng.random() < cfg.savepoint_ratio
                    if in_savepoint:
                        conn.execute("savepoint sp")
                    ids = [
                        r[0]
                        for r in conn.execute(
                            "select pgque.insert_event(%s, 'soak', %s || ':' || n)"
                            "  from generate_series(%s::int, %s::int) n order by n",
                            (self.queue, key, lo, hi - 1),
                        )
                    ]
                    if not in_savepoint:
                        kept += ids
                    elif rng.random() < 0.5:
                        conn.execute("rollback to savepoint sp")
                        lost += ids
                    else:
                        conn.execute("release savepoint sp")
                        kept += ids
                    if rng.random() < cfg.linger_ratio:
                        self._wait(rng.uniform(0, 0.1))
                if rng.random() < cfg.rollback_ratio:
                    conn.rollback()
                    self.ledger.rolled_back(kept + lost)
                else:
                    row = conn.execute("select pg_current_xact_id()::text::bigint").fetchone()
                    assert row is not None
                    conn.commit()
                    self.ledger.committed(key, row[0], kept, lost)

    def ticker(self, form: str) -> None:
        rng = random.Random(self.seed + len(form))
        query = "select pgque.ticker()" if form == "all" else "select pgque.ticker(%s)"
        with self.connect() as conn:
            while not self.stop_all.is_set():
                self.tick_barrier.wait(30)
                row = conn.execute(query, None if form == "all" else (self.queue,)).fetchone()
                assert row is not None
                with self.counter_lock:
                    self.ticker_calls += 1
                    if form != "all" and row[0] is not None:
                        self.tick_ids.append(int(row[0]))
                self._wait(rng.uniform(0, self.cfg.tick_pause))

    def rotator(self) -> None:
        with self.connect() as conn:
            while not self.stop_all.is_set():
                before = self._cur_table(conn)
                conn.execute("select pgque.maint_rotate_tables_step1(%s)", (self.queue,))
                if self._cur_table(conn) != before:
                    self.rotations += 1
                conn.execute("select pgque.maint_rotate_tables_step2()")
                self._wait(self.cfg.rotate_pause)

    def _cur_table(self, conn: Conn) -> int:
        row = conn.execute(
            "select queue_cur_table from pgque.queue where queue_id = %s", (self.queue_id,)
        ).fetchone()
        assert row is not None
        return int(row[0])

    def take_batch(self, conn: Conn, log: ConsumerLog) -> bool:
        """Open, check, record and finish one batch; False when there is none."""
        row = conn.execute(
            "select batch_id, prev_tick_id, cur_tick_id from pgque.next_batch_info(%s, %s)",
            (self.queue, log.name),
        ).fetchone()
        assert row is not None
        batch_id, prev_tick, cur_tick = row
        if batch_id is None:
            return False
        events = conn.execute(
            "select ev_id, ev_retry, ev_txid, ev_data from pgque.get_batch_events(%s)", (batch_id,)
        ).fetchall()
        snaps = {
            r[0]: Snapshot.parse(r[1])
            for r in conn.execute(
                "select tick_id, tick_snapshot::text from pgque.tick"
                " where tick_queue = %s and tick_id in (%s, %s)",
                (self.queue_id, prev_tick, cur_tick),
            )
        }
        s1, s2 = snaps[prev_tick], snaps[cur_tick]
        if cur_tick != prev_tick + 1:
            log.problems.append(f"{log.name}: batch {batch_id} spans ticks {prev_tick}..{cur_tick}")
        if not s2.sees_all_of(s1):
            log.problems.append(f"tick {cur_tick} does not see all of tick {prev_tick}: {s1} {s2}")
        for ev_id, retry, txid, data in events:
            if not (s2.visible(txid) and not s1.visible(txid)):
                log.problems.append(f"{log.name}: ev {ev_id} txid {txid} outside batch {batch_id}")
            log.record(ev_id, retry, txid, data)
        log.batches += 1
        log.empty_batches += not events
        finished = conn.execute("select pgque.finish_batch(%s)", (batch_id,)).fetchone()
        assert finished == (1,), f"finish_batch({batch_id}) -> {finished}"
        return True

    def fast_consumer(self, name: str = "fast", start_after: float = 0.0) -> None:
        with self.connect() as conn:
            if start_after:
                if self._wait(start_after):
                    return
                log = self.register(conn, name)
            else:
                log = self.logs[name]
            while not self.stop_all.is_set():
                if not self.take_batch(conn, log):
                    self._wait(0.005)

    def lagging_consumer(self) -> None:
        rng = random.Random(self.seed + 7)
        log = self.logs["lagging"]
        with self.connect() as conn:
            while not self._wait(rng.uniform(*self.cfg.lag_pause)):
                while not self.stop_all.is_set() and self.take_batch(conn, log):
                    pass

    # -- the run -------------------------------------------------------------

    def run(self) -> SoakReport:
        with self.connect() as conn:
            self.setup(conn)
            version = conn.info.parameter_status("server_version") or "?"
            targets: dict[str, Callable[[], None]] = {
                f"producer-{i}": partial(self.producer, i) for i in range(self.cfg.producers)
            }
            targets["ticker-all"] = partial(self.ticker, "all")
            targets["ticker-queue"] = partial(self.ticker, "queue")
            targets["consumer-fast"] = self.fast_consumer
            targets["consumer-lagging"] = self.lagging_consumer
            if self.cfg.late_consumer:
                targets["consumer-late"] = partial(self.fast_consumer, "late", self.cfg.seconds / 3)
            if self.cfg.rotate:
                targets["rotator"] = self.rotator
            started = time.monotonic()
            with self.threads(targets):
                self.stop_all.wait(self.cfg.seconds)
            elapsed = time.monotonic() - started
            if self.errors:
                raise SoakFailure(f"a worker failed: {self.errors[0]!r}") from self.errors[0]

            # Drain: every transaction has ended; one more tick sees them all.
            final = conn.execute("select pgque.ticker(%s)", (self.queue,)).fetchone()
            assert final is not None and final[0] is not None, "the final tick was skipped"
            for log in self.logs.values():
                while self.take_batch(conn, log):
                    pass
            ticks = self.last_tick(conn) - self.first_tick
            self.audit(conn)
            conn.execute("select pgque.drop_queue(%s, true)", (self.queue,))
        return SoakReport(
            seconds=elapsed,
            seed=self.seed,
            server_version=version,
            producers=self.cfg.producers,
            counts=dict(self.ledger.counts),
            ticks=ticks,
            ticker_calls=self.ticker_calls,
            rotations=self.rotations if self.cfg.rotate else None,
            consumers=self.logs,
        )

    def audit(self, conn: Conn) -> None:
        problems = [p for log in self.logs.values() for p in log.problems]
        state = self.ledger.state
        dup_ticks = [i for i, n in Counter(self.tick_ids).items() if n > 1]
        if dup_ticks:
            problems.append(f"ticker returned tick ids twice: {dup_ticks[:10]}")
        problems += [
            f"ticks {r[0]} -> {r[1]}: {r[2]}"
            for r in conn.execute(
                """
                with t as (
                    select tick_id, tick_snapshot s,
                           lag(tick_id) over w prev_id, lag(tick_snapshot) over w p
                      from pgque.tick where tick_queue = %s
                    window w as (order by tick_id))
                select prev_id, tick_id, 'snapshot went backwards' from t
                 where p is not null
                   and (pg_snapshot_xmin(s) < pg_snapshot_xmin(p)
                        or pg_snapshot_xmax(s) < pg_snapshot_xmax(p)
                        or exists (select 1 from pg_snapshot_xip(s) x
                                    where x < pg_snapshot_xmax(p)
                                      and x not in (select pg_snapshot_xip(p))))
                """,
                (self.queue_id,),
            )
        ]
        for log in self.logs.values():
            # Expected: every committed event its registration tick does not see.
            assert log.registered_at is not None
            expected = bytearray(len(state))
            for txid, ids in self.ledger.committed_txns:
                if not log.registered_at.visible(txid):
                    for i in ids:
                        expected[i] = 1
            seen = log.seen + bytes(max(0, len(state) - len(log.seen)))
            missing, extra, dups, rolled = [], [], [], []
            for i in range(max(len(seen), len(state))):
                n = seen[i]
                want = expected[i] if i < len(expected) else 0
                if n > 1:
                    dups.append(i)
                if n and i < len(state) and state[i] == Ledger.ROLLED_BACK:
                    rolled.append(i)
                elif n and not want:
                    extra.append(i)
                elif want and not n:
                    missing.append(i)
            dups += [k[0] for k, n in log.retried.items() if n > 1]
            for what, found in (
                ("duplicated", dups),
                ("rolled back but delivered", rolled),
                ("delivered but not expected", extra),
                ("missing", missing),
            ):
                if found:
                    problems.append(f"{log.name}: {len(found)} ev_ids {what}: {found[:10]}")
            wrong_txid = [k for k, t in log.txid_of.items() if self.ledger.txid_of.get(k, t) != t]
            if wrong_txid:
                problems.append(
                    f"{log.name}: ev_txid differs from the producer's: {wrong_txid[:5]}"
                )
        if problems:
            raise SoakFailure(
                f"soak (queue {self.queue}, seed {self.seed}) found {len(problems)} problems:\n"
                + "\n".join(problems[:50])
            )


def run_soak(dsn: str, config: SoakConfig | None = None) -> SoakReport:
    """Run a soak against the database at ``dsn``; raise SoakFailure on any violation."""
    return Soak(dsn, config or SoakConfig()).run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    target = parser.add_mutually_exclusive_group()
    target.add_argument(
        "--dsn",
        default=os.environ.get("PGQUE_DSN"),
        help="libpq connection string (default: $PGQUE_DSN)",
    )
    target.add_argument(
        "--temp-pg",
        type=int,
        metavar="VERSION",
        help="start a throwaway server of this major version and install pgque",
    )
    parser.add_argument("--seconds", type=float, default=SoakConfig.seconds)
    parser.add_argument("--producers", type=int, default=SoakConfig.producers)
    parser.add_argument("--seed", type=int)
    parser.add_argument(
        "--rotate",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="rotate event tables (default: when the functions exist)",
    )
    parser.add_argument("--late-consumer", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument(
        "--install", action="store_true", help="install (or upgrade) pgque into the database first"
    )
    args = parser.parse_args(argv)
    config = SoakConfig(
        seconds=args.seconds,
        producers=args.producers,
        seed=args.seed,
        rotate=args.rotate,
        late_consumer=args.late_consumer,
        install=args.install or bool(args.temp_pg),
    )
    try:
        if args.temp_pg:
            from pgque._cluster import TempCluster

            with TempCluster(args.temp_pg) as cluster:
                with psycopg.connect(cluster.dsn(), autocommit=True) as admin:
                    admin.execute("create database soak")
                report = run_soak(cluster.dsn("soak"), config)
        elif args.dsn:
            report = run_soak(args.dsn, config)
        else:
            parser.error("--dsn (or $PGQUE_DSN) or --temp-pg is required")
    except SoakFailure as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    print(report.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
