"""Consuming: subscribe, receive, ack."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest

from _engine import make_queue, one, rows, tick


@pytest.fixture
def queue(conn: psycopg.Connection[Any]) -> str:
    make_queue(conn, "q")
    assert one(conn, "select pgque.subscribe('q', 'c')") == 1
    assert one(conn, "select pgque.subscribe('q', 'c')") == 0
    return "q"


def receive(conn: psycopg.Connection[Any], limit: int = 100) -> list[tuple[Any, ...]]:
    return rows(conn, "select * from pgque.receive('q', 'c', %s)", limit)


def test_message_columns(conn: psycopg.Connection[Any], queue: str) -> None:
    ev_id = one(conn, "select pgque.send('q', 'typ', 'body', 'e1', 'e2', 'e3', 'e4')")
    tick(conn, queue)
    (msg,) = receive(conn)
    batch_id = one(conn, "select sub_batch from pgque.subscription")
    assert msg[:5] == (ev_id, batch_id, "typ", "body", None)
    assert msg[6:] == ("e1", "e2", "e3", "e4")
    names = [
        r[0]
        for r in rows(
            conn,
            "select attname from pg_attribute where attrelid = 'pgque.message'::regclass"
            " and attnum > 0 order by attnum",
        )
    ]
    assert names == [
        "msg_id", "batch_id", "type", "payload", "retry_count", "created_at",
        "extra1", "extra2", "extra3", "extra4",
    ]  # fmt: skip


def test_receive_is_reentrant_until_ack(conn: psycopg.Connection[Any], queue: str) -> None:
    conn.execute("select pgque.send('q', i::text) from generate_series(1, 5) i")
    tick(conn, queue)
    first = receive(conn, 3)
    assert [m[3] for m in first] == ["1", "2", "3"]
    # Called again: the same batch from its first message, not the next page.
    assert receive(conn, 3) == first
    assert [m[3] for m in receive(conn)] == ["1", "2", "3", "4", "5"]
    assert one(conn, "select pgque.ack(%s)", first[0][1]) == 1
    # ack ended the whole batch, messages beyond the limit included.
    assert receive(conn) == []
    assert one(conn, "select pgque.ack(%s)", first[0][1]) == 0


def test_no_tick_no_rows(conn: psycopg.Connection[Any], queue: str) -> None:
    one(conn, "select pgque.send('q', 'x')")
    assert receive(conn) == []
    assert one(conn, "select sub_batch from pgque.subscription") is None


def test_empty_windows_are_finished_internally(conn: psycopg.Connection[Any], queue: str) -> None:
    for _ in range(3):
        tick(conn, queue)
    assert receive(conn) == []
    last = one(conn, "select max(tick_id) from pgque.tick")
    assert rows(conn, "select sub_last_tick, sub_batch from pgque.subscription") == [(last, None)]
    # Past empty windows to the next message in one call.
    one(conn, "select pgque.send('q', 'x')")
    tick(conn, queue)
    tick(conn, queue)
    assert [m[3] for m in receive(conn)] == ["x"]


def test_receive_refuses_bad_limits_and_unknown_consumers(
    conn: psycopg.Connection[Any], queue: str
) -> None:
    for bad in (0, -5):
        with pytest.raises(
            psycopg.errors.RaiseException,
            match=f"pgque.receive: max_return must be >= 1, got {bad}",
        ):
            receive(conn, bad)
    with pytest.raises(psycopg.errors.RaiseException, match="Not subscriber to queue: q/nobody"):
        conn.execute("select * from pgque.receive('q', 'nobody')")
    with pytest.raises(psycopg.errors.RaiseException, match="Event queue not created yet"):
        conn.execute("select pgque.subscribe('nope', 'c')")


def test_fan_out_consumers_are_independent(conn: psycopg.Connection[Any], queue: str) -> None:
    one(conn, "select pgque.subscribe('q', 'd')")
    conn.execute("select pgque.send('q', i::text) from generate_series(1, 3) i")
    tick(conn, queue)
    c_msgs = receive(conn)
    one(conn, "select pgque.ack(%s)", c_msgs[0][1])
    d_msgs = rows(conn, "select * from pgque.receive('q', 'd')")
    assert [m[3] for m in d_msgs] == ["1", "2", "3"]
    assert d_msgs[0][1] != c_msgs[0][1]
    assert one(conn, "select pgque.unsubscribe('q', 'd')") == 1
    assert one(conn, "select pgque.unsubscribe('q', 'd')") == 0


def test_concurrent_receive_waits_then_gets_same_batch(
    connect: Any, conn: psycopg.Connection[Any], queue: str
) -> None:
    one(conn, "select pgque.send('q', 'x')")
    tick(conn, queue)
    first = connect(autocommit=False)
    mine = receive(first)
    second = connect()
    pid = one(second, "select pg_backend_pid()")
    got: list[list[tuple[Any, ...]]] = []
    waiter = threading.Thread(target=lambda: got.append(receive(second)))
    waiter.start()
    # Wait until the second session is blocked on the subscription row lock.
    for _ in range(500):
        if one(conn, "select wait_event_type = 'Lock' from pg_stat_activity where pid = %s", pid):
            break
        threading.Event().wait(0.01)
    else:
        pytest.fail("second receive never waited on the lock")
    first.commit()
    waiter.join(10)
    assert got == [mine]


def test_event_ttl_skips_old_events(conn: psycopg.Connection[Any], queue: str) -> None:
    one(conn, "select pgque.set_queue_config('q', 'event_ttl', '1 hour')")
    one(conn, "select pgque.send('q', 'fresh')")
    one(conn, "select pgque.insert_event_raw('q', null, now() - interval '2 hours', null, null,"
        " 'default', 'stale', null, null, null, null)")  # fmt: skip
    tick(conn, queue)
    assert [m[3] for m in receive(conn)] == ["fresh"]


def test_sending_and_a_batch_call_no_sql_function_left_uninlined(
    conn: psycopg.Connection[Any], queue: str
) -> None:
    # A SQL-language function that the planner cannot inline (one whose body
    # is less immutable than it says, or with settings) is parsed and planned
    # on every call: 52 µs for a reader's name on every receive, measured.
    # The first rounds make the session's plans (planning may call a function:
    # PL/pgSQL plans a statement anew for its first five runs).
    for warming in (True,) * 6 + (False,):
        one(conn, "select pgque.send('q', 'typ', 'body')")
        tick(conn, queue)
        if warming:
            one(conn, "select pgque._consumer_tick('q', '0 seconds')")
            (msg,) = receive(conn)
            assert one(conn, "select pgque.ack(%s)", msg[1]) == 1
    conn.execute("set track_functions = 'all'")
    with conn.transaction():  # counted by function, in this transaction
        one(conn, "select pgque.send('q', 'typ', 'next')")
        one(conn, "select pgque.insert_event('q', 'typ', 'next')")
        one(conn, "select pgque._consumer_tick('q', '0 seconds')")
        (msg,) = receive(conn)
        assert one(conn, "select pgque.ack(%s)", msg[1]) == 1
        called = rows(
            conn,
            "select f.funcname, l.lanname from pg_stat_xact_user_functions f"
            " join pg_proc p on p.oid = f.funcid join pg_language l on l.oid = p.prolang"
            " where f.schemaname = 'pgque'",
        )
    assert {name for name, _ in called} >= {"send", "receive", "ack", "_consumer_tick"}
    assert [name for name, language in called if language == "sql"] == []
