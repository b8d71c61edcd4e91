"""Maintenance never waits behind an application transaction.

The documented exactly-once pattern keeps a transaction open from receive
to ack while the handler runs. Whatever that transaction holds, maint() and
run_maint() must neither wait for it nor hold back other queues' work: the
tests run them with a short lock_timeout, which turns any wait into an error.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from _engine import make_queue, one, rows, tick

MAINT = ["select pgque.maint()", "call pgque.run_maint()"]


@pytest.fixture
def handler_in_flight(conn: psycopg.Connection[Any], connect: Any) -> Iterator[Any]:
    """Queue 'jobs' due for rotation, and a transaction that received and acked from it."""
    make_queue(conn, "jobs")
    one(conn, "select pgque.set_queue_config('jobs', 'rotation_period', '1 microsecond')")
    one(conn, "select pgque.subscribe('jobs', 'worker')")
    one(conn, "select pgque.subscribe('jobs', 'audit')")
    one(conn, "select pgque.send('jobs', 'a')")
    tick(conn, "jobs")
    handler = connect(autocommit=False)
    batch = rows(handler, "select msg_id, batch_id from pgque.receive('jobs', 'worker')")
    assert len(batch) == 1
    one(handler, "select pgque.ack(%s)", batch[0][1])
    try:
        yield handler
    finally:
        handler.rollback()


@pytest.fixture
def other_queue(conn: psycopg.Connection[Any]) -> str:
    """Queue 'other' with a due retry and a due delayed message."""
    make_queue(conn, "other")
    one(conn, "select pgque.subscribe('other', 'c')")
    one(conn, "select pgque.send('other', 'x')")
    tick(conn, "other")
    msg = rows(conn, "select * from pgque.receive('other', 'c')")[0]
    one(conn, "select pgque.nack(%s, %s::pgque.message, '0 seconds', 'retry me')", msg[1], msg)
    one(conn, "select pgque.ack(%s)", msg[1])
    one(conn, "select pgque.send_at('other', 'later', 'y', now() + interval '1 hour')")
    conn.execute("update pgque.delayed_events set de_deliver_at = now() - interval '1 second'")
    conn.execute("update pgque.retry_queue set ev_retry_after = now() - interval '1 second'")
    return "other"


def queue_table(conn: psycopg.Connection[Any], queue: str) -> int:
    return int(one(conn, "select queue_cur_table from pgque.queue where queue_name = %s", queue))


@pytest.mark.parametrize("maint", MAINT)
def test_maint_does_not_wait_for_a_handler_in_flight(
    conn: psycopg.Connection[Any], handler_in_flight: Any, other_queue: str, maint: str
) -> None:
    conn.execute("set lock_timeout = '200ms'")
    conn.execute(maint)
    # The other queue's retry and delayed message moved, and committed.
    assert one(conn, "select count(*) from pgque.retry_queue") == 0
    assert one(conn, "select count(*) from pgque.delayed_events") == 0
    tick(conn, "other")
    got = sorted(r[3] for r in rows(conn, "select * from pgque.receive('other', 'c')"))
    assert got == ["x", "y"]


@pytest.mark.parametrize("maint", MAINT)
def test_rotation_goes_on_after_the_handler_commits(
    conn: psycopg.Connection[Any], handler_in_flight: Any, maint: str
) -> None:
    conn.execute("set lock_timeout = '200ms'")
    handler_in_flight.commit()
    # Every consumer past the first tick: one round starts the rotation,
    # the next completes it.
    batch = one(conn, "select batch_id from pgque.receive('jobs', 'audit') limit 1")
    one(conn, "select pgque.ack(%s)", batch)
    before = queue_table(conn, "jobs")
    for _ in range(3):  # at most three rounds; three rotations would come full circle
        conn.execute(maint)
        if queue_table(conn, "jobs") != before:
            break
        tick(conn, "jobs")
        for consumer in ("worker", "audit"):
            for (batch,) in rows(
                conn, "select distinct batch_id from pgque.receive('jobs', %s)", consumer
            ):
                one(conn, "select pgque.ack(%s)", batch)
    assert queue_table(conn, "jobs") != before


def test_a_locked_queue_row_is_skipped_not_waited_for(
    conn: psycopg.Connection[Any], connect: Any, other_queue: str
) -> None:
    make_queue(conn, "jobs")
    one(conn, "select pgque.set_queue_config('jobs', 'rotation_period', '1 microsecond')")
    admin = connect(autocommit=False)
    one(admin, "select pgque.set_queue_config('jobs', 'ticker_max_count', '100')")  # holds the row
    conn.execute("set lock_timeout = '200ms'")
    before = queue_table(conn, "jobs")
    conn.execute("call pgque.run_maint()")
    assert queue_table(conn, "jobs") == before  # skipped this round
    assert one(conn, "select count(*) from pgque.retry_queue") == 0  # others moved on
    admin.commit()
    conn.execute("call pgque.run_maint()")
    assert queue_table(conn, "jobs") != before


def test_run_maint_refuses_a_transaction_block(connect: Any) -> None:
    conn = connect(autocommit=False)
    with pytest.raises(psycopg.errors.InvalidTransactionTermination):
        conn.execute("call pgque.run_maint()")
