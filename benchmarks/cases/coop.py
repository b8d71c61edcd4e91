"""Idempotent sends, cooperative consumers and partition slots (pgque only, PostgreSQL 18)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass

from pgque._queries import query

from ..core import Context, Series, case, timed_rate
from ..fixtures import PAYLOAD_100, Conn, connect, eager_queue, preload
from ..targets import target

SEND = "single send per call, 100 B"
COOP = "drain a backlog of 100 B events, 1000 per batch: cooperative consumer"
SLOTS = 4
PARTITION = f"drain a backlog of 100 B keyed events, 1000 per batch: {SLOTS} partition slots"
AMPLIFICATION = f"read amplification (event rows read / delivered), {SLOTS} partition slots"
PER_BATCH = 1000
KEYS = 1000
"""Distinct partition keys of the keyed backlog."""

PLAIN = "receive+ack, one consumer"
COOP_ALTERNATING = "receive_coop+ack, 2 members alternating"
COOP_THREADS = "receive_coop+ack, 2 members in 2 threads"
SLOTS_THREADS = f"receive_partitioned, {SLOTS} slots in {SLOTS} threads"

target(
    goal="cooperative drain, 2 members taking turns: receive_coop+ack >= 0.9x plain receive+ack",
    workload=COOP,
    subject=COOP_ALTERNATING,
    baseline=PLAIN,
    at_least=0.9,
)

_queues = itertools.count(1)


@dataclass
class _State:
    """The queue the current measure drains, its backlog, and whether events carry keys."""

    queue: str = ""
    total: int = 0
    keyed: bool = False


def _new_queue(conn: Conn, prefix: str) -> str:
    """A fresh eagerly ticking queue (each measure drains one of its own)."""
    name = f"{prefix}_{next(_queues)}"
    eager_queue(conn, "pgque", name)
    return name


def _preload_keyed(conn: Conn, queue: str, total: int) -> None:
    """``total`` events with partition keys k0..k999, one tick every 1000 events."""
    for start in range(0, total, PER_BATCH):
        with conn.transaction():
            conn.execute(
                "select count(pgque.send(%s, 'bench', %s::text, 'k' || (i %% %s::int)))"
                " from generate_series(%s::int, %s::int) i",
                (queue, PAYLOAD_100, KEYS, start, start + PER_BATCH - 1),
            )
        conn.execute("select pgque.ticker(%s)", (queue,))


def _rows_read(conn: Conn, queue: str) -> int:
    """Event rows read so far from ``queue``'s event tables (sequential + index fetches)."""
    row = conn.execute(
        "select coalesce(sum(s.seq_tup_read + coalesce(s.idx_tup_fetch, 0)), 0)::int8"
        " from pg_stat_user_tables s, pgque.queue q"
        " where q.queue_name = %s and s.schemaname = 'pgque'"
        "   and s.relname ~ ('^' || split_part(q.queue_data_pfx, '.', 2) || '(_[0-9]+)?$')",
        (queue,),
    ).fetchone()
    assert row is not None
    return int(row[0])


def _flush_stats(conn: Conn) -> None:
    """Publish this session's table statistics now (before the call returns)."""
    conn.execute("select pg_stat_force_next_flush()")


def _in_threads(works: list[Callable[[], int]]) -> int:
    """Run the works in parallel threads; their total (re-raising the first failure)."""
    results: list[int] = [0] * len(works)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            results[i] = works[i]()
        except BaseException as exc:  # surfaced below, in the measuring thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(works))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return sum(results)


