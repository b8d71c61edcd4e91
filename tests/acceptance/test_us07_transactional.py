"""US-7: transactional exactly-once processing.

Setup: queue "payments", consumer "processor", table processed_payments.
Action: send payment 42, ticker(); BEGIN; receive(); INSERT; ack(); COMMIT.
Verify: processed_payments holds 42 and receive() returns nothing.
Crash: send payment 43, ticker(); a second session runs BEGIN; receive();
INSERT and is terminated (pg_terminate_backend) before it commits. A new
session gets payment 43 again (the batch comes back), the insert is gone, and
processing it transactionally records it exactly once.
Teardown: drop the queue and the table.
"""

from __future__ import annotations

import json

import psycopg
import pytest
from acceptance_helpers import (
    Conn,
    Connect,
    Message,
    batch_of,
    drop_story_queue,
    receive,
    story_queue,
    subscribe,
    tick,
)

from _engine import one, rows


def process(conn: Conn, *, finish: bool = True) -> tuple[list[Message], tuple[int, int] | None]:
    """receive + insert (+ ack) in the current transaction of ``conn``.

    Returns the messages and the batch's (start tick, end tick), or None without a batch.
    """
    messages = receive(conn, "payments", "processor")
    if not messages:
        return messages, None
    batch_id = batch_of(messages)
    row = conn.execute(
        "select prev_tick_id, tick_id from pgque.get_batch_info(%s)", (batch_id,)
    ).fetchone()
    assert row is not None and None not in row
    for msg in messages:
        conn.execute(
            "insert into processed_payments (id) values (%s)",
            (json.loads(msg.payload)["payment_id"],),
        )
    if finish:
        assert one(conn, "select pgque.ack(%s)", batch_id) == 1
    return messages, (row[0], row[1])


def processed(conn: Conn) -> list[int]:
    return [r[0] for r in rows(conn, "select id from processed_payments order by id")]


def test_us07_receive_insert_ack_commit_together(conn: Conn, connect: Connect) -> None:
    story_queue(conn, "payments")
    subscribe(conn, "payments", "processor")
    conn.execute("create table processed_payments (id int primary key)")

    # The transactional pattern.
    id42 = one(conn, "select pgque.send('payments', 'payment', '{\"payment_id\": 42}')")
    tick(conn, "payments")
    worker = connect()
    with worker.transaction():
        (msg,), _ = process(worker)
        assert msg.msg_id == id42
        # Not visible to others before the commit, the batch not finished either.
        assert processed(conn) == []
        assert one(
            conn, "select current_batch from pgque.get_consumer_info('payments', 'processor')"
        ) is None  # fmt: skip
    assert processed(conn) == [42]
    assert receive(conn, "payments", "processor") == []
    tick(conn, "payments")
    assert receive(conn, "payments", "processor") == []

    # The crash: receive + insert, then the session dies before COMMIT.
    id43 = one(conn, "select pgque.send('payments', 'payment', '{\"payment_id\": 43}')")
    tick(conn, "payments")
    victim = connect(autocommit=False)
    pid = one(victim, "select pg_backend_pid()")
    (msg,), ticks = process(victim, finish=False)
    assert msg.msg_id == id43
    assert processed(victim) == [42, 43]  # its own insert, uncommitted
    state = one(conn, "select state from pg_catalog.pg_stat_activity where pid = %s", pid)
    assert state == "idle in transaction"
    # Terminated mid-transaction; waits (up to 10 s) until the backend is gone.
    assert one(conn, "select pg_terminate_backend(%s, 10000)", pid) is True
    assert one(conn, "select count(*) from pg_catalog.pg_stat_activity where pid = %s", pid) == 0
    with pytest.raises(psycopg.OperationalError):
        victim.execute("select 1")

    # A new session: the insert is gone, payment 43 comes back.
    survivor = connect()
    assert processed(survivor) == [42]
    with survivor.transaction():
        (again,), again_ticks = process(survivor)
        assert (again.msg_id, again.payload, again.retry_count) == (id43, msg.payload, None)
        assert again.created_at == msg.created_at
        # The same batch: opened again over the same two ticks.
        assert again_ticks == ticks
    assert processed(conn) == [42, 43]
    assert receive(conn, "payments", "processor") == []
    tick(conn, "payments")
    assert receive(conn, "payments", "processor") == []

    drop_story_queue(conn, "payments")
    conn.execute("drop table processed_payments")
