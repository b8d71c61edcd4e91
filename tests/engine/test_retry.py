"""Retries: event_retry, batch_retry, event_retry_raw and moving them back."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from _engine import consume, make_queue, one, rows, tick


@pytest.fixture
def queue(conn: psycopg.Connection[Any]) -> str:
    make_queue(conn, "q")
    one(conn, "select pgque.register_consumer('q', 'c')")
    one(conn, "select pgque.register_consumer('q', 'other')")
    return "q"


def open_batch(conn: psycopg.Connection[Any], consumer: str = "c") -> tuple[int, list[Any]]:
    batch_id = one(conn, "select pgque.next_batch('q', %s)", consumer)
    assert batch_id is not None
    events = rows(conn, "select ev_id, ev_retry, ev_data from pgque.get_batch_events(%s)", batch_id)
    return int(batch_id), events


def test_retry_round_trip_is_owner_only(conn: psycopg.Connection[Any], queue: str) -> None:
    ev_id = one(conn, "select pgque.insert_event('q', 't', 'x')")
    tick(conn, queue)
    batch_id, events = open_batch(conn)
    assert events == [(ev_id, None, "x")]
    assert one(conn, "select pgque.event_retry(%s, %s, 0)", batch_id, ev_id) == 1
    # Already queued for this consumer: 0.
    assert one(conn, "select pgque.event_retry(%s, %s, 0)", batch_id, ev_id) == 0
    one(conn, "select pgque.finish_batch(%s)", batch_id)
    assert one(conn, "select pgque.maint_retry_events()") == 1
    tick(conn, queue)
    for expected_retry in (1, 2, 3):
        batch_id, events = open_batch(conn)
        assert events == [(ev_id, expected_retry, "x")]
        one(conn, "select pgque.event_retry(%s, %s, 0)", batch_id, ev_id)
        one(conn, "select pgque.finish_batch(%s)", batch_id)
        one(conn, "select pgque.maint_retry_events()")
        tick(conn, queue)
    # The other consumer saw the event once, never the copies.
    assert consume(conn, queue, "other") == ["x"]
    for _ in range(4):
        assert consume(conn, queue, "other") == []


def test_retry_waits_for_its_time(conn: psycopg.Connection[Any], queue: str) -> None:
    ev_id = one(conn, "select pgque.insert_event('q', 't', 'x')")
    tick(conn, queue)
    batch_id, _ = open_batch(conn)
    one(conn, "select pgque.event_retry(%s, %s, now() + interval '1 hour')", batch_id, ev_id)
    one(conn, "select pgque.finish_batch(%s)", batch_id)
    assert one(conn, "select pgque.maint_retry_events()") == 0
    assert one(conn, "select pgque.maint()") == 0
    conn.execute("update pgque.retry_queue set ev_retry_after = now() - interval '1 second'")
    assert one(conn, "select pgque.maint()") == 1


def test_event_outside_batch_is_not_found(conn: psycopg.Connection[Any], queue: str) -> None:
    one(conn, "select pgque.insert_event('q', 't', 'x')")
    tick(conn, queue)
    batch_id, _ = open_batch(conn)
    with pytest.raises(psycopg.errors.RaiseException, match="event not found"):
        conn.execute("select pgque.event_retry(%s, 424242, 0)", (batch_id,))
    with pytest.raises(psycopg.errors.RaiseException, match="event not found"):
        conn.execute("select pgque.event_retry(424242, 1, 0)")
    with pytest.raises(psycopg.errors.RaiseException, match="batch_retry: batch 424242 not found"):
        conn.execute("select pgque.batch_retry(424242, 0)")
    assert one(conn, "select count(*) from pgque.retry_queue") == 0


def test_batch_retry_and_move_limit(conn: psycopg.Connection[Any], queue: str) -> None:
    conn.execute("select pgque.insert_event('q', 't', i::text) from generate_series(1, 25) i")
    tick(conn, queue)
    batch_id, events = open_batch(conn)
    one(conn, "select pgque.event_retry(%s, %s, 0)", batch_id, events[0][0])
    assert one(conn, "select pgque.batch_retry(%s, 0)", batch_id) == 24
    one(conn, "select pgque.finish_batch(%s)", batch_id)
    # PgQ's contract: at most 10 per call, callers loop until 0.
    moved = [one(conn, "select pgque.maint_retry_events()") for _ in range(4)]
    assert moved == [10, 10, 5, 0]
    tick(conn, queue)
    _, again = open_batch(conn)
    assert sorted(e[2] for e in again) == sorted(e[2] for e in events)
    assert {e[1] for e in again} == {1}


def test_event_retry_raw(conn: psycopg.Connection[Any], queue: str) -> None:
    assert (
        one(
            conn,
            "select pgque.event_retry_raw('q', 'c', now(), 666, now(), 3, 't', 'raw',"
            " null, null, null, null)",
        )
        == 666
    )
    new_id = one(
        conn,
        "select pgque.event_retry_raw('q', 'c', now(), null, now(), null, 't', 'raw2',"
        " 'a', null, null, null)",
    )
    assert new_id is not None and new_id != 666
    with pytest.raises(psycopg.errors.RaiseException, match="Not subscriber to queue: q/zz"):
        conn.execute(
            "select pgque.event_retry_raw('q', 'zz', now(), null, now(), null, 't', 'd',"
            " null, null, null, null)"
        )
    assert one(conn, "select pgque.maint()") == 2
    tick(conn, queue)
    _, events = open_batch(conn)
    assert events == sorted([(666, 3, "raw"), (new_id, None, "raw2")])
    assert consume(conn, queue, "other") == []


def test_unregister_drops_pending_retries(conn: psycopg.Connection[Any], queue: str) -> None:
    ev_id = one(conn, "select pgque.insert_event('q', 't', 'x')")
    tick(conn, queue)
    batch_id, _ = open_batch(conn)
    one(conn, "select pgque.event_retry(%s, %s, 0)", batch_id, ev_id)
    batch_other, _ = open_batch(conn, "other")
    one(conn, "select pgque.event_retry(%s, %s, 0)", batch_other, ev_id)
    assert one(conn, "select count(*) from pgque.retry_queue") == 2
    one(conn, "select pgque.unregister_consumer('q', 'c')")
    assert rows(
        conn,
        "select c.co_name from pgque.retry_queue r join pgque.subscription s"
        " on s.sub_id = r.ev_owner join pgque.consumer c on c.co_id = s.sub_consumer",
    ) == [("other",)]
