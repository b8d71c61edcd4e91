"""Opening, reading and finishing batches."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from _engine import consume, make_queue, one, rows, tick


@pytest.fixture
def queue(conn: psycopg.Connection[Any]) -> str:
    make_queue(conn, "q")
    one(conn, "select pgque.register_consumer('q', 'c')")
    return "q"


def test_no_batch_before_a_new_tick(conn: psycopg.Connection[Any], queue: str) -> None:
    one(conn, "select pgque.insert_event('q', 't', 'x')")
    assert one(conn, "select pgque.next_batch('q', 'c')") is None
    tick(conn, queue)
    assert consume(conn, queue, "c") == ["x"]
    assert one(conn, "select pgque.next_batch('q', 'c')") is None


def test_next_batch_returns_open_batch_again(conn: psycopg.Connection[Any], queue: str) -> None:
    tick(conn, queue)
    first = one(conn, "select pgque.next_batch('q', 'c')")
    tick(conn, queue)
    assert one(conn, "select pgque.next_batch('q', 'c')") == first
    info = rows(conn, "select * from pgque.next_batch_info('q', 'c')")[0]
    assert info[:3] == (first, 2, 1)
    # Custom thresholds do not matter while a batch is open.
    custom = rows(
        conn, "select batch_id from pgque.next_batch_custom('q', 'c', '1 hour', 10000, '1 hour')"
    )
    assert custom == [(first,)]
    assert one(conn, "select pgque.finish_batch(%s)", first) == 1
    assert one(conn, "select pgque.next_batch('q', 'c')") == first + 1


def test_batch_spans_one_tick_interval(conn: psycopg.Connection[Any], queue: str) -> None:
    for data in ("a", "b", "c"):
        one(conn, "select pgque.insert_event('q', 't', %s)", data)
        tick(conn, queue)
    assert [consume(conn, queue, "c") for _ in range(4)] == [["a"], ["b"], ["c"], None]


def test_events_come_with_all_fields_in_id_order(conn: psycopg.Connection[Any], queue: str) -> None:
    ids = [
        one(conn, "select pgque.insert_event('q', 'typ', 'd1')"),
        one(conn, "select pgque.insert_event('q', 'typ2', 'd2', 'e1', 'e2', 'e3', 'e4')"),
    ]
    tick(conn, queue)
    batch_id = one(conn, "select pgque.next_batch('q', 'c')")
    got = rows(
        conn,
        "select ev_id, ev_retry, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4,"
        " ev_txid > 0, ev_time <= now() from pgque.get_batch_events(%s)",
        batch_id,
    )
    assert got == [
        (ids[0], None, "typ", "d1", None, None, None, None, True, True),
        (ids[1], None, "typ2", "d2", "e1", "e2", "e3", "e4", True, True),
    ]
    # Reading again gives the same rows.
    assert rows(conn, "select ev_id from pgque.get_batch_events(%s)", batch_id) == [
        (i,) for i in ids
    ]


def test_finish_batch_twice_warns_and_returns_zero(
    conn: psycopg.Connection[Any], queue: str
) -> None:
    tick(conn, queue)
    batch_id = one(conn, "select pgque.next_batch('q', 'c')")
    warnings: list[str] = []
    conn.add_notice_handler(
        lambda diag: warnings.append(f"{diag.severity}: {diag.message_primary}")
    )
    assert one(conn, "select pgque.finish_batch(%s)", batch_id) == 1
    assert one(conn, "select pgque.finish_batch(%s)", batch_id) == 0
    assert warnings == [f"WARNING: finish_batch: batch {batch_id} not found"]


def test_next_batch_custom_thresholds(conn: psycopg.Connection[Any], queue: str) -> None:
    conn.execute("select pgque.insert_event('q', 't', 'x') from generate_series(1, 20)")
    tick(conn, queue)
    nothing = rows(conn, "select * from pgque.next_batch_custom('q', 'c', '1 hour', null, null)")
    assert nothing == [(None,) * 7]
    assert rows(conn, "select * from pgque.next_batch_custom('q', 'c', null, 10000, null)") == [
        (None,) * 7
    ]
    assert rows(
        conn, "select * from pgque.next_batch_custom('q', 'c', null, null, '10 minutes')"
    ) == [(None,) * 7]
    batch = rows(
        conn,
        "select batch_id, cur_tick_id, prev_tick_id from pgque.next_batch_custom"
        "('q', 'c', null, 5, null)",
    )
    assert batch[0][1:] == (2, 1)


def test_min_count_picks_first_tick_when_latest_overshoots(
    conn: psycopg.Connection[Any], queue: str
) -> None:
    # Ticks with about 10, 20, ... 60 events since the position: min_count 10
    # overshoots 2x at the latest tick, so the batch ends at the first tick
    # reaching 10 instead of swallowing everything.
    for _ in range(6):
        conn.execute("select pgque.insert_event('q', 't', 'x') from generate_series(1, 10)")
        tick(conn, queue)
    got = rows(
        conn,
        "select cur_tick_id, cur_tick_event_seq - prev_tick_event_seq"
        " from pgque.next_batch_custom('q', 'c', null, 10, null)",
    )
    assert got[0][0] < 7
    assert got[0][1] >= 10


def test_batch_info_and_tables(conn: psycopg.Connection[Any], queue: str) -> None:
    tick(conn, queue)
    batch_id = one(conn, "select pgque.next_batch('q', 'c')")
    info = rows(
        conn,
        "select queue_name, consumer_name, prev_tick_id, tick_id, batch_end >= batch_start"
        " from pgque.get_batch_info(%s)",
        batch_id,
    )
    assert info == [("q", "c", 1, 2, True)]
    assert rows(conn, "select * from pgque.get_batch_info(-1)") == [(None,) * 9]
    # The first batch starts at the tick of create_queue's own transaction,
    # which may have written to either side of the initial switch: both tables.
    assert len(rows(conn, "select * from pgque.batch_event_tables(%s)", batch_id)) == 2
    one(conn, "select pgque.finish_batch(%s)", batch_id)
    tick(conn, queue)
    batch_id = one(conn, "select pgque.next_batch('q', 'c')")
    assert rows(conn, "select * from pgque.batch_event_tables(%s)", batch_id) == [
        (one(conn, "select pgque.current_event_table('q')"),)
    ]


def test_independent_consumers(conn: psycopg.Connection[Any], queue: str) -> None:
    one(conn, "select pgque.register_consumer('q', 'd')")
    one(conn, "select pgque.insert_event('q', 't', 'x')")
    tick(conn, queue)
    assert consume(conn, queue, "c") == ["x"]
    one(conn, "select pgque.insert_event('q', 't', 'y')")
    tick(conn, queue)
    assert consume(conn, queue, "c") == ["y"]
    assert consume(conn, queue, "d") == ["x"]
    assert consume(conn, queue, "d") == ["y"]


def test_rolled_back_next_batch_forgets_assignment(
    connect: Any, conn: psycopg.Connection[Any], queue: str
) -> None:
    one(conn, "select pgque.insert_event('q', 't', 'x')")
    tick(conn, queue)
    tx = connect(autocommit=False)
    first = one(tx, "select pgque.next_batch('q', 'c')")
    tx.rollback()
    second = one(conn, "select pgque.next_batch('q', 'c')")
    assert second != first
    assert rows(conn, "select ev_data from pgque.get_batch_events(%s)", second) == [("x",)]


def test_cursor_reads_batch_in_pieces(
    connect: Any, conn: psycopg.Connection[Any], queue: str
) -> None:
    conn.execute("select pgque.insert_event('q', 't', i::text) from generate_series(1, 5) i")
    tick(conn, queue)
    batch_id = one(conn, "select pgque.next_batch('q', 'c')")
    tx = connect(autocommit=False)
    first = rows(tx, "select ev_data from pgque.get_batch_cursor(%s, 'cur', 2)", batch_id)
    rest = [(r[5],) for r in rows(tx, "fetch all from cur")]
    assert [r[0] for r in first + rest] == ["1", "2", "3", "4", "5"]
    tx.rollback()
    filtered = rows(
        tx,
        "select ev_data from pgque.get_batch_cursor(%s, 'cur2', 10, 'ev_data > ''3''')",
        batch_id,
    )
    assert filtered == [("4",), ("5",)]
    tx.rollback()


def test_batch_reads_run_without_jit_or_workers(conn: psycopg.Connection[Any], queue: str) -> None:
    """The event tables are never ANALYZEd, so a big one's batch query looks costly
    enough to JIT-compile (88 ms for 2 ms of reading at 10^8 events) and to start
    parallel workers for: the functions that run it turn both off, and a queue's
    batch reader plans it once, by index."""
    settings = {
        name: set(config or ())
        for name, config in rows(
            conn,
            "select p.proname, p.proconfig from pg_proc p"
            " where p.pronamespace = 'pgque'::regnamespace",
        )
    }
    for name in ("_batch_events_by_id", "get_batch_cursor"):
        assert "jit=off" in settings[name], name
    assert "max_parallel_workers_per_gather=0" in settings["_batch_events_by_id"]
    queue_id = one(conn, "select queue_id from pgque.queue where queue_name = %s", queue)
    reader = settings[f"_read_l{queue_id // 16}"]
    assert {"jit=off", "plan_cache_mode=force_generic_plan", "enable_seqscan=off",
            "enable_bitmapscan=off", "max_parallel_workers_per_gather=0"} <= reader  # fmt: skip


TICKS_READ = (
    "select coalesce(idx_tup_fetch, 0) + coalesce(seq_tup_read, 0)"
    " from pg_stat_xact_user_tables where relid = 'pgque.tick'::regclass"
)
"""Rows of pgque.tick this backend read, in this transaction and not yet reported."""


@pytest.mark.parametrize(
    "statement",
    [
        "select count(*) from pgque.get_batch_events(%s)",
        "select tick_id from pgque.get_batch_info(%s)",
        "select count(*) from pgque.batch_event_tables(%s)",
        "select pgque.next_batch('q', 'c') = %s",  # the open batch, found again
    ],
)
def test_a_batch_reads_its_two_ticks_only(
    conn: psycopg.Connection[Any], queue: str, statement: str
) -> None:
    # Both ticks of a batch are found by their keys: a plan that took only the
    # queue's half of the key read every tick the queue kept, per batch (the
    # table not analyzed yet, as between autovacuum's rounds). The queue and
    # consumer tables VACUUMed while they hold one row each (the Ticker's
    # maintenance does so when it starts) made the planner join the
    # subscription to every tick of its queue, in plans a session keeps.
    assert one(conn, "select reltuples from pg_class where oid = 'pgque.tick'::regclass") < 0
    conn.execute("vacuum pgque.queue, pgque.consumer")
    for _ in range(1000):
        tick(conn, queue)
        consume(conn, queue, "c")
    one(conn, "select pgque.insert_event('q', 't', 'x')")
    tick(conn, queue)
    batch_id = one(conn, "select pgque.next_batch('q', 'c')")
    with conn.transaction():  # the counts of this backend not yet reported
        before = one(conn, TICKS_READ)
        one(conn, statement, batch_id)
        ticks_read = one(conn, TICKS_READ) - before
    assert ticks_read <= 4, f"{statement}: read {ticks_read} of the queue's 1002 ticks"


def test_ticking_and_batches_find_ticks_by_key_after_a_vacuum_of_few_ticks(
    conn: psycopg.Connection[Any],
) -> None:
    # A VACUUM of pgque.tick right after a queue's ticks were deleted records
    # a few rows over many pages; the next queue's ticks fill those pages
    # unseen by the planner. The hot functions must still take the index.
    make_queue(conn, "old")
    for _ in range(600):
        tick(conn, "old")
    one(conn, "select pgque.drop_queue('old')")
    conn.execute("vacuum pgque.tick")
    make_queue(conn, "q")
    one(conn, "select pgque.register_consumer('q', 'c')")
    for _ in range(600):
        tick(conn, "q")
        consume(conn, "q", "c")
    one(conn, "select pgque.insert_event('q', 't', 'x')")
    statements = [
        "select pgque.ticker_eager('q', '0 seconds')",
        "select pgque.next_batch('q', 'c')",
        "select count(*) from pgque.get_batch_events(pgque.next_batch('q', 'c'))",
        "select pgque.finish_batch(pgque.next_batch('q', 'c'))",
        "select count(*) from pgque._ticker_sequences()",
        "select count(*) from pgque.ticker()",
    ]
    for statement in statements:
        with conn.transaction():  # the counts of this backend not yet reported
            before = one(conn, TICKS_READ)
            one(conn, statement)
            ticks_read = one(conn, TICKS_READ) - before
        assert ticks_read <= 6, f"{statement}: read {ticks_read} of the queue's 601 ticks"
