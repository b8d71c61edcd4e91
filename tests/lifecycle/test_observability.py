"""Observability: each figure checked against a state the test built (US-9 and more)."""

from __future__ import annotations

import datetime as dt
import math
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from lifecycle_helpers import NewRole, install_timetable

from _engine import one, rows
from _wait import wait_for

Conn = psycopg.Connection[Any]
Connect = Callable[..., Conn]

OBSERVERS = [
    "select * from pgque.queue_stats()",
    "select * from pgque.consumer_stats()",
    "select * from pgque.queue_health()",
    "select * from pgque.otel_metrics()",
    "select * from pgque.throughput('q', '1 minute', '10 seconds')",
    "select * from pgque.error_rate('q', '1 minute', '10 seconds')",
    "select * from pgque.in_flight('q')",
    "select * from pgque.stuck_consumers()",
    "select * from pgque.latency_percentiles('q', 'c', '1 hour')",
]


def queue_with(conn: Conn, name: str, *consumers: str, **settings: str) -> None:
    """A queue with settings, consumers, and one warm-up event sent, ticked and consumed.

    The event sequence does not count the first event after creation; after the
    warm-up, N new events count as N.
    """
    assert one(conn, "select pgque.create_queue(%s)", name) == 1
    for key, value in {
        "ticker_max_lag": "1 microsecond",
        "ticker_idle_period": "1 microsecond",
        **settings,
    }.items():
        one(conn, "select pgque.set_queue_config(%s, %s, %s)", name, key, value)
    for consumer in consumers:
        one(conn, "select pgque.subscribe(%s, %s)", name, consumer)
    send(conn, name)
    tick(conn, name)
    for consumer in consumers:
        consume(conn, name, consumer)


def send(conn: Conn, queue: str, n: int = 1) -> list[int]:
    return [int(one(conn, "select pgque.send(%s, '{\"n\": 1}'::jsonb)", queue)) for _ in range(n)]


def tick(conn: Conn, queue: str, *, force: bool = False) -> int:
    """Tick ``queue``: queues made by ``queue_with`` tick on every call; others need ``force``.

    (force_next_tick moves the event sequence on by 2 x ticker_max_count + 1000.)
    """
    if force:
        one(conn, "select pgque.force_next_tick(%s)", queue)
    tick_id = one(conn, "select pgque.ticker(%s)", queue)
    assert tick_id is not None
    return int(tick_id)


def consume(conn: Conn, queue: str, consumer: str) -> int:
    """Receive and ack every ticked batch; return how many messages."""
    total = 0
    while True:
        got = rows(
            conn, "select msg_id, batch_id from pgque.receive(%s, %s, 100000)", queue, consumer
        )
        if not got:
            return total
        total += len(got)
        one(conn, "select pgque.ack(%s)", got[0][1])


def queue_stats(conn: Conn) -> dict[str, dict[str, Any]]:
    cur = conn.execute("select * from pgque.queue_stats()")
    names = [c.name for c in cur.description or []]
    return {r[0]: dict(zip(names, r, strict=True)) for r in cur.fetchall()}


def consumer_stats(conn: Conn) -> dict[tuple[str, str], dict[str, Any]]:
    cur = conn.execute("select * from pgque.consumer_stats()")
    names = [c.name for c in cur.description or []]
    return {(r[0], r[1]): dict(zip(names, r, strict=True)) for r in cur.fetchall()}


def health(conn: Conn) -> dict[tuple[str, str], tuple[str, str]]:
    return {
        (r[0], r[1]): (r[2], r[3])
        for r in rows(
            conn, "select queue_name, check_name, status, detail from pgque.queue_health()"
        )
    }


def backdate_ticks(conn: Conn, queue: str, by: str) -> None:
    conn.execute(
        "update pgque.tick set tick_time = tick_time - %s::interval"
        " where tick_queue = (select queue_id from pgque.queue where queue_name = %s)",
        (by, queue),
    )


def percentile_cont(values: list[dt.timedelta], fraction: float) -> dt.timedelta:
    ordered = sorted(values)
    pos = fraction * (len(ordered) - 1)
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


# -- US-9 ---------------------------------------------------------------------


