"""US-3: retry and dead letter queue flow, through real retry cycles.

Setup: queue "jobs" with max_retries = 2, consumer "worker".
Action: send an event, ticker(), receive (retry_count NULL). Each cycle:
nack(msg) -> ack(batch) -> maint() -> ticker() -> receive. Cycle 1 brings the
message back with retry_count 1, cycle 2 with 2; the third nack finds
retry_count 2 >= max_retries and dead-letters it.
Verify: the event is in the dead letter queue and not retried again;
dlq_inspect() shows it with the reason; dlq_replay() puts it back into the
queue, and ticker() + receive() get it with the retry count reset.
Teardown: drop the queue.

The retry delay is real (30 seconds): the test checks that maint() leaves the
retry alone while it is not due, then moves ev_retry_after into the past
instead of sleeping.
"""

from __future__ import annotations

from acceptance_helpers import (
    Conn,
    Message,
    ack,
    drop_story_queue,
    maint,
    nack,
    receive,
    story_queue,
    subscribe,
    tick,
)

from _engine import one, rows

PAYLOAD = '{"job": "resize", "image": 7}'


def retry_rows(conn: Conn) -> list[tuple[object, ...]]:
    return rows(
        conn,
        "select ev_id, ev_retry, ev_retry_after > now() from pgque.retry_queue order by ev_id",
    )


def retry_cycle(conn: Conn, msg: Message, expected_retry: int) -> Message:
    """nack -> ack -> maint -> ticker -> receive; return the message as it comes back."""
    nack(conn, msg, "30 seconds", "transient failure")
    ack(conn, msg.batch_id)
    assert retry_rows(conn) == [(msg.msg_id, expected_retry, True)]
    assert one(conn, "select count(*) from pgque.dead_letter") == 0

    # Not due yet: maint() leaves it in the retry queue, nothing is delivered.
    assert maint(conn) == 0
    tick(conn, "jobs")
    assert receive(conn, "jobs", "worker") == []
    assert retry_rows(conn) == [(msg.msg_id, expected_retry, True)]

    # Its time comes (moved into the past instead of waiting 30 seconds).
    conn.execute("update pgque.retry_queue set ev_retry_after = now() - interval '1 second'")
    assert maint(conn) == 1
    assert retry_rows(conn) == []
    tick(conn, "jobs")
    (back,) = receive(conn, "jobs", "worker")
    assert back.batch_id != msg.batch_id
    assert (back.msg_id, back.type, back.payload, back.created_at) == (
        msg.msg_id, msg.type, msg.payload, msg.created_at,
    )  # fmt: skip
    assert back.retry_count == expected_retry
    return back


def test_us03_retries_then_dead_letter_then_replay(conn: Conn) -> None:
    story_queue(conn, "jobs", max_retries=2)
    subscribe(conn, "jobs", "worker")
    assert one(conn, "select queue_max_retries from pgque.queue where queue_name = 'jobs'") == 2

    msg_id = one(conn, "select pgque.send('jobs', 'image.resize', %s)", PAYLOAD)
    tick(conn, "jobs")
    (msg,) = receive(conn, "jobs", "worker")
    assert (msg.msg_id, msg.payload, msg.retry_count) == (msg_id, PAYLOAD, None)

    msg = retry_cycle(conn, msg, 1)
    msg = retry_cycle(conn, msg, 2)

    # Cycle 3: retry_count 2 >= max_retries 2, so nack dead-letters it.
    nack(conn, msg, "30 seconds", "image service down")
    ack(conn, msg.batch_id)
    assert retry_rows(conn) == []

    # Not retried again, whatever maintenance and ticks follow.
    conn.execute("update pgque.retry_queue set ev_retry_after = now() - interval '1 second'")
    assert maint(conn) == 0
    tick(conn, "jobs")
    assert receive(conn, "jobs", "worker") == []

    dead = conn.execute(
        "select dl_id, dl_reason, ev_id, ev_retry, ev_type, ev_data, ev_time,"
        " q.queue_name, c.co_name"
        " from pgque.dlq_inspect('jobs') d"
        " join pgque.queue q on q.queue_id = d.dl_queue_id"
        " join pgque.consumer c on c.co_id = d.dl_consumer_id"
    ).fetchall()
    assert len(dead) == 1, dead
    dl_id, reason, ev_id, ev_retry, ev_type, ev_data, ev_time, queue, consumer = dead[0]
    assert reason == "image service down"
    assert (ev_id, ev_retry, ev_type, ev_data, ev_time) == (
        msg_id, 2, "image.resize", PAYLOAD, msg.created_at,
    )  # fmt: skip
    assert (queue, consumer) == ("jobs", "worker")
    if one(conn, "select to_regprocedure('pgque.queue_stats()') is not null"):
        assert one(conn, "select dlq_count from pgque.queue_stats() where queue_name = 'jobs'") == 1

    # Replay: a new event with the same type and payload, retry count reset.
    new_id = one(conn, "select pgque.dlq_replay(%s)", dl_id)
    assert new_id is not None and new_id != msg_id
    assert one(conn, "select count(*) from pgque.dead_letter") == 0
    tick(conn, "jobs")
    (replayed,) = receive(conn, "jobs", "worker")
    assert (replayed.msg_id, replayed.type, replayed.payload) == (new_id, "image.resize", PAYLOAD)
    assert replayed.retry_count is None
    ack(conn, replayed.batch_id)
    tick(conn, "jobs")
    assert receive(conn, "jobs", "worker") == []

    drop_story_queue(conn, "jobs")
