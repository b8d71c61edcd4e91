"""Snapshot correctness of the engine under real concurrency across several sessions.

Every test drives several connections in an explicit order. A call that must
block runs in a worker thread, and the test goes on only once the wait shows
in ``pg_locks``; nothing is ordered by sleeping. Time never decides a tick:
queues run with ``ticker_max_lag`` and ``ticker_idle_period`` at '1 microsecond', so every
``ticker()`` call ticks. The invariant checked throughout: each committed
event reaches each consumer exactly once, in the batch whose end tick first
sees its transaction committed; a rolled-back event never arrives.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import psycopg
import pytest
from psycopg import IsolationLevel

pytestmark = pytest.mark.concurrency

Conn = psycopg.Connection[Any]
Connect = Callable[..., Conn]
Key = tuple[str, int]  # (queue name, ev_id)

Q = "q"
WAIT_SECONDS = 20.0


# -- small helpers ------------------------------------------------------------


def one(conn: Conn, query: str, *params: Any) -> Any:
    """Return the first column of the first row of ``query``."""
    row = conn.execute(query, params or None).fetchone()
    assert row is not None, query
    return row[0]


def make_queue(conn: Conn, queue: str = Q) -> None:
    """Create a queue on which every ticker() call ticks."""
    assert one(conn, "select pgque.create_queue(%s)", queue) == 1
    for param in ("ticker_max_lag", "ticker_idle_period"):
        conn.execute("select pgque.set_queue_config(%s, %s, '1 microsecond')", (queue, param))


def register(conn: Conn, consumer: str, queue: str = Q) -> int:
    """Register ``consumer`` at the latest tick; return that tick id."""
    assert one(conn, "select pgque.register_consumer(%s, %s)", queue, consumer) == 1
    return int(
        one(
            conn,
            "select sub_last_tick from pgque.subscription s"
            " join pgque.queue q on q.queue_id = s.sub_queue"
            " join pgque.consumer c on c.co_id = s.sub_consumer"
            " where q.queue_name = %s and c.co_name = %s",
            queue,
            consumer,
        )
    )


def tick(conn: Conn, queue: str = Q) -> int:
    """Tick ``queue``; return the new tick id."""
    tick_id = one(conn, "select pgque.ticker(%s)", queue)
    assert tick_id is not None, "ticker() skipped a queue with max_lag 0"
    return int(tick_id)


def insert(conn: Conn, data: str, queue: str = Q) -> int:
    """Insert one event in the connection's current transaction; return its id."""
    return int(one(conn, "select pgque.insert_event(%s, 'test', %s)", queue, data))