def test_us9_observability_and_health_monitoring(conn: Conn) -> None:
    queue_with(conn, "healthy", "app")
    queue_with(conn, "lagging", "fast", "slow", rotation_period="2 seconds")
    queue_with(conn, "failing", "worker", max_retries="0")

    send(conn, "healthy", 5)
    tick(conn, "healthy")
    assert consume(conn, "healthy", "app") == 5
    send(conn, "lagging", 10)
    tick(conn, "lagging")
    assert consume(conn, "lagging", "fast") == 10
    send(conn, "failing", 2)
    tick(conn, "failing")
    msgs = rows(conn, "select msg_id, batch_id from pgque.receive('failing', 'worker', 10)")
    one(
        conn,
        "select pgque.nack(%s, %s::bigint, '0 seconds', 'bad payload')",
        msgs[0][1],
        msgs[0][0],
    )
    one(conn, "select pgque.ack(%s)", msgs[0][1])

    stats = queue_stats(conn)
    assert [stats[q]["depth"] for q in ("healthy", "lagging", "failing")] == [0, 10, 0]
    assert [stats[q]["consumers"] for q in ("healthy", "lagging", "failing")] == [1, 2, 1]
    assert [stats[q]["dlq_count"] for q in ("healthy", "lagging", "failing")] == [0, 0, 1]
    assert stats["healthy"]["events_per_sec"] > 0
    assert stats["healthy"]["oldest_msg_age"] is None
    assert stats["lagging"]["oldest_msg_age"] > dt.timedelta(0)

    consumers = consumer_stats(conn)
    assert consumers["lagging", "slow"]["pending_events"] == 10
    assert consumers["lagging", "slow"]["lag"] > dt.timedelta(0)
    assert consumers["lagging", "fast"]["pending_events"] == 0
    assert consumers["lagging", "fast"]["lag"] == dt.timedelta(0)

    # The slow consumer's lag crosses half the rotation period, then all of it.
    lag = ("lagging", "consumer_lag:slow")
    wait_for(lambda: health(conn)[lag][0] == "warning", timeout=5, what="a warning")
    wait_for(lambda: health(conn)[lag][0] == "critical", timeout=5, what="critical")
    checks = health(conn)
    assert checks["lagging", "consumer_lag:fast"] == ("ok", "caught up")
    assert checks["healthy", "consumer_lag:app"] == ("ok", "caught up")
    assert checks["failing", "dlq_health"][0] == "warning"
    assert checks["healthy", "dlq_health"] == ("ok", "0 dead letter events")
    assert {checks[q, "ticker_running"][0] for q in ("healthy", "lagging", "failing")} == {"ok"}

    metrics = rows(conn, "select metric_name, metric_type, value, labels from pgque.otel_metrics()")
    assert {(m[0], m[1]) for m in metrics} == {
        ("pgque.queue.depth", "gauge"),
        ("pgque.queue.oldest_message_age_seconds", "gauge"),
        ("pgque.consumer.lag_seconds", "gauge"),
        ("pgque.consumer.pending_events", "gauge"),
        ("pgque.message.dead_lettered", "gauge"),
        ("pgque.queue.throughput", "gauge"),
    }
    by_key = {(m[0], tuple(sorted(m[3].items()))): m[2] for m in metrics}
    assert by_key["pgque.queue.depth", (("queue", "lagging"),)] == 10
    assert by_key["pgque.message.dead_lettered", (("queue", "failing"),)] == 1
    assert (
        by_key["pgque.consumer.pending_events", (("consumer", "slow"), ("queue", "lagging"))] == 10
    )
    assert by_key["pgque.consumer.lag_seconds", (("consumer", "slow"), ("queue", "lagging"))] > 2
    assert len(metrics) == 3 * 4 + 4 * 2  # 4 queue gauges x 3 queues, 2 consumer gauges x 4

    stuck = rows(conn, "select queue_name, consumer_name from pgque.stuck_consumers('1 second')")
    assert stuck == [("lagging", "slow")]


# -- queue_stats and consumer_stats -------------------------------------------


