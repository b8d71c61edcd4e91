"""The ticker's decision rules, with time driven by rewriting tick times.

``ticker(q)`` compares ``now()`` with the latest ticks' ``tick_time``; moving
those times back is how these tests make time pass without sleeping.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from _engine import make_queue, one, rows


def age_ticks(conn: psycopg.Connection[Any], queue: str, *ages: str) -> None:
    """Set the newest ticks' times to ``now() - age``, newest first."""
    ids = [
        r[0]
        for r in rows(
            conn,
            "select tick_id from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue"
            " where q.queue_name = %s order by tick_id desc",
            queue,
        )
    ]
    for tick_id, age in zip(ids, ages, strict=False):
        conn.execute(
            "update pgque.tick set tick_time = now() - %s::interval where tick_id = %s"
            " and tick_queue = (select queue_id from pgque.queue where queue_name = %s)",
            (age, tick_id, queue),
        )


def ticker(conn: psycopg.Connection[Any], queue: str) -> int | None:
    value = one(conn, "select pgque.ticker(%s)", queue)
    return None if value is None else int(value)


def insert(conn: psycopg.Connection[Any], queue: str, count: int) -> None:
    conn.execute(
        "select pgque.insert_event(%s, 't', 'x') from generate_series(1, %s)", (queue, count)
    )


@pytest.fixture
def queue(conn: psycopg.Connection[Any]) -> str:
    """A queue with default thresholds (max_count 500, max_lag 3 s, idle 1 min) and 2 ticks."""
    make_queue(conn, "q", eager=False)
    # The second tick of a fresh queue is unconditional (no earlier gap yet).
    assert ticker(conn, "q") == 2
    return "q"


def test_first_ticks_are_unconditional(conn: psycopg.Connection[Any]) -> None:
    make_queue(conn, "fresh", eager=False)
    assert ticker(conn, "fresh") == 2
    assert ticker(conn, "fresh") is None


def test_max_count_ticks_before_max_lag(conn: psycopg.Connection[Any], queue: str) -> None:
    one(conn, "select pgque.set_queue_config(%s, 'ticker_max_count', '5')", queue)
    # The first event after a tick is not counted by the sequence gauge
    # (its last_value had not moved); insert one to prime it.
    insert(conn, queue, 1)
    age_ticks(conn, queue, "0", "1 second")
    insert(conn, queue, 3)
    assert ticker(conn, queue) is None
    insert(conn, queue, 2)
    assert ticker(conn, queue) == 3


def test_max_lag_ticks_few_events(conn: psycopg.Connection[Any], queue: str) -> None:
    insert(conn, queue, 2)
    age_ticks(conn, queue, "1 second")
    assert ticker(conn, queue) is None
    age_ticks(conn, queue, "4 seconds")
    assert ticker(conn, queue) == 3


def test_idle_queue_backs_off_geometrically(conn: psycopg.Connection[Any], queue: str) -> None:
    # Last gap 10 s: an idle queue waits until the latest tick is 20 s old.
    age_ticks(conn, queue, "0", "10 seconds")
    assert ticker(conn, queue) is None
    age_ticks(conn, queue, "15 seconds", "25 seconds")
    assert ticker(conn, queue) is None
    age_ticks(conn, queue, "21 seconds", "31 seconds")
    assert ticker(conn, queue) == 3


def test_idle_period_caps_back_off(conn: psycopg.Connection[Any], queue: str) -> None:
    # A 50 s gap would mean waiting 100 s; the 1 minute idle period wins.
    age_ticks(conn, queue, "59 seconds", "109 seconds")
    assert ticker(conn, queue) is None
    age_ticks(conn, queue, "61 seconds", "111 seconds")
    assert ticker(conn, queue) == 3


def test_idle_waits_at_least_half_max_lag(conn: psycopg.Connection[Any], queue: str) -> None:
    one(conn, "select pgque.set_queue_config(%s, 'ticker_idle_period', '1 microsecond')", queue)
    age_ticks(conn, queue, "1 second", "2 seconds")
    assert ticker(conn, queue) is None
    age_ticks(conn, queue, "1.6 seconds", "2 seconds")
    assert ticker(conn, queue) == 3


