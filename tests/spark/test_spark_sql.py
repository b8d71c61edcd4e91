"""The SQL behind the Spark connector (functions/spark.sql), without Spark."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from spark_helpers import queue_events

from _engine import consume, make_queue, one, rows, tick
from _wait import wait_for

Conn = psycopg.Connection[Any]


def read(conn: Conn, start: int, end: int, part: int = 0, parts: int = 1) -> list[str]:
    return [
        r[0]
        for r in rows(
            conn,
            "select ev_data from pgque.spark_read_range('q', %s, %s, %s, %s)",
            start,
            end,
            part,
            parts,
        )
    ]


@pytest.fixture
def q(conn: Conn) -> str:
    make_queue(conn, "q")
    one(conn, "select pgque.register_consumer('q', 'c')")
    return "q"


def test_ranges_match_batches_under_concurrent_transactions(
    conn: Conn, connect: Any, q: str
) -> None:
    """The snapshot rule: a range holds what the consumer's batch over the same ticks holds."""
    long_tx = connect(autocommit=False)
    aborted = connect(autocommit=False)
    start = int(one(conn, "select sub_last_tick from pgque.subscription"))
    one(long_tx, "select pgque.insert_event('q', 't', 'long')")  # open across two ticks
    one(aborted, "select pgque.insert_event('q', 't', 'aborted')")
    one(conn, "select pgque.insert_event('q', 't', 'a1')")
    with conn.transaction():
        one(conn, "select pgque.insert_event('q', 't', 'a2')")
        with pytest.raises(psycopg.errors.DivisionByZero), conn.transaction():
            one(conn, "select pgque.insert_event('q', 't', 'rolled back savepoint')")
            one(conn, "select 1 / 0")
    t1 = tick(conn, q)
    aborted.rollback()
    one(conn, "select pgque.insert_event('q', 't', 'b1')")
    t2 = tick(conn, q)
    long_tx.commit()
    one(conn, "select pgque.insert_event('q', 't', 'c1')")
    t3 = tick(conn, q)

    batches = [sorted(consume(conn, q, "c") or []) for _ in range(3)]
    assert batches == [["a1", "a2"], ["b1"], ["c1", "long"]]
    assert [sorted(read(conn, a, b)) for a, b in ((start, t1), (t1, t2), (t2, t3))] == batches
    # One range over several ticks is their union.
    assert sorted(read(conn, start, t3)) == sorted(e for b in batches for e in b)


def test_partitions_are_disjoint_and_complete(conn: Conn, q: str) -> None:
    one(
        conn,
        "select pgque.send_batch('q', 't', array(select 'e' || g from generate_series(1, 200) g))",
    )
    end = tick(conn, q)
    whole = read(conn, 1, end)
    assert len(whole) == 200
    for parts in (1, 3, 7):
        slices = [read(conn, 1, end, p, parts) for p in range(parts)]
        assert sorted(e for s in slices for e in s) == sorted(whole)
        assert all(s for s in slices)  # ev_id % n spreads them
        # Deterministic: the same slice twice is the same rows.
        assert read(conn, 1, end, 1 % parts, parts) == slices[1 % parts]


def test_retry_copies_are_not_in_a_range(conn: Conn, q: str) -> None:
    ev_id = one(conn, "select pgque.insert_event('q', 't', 'x')")
    t1 = tick(conn, q)
    batch_id = one(conn, "select pgque.next_batch('q', 'c')")
    one(conn, "select pgque.event_retry(%s, %s, 0)", batch_id, ev_id)
    one(conn, "select pgque.finish_batch(%s)", batch_id)
    assert one(conn, "select pgque.maint_retry_events()") == 1
    t2 = tick(conn, q)
    assert consume(conn, q, "c") == ["x"]  # the consumer that nacked gets its copy
    assert read(conn, t1, t2) == []  # a Spark range never does
    assert read(conn, 1, t2) == ["x"]  # the original only


def test_empty_range_and_argument_errors(conn: Conn, q: str) -> None:
    assert read(conn, 1, 1) == []
    for args, text in (
        ((2, 1, 0, 1), "after end tick"),
        ((1, 1, 1, 1), "partition 1 of 1"),
        ((1, 1, 0, 0), "partition 0 of 0"),
        ((None, 1, 0, 1), "must not be NULL"),
    ):
        with pytest.raises(psycopg.errors.RaiseException, match=text) as info:
            conn.execute("select pgque.spark_range_sql('q', %s, %s, %s, %s)", args)
        assert info.value.diag.message_detail == "pgque:invalid_argument"
    with pytest.raises(psycopg.errors.RaiseException, match="queue not found: nope"):
        conn.execute("select pgque.spark_range_sql('nope', 1, 1)")