def test_depth_counts_unticked_events_and_consumers_count_ticked_ones(conn: Conn) -> None:
    queue_with(conn, "q", "c")
    send(conn, "q", 3)
    tick(conn, "q")
    send(conn, "q", 2)  # not ticked yet
    assert queue_stats(conn)["q"]["depth"] == 5
    assert consumer_stats(conn)["q", "c"]["pending_events"] == 3
    assert consume(conn, "q", "c") == 3
    assert queue_stats(conn)["q"]["depth"] == 2
    assert consumer_stats(conn)["q", "c"]["pending_events"] == 0


def test_estimates_follow_the_event_sequence(conn: Conn) -> None:
    """Documented limits: the first event is not counted, force_tick's jump is."""
    one(conn, "select pgque.create_queue('q')")
    one(conn, "select pgque.subscribe('q', 'c')")
    send(conn, "q")
    assert queue_stats(conn)["q"]["depth"] == 0  # the very first event
    send(conn, "q")
    assert queue_stats(conn)["q"]["depth"] == 1
    one(conn, "select pgque.force_next_tick('q')")
    assert queue_stats(conn)["q"]["depth"] == 1 + 1 + 2 * 500 + 1000
    one(conn, "select pgque.ticker('q')")
    consume(conn, "q", "c")
    assert queue_stats(conn)["q"]["depth"] == 0


def test_queue_without_consumers_has_no_depth(conn: Conn) -> None:
    queue_with(conn, "q")
    send(conn, "q", 4)
    tick(conn, "q")
    row = queue_stats(conn)["q"]
    assert (row["depth"], row["consumers"], row["oldest_msg_age"]) == (0, 0, None)


def test_oldest_message_age_is_an_upper_bound_within_a_tick(conn: Conn) -> None:
    queue_with(conn, "q", "c")
    backdate_ticks(conn, "q", "10 seconds")  # the consumer's position tick is 10 s old
    send(conn, "q")
    tick(conn, "q")
    age = queue_stats(conn)["q"]["oldest_msg_age"]
    assert dt.timedelta(seconds=10) <= age < dt.timedelta(seconds=11)
    lag = consumer_stats(conn)["q", "c"]["lag"]
    assert dt.timedelta(seconds=10) <= lag < dt.timedelta(seconds=11)


def test_unticked_events_give_their_own_age(connect: Connect) -> None:
    conn = connect()
    queue_with(conn, "q", "c")
    send(conn, "q")
    conn.execute(
        "update pgque.event_1_0 set ev_time = ev_time - interval '20 seconds'"
        " where ev_id = (select max(ev_id) from pgque.event_1)"
    )
    age = queue_stats(conn)["q"]["oldest_msg_age"]
    assert dt.timedelta(seconds=20) <= age < dt.timedelta(seconds=21)


def test_events_per_sec_is_the_rate_over_the_last_minute(connect: Connect) -> None:
    conn = connect()
    queue_with(conn, "q", "c")
    send(conn, "q", 30)
    tx = connect(autocommit=False)
    rate = one(tx, "select events_per_sec from pgque.queue_stats() where queue_name = 'q'")
    oldest_time, oldest_seq, now, seq = tx.execute(
        "select t.tick_time, t.tick_event_seq, now(),"
        " pg_sequence_last_value('pgque.event_1_id_seq') from pgque.tick t"
        " where t.tick_queue = 1 order by t.tick_id limit 1"
    ).fetchone()
    tx.rollback()
    expected = (seq - oldest_seq) / (now - oldest_time).total_seconds()
    assert float(rate) == pytest.approx(expected, abs=0.001)
    assert seq - oldest_seq == 30  # the warm-up, the queue's first event, is not counted


def test_queue_stats_reports_rotation_and_last_tick(conn: Conn) -> None:
    queue_with(conn, "q", "c", rotation_period="1 hour")
    tick_id = tick(conn, "q")
    row = queue_stats(conn)["q"]
    assert row["last_tick_id"] == tick_id
    assert row["cur_table"] == 0
    assert row["rotation_period"] == dt.timedelta(hours=1)
    assert row["ticker_paused"] is False
    assert dt.timedelta(0) <= row["rotation_age"] < dt.timedelta(seconds=30)


# -- history: throughput and error_rate ---------------------------------------


