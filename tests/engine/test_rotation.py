"""Two-step rotation of the event tables, and maint()."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from _engine import consume, make_queue, one, rows, tick


def cur_table(conn: psycopg.Connection[Any]) -> int:
    return int(one(conn, "select queue_cur_table from pgque.queue where queue_name = 'q'"))


def step1(conn: psycopg.Connection[Any]) -> None:
    assert one(conn, "select pgque.maint_rotate_tables_step1('q')") == 0


def step2(conn: psycopg.Connection[Any]) -> None:
    assert one(conn, "select pgque.maint_rotate_tables_step2()") == 0


@pytest.fixture
def queue(conn: psycopg.Connection[Any]) -> str:
    make_queue(conn, "q")
    one(conn, "select pgque.set_queue_config('q', 'rotation_period', '1 microsecond')")
    one(conn, "select pgque.register_consumer('q', 'c')")
    # Move the consumer past the creating transaction, which step 2 points at.
    tick(conn, "q")
    consume(conn, "q", "c")
    return "q"


def test_rotation_switches_table_and_truncates(conn: psycopg.Connection[Any], queue: str) -> None:
    assert cur_table(conn) == 0
    step1(conn)
    assert cur_table(conn) == 1
    step1(conn)  # step 2 pending: no second rotation
    assert cur_table(conn) == 1
    step2(conn)
    one(conn, "select pgque.insert_event('q', 't', 'in table 1')")
    tick(conn, queue)
    assert consume(conn, queue, "c") == ["in table 1"]
    step1(conn)
    assert cur_table(conn) == 2
    step2(conn)
    tick(conn, queue)
    consume(conn, queue, "c")
    step1(conn)  # table 0 is emptied and reused
    assert cur_table(conn) == 0
    assert one(conn, "select count(*) from pgque.event_1_0") == 0
    assert one(conn, "select count(*) from pgque.event_1_1") == 1


def test_step2_in_the_same_transaction_does_nothing(
    connect: Any, conn: psycopg.Connection[Any], queue: str
) -> None:
    tx = connect(autocommit=False)
    step1(tx)
    step2(tx)
    tx.commit()
    assert one(conn, "select queue_switch_step2 is null from pgque.queue") is True
    step2(conn)
    assert one(conn, "select queue_switch_step2 > queue_switch_step1 from pgque.queue") is True


def test_lagging_consumer_blocks_rotation(conn: psycopg.Connection[Any], queue: str) -> None:
    one(conn, "select pgque.register_consumer('q', 'slow')")
    step1(conn)
    step2(conn)
    for i in range(3):
        one(conn, "select pgque.insert_event('q', 't', %s)", str(i))
        tick(conn, queue)
        consume(conn, queue, "c")
    # 'slow' has not moved past step 2: the oldest table must stay.
    step1(conn)
    assert cur_table(conn) == 1
    assert [consume(conn, queue, "slow") for _ in range(3)] == [["0"], ["1"], ["2"]]
    step1(conn)
    assert cur_table(conn) == 2


def test_open_transaction_blocks_rotation(
    connect: Any, conn: psycopg.Connection[Any], queue: str
) -> None:
    step1(conn)
    holder = connect(autocommit=False)
    one(holder, "select pg_current_xact_id()")  # older than step 2: holds every tick's xmin
    step2(conn)
    tick(conn, queue)
    consume(conn, queue, "c")
    step1(conn)
    assert cur_table(conn) == 1
    holder.commit()
    tick(conn, queue)
    consume(conn, queue, "c")
    step1(conn)
    assert cur_table(conn) == 2


def test_writer_racing_step1_loses_nothing(
    connect: Any, conn: psycopg.Connection[Any], queue: str
) -> None:
    """pgq-engine §8.3: a writer reading the old table while step 1 is uncommitted."""
    step1(conn)
    step2(conn)
    tick(conn, queue)
    consume(conn, queue, "c")
    rotator = connect(autocommit=False)
    step1(rotator)  # rotated, not committed yet
    writer = connect(autocommit=False)
    one(writer, "select pgque.insert_event('q', 't', 'racing')")  # lands in the old table
    rotator.commit()
    step2(conn)
    tick(conn, queue)
    assert consume(conn, queue, "c") == []
    writer.commit()
    tick(conn, queue)
    assert consume(conn, queue, "c") == ["racing"]


def test_tick_cleanup_keeps_ticks_consumers_need(conn: psycopg.Connection[Any], queue: str) -> None:
    one(conn, "select pgque.register_consumer('q', 'slow')")
    for _ in range(5):
        step1(conn)
        step2(conn)
        tick(conn, queue)
        consume(conn, queue, "c")
    slow_tick = one(
        conn,
        "select sub_last_tick from pgque.subscription s join pgque.consumer c"
        " on c.co_id = s.sub_consumer where co_name = 'slow'",
    )
    assert one(conn, "select count(*) from pgque.tick where tick_id = %s", slow_tick) == 1
    # Every consumer can still open its next batch.
    assert consume(conn, queue, "slow") is not None
    for _ in range(3):
        tick(conn, queue)
        consume(conn, queue, "c")
        consume(conn, queue, "slow")
        step1(conn)
        step2(conn)
    assert one(conn, "select min(tick_id) from pgque.tick") > 1


def test_many_rotations_lose_and_duplicate_nothing(
    conn: psycopg.Connection[Any], queue: str
) -> None:
    one(conn, "select pgque.register_consumer('q', 'lagging')")
    sent: list[str] = []
    seen: dict[str, list[str]] = {"c": [], "lagging": []}
    for round_no in range(30):
        for i in range(3):
            sent.append(f"{round_no}-{i}")
            one(conn, "select pgque.insert_event('q', 't', %s)", sent[-1])
        tick(conn, queue)
        seen["c"] += consume(conn, queue, "c") or []
        if round_no % 10 == 9:  # the lagging consumer catches up now and then
            while (got := consume(conn, queue, "lagging")) is not None:
                seen["lagging"] += got
        one(conn, "select pgque.maint()")
    tick(conn, queue)
    for consumer in seen:
        while (got := consume(conn, queue, consumer)) is not None:
            seen[consumer] += got
        assert seen[consumer] == sent
    rotations = one(conn, "select queue_switch_step1 > '1'::xid8 from pgque.queue")
    assert rotations


def test_maint_completes_a_rotation_over_two_calls(
    conn: psycopg.Connection[Any], queue: str
) -> None:
    one(conn, "select pgque.maint()")
    assert rows(conn, "select queue_cur_table, queue_switch_step2 is null from pgque.queue") == [
        (1, True)
    ]
    one(conn, "select pgque.maint()")
    assert one(conn, "select queue_switch_step2 is not null from pgque.queue") is True


def test_maint_operations_lists_due_work(conn: psycopg.Connection[Any], queue: str) -> None:
    ops = rows(conn, "select func_name, func_arg from pgque.maint_operations()")
    assert ops[:2] == [
        ("pgque.maint_rotate_tables_step1", "q"),
        ("pgque.maint_rotate_tables_step2", None),
    ]
    assert {arg for name, arg in ops if name == "vacuum"} == {
        r[0] for r in rows(conn, "select * from pgque.maint_tables_to_vacuum()")
    }


def test_info_functions(conn: psycopg.Connection[Any], queue: str) -> None:
    conn.execute("select pgque.insert_event('q', 't', 'x') from generate_series(1, 10)")
    last = tick(conn, queue)
    info = rows(
        conn,
        "select queue_name, queue_ntables, queue_cur_table, last_tick_id, ev_new,"
        " ticker_lag >= '0' from pgque.get_queue_info('q')",
    )
    assert info == [("q", 3, 0, last, 0, True)]
    consumers = rows(
        conn,
        "select consumer_name, last_tick, current_batch, pending_events"
        " from pgque.get_consumer_info('q')",
    )
    # The sequence gauge missed the first event of the queue (PgQ's rule).
    assert consumers == [("c", last - 1, None, 9)]
    assert len(rows(conn, "select * from pgque.get_consumer_info()")) == 1
    assert len(rows(conn, "select * from pgque.get_queue_info()")) == 1
