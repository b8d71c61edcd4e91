"""Helpers for the user-story acceptance tests (spec section 13.3): SQL through psycopg.

Time is driven explicitly: story queues tick on every ``ticker`` call and
rotate whenever allowed, ``tick`` forces a tick, and ``maint`` runs one
maintenance round. Nothing here sleeps.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import Any, NamedTuple

import psycopg

from _engine import one, rows

Conn = psycopg.Connection[Any]
Connect = Callable[..., Conn]
"""The ``connect`` fixture: ``connect(autocommit=True, dsn=None)`` opens another connection."""

# Every ticker call ticks; rotation happens whenever the consumers allow it.
STORY_OPTIONS: dict[str, Any] = {
    "ticker_max_lag": "1 microsecond",
    "ticker_idle_period": "1 microsecond",
    "rotation_period": "1 microsecond",
}


class Message(NamedTuple):
    """One row of ``pgque.receive()`` (the composite type ``pgque.message``)."""

    msg_id: int
    batch_id: int
    type: str
    payload: str
    retry_count: int | None
    created_at: Any
    extra1: str | None
    extra2: str | None
    extra3: str | None
    extra4: str | None


def story_queue(conn: Conn, name: str, **options: Any) -> None:
    """Create a queue with the story settings plus ``options`` (create_queue(text, jsonb))."""
    settings = {**STORY_OPTIONS, **options}
    assert one(conn, "select pgque.create_queue(%s, %s::jsonb)", name, json.dumps(settings)) == 1
    row = conn.execute(
        "select queue_ticker_max_lag, queue_ticker_idle_period, queue_rotation_period"
        " from pgque.queue where queue_name = %s",
        (name,),
    ).fetchone()
    assert row is not None
    smallest = dt.timedelta(microseconds=1)
    assert all(v == smallest for v in row), f"queue {name} settings not applied: {row}"


def subscribe(conn: Conn, queue: str, *consumers: str) -> None:
    """Subscribe each consumer (a new subscription returns 1)."""
    for consumer in consumers:
        assert one(conn, "select pgque.subscribe(%s, %s)", queue, consumer) == 1


def tick(conn: Conn, queue: str, *, force: bool = True) -> int:
    """Make ``queue`` tick now (``force_next_tick``, then ``ticker``); return the new tick id.

    ``force=False`` relies on the story settings alone (every ticker call ticks),
    which keeps the event sequence (and so the pending-event estimates) unjumped.
    """
    before = one(conn, "select max(tick_id) from pgque.tick t join pgque.queue q"
                       " on q.queue_id = t.tick_queue where q.queue_name = %s", queue)  # fmt: skip
    if force:
        one(conn, "select pgque.force_next_tick(%s)", queue)
    tick_id = one(conn, "select pgque.ticker(%s)", queue)
    assert tick_id is not None, f"queue {queue} did not tick"
    assert before is None or tick_id > before, f"tick {tick_id} is not after {before}"
    return int(tick_id)


def maint(conn: Conn) -> int:
    """One maintenance round in its own transaction; return what ``maint()`` returned."""
    return int(one(conn, "select pgque.maint()"))


def receive(conn: Conn, queue: str, consumer: str, max_return: int = 100) -> list[Message]:
    """``pgque.receive`` as a list of messages (empty: nothing to consume)."""
    return [
        Message(*r)
        for r in rows(conn, "select * from pgque.receive(%s, %s, %s)", queue, consumer, max_return)
    ]


def ack(conn: Conn, batch_id: int) -> None:
    """Finish the batch; it must have been open."""
    assert one(conn, "select pgque.ack(%s)", batch_id) == 1


def nack(conn: Conn, msg: Message, retry_after: str, reason: str | None = None) -> None:
    """``pgque.nack(batch, msg, retry_after, reason)`` with the message as received."""
    result = one(
        conn,
        "select pgque.nack(%s, row(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)::pgque.message,"
        " %s::interval, %s)",
        msg.batch_id, *msg, retry_after, reason,
    )  # fmt: skip
    assert result == 1


def batch_of(messages: list[Message]) -> int:
    """The one batch id the messages share."""
    batches = {m.batch_id for m in messages}
    assert len(batches) == 1, f"messages from several batches: {sorted(batches)}"
    return batches.pop()


def consume_all(conn: Conn, queue: str, consumer: str, *, limit: int = 1000) -> list[Message]:
    """Receive and ack batch after batch until ``receive`` comes back empty."""
    got: list[Message] = []
    for _ in range(limit):
        batch = receive(conn, queue, consumer, 100_000)
        if not batch:
            return got
        got.extend(batch)
        ack(conn, batch_of(batch))
    raise AssertionError(f"{consumer} on {queue} still receiving after {limit} batches")


def queue_id(conn: Conn, queue: str) -> int:
    """The queue's id (its event tables are ``pgque.event_<id>_<n>``)."""
    return int(one(conn, "select queue_id from pgque.queue where queue_name = %s", queue))


def has_function(conn: Conn, signature: str) -> bool:
    """True when ``signature`` (for example ``pgque.queue_stats()``) exists."""
    return bool(one(conn, "select to_regprocedure(%s) is not null", signature))


def drop_story_queue(conn: Conn, queue: str) -> None:
    """Teardown: drop the queue with its consumers; nothing of it may remain."""
    qid = queue_id(conn, queue)
    assert one(conn, "select pgque.drop_queue(%s, true)", queue) == 1
    row = conn.execute(
        "select (select count(*) from pgque.queue where queue_id = %(q)s)"
        " + (select count(*) from pgque.tick where tick_queue = %(q)s)"
        " + (select count(*) from pgque.subscription where sub_queue = %(q)s)"
        " + (select count(*) from pgque.retry_queue where ev_queue = %(q)s)"
        " + (select count(*) from pgque.dead_letter where dl_queue_id = %(q)s)"
        " + (select count(*) from pgque.delayed_events where de_queue_name = %(name)s)"
        " + (select count(*) from pg_catalog.pg_class c"
        "     join pg_catalog.pg_namespace n on n.oid = c.relnamespace"
        "    where n.nspname = 'pgque' and c.relname ~ ('^event_' || %(q)s || '(_|$)'))",
        {"q": qid, "name": queue},
    ).fetchone()
    assert row is not None
    left = row[0]
    assert left == 0, f"drop_queue({queue}) left {left} rows or tables behind"