def external_ticks(conn: Conn, queue: str, base: str, ticks: list[tuple[int, int]]) -> None:
    """A queue whose only ticks are ``ticks``: (seconds after ``base``, event seq), in id order."""
    assert one(conn, "select pgque.create_queue(%s)", queue) == 1
    one(conn, "select pgque.set_queue_config(%s, 'external_ticker', 'true')", queue)
    conn.execute(
        "delete from pgque.tick where tick_queue ="
        " (select queue_id from pgque.queue where queue_name = %s)",
        (queue,),
    )
    for tick_id, (offset, seq) in enumerate(ticks, start=10):
        one(
            conn,
            f"select pgque.ticker(%s, %s, {base} + %s * interval '1 second', %s)",
            queue, tick_id, offset, seq,
        )  # fmt: skip


def test_throughput_sums_consecutive_window_ticks_into_epoch_buckets(conn: Conn) -> None:
    # Minute boundaries are multiples of 60 s since the Unix epoch; the
    # window (7 minutes) starts between the first two ticks.
    base = "(date_trunc('minute', now()) - interval '5 minutes')"
    external_ticks(conn, "q", base, [(-600, 0), (50, 10), (65, 10), (90, 40), (130, 45), (250, 50)])
    got = rows(
        conn,
        f"select extract(epoch from bucket_start - {base})::int, events, events_per_sec"
        " from pgque.throughput('q', '7 minutes', '1 minute')",
    )
    # The tick at +50 s only starts the count: its predecessor lies outside
    # the window. No row for the minute at +180 s, which holds no tick.
    assert [row[:2] for row in got] == [(60, 30), (120, 5), (240, 5)]
    # Per second over the whole bucket, unrounded.
    assert [float(row[2]) for row in got] == pytest.approx([0.5, 5 / 60, 5 / 60], rel=1e-15)
    # Buckets are aligned to the epoch whatever their size; a month is 30 days.
    starts = rows(
        conn,
        "select extract(epoch from bucket_start)::bigint from pgque.throughput('q', '1 hour', %s)",
        "1 month",
    )
    assert starts and all(start % (30 * 86400) == 0 for (start,) in starts)


@pytest.mark.parametrize("period", ["0", "-1 hour", None])
def test_throughput_of_an_empty_window_is_empty(conn: Conn, period: str | None) -> None:
    external_ticks(conn, "q", "now()", [(-5, 1), (-1, 9)])
    assert rows(conn, "select * from pgque.throughput('q', %s, '1 second')", period) == []


def test_throughput_checks_the_bucket_size_before_the_queue(conn: Conn) -> None:
    with pytest.raises(psycopg.errors.RaiseException, match="bucket size must be > 0"):
        conn.execute("select * from pgque.throughput('nope', '1 hour', '0')")


def test_throughput_counts_events_sent_between_real_ticks(connect: Connect) -> None:
    conn = connect()
    queue_with(conn, "q", "c")
    before = tick(conn, "q", force=True)
    send(conn, "q", 5)
    after = tick(conn, "q")
    got = rows(conn, "select * from pgque.throughput('q', '1 hour', '1 hour')")
    seqs = dict(
        rows(conn, "select tick_id, tick_event_seq from pgque.tick where tick_id in (%s, %s)",
             before, after)
    )  # fmt: skip
    assert seqs[after] - seqs[before] == 5
    assert sum(r[1] for r in got) >= 5
    assert [r[0] for r in got] == sorted(r[0] for r in got)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            "pgque.throughput('q', '1 hour', '0')",
            "throughput: bucket size must be > 0, got 00:00:00",
        ),
        (
            "pgque.throughput('q', '1 hour', '-1 second')",
            "throughput: bucket size must be > 0, got -00:00:01",
        ),
        ("pgque.throughput('nope', '1 hour', '1 minute')", "queue not found: nope"),
        ("pgque.throughput(null, '1 hour', '1 minute')", "throughput: queue name must not be null"),
        (
            "pgque.error_rate('q', '1 hour', '0')",
            "error_rate: bucket size must be > 0, got 00:00:00",
        ),
        ("pgque.error_rate('nope', '1 hour', '1 minute')", "queue not found: nope"),
        ("pgque.in_flight('nope')", "queue not found: nope"),
        ("pgque.in_flight(null)", "in_flight: queue name must not be null"),
        (
            "pgque.stuck_consumers('-1 second')",
            "stuck_consumers: threshold must be >= 0, got -00:00:01",
        ),
        ("pgque.stuck_consumers(null)", "stuck_consumers: threshold must be >= 0, got NULL"),
        ("pgque.latency_percentiles('nope', 'c', '1 hour')", "queue not found: nope"),
        ("pgque.latency_percentiles('q', 'nobody', '1 hour')", "Not subscriber to queue: q/nobody"),
        (
            "pgque.latency_percentiles('q', null, '1 hour')",
            "latency_percentiles: consumer name must not be null",
        ),
        (
            "pgque.latency_percentiles('q', 'c', '-1 hour')",
            "latency_percentiles: period must be > 0, got -01:00:00",
        ),
    ],
)
def test_bad_input_is_refused_clearly(conn: Conn, call: str, message: str) -> None:
    queue_with(conn, "q", "c")
    with pytest.raises(psycopg.errors.RaiseException) as caught:
        conn.execute(f"select * from {call}")
    assert (caught.value.diag.message_primary or "").startswith(message)