def test_zero_thresholds_tick_every_call(conn: psycopg.Connection[Any]) -> None:
    make_queue(conn, "eager")
    assert [ticker(conn, "eager") for _ in range(3)] == [2, 3, 4]


def test_paused_and_external_queues(conn: psycopg.Connection[Any], queue: str) -> None:
    make_queue(conn, "other")
    one(conn, "select pgque.set_queue_config(%s, 'ticker_paused', 'true')", queue)
    with pytest.raises(psycopg.errors.RaiseException, match="Ticker has been paused"):
        ticker(conn, queue)
    # ticker() skips the paused queue silently and ticks the other one.
    assert one(conn, "select pgque.ticker()") == 1
    one(conn, "select pgque.set_queue_config(%s, 'ticker_paused', 'false')", queue)
    one(conn, "select pgque.set_queue_config(%s, 'external_ticker', 'true')", queue)
    with pytest.raises(psycopg.errors.RaiseException, match="external tick source"):
        ticker(conn, queue)
    # force_tick and its alias force_next_tick raise for both (upstream
    # PgQue; PgQ's force_tick returns the last tick silently), paused first.
    last_tick = one(conn, "select max(tick_id) from pgque.tick where tick_queue = 1")
    for function in ("force_tick", "force_next_tick"):
        with pytest.raises(psycopg.errors.RaiseException, match="external ticker"):
            one(conn, f"select pgque.{function}(%s)", queue)
    one(conn, "select pgque.set_queue_config(%s, 'ticker_paused', 'true')", queue)
    for function in ("force_tick", "force_next_tick"):
        with pytest.raises(psycopg.errors.RaiseException, match="is paused"):
            one(conn, f"select pgque.{function}(%s)", queue)
    assert one(conn, "select max(tick_id) from pgque.tick where tick_queue = 1") == last_tick


def test_external_ticker_inserts_given_tick(conn: psycopg.Connection[Any], queue: str) -> None:
    one(conn, "select pgque.set_queue_config(%s, 'external_ticker', 'true')", queue)
    assert one(conn, "select pgque.ticker(%s, 10, now() - interval '1 minute', 5000)", queue) == 10
    assert rows(
        conn,
        "select tick_event_seq, now() - tick_time > interval '59 seconds' from pgque.tick"
        " where tick_id = 10",
    ) == [(5000, True)]
    # Both sequences moved forward to the given values.
    assert one(conn, "select pgque.insert_event(%s, 't', 'x')", queue) == 5001
    with pytest.raises(psycopg.errors.RaiseException, match="tick_id must be strictly greater"):
        one(conn, "select pgque.ticker(%s, 10, now(), 6000)", queue)
    with pytest.raises(psycopg.errors.RaiseException, match="event_seq must be >= previous"):
        one(conn, "select pgque.ticker(%s, 11, now(), 10)", queue)


def test_force_tick_makes_next_ticker_tick(conn: psycopg.Connection[Any], queue: str) -> None:
    age_ticks(conn, queue, "0", "1 second")
    assert ticker(conn, queue) is None
    assert one(conn, "select pgque.force_tick(%s)", queue) == 2
    assert ticker(conn, queue) == 3
    assert one(conn, "select pgque.force_next_tick(%s)", queue) == 3


def test_tick_notifies_listeners(conn: psycopg.Connection[Any], connect: Any) -> None:
    listener = connect()
    listener.execute('listen "pgque_q-1"')
    make_queue(conn, "q-1")
    assert ticker(conn, "q-1") is not None
    notices = list(listener.notifies(timeout=5, stop_after=2))
    # A wake-up only: any role may LISTEN, so the payload carries nothing.
    assert [(n.channel, n.payload) for n in notices] == [("pgque_q-1", ""), ("pgque_q-1", "")]


def test_ticker_refuses_repeatable_read(connect: Any) -> None:
    conn = connect(autocommit=False)
    make_queue(conn, "q")
    conn.commit()
    conn.execute("set transaction isolation level repeatable read")
    with pytest.raises(psycopg.errors.RaiseException, match="READ COMMITTED"):
        one(conn, "select pgque.ticker('q')")
