"""US-4: delayed delivery.

Setup: queue "reminders", consumer "sender".
Action: send_at('reminders', 'remind', payload, now() + 1 second).
Verify: receive() returns nothing at once (maint() and ticker() included);
then maint() + ticker() + receive() in a loop, with a deadline, until the
message arrives: not before its time, with its type and payload.
Teardown: drop the queue.

This story is about real time, so it waits for the clock (polling, no sleep
to order things); the deadline is 10 seconds.
"""

from __future__ import annotations

import time
from datetime import datetime

from acceptance_helpers import (
    Conn,
    Message,
    ack,
    drop_story_queue,
    receive,
    story_queue,
    subscribe,
    tick,
)

from _engine import one, rows

PAYLOAD = '{"user_id": 7, "text": "call back"}'
DEADLINE_SECONDS = 10.0


def timed_maint(conn: Conn) -> tuple[datetime, int]:
    """Run maint(); return the time its transaction saw (now()) and what it returned."""
    row = conn.execute("select now(), pgque.maint()").fetchone()
    assert row is not None
    return row[0], row[1]


def test_us04_send_at_is_delivered_when_due(conn: Conn) -> None:
    story_queue(conn, "reminders")
    subscribe(conn, "reminders", "sender")

    de_id, deliver_at = conn.execute(
        "select pgque.send_at('reminders', 'remind', %s::jsonb, now() + interval '1 second'),"
        " now() + interval '1 second'",
        (PAYLOAD,),
    ).fetchone() or (None, None)
    assert de_id is not None
    assert isinstance(deliver_at, datetime)
    # Waiting in the holding table, not in the queue.
    assert rows(conn, "select de_id, de_type, de_deliver_at from pgque.delayed_events") == [
        (de_id, "remind", deliver_at)
    ]

    # Immediately: nothing, even after a maintenance round and a tick.
    maint_now, moved = timed_maint(conn)
    assert maint_now < deliver_at, "test machine too slow: 1 second passed before the first maint"
    assert moved == 0
    tick(conn, "reminders")
    assert receive(conn, "reminders", "sender") == []
    assert one(conn, "select count(*) from pgque.delayed_events") == 1

    # Poll: maint() + ticker() + receive() until it arrives.
    deadline = time.monotonic() + DEADLINE_SECONDS
    got: list[Message] = []
    while not got:
        assert time.monotonic() < deadline, "the delayed message did not arrive within 10 s"
        maint_now, moved = timed_maint(conn)
        if maint_now < deliver_at:
            assert moved == 0, "maint() delivered the message before its time"
        tick(conn, "reminders")
        got = receive(conn, "reminders", "sender")
        if not got:
            assert maint_now < deliver_at, "due at maint() time but not delivered"
    received_at = one(conn, "select clock_timestamp()")

    (msg,) = got
    assert received_at >= deliver_at
    assert msg.type == "remind"
    assert msg.payload == '{"text": "call back", "user_id": 7}'  # jsonb overload: canonical text
    assert msg.retry_count is None
    assert msg.created_at >= deliver_at  # the event is created when delivered
    assert one(conn, "select count(*) from pgque.delayed_events") == 0
    ack(conn, msg.batch_id)
    tick(conn, "reminders")
    assert receive(conn, "reminders", "sender") == []

    drop_story_queue(conn, "reminders")