def test_error_rate_counts_retries_once_and_dead_letters(conn: Conn) -> None:
    queue_with(conn, "q", "c", max_retries="1")
    send(conn, "q")
    tick(conn, "q")
    msg = conn.execute("select msg_id, batch_id from pgque.receive('q', 'c', 10)").fetchone()
    assert msg is not None
    one(conn, "select pgque.nack(%s, %s::bigint, '0 seconds')", msg[1], msg[0])
    one(conn, "select pgque.ack(%s)", msg[1])

    def totals() -> tuple[int, int]:
        got = rows(conn, "select * from pgque.error_rate('q', '1 minute', '10 seconds')")
        assert 6 <= len(got) <= 7
        return sum(r[1] for r in got), sum(r[2] for r in got)

    assert totals() == (1, 0)  # due in retry_queue
    one(conn, "select pgque.maint()")
    assert totals() == (1, 0)  # moved back, not yet ticked
    tick(conn, "q")
    assert totals() == (1, 0)  # moved back and ticked: still one retry
    again = conn.execute(
        "select msg_id, batch_id, retry_count from pgque.receive('q', 'c', 10)"
    ).fetchone()
    assert again is not None and again[2] == 1
    one(conn, "select pgque.nack(%s, %s::bigint, '0 seconds', 'gave up')", again[1], again[0])
    one(conn, "select pgque.ack(%s)", again[1])
    assert totals() == (1, 1)


def test_error_rate_puts_a_retry_into_the_bucket_of_its_tick(connect: Connect) -> None:
    conn = connect()
    queue_with(conn, "q", "c")
    one(
        conn,
        "select pgque.event_retry_raw('q', 'c', now(), null, now(), 1, 't', 'x',"
        " null, null, null, null)",
    )
    one(conn, "select pgque.maint()")
    tick_id = tick(conn, "q")
    tx = connect(autocommit=False)
    got = rows(tx, "select * from pgque.error_rate('q', '10 seconds', '1 second')")
    tick_time = one(tx, "select tick_time from pgque.tick where tick_id = %s", tick_id)
    tx.rollback()
    assert [(r[0], r[1]) for r in got if r[1]] == [(tick_time.replace(microsecond=0), 1)]


# -- in_flight and stuck_consumers --------------------------------------------


def test_in_flight_lists_open_batches(conn: Conn) -> None:
    queue_with(conn, "q", "a", "b")
    send(conn, "q", 4)
    tick(conn, "q")
    batch = one(conn, "select batch_id from pgque.receive('q', 'a', 1)")
    got = rows(conn, "select * from pgque.in_flight('q')")
    assert [(r[0], r[1], r[3]) for r in got] == [("a", batch, 4)]
    assert dt.timedelta(0) <= got[0][2] < dt.timedelta(seconds=30)
    one(conn, "select pgque.ack(%s)", batch)
    assert rows(conn, "select * from pgque.in_flight('q')") == []