def rotate(conn: Conn, q: str) -> None:
    """One rotation: ticks and maint() rounds, consumer 'c' keeping up, until the table switches."""
    before = one(conn, "select queue_cur_table from pgque.queue where queue_name = %s", q)
    for _ in range(4):
        tick(conn, q)
        while consume(conn, q, "c") is not None:
            pass
        one(conn, "select pgque.maint()")
        if one(conn, "select queue_cur_table from pgque.queue where queue_name = %s", q) != before:
            break
    tick(conn, q)
    one(conn, "select pgque.maint()")
    assert one(conn, "select queue_cur_table from pgque.queue where queue_name = %s", q) != before


def test_rotated_away_and_unknown_ticks_are_named(conn: Conn, q: str) -> None:
    one(conn, "select pgque.set_queue_config('q', 'rotation_period', '1 microsecond')")
    for _ in range(3):
        rotate(conn, "q")
    oldest = one(conn, "select min(tick_id) from pgque.tick")
    assert oldest > 1
    with pytest.raises(psycopg.errors.RaiseException) as info:
        conn.execute("select pgque.spark_range_sql('q', 1, %s)", (oldest,))
    assert "queue q: tick 1 was rotated away" in str(info.value)
    assert info.value.diag.message_detail == "pgque:tick_not_found"
    latest = one(conn, "select max(tick_id) from pgque.tick")
    with pytest.raises(psycopg.errors.RaiseException, match=f"tick {latest + 5} does not exist"):
        conn.execute("select pgque.spark_range_sql('q', %s, %s)", (oldest, latest + 5))
    with pytest.raises(psycopg.errors.RaiseException, match="tick 1 was rotated away"):
        conn.execute("select pgque.spark_next_tick('q', null, 1)")


def test_an_open_range_read_holds_off_rotation(conn: Conn, connect: Any) -> None:
    make_queue(conn, "q")
    one(conn, "select pgque.set_queue_config('q', 'rotation_period', '1 microsecond')")
    tick(conn, "q")
    reader = connect(autocommit=False)
    one(reader, "select pgque.spark_range_sql('q', 1, 2)")
    # Step 1 skips the queue (it never waits) while the read's transaction lasts.
    one(conn, "select pgque.maint_rotate_tables_step1('q')")
    assert one(conn, "select queue_cur_table from pgque.queue") == 0
    reader.commit()
    one(conn, "select pgque.maint_rotate_tables_step1('q')")
    assert one(conn, "select queue_cur_table from pgque.queue") == 1


def test_next_tick_respects_limits_and_consumer(conn: Conn, q: str) -> None:
    one(conn, "select pgque.register_consumer('q', 'sp')")
    ticks = []
    for n in (10, 10, 10, 10):
        one(conn, "select pgque.send_batch('q', 't', array_fill('x'::text, array[%s]))", n)
        ticks.append(tick(conn, q))
    nxt = "select pgque.spark_next_tick('q', 'sp', 1, %s, %s, %s)"
    assert one(conn, nxt, None, None, None) == ticks[-1]
    assert one(conn, nxt, None, 2, None) == ticks[1]
    assert one(conn, nxt, ticks[2], None, None) == ticks[2]  # pinned (availableNow)
    assert one(conn, nxt, None, None, 25) == ticks[1]  # 20 events fit, 30 do not
    assert one(conn, nxt, None, None, 3) == ticks[0]  # at least one tick
    assert one(conn, nxt, None, 3, 15) == ticks[0]
    assert one(conn, "select pgque.spark_next_tick('q', 'sp', %s)", ticks[-1]) == ticks[-1]
    with pytest.raises(psycopg.errors.RaiseException, match="consumer nobody is not subscribed"):
        conn.execute("select pgque.spark_next_tick('q', 'nobody', 1)")


def test_start_tick_positions(conn: Conn, q: str) -> None:
    t2 = tick(conn, q)
    # New consumer: registered at the latest tick; then where it is.
    assert one(conn, "select pgque.spark_start_tick('q', 'sp')") == t2
    t3 = tick(conn, q)
    assert one(conn, "select pgque.spark_start_tick('q', 'sp')") == t2
    assert one(conn, "select pgque.spark_start_tick('q', 'sp', 'latest')") == t3
    assert one(conn, "select last_tick from pgque.get_consumer_info('q', 'sp')") == t3
    assert one(conn, "select pgque.spark_start_tick('q', 'sp', '1')") == 1
    assert one(conn, "select last_tick from pgque.get_consumer_info('q', 'sp')") == 1
    with pytest.raises(psycopg.errors.RaiseException, match="tick 99 does not exist"):
        conn.execute("select pgque.spark_start_tick('q', 'sp', '99')")
    with pytest.raises(psycopg.errors.RaiseException, match="consumer, latest or a tick id"):
        conn.execute("select pgque.spark_start_tick('q', 'sp', 'earliest')")
    one(conn, "select pgque.register_subconsumer('q', 'grp', 'w1', false)")
    with pytest.raises(psycopg.errors.RaiseException, match="cooperative consumer"):
        conn.execute("select pgque.spark_start_tick('q', 'grp')")


