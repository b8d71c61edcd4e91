"""The SQL test helpers: test_send, test_consume, assert_empty, assert_dlq_empty."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from lifecycle_helpers import NewRole

from _engine import make_queue, one, rows

Conn = psycopg.Connection[Any]


def failure(conn: Conn, query: str, *params: Any) -> tuple[str, str]:
    with pytest.raises(psycopg.errors.RaiseException) as caught:
        conn.execute(query, params or None)
    return caught.value.diag.message_primary or "", caught.value.diag.message_detail or ""


@pytest.fixture
def q(conn: Conn) -> Conn:
    """Queue ``q`` (ticks on every ticker() call) with consumer ``c``."""
    make_queue(conn, "q")
    one(conn, "select pgque.subscribe('q', 'c')")
    return conn


def test_send_then_tick_then_consume(q: Conn) -> None:
    ev_id = one(q, "select pgque.test_send('q', '{\"id\": 7}')")
    one(q, "select pgque.ticker('q')")
    msg = q.execute("select * from pgque.test_consume('q', 'c', 'default')").fetchone()
    assert msg is not None
    assert (msg[0], msg[2], msg[3]) == (ev_id, "default", '{"id": 7}')
    # Acked: nothing comes again.
    assert rows(q, "select * from pgque.receive('q', 'c', 10)") == []
    assert one(q, "select pgque.assert_empty('q')") is True


def test_consume_with_any_type(q: Conn) -> None:
    one(q, "select pgque.send('q', 'order.created', '{}'::jsonb)")
    one(q, "select pgque.ticker('q')")
    assert one(q, "select (pgque.test_consume('q', 'c', null)).type") == "order.created"


def test_send_refuses_bad_input(q: Conn) -> None:
    assert failure(q, "select pgque.test_send('nope', '{}')") == (
        "queue not found: nope",
        "pgque:queue_not_found",
    )
    assert failure(q, "select pgque.test_send(null, '{}')")[0] == (
        "test_send: queue name must not be null"
    )
    assert failure(q, "select pgque.test_send('q', null)")[0] == (
        "test_send: payload must not be null (queue q)"
    )


def test_consume_fails_with_the_queue_and_what_it_found(q: Conn) -> None:
    message, detail = failure(q, "select pgque.test_consume('q', 'c', 'default')")
    assert message == (
        "test_consume: no message for consumer c on queue q"
        " (was it sent and then ticked, in separate transactions?)"
    )
    assert detail == "pgque:assertion_failed"

    one(q, "select pgque.send('q', 'a', '{}'::jsonb)")
    one(q, "select pgque.send('q', 'b', '{}'::jsonb)")
    one(q, "select pgque.ticker('q')")
    message, _ = failure(q, "select pgque.test_consume('q', 'c', 'a')")
    batch = one(q, "select sub_batch is null from pgque.subscription")
    assert batch is True  # the failed call left nothing open
    assert message.startswith(
        "test_consume: expected one message for consumer c on queue q, batch "
    )
    assert message.endswith(" holds 2 (types: a, b)")
    q.execute("select pgque.ack(batch_id) from pgque.receive('q', 'c', 10) limit 1")

    ev_id = one(q, "select pgque.send('q', 'other', '{\"x\": 1}'::jsonb)")
    one(q, "select pgque.ticker('q')")
    message, _ = failure(q, "select pgque.test_consume('q', 'c', 'wanted')")
    assert message == (
        "test_consume: expected type wanted on queue q (consumer c), got other"
        f' (msg_id {ev_id}, payload {{"x": 1}})'
    )
    assert failure(q, "select pgque.test_consume('q', 'nobody', 'other')")[0] == (
        "Not subscriber to queue: q/nobody"
    )
    assert failure(q, "select pgque.test_consume('q', null, 'other')")[0] == (
        "test_consume: consumer name must not be null (queue q)"
    )


def test_assert_empty_is_exact_per_consumer(q: Conn) -> None:
    one(q, "select pgque.subscribe('q', 'd')")
    assert one(q, "select pgque.assert_empty('q')") is True
    one(q, "select pgque.force_next_tick('q')")  # moves the sequence: no effect on the check
    assert one(q, "select pgque.assert_empty('q')") is True
    ids = [one(q, "select pgque.send('q', '{}'::jsonb)") for _ in range(2)]
    message, detail = failure(q, "select pgque.assert_empty('q')")
    assert message == (
        "assert_empty: queue q is not empty:"
        f" consumer c has 2 events not yet consumed (first ev_id {ids[0]});"
        f" consumer d has 2 events not yet consumed (first ev_id {ids[0]})"
    )
    assert detail == "pgque:assertion_failed"
    one(q, "select pgque.ticker('q')")
    q.execute("select pgque.ack(batch_id) from pgque.receive('q', 'c', 10) limit 1")
    message, _ = failure(q, "select pgque.assert_empty('q')")
    assert "consumer c" not in message and "consumer d has 2 events" in message
    q.execute("select pgque.ack(batch_id) from pgque.receive('q', 'd', 10) limit 1")
    assert one(q, "select pgque.assert_empty('q')") is True


def test_assert_empty_sees_uncommitted_own_events(connect: Any, q: Conn) -> None:
    tx = connect(autocommit=False)
    one(tx, "select pgque.test_send('q', '{}')")
    with pytest.raises(psycopg.errors.RaiseException, match="consumer c has 1 events"):
        tx.execute("select pgque.assert_empty('q')")
    tx.rollback()
    assert one(q, "select pgque.assert_empty('q')") is True


def test_assert_empty_counts_retries_and_delayed_messages(q: Conn) -> None:
    one(q, "select pgque.send('q', '{}'::jsonb)")
    one(q, "select pgque.ticker('q')")
    msg = q.execute("select msg_id, batch_id from pgque.receive('q', 'c', 10)").fetchone()
    assert msg is not None
    one(q, "select pgque.nack(%s, %s::bigint, '1 hour')", msg[1], msg[0])
    one(q, "select pgque.ack(%s)", msg[1])
    one(q, "select pgque.send_at('q', 't', '{}'::jsonb, now() + interval '1 hour')")
    assert failure(q, "select pgque.assert_empty('q')")[0] == (
        "assert_empty: queue q is not empty: 1 events wait in retry_queue;"
        " 1 delayed messages wait for delivery"
    )


def test_assert_dlq_empty(q: Conn) -> None:
    assert one(q, "select pgque.assert_dlq_empty('q')") is True
    one(q, "select pgque.set_queue_config('q', 'max_retries', '0')")
    ev_id = one(q, "select pgque.send('q', '{}'::jsonb)")
    one(q, "select pgque.ticker('q')")
    batch = one(q, "select batch_id from pgque.receive('q', 'c', 10)")
    one(q, "select pgque.nack(%s, %s::bigint, '0 seconds', 'broken')", batch, ev_id)
    dl_id = one(q, "select dl_id from pgque.dead_letter")
    message, detail = failure(q, "select pgque.assert_dlq_empty('q')")
    assert message == (
        f"assert_dlq_empty: queue q has 1 dead letters (newest: dl_id {dl_id}, ev_id {ev_id},"
        " consumer c, reason broken)"
    )
    assert detail == "pgque:assertion_failed"
    assert failure(q, "select pgque.assert_dlq_empty('nope')")[0] == "queue not found: nope"
    assert failure(q, "select pgque.assert_empty(null)")[0] == (
        "assert_empty: queue name must not be null"
    )


def test_helpers_roles(q: Conn, new_role: NewRole) -> None:
    reader, writer = new_role("pgque_reader"), new_role("pgque_writer")
    q.execute(f'set role "{writer}"')
    one(q, "select pgque.test_send('q', '{}')")
    for query in (
        "select pgque.test_consume('q', 'c', null)",
        "select pgque.assert_empty('q')",
        "select pgque.assert_dlq_empty('q')",
    ):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            q.execute(query)
    q.execute("reset role")
    one(q, "select pgque.ticker('q')")
    q.execute(f'set role "{reader}"')
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        q.execute("select pgque.test_send('q', '{}')")
    assert one(q, "select (pgque.test_consume('q', 'c', 'default')).type") == "default"
    assert one(q, "select pgque.assert_empty('q')") is True
    assert one(q, "select pgque.assert_dlq_empty('q')") is True
    q.execute("reset role")