def test_stuck_consumers_have_work_and_no_recent_activity(conn: Conn) -> None:
    queue_with(conn, "q", "idle", "busy", "stuck", "holding")
    send(conn, "q", 2)
    tick(conn, "q")
    consume(conn, "q", "idle")  # caught up: never stuck
    one(conn, "select batch_id from pgque.receive('q', 'holding', 10)")  # an open batch
    conn.execute(
        "update pgque.subscription set sub_active = now() - interval '2 hours'"
        " where sub_consumer in (select co_id from pgque.consumer where co_name <> 'busy')"
    )
    got = rows(conn, "select queue_name, consumer_name from pgque.stuck_consumers()")
    assert got == [("q", "holding"), ("q", "stuck")]
    assert rows(conn, "select consumer_name from pgque.stuck_consumers('3 hours')") == []
    assert len(rows(conn, "select * from pgque.stuck_consumers('0')")) == 3  # busy too


# -- latency_percentiles ------------------------------------------------------


def test_latency_runs_from_ev_time_to_the_tick_that_delivered(connect: Connect) -> None:
    conn = connect()
    one(conn, "select pgque.create_queue('q')")
    one(conn, "select pgque.subscribe('q', 'c')")
    one(conn, "select pgque.subscribe('q', 'later')")
    for n, pause in ((3, 0.3), (1, 0.1), (2, 0.2)):
        tx = connect(autocommit=False)
        for _ in range(n):
            one(tx, "select pgque.send('q', '{}'::jsonb)")
        time.sleep(pause)
        tx.commit()
    tick(conn, "q", force=True)
    assert consume(conn, "q", "c") == 6

    tx = connect(autocommit=False)
    got = tx.execute("select * from pgque.latency_percentiles('q', 'c', '1 hour')").fetchone()
    tick_time = one(tx, "select max(tick_time) from pgque.tick")
    ev_times = [r[0] for r in rows(tx, "select ev_time from pgque.event_1")]
    # The consumer that has not passed the tick: each event's age now.
    waiting = tx.execute(
        "select * from pgque.latency_percentiles('q', 'later', '1 hour')"
    ).fetchone()
    now = one(tx, "select now()")
    tx.rollback()

    delivered = [tick_time - t for t in ev_times]
    assert got == tuple(percentile_cont(delivered, f) for f in (0.5, 0.95, 0.99))
    assert got[2] >= dt.timedelta(seconds=0.3)
    ages = [now - t for t in ev_times]
    assert waiting == tuple(percentile_cont(ages, f) for f in (0.5, 0.95, 0.99))


def test_latency_of_nothing_is_null(conn: Conn) -> None:
    queue_with(conn, "q", "c")
    conn.execute("update pgque.event_1_0 set ev_time = now() - interval '2 hours'")
    got = conn.execute("select * from pgque.latency_percentiles('q', 'c', '1 hour')").fetchone()
    assert got == (None, None, None)


# -- queue_health rules -------------------------------------------------------


def test_ticker_running_is_ok_for_an_idle_queue_however_old_its_tick(conn: Conn) -> None:
    one(conn, "select pgque.create_queue('q')")  # default: idle period 1 min, max lag 3 s
    status, detail = health(conn)["q", "ticker_running"]
    assert status == "ok"
    assert detail.startswith("last tick 0.")
    assert detail.endswith("s ago (tick 1); no event waiting for a tick")
    # Nothing waits, so nothing is late: an idle queue is healthy.
    backdate_ticks(conn, "q", "3 hours")
    status, detail = health(conn)["q", "ticker_running"]
    assert status == "ok"
    assert detail.endswith("; no event waiting for a tick")
    # An event that then waits past max_lag is what makes it late.
    send(conn, "q")
    conn.execute("update pgque.event_1_0 set ev_time = ev_time - interval '2 minutes'")
    assert health(conn)["q", "ticker_running"][0] == "critical"


def test_ticker_running_watches_events_waiting_for_a_tick(conn: Conn) -> None:
    one(conn, "select pgque.create_queue('q')")
    send(conn, "q")
    status, detail = health(conn)["q", "ticker_running"]
    assert status == "ok"
    assert "oldest event waiting for a tick: 0." in detail
    conn.execute("update pgque.event_1_0 set ev_time = ev_time - interval '20 seconds'")
    status, detail = health(conn)["q", "ticker_running"]
    assert status == "warning"  # waited max_lag (3 s) and 17 s more
    assert "oldest event waiting for a tick: 20." in detail
    conn.execute("update pgque.event_1_0 set ev_time = ev_time - interval '2 minutes'")
    assert health(conn)["q", "ticker_running"][0] == "critical"
    tick(conn, "q", force=True)
    assert health(conn)["q", "ticker_running"][0] == "ok"