def test_advance_needs_the_consumer_and_the_tick(conn: Conn, q: str) -> None:
    t2 = tick(conn, q)
    assert one(conn, "select pgque.spark_advance('q', 'c', %s)", t2) == 0
    assert one(conn, "select last_tick from pgque.get_consumer_info('q', 'c')") == t2
    with pytest.raises(psycopg.errors.RaiseException, match="tick 77 does not exist"):
        conn.execute("select pgque.spark_advance('q', 'c', 77)")
    one(conn, "select pgque.unregister_consumer('q', 'c')")
    with pytest.raises(psycopg.errors.RaiseException, match="consumer c is not subscribed"):
        conn.execute("select pgque.spark_advance('q', 'c', %s)", (t2,))
    # Never re-created behind the user's back.
    assert rows(conn, "select * from pgque.get_consumer_info('q', 'c')") == []


def stage(conn: Conn, write: str, stage_id: str, payloads: list[str], first: int = 0) -> int:
    return int(
        one(
            conn,
            "select pgque.spark_stage(%s, %s, %s, null, %s::text[], null, null, null, %s::text[])",
            write,
            stage_id,
            first,
            payloads,
            [p.upper() for p in payloads],
        )
    )


def test_publish_sends_reported_stages_in_order_once(conn: Conn, q: str) -> None:
    assert stage(conn, "w", "s2", ["c", "d"]) == 2
    assert stage(conn, "w", "s1", ["a"]) == 1
    assert stage(conn, "w", "s1", ["b"], first=1) == 1
    assert stage(conn, "w", "failed-attempt", ["zombie"]) == 1
    published = one(
        conn, "select pgque.spark_publish('q', 'w', array['s1', 's2'], array[2, 2]::bigint[])"
    )
    assert published == 4
    assert queue_events(conn, q) == [
        ("default", p, None, None, None, p.upper()) for p in ["a", "b", "c", "d"]
    ]
    assert one(conn, "select count(*) from pgque.spark_staging") == 0  # zombie rows too


def test_publish_refuses_missing_rows_and_sends_nothing(conn: Conn, q: str) -> None:
    stage(conn, "w", "s1", ["a", "b"])
    with pytest.raises(psycopg.errors.RaiseException, match="staged 3 rows, 2 are there") as info:
        conn.execute("select pgque.spark_publish('q', 'w', array['s1'], array[3]::bigint[])")
    assert info.value.diag.message_detail == "pgque:staging_incomplete"
    with pytest.raises(psycopg.errors.RaiseException, match="stage id is listed twice"):
        conn.execute(
            "select pgque.spark_publish('q', 'w', array['s1', 's1'], array[2, 2]::bigint[])"
        )
    assert queue_events(conn, q) == []
    assert one(conn, "select pgque.spark_discard('w')") == 2


def test_publish_of_a_recorded_streaming_batch_is_a_no_op(conn: Conn, q: str) -> None:
    publish = "select pgque.spark_publish('q', %s, %s::text[], %s::bigint[], 'query-1', %s)"
    stage(conn, "query-1:0", "s", ["a"])
    stage(conn, "query-1:7", "old", ["left by an earlier batch"])
    assert one(conn, publish, "query-1:0", ["s"], [1], 0) == 1
    assert one(conn, "select count(*) from pgque.spark_staging") == 0
    stage(conn, "query-1:0", "s-replayed", ["a"])
    assert one(conn, publish, "query-1:0", ["s-replayed"], [1], 0) == 0
    assert one(conn, "select count(*) from pgque.spark_staging") == 0
    assert [e[1] for e in queue_events(conn, q)] == ["a"]
    assert rows(conn, "select query_id, batch_id, events from pgque.spark_commits") == [
        ("query-1", 0, 1)
    ]