def insert_autocommit(conn: Conn, data: str, queue: str = Q) -> tuple[int, int]:
    """Insert one event in a transaction of its own; return (ev_id, txid)."""
    assert conn.autocommit
    row = conn.execute(
        "select pgque.insert_event(%s, 'test', %s), pg_current_xact_id()::text::bigint",
        (queue, data),
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def txid(conn: Conn) -> int:
    """The top-level txid of the connection's transaction (assigning one if needed)."""
    return int(one(conn, "select pg_current_xact_id()::text::bigint"))


def tick_count(conn: Conn, queue: str) -> int:
    return int(
        one(
            conn,
            "select count(*) from pgque.tick t join pgque.queue q"
            " on q.queue_id = t.tick_queue where q.queue_name = %s",
            queue,
        )
    )


def snapshot_visible(conn: Conn, queue: str, tick_id: int, txids: Iterable[int]) -> list[bool]:
    """For each txid: is it visible in the snapshot of tick ``tick_id``?"""
    rows = conn.execute(
        "select pg_visible_in_snapshot(x::text::xid8, t.tick_snapshot)"
        "  from unnest(%s::bigint[]) with ordinality u(x, n)"
        "  join pgque.tick t on t.tick_id = %s"
        "  join pgque.queue q on q.queue_id = t.tick_queue and q.queue_name = %s"
        " order by n",
        (list(txids), tick_id, queue),
    ).fetchall()
    return [bool(r[0]) for r in rows]


# -- batches ------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    ev_id: int
    txid: int
    retry: int | None
    data: str


@dataclass
class Batch:
    queue: str
    batch_id: int
    prev_tick: int
    cur_tick: int
    events: list[Event]

    @property
    def ids(self) -> list[int]:
        return [e.ev_id for e in self.events]


def open_batch(conn: Conn, consumer: str, queue: str = Q) -> Batch | None:
    """Open (or re-get) the consumer's batch and read its events, without finishing it."""
    row = conn.execute(
        "select batch_id, prev_tick_id, cur_tick_id from pgque.next_batch_info(%s, %s)",
        (queue, consumer),
    ).fetchone()
    assert row is not None
    if row[0] is None:
        return None
    events = [
        Event(r[0], r[1], r[2], r[3])
        for r in conn.execute(
            "select ev_id, ev_txid, ev_retry, ev_data from pgque.get_batch_events(%s)", (row[0],)
        )
    ]
    batch = Batch(queue, row[0], row[1], row[2], events)
    assert batch.ids == sorted(batch.ids), "events of a batch come ordered by ev_id"
    check_batch_cut(conn, batch)
    return batch


def check_batch_cut(conn: Conn, batch: Batch) -> None:
    """Every event's txid is visible in the end tick's snapshot and not in the start tick's."""
    bad = conn.execute(
        "select x from unnest(%s::bigint[]) x,"
        " (select (select tick_snapshot from pgque.tick where tick_queue = q.queue_id"
        "          and tick_id = %s) s1,"
        "         (select tick_snapshot from pgque.tick where tick_queue = q.queue_id"
        "          and tick_id = %s) s2"
        "    from pgque.queue q where q.queue_name = %s) s"
        " where (pg_visible_in_snapshot(x::text::xid8, s.s2)"
        "        and not pg_visible_in_snapshot(x::text::xid8, s.s1)) is not true",
        ([e.txid for e in batch.events], batch.prev_tick, batch.cur_tick, batch.queue),
    ).fetchall()
    assert not bad, f"batch {batch.batch_id}: txids outside its snapshot cut: {bad}"


def take_batch(conn: Conn, consumer: str, queue: str = Q) -> Batch | None:
    """Open, read and finish the consumer's next batch; None when there is none."""
    batch = open_batch(conn, consumer, queue)
    if batch is not None:
        assert one(conn, "select pgque.finish_batch(%s)", batch.batch_id) == 1
    return batch


def next_ids(conn: Conn, consumer: str, queue: str = Q) -> list[int]:
    """Take the consumer's next batch, which must exist; return its event ids."""
    batch = take_batch(conn, consumer, queue)
    assert batch is not None, f"{consumer}: no batch"
    return batch.ids


def drain(conn: Conn, consumer: str, queue: str = Q) -> list[Batch]:
    """Take batches until the consumer has caught up with the latest tick."""
    batches: list[Batch] = []
    while (batch := take_batch(conn, consumer, queue)) is not None:
        if batches:
            assert batch.prev_tick == batches[-1].cur_tick, "batches must chain tick to tick"
        batches.append(batch)
    return batches


def assert_exactly_once(
    batches: Iterable[Batch],
    expected: AbstractSet[int],
    rolled_back: AbstractSet[int] = frozenset(),
) -> None:
    """The consumer got each expected id exactly once and no rolled-back id."""
    got = Counter(e.ev_id for b in batches for e in b.events)
    dups = sorted(i for i, n in got.items() if n > 1)
    assert not dups, f"delivered more than once: {dups}"
    assert not set(got) & rolled_back, (
        f"rolled-back ids delivered: {sorted(set(got) & rolled_back)}"
    )
    assert set(got) == expected, (
        f"missing {sorted(expected - set(got))}, unexpected {sorted(set(got) - expected)}"
    )


def tick_order_violations(conn: Conn, queue: str) -> list[tuple[Any, ...]]:
    """Consecutive ticks (by id) whose snapshots go backwards.

    Tick k+1 must see everything tick k saw: xmin and xmax never decrease, and
    each txid visible in tick k (all below its xmin, and those of
    [xmin, xmax) not in its xip) is visible in tick k+1.
    """
    return conn.execute(
        """
        with t as (
            select k.tick_id, k.tick_snapshot as s,
                   lag(k.tick_id) over w as prev_id, lag(k.tick_snapshot) over w as p
              from pgque.tick k join pgque.queue q on q.queue_id = k.tick_queue
             where q.queue_name = %(q)s
            window w as (order by k.tick_id))
        select prev_id, tick_id, 'xmin or xmax went backwards', null::bigint
          from t
         where p is not null
           and (pg_snapshot_xmin(s) < pg_snapshot_xmin(p)
                or pg_snapshot_xmax(s) < pg_snapshot_xmax(p))
        union all
        select prev_id, tick_id, 'visible in the earlier tick only', x
          from t, generate_series(pg_snapshot_xmin(p)::text::bigint,
                                  pg_snapshot_xmax(p)::text::bigint - 1) x
         where p is not null
           and pg_visible_in_snapshot(x::text::xid8, p)
           and not pg_visible_in_snapshot(x::text::xid8, s)
        """,
        {"q": queue},
    ).fetchall()


# -- producers ----------------------------------------------------------------


@dataclass
class Producer:
    """A session whose transaction the test opens, grows and ends step by step."""

    conn: Conn
    pending: list[Key] = field(default_factory=list)
    savepoints: list[tuple[str, int]] = field(default_factory=list)
    discarded: list[Key] = field(default_factory=list)
    _sp_counter: int = 0

    def __post_init__(self) -> None:
        assert not self.conn.autocommit, "a Producer needs a non-autocommit connection"

    @property
    def in_tx(self) -> bool:
        return bool(self.pending or self.savepoints or self.discarded)

    def insert(self, data: str, queue: str = Q) -> int:
        ev_id = insert(self.conn, data, queue)
        self.pending.append((queue, ev_id))
        return ev_id

    def savepoint(self) -> str:
        self._sp_counter += 1
        name = f"sp{self._sp_counter}"
        self.conn.execute(f"savepoint {name}")
        self.savepoints.append((name, len(self.pending)))
        return name

    def rollback_to(self, name: str) -> list[Key]:
        """Roll back to the savepoint (which stays); return the ids it discarded."""
        pos = [n for n, _ in self.savepoints].index(name)
        mark = self.savepoints[pos][1]
        del self.savepoints[pos + 1 :]
        self.conn.execute(f"rollback to savepoint {name}")
        lost, self.pending = self.pending[mark:], self.pending[:mark]
        self.discarded.extend(lost)
        return lost

    def release(self, name: str) -> None:
        pos = [n for n, _ in self.savepoints].index(name)
        del self.savepoints[pos:]
        self.conn.execute(f"release savepoint {name}")

    def commit(self) -> tuple[int, list[Key], list[Key]]:
        """Commit; return (txid, delivered keys, keys lost to rolled-back savepoints)."""
        xid = txid(self.conn)
        self.conn.commit()
        return xid, self._reset(), self._reset_discarded()

    def rollback(self) -> list[Key]:
        """Roll back; return every key the transaction inserted."""
        self.conn.rollback()
        return self._reset() + self._reset_discarded()

    def _reset(self) -> list[Key]:
        keys, self.pending, self.savepoints = self.pending, [], []
        return keys

    def _reset_discarded(self) -> list[Key]:
        keys, self.discarded = self.discarded, []
        return keys


def ids(keys: Iterable[Key]) -> set[int]:
    return {i for _, i in keys}


# -- blocking calls -----------------------------------------------------------


def wait_until_blocked(
    observer: Conn, pid: int, call: Future[Any], blocker_pid: int
) -> list[tuple[str, str]]:
    """Wait until backend ``pid`` waits for a lock held by ``blocker_pid``.

    Returns the (locktype, mode) of the ungranted locks. Fails if the call
    finishes instead, or nothing shows within WAIT_SECONDS.
    """
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        rows = observer.execute(
            "select locktype, mode from pg_locks"
            " where pid = %s and not granted and %s = any (pg_blocking_pids(%s))",
            (pid, blocker_pid, pid),
        ).fetchall()
        if rows:
            return [(r[0], r[1]) for r in rows]
        assert not call.done(), f"the call returned without waiting: {call.result()!r}"
        assert time.monotonic() < deadline, f"backend {pid} never waited on {blocker_pid}"
        time.sleep(0.002)  # polling an observable state, not ordering by time


def wait_event(observer: Conn, pid: int) -> tuple[str | None, str | None]:
    row = observer.execute(
        "select wait_event_type, wait_event from pg_stat_activity where pid = %s", (pid,)
    ).fetchone()
    assert row is not None
    return row[0], row[1]


# -- tests --------------------------------------------------------------------


def test_open_transaction_events_arrive_in_the_batch_of_its_commit(
    conn: Conn, connect: Connect
) -> None:
    make_queue(conn)
    register(conn, "each")
    register(conn, "at_end")
    long = Producer(connect(autocommit=False))
    short = connect()

    l1 = long.insert("long-1")
    s1 = insert(short, "short-1")
    t2 = tick(conn)
    assert next_ids(conn, "each") == [s1]

    l2 = long.insert("long-2")
    s2 = insert(short, "short-2")
    tick(conn)
    assert next_ids(conn, "each") == [s2]
    tick(conn)
    assert next_ids(conn, "each") == []

    long_xid, keys, _ = long.commit()
    t5 = tick(conn)
    batch = take_batch(conn, "each")
    assert batch is not None and batch.cur_tick == t5
    assert batch.ids == [l1, l2]
    assert {e.txid for e in batch.events} == {long_xid}
    tick(conn)
    assert next_ids(conn, "each") == []
    assert take_batch(conn, "each") is None

    # The long transaction kept every tick's xmin at its txid until it ended.
    assert snapshot_visible(conn, Q, t2, [long_xid]) == [False]
    assert snapshot_visible(conn, Q, t5, [long_xid]) == [True]

    late = drain(conn, "at_end")
    assert [b.ids for b in late] == [[s1], [s2], [], [l1, l2], []]
    assert_exactly_once(late, {s1, s2} | ids(keys))


@pytest.mark.parametrize("outcome", ["commit", "rollback"])
@pytest.mark.parametrize("gap", [0, 150], ids=["near", "far"])
def test_transaction_open_across_ticks_ends(
    conn: Conn, connect: Connect, outcome: str, gap: int
) -> None:
    """A transaction running at several ticks commits (delivered once) or aborts (never).

    With ``gap`` other transactions between it and the next tick, its txid is
    far below that tick's xmax and reaches the batch query through the exact
    txid list instead of the widened range: both paths are exercised.
    """
    make_queue(conn)
    register(conn, "each")
    register(conn, "at_end")
    open_tx = Producer(connect(autocommit=False))
    other = connect()

    mine = [open_tx.insert(f"open-{i}") for i in range(3)]
    others = [insert(other, f"other-{i}") for i in range(gap + 1)]
    tick(conn)
    assert next_ids(conn, "each") == others
    tick(conn)
    assert next_ids(conn, "each") == []

    if outcome == "commit":
        open_tx.commit()
        expected_last = mine
    else:
        assert ids(open_tx.rollback()) == set(mine)
        expected_last = []
    after = insert(other, "after")
    tick(conn)
    assert next_ids(conn, "each") == sorted([*expected_last, after])
    tick(conn)
    assert next_ids(conn, "each") == []

    rolled_back = set() if outcome == "commit" else set(mine)
    assert_exactly_once(drain(conn, "at_end"), {*others, after, *expected_last}, rolled_back)


def test_rollback_before_any_tick_is_never_delivered(conn: Conn, connect: Connect) -> None:
    make_queue(conn)
    register(conn, "c")
    p = Producer(connect(autocommit=False))
    lost = [p.insert(f"lost-{i}") for i in range(5)]
    p.rollback()
    kept = insert(conn, "kept")
    tick(conn)
    assert_exactly_once(drain(conn, "c"), {kept}, set(lost))


def test_savepoints_rolled_back_are_dropped_released_are_kept(conn: Conn, connect: Connect) -> None:
    make_queue(conn)
    register(conn, "each")
    register(conn, "at_end")
    p = Producer(connect(autocommit=False))

    # The transaction's first write happens inside a savepoint: the
    # subtransaction has an xid of its own, but ev_txid must be the top-level one.
    a = p.savepoint()
    x1 = p.insert("x1")
    p.release(a)
    b = p.savepoint()
    x2 = p.insert("x2")
    p.rollback_to(b)
    p.release(b)
    x3 = p.insert("x3")
    c = p.savepoint()
    x4 = p.insert("x4")
    d = p.savepoint()
    x5 = p.insert("x5")
    p.rollback_to(d)
    p.release(c)  # releases d as well
    tick(conn)
    assert next_ids(conn, "each") == []
    e = p.savepoint()
    x6 = p.insert("x6")
    p.rollback_to(e)
    xid, kept, lost = p.commit()
    assert ids(kept) == {x1, x3, x4} and ids(lost) == {x2, x5, x6}

    # All of a committed transaction's savepoints rolled back: nothing delivered.
    q = Producer(connect(autocommit=False))
    f = q.savepoint()
    y1 = q.insert("y1")
    q.rollback_to(f)
    _, none_kept, y_lost = q.commit()
    assert none_kept == [] and ids(y_lost) == {y1}

    # Released savepoints of a transaction that then rolls back: nothing delivered.
    g = q.savepoint()
    z1 = q.insert("z1")
    q.release(g)
    z_lost = q.rollback()
    assert ids(z_lost) == {z1}

    tick(conn)
    batch = take_batch(conn, "each")
    assert batch is not None and batch.ids == [x1, x3, x4]
    assert {ev.txid for ev in batch.events} == {xid}
    dropped = {x2, x5, x6, y1, z1}
    assert_exactly_once(drain(conn, "at_end"), {x1, x3, x4}, dropped)


def test_commits_out_of_id_order(conn: Conn, connect: Connect) -> None:
    make_queue(conn)
    register(conn, "each")
    register(conn, "at_end")
    a, b, c = (Producer(connect(autocommit=False)) for _ in range(3))
    a1 = a.insert("a1")
    b1 = b.insert("b1")
    c1 = c.insert("c1")
    a2 = a.insert("a2")
    assert a1 < b1 < c1 < a2

    c.commit()
    tick(conn)
    a.commit()
    tick(conn)
    b.commit()
    tick(conn)
    each = [take_batch(conn, "each") for _ in range(3)]
    assert [bt.ids for bt in each if bt is not None] == [[c1], [a1, a2], [b1]]
    at_end = drain(conn, "at_end")
    assert [bt.ids for bt in at_end] == [[c1], [a1, a2], [b1]]
    assert_exactly_once(at_end, {a1, a2, b1, c1})


def test_late_registration_sees_exactly_what_its_tick_does_not(
    conn: Conn, connect: Connect
) -> None:
    make_queue(conn)
    register(conn, "early")
    open_tx = Producer(connect(autocommit=False))
    other = connect()

    before = insert(other, "before")
    t1 = tick(conn)
    pending = open_tx.insert("inserted before registration, committed after")
    visible = insert(other, "committed before the registration tick")
    t2 = tick(conn)
    assert register(conn, "late") == t2
    open_tx.commit()
    after = insert(other, "after")
    tick(conn)

    everything = {before, pending, visible, after}
    assert_exactly_once(drain(conn, "early"), everything)
    assert_exactly_once(drain(conn, "late"), {pending, after})
    # Registering at an older tick: exactly the events not visible in its snapshot.
    assert one(conn, "select pgque.register_consumer_at(%s, 'rewound', %s)", Q, t1) == 1
    assert_exactly_once(drain(conn, "rewound"), {pending, visible, after})


class InterleavedRun:
    """A seeded random schedule of several sessions' statements, ticks and consumers.

    Statements run one at a time, so the run knows for every commit how many
    ticks were taken before it (its epoch): its events belong to the batch
    ending at tick ``ticks[epoch]``, whoever consumes.
    """

    def __init__(self, conn: Conn, connect: Connect, seed: int, producers: int = 6) -> None:
        self.rng = random.Random(seed)
        self.conn = conn
        self.solo = connect()
        self.producers = [Producer(connect(autocommit=False)) for _ in range(producers)]
        self.ticks = [int(one(conn, "select max(tick_id) from pgque.tick"))]
        self.epoch_of: dict[int, int] = {}  # ev_id -> index in ticks of its batch's end
        self.txid_of: dict[int, int] = {}
        self.rolled_back: set[int] = set()
        self.batches: dict[str, list[Batch]] = {}
        self.starts: dict[str, int] = {}  # consumer -> first epoch it must see

    def register(self, consumer: str, at: int | None = None) -> None:
        """Register at the latest tick, or at ``ticks[at]``."""
        if at is None:
            register(self.conn, consumer)
            at = len(self.ticks) - 1
        else:
            assert (
                one(
                    self.conn,
                    "select pgque.register_consumer_at(%s, %s, %s)",
                    Q,
                    consumer,
                    self.ticks[at],
                )
                == 1
            )
        self.starts[consumer] = at + 1
        self.batches[consumer] = []

    def consume(self, consumer: str) -> None:
        self.batches[consumer].extend(drain(self.conn, consumer))

    def tick(self) -> None:
        self.ticks.append(tick(self.conn))
        self.consume("each")

    def solo_insert(self, data: str) -> None:
        ev_id, xid = insert_autocommit(self.solo, data)
        self._committed([(Q, ev_id)], xid)

    def commit(self, p: Producer) -> None:
        xid, kept, lost = p.commit()
        self.rolled_back |= ids(lost)
        self._committed(kept, xid)

    def rollback(self, p: Producer) -> None:
        self.rolled_back |= ids(p.rollback())

    def rollback_to(self, p: Producer, name: str) -> None:
        self.rolled_back |= ids(p.rollback_to(name))

    def _committed(self, keys: Iterable[Key], xid: int) -> None:
        for _, ev_id in keys:
            self.epoch_of[ev_id] = len(self.ticks)
            self.txid_of[ev_id] = xid

    def step(self, n: int) -> None:
        """Run one randomly chosen statement."""
        p = self.rng.choice(self.producers)
        actions: list[tuple[int, Callable[[], object]]] = [
            (6, partial(p.insert, f"step{n}")),
            (1, partial(self.solo_insert, f"solo{n}")),
            (2, self.tick),
            (1, partial(self.consume, "slow")),
        ]
        if p.in_tx:
            actions += [
                (2, partial(self.commit, p)),
                (1, partial(self.rollback, p)),
                (1, p.savepoint),
            ]
        if p.savepoints:
            name = self.rng.choice(p.savepoints)[0]
            actions += [(1, partial(self.rollback_to, p, name)), (1, partial(p.release, name))]
        weights = [w for w, _ in actions]
        self.rng.choices([f for _, f in actions], weights)[0]()

    def finish(self) -> None:
        """End every open transaction, tick once more and let every consumer catch up."""
        for p in self.producers:
            if p.in_tx:
                (self.commit if self.rng.random() < 0.5 else self.rollback)(p)
        self.ticks.append(tick(self.conn))
        for consumer in self.batches:
            self.consume(consumer)

    def check(self) -> None:
        for consumer, got in self.batches.items():
            start = self.starts[consumer]
            want = {i for i, e in self.epoch_of.items() if e >= start}
            assert_exactly_once(got, want, self.rolled_back)
            for batch in got:
                pos = self.ticks.index(batch.cur_tick)
                assert self.ticks[pos - 1] == batch.prev_tick, "a batch spans one tick interval"
                assert set(batch.ids) == {i for i, e in self.epoch_of.items() if e == pos}, (
                    f"{consumer}: batch ending at tick {batch.cur_tick} has the wrong events"
                )
                assert all(ev.txid == self.txid_of[ev.ev_id] for ev in batch.events)
        assert tick_order_violations(self.conn, Q) == []


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_many_producers_interleaved_with_ticks(conn: Conn, connect: Connect, seed: int) -> None:
    """Six sessions' transactions, savepoints and autocommit inserts interleaved with
    ticks; consumers: one after every tick, one at random moments, one registered
    late and one registered at an old tick at the end."""
    make_queue(conn)
    run = InterleavedRun(conn, connect, seed)
    run.register("each")
    run.register("slow")
    for n in range(500):
        if n == 200:
            run.register("late")
        run.step(n)
    run.finish()
    run.register("rewound", at=run.rng.randrange(len(run.ticks) - 1))
    run.consume("rewound")
    run.check()
    assert len(run.epoch_of) > 100 and len(run.rolled_back) > 10, "the schedule did too little"
    assert all(run.batches[c] for c in ("each", "slow", "late"))


RACE_ROUNDS = 150
RACE_COMMITTERS = 4


def test_two_tickers_racing(conn: Conn, connect: Connect) -> None:
    """Two sessions call the ticker at the same moment, round after round, while other
    sessions commit or abort; ticks are neither lost, doubled nor out of snapshot order."""
    rng = random.Random(11)
    queues = ["qa", "qb"]  # two queues: the no-argument ticker() locks them in name order
    for queue in queues:
        make_queue(conn, queue)
        register(conn, "each", queue)
        register(conn, "at_end", queue)
    racers = [connect(), connect()]
    committers = [Producer(connect(autocommit=False)) for _ in range(RACE_COMMITTERS)]
    producers = [Producer(connect(autocommit=False)) for _ in range(3)]
    committed: set[Key] = set()
    rolled_back: set[Key] = set()
    returned_ids: dict[str, list[int]] = {q: [] for q in queues}
    each: dict[str, list[Batch]] = {q: [] for q in queues}
    barrier = threading.Barrier(len(racers) + len(committers))

    def race_ticker(c: Conn, form: str) -> int | None:
        barrier.wait(WAIT_SECONDS)
        if form == "all":
            return int(one(c, "select pgque.ticker()"))
        tick_id = one(c, "select pgque.ticker(%s)", form)
        return None if tick_id is None else int(tick_id)

    def race_commit(p: Producer, outcome: str) -> list[Key]:
        barrier.wait(WAIT_SECONDS)
        return p.commit()[1] if outcome == "commit" else p.rollback()

    with ThreadPoolExecutor(max_workers=len(racers) + len(committers)) as pool:
        for rnd in range(RACE_ROUNDS):
            for p in producers:
                for _ in range(rng.randrange(3)):
                    p.insert(f"r{rnd}", rng.choice(queues))
                if p.in_tx and rng.random() < 0.3:
                    if rng.random() < 0.7:
                        committed.update(p.commit()[1])
                    else:
                        rolled_back.update(p.rollback())
            outcomes = [rng.choice(["commit", "commit", "rollback"]) for _ in committers]
            for p in committers:
                for i in range(rng.randrange(1, 4)):
                    p.insert(f"c{rnd}.{i}", rng.choice(queues))
            forms = [rng.choice(["all", *queues]) for _ in racers]
            before = {q: tick_count(conn, q) for q in queues}
            tickers = [pool.submit(race_ticker, c, f) for c, f in zip(racers, forms, strict=True)]
            ends = [
                pool.submit(race_commit, p, o) for p, o in zip(committers, outcomes, strict=True)
            ]
            results = [f.result(timeout=WAIT_SECONDS) for f in tickers]
            for outcome, end in zip(outcomes, ends, strict=True):
                (committed if outcome == "commit" else rolled_back).update(
                    end.result(timeout=WAIT_SECONDS)
                )

            new = {q: tick_count(conn, q) - before[q] for q in queues}
            reported = 0
            for form, res in zip(forms, results, strict=True):
                if form == "all":
                    reported += int(res or 0)
                elif res is not None:
                    reported += 1
                    returned_ids[form].append(res)
            assert sum(new.values()) == reported, f"round {rnd}: {forms} -> {results}, {new}"
            for queue in queues:
                got = drain(conn, "each", queue)
                assert len(got) == new[queue], "one batch per new tick"
                each[queue].extend(got)

    for p in producers:
        committed.update(p.commit()[1])
    for queue in queues:
        tick(conn, queue)
        each[queue].extend(drain(conn, "each", queue))
        tick_ids = [
            r[0]
            for r in conn.execute(
                "select tick_id from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue"
                " where q.queue_name = %s order by tick_id",
                (queue,),
            )
        ]
        assert tick_ids == list(range(1, len(tick_ids) + 1)), "tick ids have gaps"
        dup = [i for i, n in Counter(returned_ids[queue]).items() if n > 1]
        assert not dup and set(returned_ids[queue]) <= set(tick_ids)
        assert tick_order_violations(conn, queue) == []
        want = {i for q, i in committed if q == queue}
        lost = {i for q, i in rolled_back if q == queue}
        assert_exactly_once(each[queue], want, lost)
        assert_exactly_once(drain(conn, "at_end", queue), want, lost)
    assert len(committed) > 100 and rolled_back


def test_ticker_waits_for_a_ticker_held_open(conn: Conn, connect: Connect) -> None:
    """A second ticker() waits on the queue's tick lock and then snapshots after the first."""
    make_queue(conn)
    register(conn, "c")
    holder = connect(autocommit=False)
    waiter = connect()
    observer = connect()
    early = insert(conn, "committed before the first tick")

    t_a = tick(holder)  # transaction left open: holds the tick lock
    holder_xid = txid(holder)
    waiter_pid = waiter.info.backend_pid
    with ThreadPoolExecutor(max_workers=1) as pool:
        try:
            call = pool.submit(tick, waiter)
            locks = wait_until_blocked(observer, waiter_pid, call, holder.info.backend_pid)
            # The queue's row of pgque.tick_lock, locked FOR UPDATE by the holder.
            assert ("transactionid", "ShareLock") in locks
            assert wait_event(observer, waiter_pid) == ("Lock", "transactionid")
            # Committed while the second ticker waits: invisible to the first tick.
            during, during_xid = insert_autocommit(conn, "committed while the ticker waits")
            assert not call.done()
            holder.commit()
            t_b = call.result(timeout=WAIT_SECONDS)
        finally:
            holder.rollback()
    assert t_b == t_a + 1
    assert snapshot_visible(conn, Q, t_a, [holder_xid, during_xid]) == [False, False]
    assert snapshot_visible(conn, Q, t_b, [holder_xid, during_xid]) == [True, True]
    assert tick_order_violations(conn, Q) == []
    batches = drain(conn, "c")
    assert [(b.cur_tick, b.ids) for b in batches] == [(t_a, [early]), (t_b, [during])]


@pytest.mark.parametrize("outcome", ["commit", "rollback", "finish"])
def test_next_batch_for_one_consumer_from_two_sessions(
    conn: Conn, connect: Connect, outcome: str
) -> None:
    """The second next_batch waits on the subscription row; then gets the same batch
    (first committed), a new id for the same ticks (first rolled back), or the next
    batch (first finished its batch and committed: what the SDK's consumers do)."""
    make_queue(conn)
    register(conn, "c")
    events = [insert(conn, f"e{i}") for i in range(4)]
    tick(conn)
    first = connect(autocommit=False)
    second = connect()
    observer = connect()

    a = open_batch(first, "c")
    assert a is not None and a.ids == events
    later = insert(conn, "after the first batch")
    next_tick = tick(conn)
    with ThreadPoolExecutor(max_workers=1) as pool:
        try:
            call = pool.submit(open_batch, second, "c")
            locks = wait_until_blocked(
                observer, second.info.backend_pid, call, first.info.backend_pid
            )
            assert {lt for lt, _ in locks} <= {"transactionid", "tuple"}, locks
            assert wait_event(observer, second.info.backend_pid)[0] == "Lock"
            if outcome == "finish":
                assert one(first, "select pgque.finish_batch(%s)", a.batch_id) == 1
            if outcome == "rollback":
                first.rollback()
            else:
                first.commit()
            b = call.result(timeout=WAIT_SECONDS)
        finally:
            first.rollback()
    assert b is not None
    if outcome == "finish":
        # From where the first batch ended: nothing of it again.
        assert (b.prev_tick, b.cur_tick, b.ids) == (a.cur_tick, next_tick, [later])
        return
    assert (b.prev_tick, b.cur_tick, b.events) == (a.prev_tick, a.cur_tick, a.events)
    if outcome == "commit":
        assert b.batch_id == a.batch_id
    else:
        assert b.batch_id != a.batch_id
        assert one(conn, "select pgque.finish_batch(%s)", a.batch_id) == 0
    assert one(conn, "select pgque.finish_batch(%s)", b.batch_id) == 1
    rest = take_batch(conn, "c")
    assert rest is not None and (rest.prev_tick, rest.ids) == (a.cur_tick, [later])
    assert take_batch(conn, "c") is None


@pytest.mark.parametrize(
    "level", [IsolationLevel.REPEATABLE_READ, IsolationLevel.SERIALIZABLE], ids=["rr", "ser"]
)
@pytest.mark.parametrize("call", ["select pgque.ticker(%s)", "select pgque.ticker()"])
def test_ticker_refuses_snapshot_isolation(
    conn: Conn, connect: Connect, level: IsolationLevel, call: str
) -> None:
    make_queue(conn)
    before = tick_count(conn, Q)
    session = connect(autocommit=False)
    session.isolation_level = level
    with pytest.raises(psycopg.errors.RaiseException) as info:
        session.execute(call, (Q,) if "%s" in call else None)
    assert "READ COMMITTED" in (info.value.diag.message_primary or "")
    assert info.value.diag.message_detail == "pgque:wrong_isolation"
    session.rollback()
    assert tick_count(conn, Q) == before

    # The same session ticks fine in READ COMMITTED, inside an explicit transaction too.
    session.isolation_level = IsolationLevel.READ_COMMITTED
    with session.transaction():
        tick(session)
    assert tick_count(conn, Q) == before + 1
