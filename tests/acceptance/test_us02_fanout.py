"""US-2: multiple consumers (fan-out).

Setup: queue "events", consumers "analytics", "notifier", "audit".
Action: send 5 events, ticker().
Verify: every consumer receives all 5 on its own; acking one leaves the others'
batches untouched; consumer_stats() (get_consumer_info where consumer_stats is
not installed) shows each consumer's own lag.
Teardown: drop the queue.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from acceptance_helpers import (
    Conn,
    ack,
    batch_of,
    drop_story_queue,
    has_function,
    receive,
    story_queue,
    subscribe,
    tick,
)

from _engine import rows

CONSUMERS = ("analytics", "notifier", "audit")


def consumer_info(conn: Conn) -> dict[str, tuple[Any, ...]]:
    """consumer -> (last_tick, current_batch, pending_events) from get_consumer_info."""
    return {
        r[0]: r[1:]
        for r in rows(
            conn,
            "select consumer_name, last_tick, current_batch, pending_events"
            " from pgque.get_consumer_info('events')",
        )
    }


def consumer_stats(conn: Conn) -> dict[str, tuple[timedelta, int]]:
    """consumer -> (lag, pending_events) from consumer_stats()."""
    return {
        r[0]: (r[1], r[2])
        for r in rows(
            conn,
            "select consumer_name, lag, pending_events from pgque.consumer_stats()"
            " where queue_name = 'events'",
        )
    }


def test_us02_each_consumer_gets_every_event(conn: Conn) -> None:
    story_queue(conn, "events")
    subscribe(conn, "events", *CONSUMERS)
    start = {c: info[0] for c, info in consumer_info(conn).items()}
    assert set(start) == set(CONSUMERS)

    payloads = [f'{{"n":{n}}}' for n in range(1, 6)]
    ids = [rows(conn, "select pgque.send('events', 'evt', %s)", p)[0][0] for p in payloads]
    # Without force_next_tick, so that the pending-event estimates are not jumped.
    end_tick = tick(conn, "events", force=False)

    got = {c: receive(conn, "events", c) for c in CONSUMERS}
    for consumer, messages in got.items():
        assert [m.msg_id for m in messages] == ids, consumer
        assert [m.payload for m in messages] == payloads, consumer
        assert {m.type for m in messages} == {"evt"}, consumer
    batches = {c: batch_of(m) for c, m in got.items()}
    assert len(set(batches.values())) == 3, f"consumers share a batch: {batches}"

    # Lag before anyone acks: the same for all three.
    info = consumer_info(conn)
    for consumer in CONSUMERS:
        assert info[consumer][0] == start[consumer]
        assert info[consumer][1] == batches[consumer]
    pending = {info[c][2] for c in CONSUMERS}
    assert len(pending) == 1 and pending.pop() > 0, info

    # analytics acks; notifier and audit keep their open batches and lag.
    ack(conn, batches["analytics"])
    assert receive(conn, "events", "analytics") == []
    info = consumer_info(conn)
    assert info["analytics"] == (end_tick, None, 0)
    for consumer in ("notifier", "audit"):
        assert info[consumer][0] == start[consumer]
        assert info[consumer][1] == batches[consumer]
        assert info[consumer][2] > 0
        assert receive(conn, "events", consumer) == got[consumer]  # the same batch again

    if has_function(conn, "pgque.consumer_stats()"):
        stats = consumer_stats(conn)
        assert stats["analytics"] == (timedelta(0), 0)
        assert stats["notifier"][0] > timedelta(0) and stats["notifier"][1] > 0
        assert stats["audit"] == stats["notifier"]

    # More events: analytics gets only the new ones, the others still get
    # their first batch first, then the new events, each exactly once.
    new_ids = [rows(conn, "select pgque.send('events', 'evt', %s)", f"more {n}")[0][0]
               for n in range(3)]  # fmt: skip
    tick(conn, "events", force=False)
    batch = receive(conn, "events", "analytics")
    assert [m.msg_id for m in batch] == new_ids
    ack(conn, batch_of(batch))
    ack(conn, batches["notifier"])
    batch = receive(conn, "events", "notifier")
    assert [m.msg_id for m in batch] == new_ids
    ack(conn, batch_of(batch))
    assert receive(conn, "events", "notifier") == []
    # audit, the slowest, still gets everything in order.
    seen: list[int] = []
    ack(conn, batches["audit"])
    seen.extend(m.msg_id for m in got["audit"])
    batch = receive(conn, "events", "audit")
    seen.extend(m.msg_id for m in batch)
    ack(conn, batch_of(batch))
    assert seen == ids + new_ids
    assert receive(conn, "events", "audit") == []
    info = consumer_info(conn)
    assert {c: (i[1], i[2]) for c, i in info.items()} == {c: (None, 0) for c in CONSUMERS}
    if has_function(conn, "pgque.consumer_stats()"):
        assert set(consumer_stats(conn).values()) == {(timedelta(0), 0)}

    drop_story_queue(conn, "events")