def test_a_write_ends_after_its_running_stagers(conn: Conn, connect: Any, q: str) -> None:
    # A failed task's writer still staging (Spark handed it a cut-off input) while
    # the driver aborts: the abort waits for it, then drops its rows too.
    task = connect(autocommit=False)
    assert stage(task, "w", "failed-attempt", ["late"]) == 1
    dropped: list[int] = []
    abort = threading.Thread(
        target=lambda: dropped.append(one(connect(), "select pgque.spark_discard('w')"))
    )
    abort.start()
    wait_for(
        lambda: one(
            conn, "select count(*) from pg_locks where locktype = 'advisory' and not granted"
        ),
        what="the abort waiting for the running stager",
    )
    assert dropped == []
    task.commit()
    abort.join(30)
    assert dropped == [1]
    assert one(conn, "select count(*) from pgque.spark_staging") == 0
    # A task that starts staging after the abort is refused; so is a publish.
    with pytest.raises(psycopg.errors.RaiseException, match="write w is over"):
        stage(conn, "w", "started-late", ["x"])
    with pytest.raises(psycopg.errors.RaiseException, match="write w is over already"):
        conn.execute("select pgque.spark_publish('q', 'w', array[]::text[], array[]::bigint[])")
    # A published batch write is over too; a streaming write stays open for its replays.
    stage(conn, "w2", "s", ["a"])
    assert one(conn, "select pgque.spark_publish('q', 'w2', array['s'], array[1]::bigint[])") == 1
    with pytest.raises(psycopg.errors.RaiseException, match="write w2 is over"):
        stage(conn, "w2", "speculative-loser", ["a"])
    assert one(conn, "select pgque.spark_discard('query-1:3')") == 0
    assert stage(conn, "query-1:3", "replayed", ["b"]) == 1
    assert [e[1] for e in queue_events(conn, q)] == ["a"]
    # spark_cleanup forgets ended batch writes after the interval.
    one(conn, "select pgque.spark_cleanup(interval '0')")
    assert one(conn, "select count(*) from pgque.spark_commits where batch_id = -1") == 0


def test_stage_refuses_null_payloads_and_ragged_arrays(conn: Conn, q: str) -> None:
    with pytest.raises(psycopg.errors.RaiseException, match="payload 2 of the chunk is NULL"):
        conn.execute(
            "select pgque.spark_stage('w', 's', 0, null, array['a', null], null, null, null, null)"
        )
    with pytest.raises(psycopg.errors.RaiseException, match="every array must have"):
        conn.execute(
            "select pgque.spark_stage('w', 's', 0, array['t'], array['a', 'b'],"
            " null, null, null, null)"
        )


@pytest.fixture
def roles(conn: Conn) -> Iterator[dict[str, str]]:
    suffix = uuid.uuid4().hex[:8]
    made = {kind: f"t_spark_{kind}_{suffix}" for kind in ("reader", "writer")}
    for kind, role in made.items():
        conn.execute(f'create role "{role}" nologin')
        conn.execute(f'grant pgque_{kind} to "{role}"')
    try:
        yield made
    finally:
        conn.execute("reset role")
        for role in made.values():
            conn.execute(f'drop owned by "{role}"')
            conn.execute(f'drop role "{role}"')


def test_roles(conn: Conn, q: str, roles: dict[str, str]) -> None:
    one(conn, "select pgque.insert_event('q', 't', 'x')")
    end = tick(conn, q)

    def run(role: str, query: str) -> Any:
        conn.execute(f'set role "{role}"')
        try:
            return conn.execute(query).fetchall()
        finally:
            conn.execute("reset role")

    reader, writer = roles["reader"], roles["writer"]
    # The reader runs sources: range SQL (it may select the event tables), limits, positions.
    sql = run(reader, f"select pgque.spark_range_sql('q', 1, {end})")[0][0]
    assert [r[5] for r in run(reader, sql)] == ["x"]
    assert run(reader, f"select count(*) from pgque.spark_read_range('q', 1, {end})") == [(1,)]
    run(reader, "select pgque.spark_start_tick('q', 'sp')")
    run(reader, "select pgque.spark_next_tick('q', 'sp', 1)")
    run(reader, f"select pgque.spark_advance('q', 'sp', {end})")
    # The writer runs sinks through definer functions only.
    run(writer, "select pgque.spark_stage('w', 's', 0, null, array['p'], null, null, null, null)")
    run(writer, "select pgque.spark_publish('q', 'w', array['s'], array[1]::bigint[])")
    run(writer, "select pgque.spark_discard('w')")
    run(writer, "select * from pgque.spark_latest_tick('q')")
    for role, query in (
        (writer, "select count(*) from pgque.spark_staging"),
        (writer, "select pgque.spark_start_tick('q', 'w')"),
        (writer, f"select pgque.spark_range_sql('q', 1, {end})"),
        (reader, "select pgque.spark_stage('w', 's', 0, null, array['p'], null, null, null, null)"),
        (reader, "select pgque.spark_publish('q', 'w', array['s'], array[1]::bigint[])"),
    ):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            run(role, query)