def test_paused_and_external_queues_are_not_expected_to_tick(conn: Conn) -> None:
    one(conn, "select pgque.create_queue('paused')")
    one(conn, "select pgque.create_queue('external')")
    one(conn, "select pgque.pause_queue('paused')")
    one(conn, "select pgque.set_queue_config('external', 'external_ticker', 'true')")
    backdate_ticks(conn, "paused", "1 day")
    backdate_ticks(conn, "external", "1 day")
    checks = health(conn)
    assert checks["paused", "ticker_running"] == ("ok", "ticker paused (ticker_paused = true)")
    assert checks["external", "ticker_running"][0] == "ok"
    assert checks["external", "ticker_running"][1].startswith("external ticker; last tick 864")


def test_consumer_lag_is_measured_against_the_rotation_period(conn: Conn) -> None:
    queue_with(conn, "q", "c", rotation_period="10 seconds")
    backdate_ticks(conn, "q", "1 hour")
    assert health(conn)["q", "consumer_lag:c"] == ("ok", "caught up")  # old position, no work
    send(conn, "q", 3)
    tick(conn, "q")
    status, detail = health(conn)["q", "consumer_lag:c"]
    assert status == "critical"
    assert detail.startswith("3 events pending, the oldest for about 3600.")
    conn.execute("update pgque.tick set tick_time = now() - interval '6 seconds'")
    assert health(conn)["q", "consumer_lag:c"][0] == "warning"
    conn.execute("update pgque.tick set tick_time = now() - interval '4 seconds'")
    assert health(conn)["q", "consumer_lag:c"][0] == "ok"
    batch = one(conn, "select batch_id from pgque.receive('q', 'c', 10)")
    assert health(conn)["q", "consumer_lag:c"][1].endswith(f"; batch {batch} open for 0.0 s")


def test_rotation_health(conn: Conn) -> None:
    queue_with(conn, "q", rotation_period="1 hour")
    assert health(conn)["q", "rotation_health"][0] == "ok"
    conn.execute("update pgque.queue set queue_switch_time = now() - interval '3 hours'")
    status, detail = health(conn)["q", "rotation_health"]
    assert status == "warning"
    assert detail.endswith("; held back by a lagging consumer, or maint() is not running")
    conn.execute("update pgque.queue set queue_switch_time = now() - interval '5 hours'")
    assert health(conn)["q", "rotation_health"][0] == "critical"
    conn.execute(
        "update pgque.queue set queue_switch_step2 = null,"
        " queue_switch_time = now() - interval '30 seconds'"
    )
    status, detail = health(conn)["q", "rotation_health"]
    assert (status, detail.startswith("rotation step 2 pending for 30.")) == ("ok", True)
    conn.execute("update pgque.queue set queue_switch_time = now() - interval '5 minutes'")
    assert health(conn)["q", "rotation_health"][0] == "warning"
    conn.execute("update pgque.queue set queue_rotation_period = null")
    assert health(conn)["q", "rotation_health"] == (
        "ok",
        "rotation disabled (rotation_period is NULL)",
    )


def test_dlq_health_warns_about_any_dead_letter(conn: Conn) -> None:
    queue_with(conn, "q", "c", max_retries="0")
    send(conn, "q")
    tick(conn, "q")
    msg = conn.execute("select msg_id, batch_id from pgque.receive('q', 'c', 10)").fetchone()
    assert msg is not None
    one(conn, "select pgque.nack(%s, %s::bigint)", msg[1], msg[0])
    status, detail = health(conn)["q", "dlq_health"]
    assert status == "warning"
    assert detail.startswith("1 dead letter events, newest at ")


