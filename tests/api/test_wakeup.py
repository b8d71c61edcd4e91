"""Producers wake a waiting ticker: one NOTIFY per arming, sent at commit."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from _engine import make_queue, one, rows

CHANNEL = "pgque_ticker_wake"


@pytest.fixture
def listener(connect: Any) -> psycopg.Connection[Any]:
    listening = connect()
    listening.execute(f"listen {CHANNEL}")
    return listening


def wakeups(listener: psycopg.Connection[Any], conn: psycopg.Connection[Any]) -> int:
    """The wakeups received so far: a marker NOTIFY, committed last, ends the count
    (notifications arrive in commit order)."""
    conn.execute(f"notify {CHANNEL}, 'marker'")
    for count, note in enumerate(listener.notifies(timeout=10)):
        if note.payload == "marker":
            return count
    raise AssertionError("the marker notification did not arrive in 10 s")


def arm(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    """Arm the wakeup; each queue's event sequence and its last tick's."""
    return rows(conn, "select * from pgque._ticker_arm_wake() order by 1")


def test_no_wakeup_unless_armed(conn: psycopg.Connection[Any], listener: Any) -> None:
    make_queue(conn, "w")
    for _ in range(3):
        one(conn, "select pgque.send('w', '{}'::jsonb)")
    assert wakeups(listener, conn) == 0


def test_one_wakeup_per_arming(conn: psycopg.Connection[Any], listener: Any) -> None:
    make_queue(conn, "w")
    make_queue(conn, "v")
    assert arm(conn) == [("v", 0, 1), ("w", 0, 1)]  # 0: never drawn from; 1: PgQ's gauge
    for _ in range(3):  # three transactions, two queues: one wakeup
        one(conn, "select pgque.send('w', '{}'::jsonb)")
        one(conn, "select pgque.insert_event('v', 't', 'x')")
    assert wakeups(listener, conn) == 1
    assert arm(conn) == [("v", 3, 1), ("w", 3, 1)]  # sent, not ticked yet
    one(conn, "select pgque.send_batch('w', 't', array['1', '2', '3']::text[])")
    one(conn, "select pgque.send('w', '{}'::jsonb)")
    assert wakeups(listener, conn) == 1


def test_the_wakeup_comes_at_commit_and_not_on_rollback(
    conn: psycopg.Connection[Any], connect: Any, listener: Any
) -> None:
    make_queue(conn, "w")
    producer = connect(autocommit=False)
    arm(conn)
    one(producer, "select pgque.send('w', '{}'::jsonb)")
    assert wakeups(listener, conn) == 0  # not committed yet
    producer.commit()
    assert wakeups(listener, conn) == 1
    arm(conn)
    one(producer, "select pgque.send('w', '{}'::jsonb)")
    producer.rollback()  # it had drawn the wakeup: the ticker's safety poll finds the rest
    one(conn, "select pgque.send('w', '{}'::jsonb)")
    assert wakeups(listener, conn) == 0
    arm(conn)
    one(conn, "select pgque.send('w', '{}'::jsonb)")
    assert wakeups(listener, conn) == 1


def test_only_the_admin_arms_and_nobody_wakes_by_hand(conn: psycopg.Connection[Any]) -> None:
    def may(role: str, routine: str) -> bool:
        return bool(one(conn, "select has_function_privilege(%s, %s, 'execute')", role, routine))

    assert may("pgque_admin", "pgque._ticker_arm_wake()")
    for role in ("pgque_reader", "pgque_writer", "pgque_admin"):
        assert not may(role, "pgque._wake(integer)")
    for role in ("pgque_reader", "pgque_writer"):
        assert not may(role, "pgque._ticker_arm_wake()")


def test_a_straggler_of_the_last_tick_is_ticked_once_committed(
    conn: psycopg.Connection[Any], connect: Any
) -> None:
    make_queue(conn, "w")
    one(conn, "select pgque.subscribe('w', 'c')")
    assert one(conn, "select pgque._tick_stragglers('w')") == 0
    producer = connect(autocommit=False)
    one(producer, "select pgque.send('w', '{\"late\": 1}'::jsonb)")
    one(conn, "select pgque.force_tick('w')")
    one(conn, "select pgque.ticker('w')")  # its sequence value covers the open send
    assert one(conn, "select pgque.ticker_eager('w', '0')") is not None  # "covered": no tick
    assert rows(conn, "select * from pgque.receive('w', 'c')") == []
    ticks = one(conn, "select count(*) from pgque.tick")
    assert one(conn, "select pgque._tick_stragglers('w')") == 2  # still running
    producer.commit()
    assert one(conn, "select pgque._tick_stragglers('w')") == 1
    assert one(conn, "select count(*) from pgque.tick") == ticks + 1
    assert [r[3] for r in rows(conn, "select * from pgque.receive('w', 'c')")] == ['{"late": 1}']
    assert one(conn, "select pgque._tick_stragglers('w')") == 0