@case("coop", "send_idem vs send, cooperative and partitioned drains (PostgreSQL 18)")
def coop(ctx: Context) -> None:
    dsn = ctx.clusters.database("bench_coop", version=18)
    conn = connect(dsn)
    members = [connect(dsn) for _ in range(max(2, SLOTS))]
    for c in (conn, *members):
        # As the SDK's consumers do on every connection: without it, a backend that
        # never freed a large allocation returns each batch's memory to the kernel
        # and faults it in again (tests/sdk/test_consumer_backend_heap.py; 15-16%
        # more backend CPU per event), while the connection that created the
        # queues, where the plain drain runs, had raised its threshold already.
        c.execute(query("keep_backend_heap"))

    # -- send_idem against send: one event per call, autocommit --------------------
    calls = ctx.size(5_000, 500)
    eager_queue(conn, "pgque", "send_q")
    keys = itertools.count()

    def send(idem: bool) -> int:
        for _ in range(calls):
            if idem:
                conn.execute(
                    "select * from pgque.send_idem('send_q', 'bench', %s::text, %s)",
                    (PAYLOAD_100, f"key-{next(keys)}"),
                )
            else:
                conn.execute("select pgque.send('send_q', 'bench', %s::text)", (PAYLOAD_100,))
        return calls

    series = ctx.interleave({
        "pgque.send": lambda: timed_rate(lambda: send(False)),
        "pgque.send_idem (unique keys)": lambda: timed_rate(lambda: send(True)),
    })  # fmt: skip
    note = f"{calls:,} calls, one connection, synchronous_commit off"
    ctx.record(SEND, series, "msg/s", notes=dict.fromkeys(series, note))

    # -- cooperative drain against a plain one, then partition slots ----------------------
    backlog = ctx.size(100_000, 10_000)
    state = _State()

    def load(target_name: str, total: int) -> None:
        """A fresh queue with ``target_name``'s consumers and a backlog of ``total``."""
        queue = _new_queue(conn, "coop_q")
        state.queue, state.total = queue, total
        if target_name == PLAIN:
            conn.execute("select pgque.subscribe(%s, 'plain')", (queue,))
        elif target_name == SLOTS_THREADS:
            for slot in range(SLOTS):
                conn.execute("select pgque.subscribe_slot(%s, 'shard', %s, %s)",
                             (queue, slot, SLOTS))  # fmt: skip
                conn.execute("select pgque.claim_slot(%s, 'shard', %s, %s, '10 minutes')",
                             (queue, slot, f"worker{slot}"))  # fmt: skip
        else:
            for member in ("w1", "w2"):
                conn.execute("select pgque.register_subconsumer(%s, 'group', %s)", (queue, member))
        if target_name == SLOTS_THREADS or state.keyed:
            _preload_keyed(conn, queue, total)
        else:
            preload(conn, "pgque", queue, total, PER_BATCH)

    def plain_drain() -> int:
        got = 0
        while True:
            rows = conn.execute(
                "select batch_id from pgque.receive(%s, 'plain', %s)",
                (state.queue, PER_BATCH),
            ).fetchall()
            if not rows:
                return got
            got += len(rows)
            conn.execute("select pgque.ack(%s)", (rows[0][0],))

    def member_step(c: Conn, member: str) -> int:
        """One receive_coop + ack of ``member`` on its connection; messages received."""
        rows = c.execute(
            "select batch_id from pgque.receive_coop(%s, 'group', %s, %s)",
            (state.queue, member, PER_BATCH),
        ).fetchall()
        if rows:
            c.execute("select pgque.ack(%s)", (rows[0][0],))
        return len(rows)

    def coop_alternating() -> int:
        got = 0
        while n := member_step(members[0], "w1") + member_step(members[1], "w2"):
            got += n
        return got

    def coop_member(c: Conn, member: str) -> int:
        got = 0
        while n := member_step(c, member):
            got += n
        return got

    def coop_threads() -> int:
        return _in_threads([lambda: coop_member(members[0], "w1"),
                            lambda: coop_member(members[1], "w2")])  # fmt: skip

    def slot_drain(slot: int) -> int:
        c = members[slot]
        args = (state.queue, slot, SLOTS, f"worker{slot}")
        got = 0
        while True:
            rows = c.execute(
                "select msg_id from pgque.receive_partitioned(%s, 'shard', %s, %s, %s, %s)",
                (*args, PER_BATCH),
            ).fetchall()
            if not rows:
                _flush_stats(c)
                return got
            got += len(rows)
            c.execute("select pgque.ack_partitioned(%s, 'shard', %s, %s, %s)", args)

    def slots_threads() -> int:
        return _in_threads([lambda s=s: slot_drain(s) for s in range(SLOTS)])

    def whole(work: Callable[[], int]) -> Callable[[], int]:
        """``work``, checked to deliver the whole backlog (each event once)."""

        def checked() -> int:
            got = work()
            if got != state.total:
                raise RuntimeError(f"delivered {got:,} events of a backlog of {state.total:,}")
            return got

        return checked

    def amplified(work: Callable[[], int]) -> dict[str, float]:
        """The drain rate of ``work``, and the event rows it read per event delivered."""
        before = _rows_read(conn, state.queue)
        rate = timed_rate(whole(work))
        _flush_stats(conn)
        read = _rows_read(conn, state.queue) - before
        return {"value": rate, "amplification": read / state.total}

    drains = {PLAIN: plain_drain, COOP_ALTERNATING: coop_alternating,
              COOP_THREADS: coop_threads, SLOTS_THREADS: slots_threads}  # fmt: skip
    # Warm every connection (function caches, plans) on a small backlog, unmeasured.
    for keyed in (False, True):
        state.keyed = keyed
        for name, drain in drains.items():
            load(name, 10 * PER_BATCH)
            whole(drain)()

    state.keyed = False
    series = ctx.interleave(
        {name: lambda d=drains[name]: timed_rate(whole(d))
         for name in (PLAIN, COOP_ALTERNATING, COOP_THREADS)},
        before=lambda name: load(name, backlog),
    )  # fmt: skip
    ctx.record(COOP, series, "msg/s", notes={
        PLAIN: f"backlog {backlog:,}; receive and ack in their own autocommit transactions",
        COOP_ALTERNATING: f"backlog {backlog:,}; members w1, w2 on two connections, one thread",
        COOP_THREADS: f"backlog {backlog:,}; members w1, w2 each in its own thread",
    })  # fmt: skip

    state.keyed = True
    series = ctx.interleave(
        {name: lambda d=drains[name]: amplified(d) for name in (PLAIN, SLOTS_THREADS)},
        before=lambda name: load(name, backlog),
    )  # fmt: skip
    kept = f"backlog {backlog:,}, {KEYS} keys"
    notes = {PLAIN: f"{kept}; every event delivered once",
             SLOTS_THREADS: f"{kept}; each slot reads every batch and keeps its keys"}  # fmt: skip
    amplification = {
        name: Series(values=s.extra.pop("amplification"), other_cpu=s.other_cpu,
                     rerun=s.rerun, disturbed=s.disturbed)
        for name, s in series.items()
    }  # fmt: skip
    ctx.record(PARTITION, series, "msg/s", notes=notes)
    ctx.record(AMPLIFICATION, amplification, "x", higher_is_better=False, notes={
        name: f"{kept}; rows read = pg_stat_user_tables seq_tup_read + idx_tup_fetch"
              " of the queue's event tables" for name in amplification
    })  # fmt: skip
    for c in members:
        c.close()
    conn.close()