def test_system_rows_without_a_scheduler_judge_by_evidence(conn: Conn, connect: Connect) -> None:
    one(conn, "select pgque.create_queue('q')")
    checks = health(conn)
    assert checks["system", "pg_cron_ticker"] == (
        "ok",
        "no scheduled ticker job and no ticker leads; every queue ticked on time",
    )
    assert checks["system", "pg_cron_maint"] == (
        "ok",
        "no scheduled maintenance job;"
        " nothing overdue (retries, delayed messages, rotation step 2)",
    )

    backdate_ticks(conn, "q", "10 minutes")  # idle: still on time
    assert health(conn)["system", "pg_cron_ticker"][0] == "ok"
    send(conn, "q")  # an event waits 10 minutes for a tick: late
    conn.execute("update pgque.event_1_0 set ev_time = ev_time - interval '10 minutes'")
    assert health(conn)["system", "pg_cron_ticker"] == (
        "warning",
        "no ticker job is scheduled, no ticker leads, and 1 queue is late:"
        " run pgque.start() or pgque.start_timetable(), run a pgque ticker,"
        " or call pgque.ticker() yourself",
    )
    ticker = connect()
    ticker.execute("set application_name = 'my ticker'")
    one(ticker, "select pgque.ticker_lead('mine', '1 hour')")
    status, detail = health(conn)["system", "pg_cron_ticker"]
    assert status == "ok"
    assert detail.startswith(
        f"no scheduled ticker job; a ticker leads: my ticker (pid {ticker.info.backend_pid}) since "
    )

    one(conn, "select pgque.subscribe('q', 'c')")
    one(
        conn,
        "select pgque.event_retry_raw('q', 'c', now() - interval '5 minutes', null, now(), 1,"
        " 't', 'x', null, null, null, null)",
    )
    status, detail = health(conn)["system", "pg_cron_maint"]
    assert status == "warning"
    assert detail.startswith(
        "no maintenance job is scheduled and maintenance is overdue (1 retries due since "
    )
    assert detail.endswith(
        "): run pgque.start() or pgque.start_timetable(),"
        " or call pgque.maint() about every 30 seconds"
    )
    one(conn, "select pgque.maint()")
    assert health(conn)["system", "pg_cron_maint"][0] == "ok"


def test_system_rows_with_pg_timetable(conn: Conn) -> None:
    install_timetable(conn)
    conn.execute("select pgque.start_timetable()")
    ticker_id, maint_id = conn.execute(
        "select ticker_job_id, maint_job_id from pgque.config"
    ).fetchone()
    checks = health(conn)
    assert checks["system", "pg_cron_ticker"] == ("ok", f"job_id={ticker_id} (pg_timetable)")
    assert checks["system", "pg_cron_maint"] == ("ok", f"job_id={maint_id} (pg_timetable)")


def test_every_health_status_is_ok_warning_or_critical(conn: Conn) -> None:
    queue_with(conn, "q", "c")
    assert {r[0] for r in rows(conn, "select status from pgque.queue_health()")} <= {
        "ok",
        "warning",
        "critical",
    }


# -- no writes, roles ---------------------------------------------------------


@pytest.mark.parametrize("query", OBSERVERS)
def test_observing_writes_nothing(connect: Connect, query: str) -> None:
    conn = connect()
    queue_with(conn, "q", "c")
    send(conn, "q", 3)
    tick(conn, "q")
    tx = connect(autocommit=False)
    tx.execute(query).fetchall()
    assert one(tx, "select pg_current_xact_id_if_assigned()") is None
    tx.rollback()


def test_observability_functions_are_stable(conn: Conn) -> None:
    got = rows(
        conn,
        "select proname, provolatile from pg_proc where pronamespace = 'pgque'::regnamespace"
        " and proname in ('queue_stats', 'consumer_stats', 'queue_health', 'otel_metrics',"
        " 'throughput', 'error_rate', 'in_flight', 'stuck_consumers', 'latency_percentiles')",
    )
    assert len(got) == 9
    assert {r[1] for r in got} == {"s"}


@pytest.mark.parametrize("query", OBSERVERS)
def test_readers_may_observe_writers_may_not(conn: Conn, new_role: NewRole, query: str) -> None:
    queue_with(conn, "q", "c")
    reader, writer = new_role("pgque_reader"), new_role("pgque_writer")
    conn.execute(f'set role "{reader}"')
    conn.execute(query).fetchall()
    conn.execute(f'set role "{writer}"')
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute(query)
    conn.execute("reset role")
