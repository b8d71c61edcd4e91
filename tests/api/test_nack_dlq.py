"""nack, retries through real cycles, and the dead letter queue."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest

from _engine import make_queue, one, rows, tick

RAISE = psycopg.errors.RaiseException


@pytest.fixture
def queue(conn: psycopg.Connection[Any]) -> str:
    make_queue(conn, "q")
    one(conn, "select pgque.subscribe('q', 'c')")
    return "q"


def receive_one(conn: psycopg.Connection[Any]) -> tuple[Any, ...]:
    (msg,) = rows(conn, "select * from pgque.receive('q', 'c', 10)")
    return msg


def nack(conn: psycopg.Connection[Any], msg: tuple[Any, ...], reason: str | None = None) -> int:
    """nack through the pgque.message overload, built from the received row."""
    return int(
        one(
            conn,
            "select pgque.nack(%s, row(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)::pgque.message,"
            " '0 seconds', %s)",
            msg[1], *msg, reason,
        )
    )  # fmt: skip


def cycle(conn: psycopg.Connection[Any], queue: str) -> None:
    """After nack + ack: move the retry back and tick, as the SDK ticker would."""
    one(conn, "select pgque.maint()")
    tick(conn, queue)


def test_retry_count_grows_then_dead_letter(conn: psycopg.Connection[Any], queue: str) -> None:
    one(conn, "select pgque.set_queue_config('q', 'max_retries', '2')")
    ev_id = one(conn, "select pgque.send('q', 'job', '{\"n\": 1}', 'x1', null, null, null)")
    tick(conn, queue)
    for expected in (None, 1):
        msg = receive_one(conn)
        assert (msg[0], msg[4]) == (ev_id, expected)
        assert nack(conn, msg) == 1
        one(conn, "select pgque.ack(%s)", msg[1])
        cycle(conn, queue)
    msg = receive_one(conn)
    assert msg[4] == 2
    assert nack(conn, msg, "gave up") == 1
    one(conn, "select pgque.ack(%s)", msg[1])
    cycle(conn, queue)
    assert rows(conn, "select * from pgque.receive('q', 'c')") == []
    dead = rows(
        conn,
        "select ev_id, ev_retry, ev_type, ev_data, ev_extra1, dl_reason, ev_txid is not null"
        " from pgque.dlq_inspect('q')",
    )
    assert dead == [(ev_id, 2, "job", '{"n": 1}', "x1", "gave up", True)]


def test_default_max_retries_is_five(conn: psycopg.Connection[Any], queue: str) -> None:
    one(conn, "select pgque.send('q', 'x')")
    tick(conn, queue)
    deliveries = 0
    while msgs := rows(conn, "select * from pgque.receive('q', 'c')"):
        deliveries += 1
        nack(conn, msgs[0])
        one(conn, "select pgque.ack(%s)", msgs[0][1])
        cycle(conn, queue)
    assert deliveries == 6
    assert one(conn, "select dl_reason from pgque.dead_letter") == "max retries exceeded"


def test_zero_max_retries_dead_letters_at_once(conn: psycopg.Connection[Any], queue: str) -> None:
    one(conn, "select pgque.set_queue_config('q', 'max_retries', '0')")
    one(conn, "select pgque.send('q', 'x')")
    tick(conn, queue)
    msg = receive_one(conn)
    nack(conn, msg)
    assert one(conn, "select count(*) from pgque.dead_letter") == 1
    assert one(conn, "select count(*) from pgque.retry_queue") == 0


def test_forged_message_fields_change_nothing(conn: psycopg.Connection[Any], queue: str) -> None:
    one(conn, "select pgque.set_queue_config('q', 'max_retries', '2')")
    one(conn, "select pgque.send('q', 'real')")
    tick(conn, queue)
    msg = list(receive_one(conn))
    msg[3] = "forged payload"
    msg[4] = 99  # a forged retry count must not dead-letter it
    nack(conn, tuple(msg))
    assert one(conn, "select count(*) from pgque.dead_letter") == 0
    assert rows(conn, "select ev_data, ev_retry from pgque.retry_queue") == [("real", 1)]


def test_repeated_nack_is_a_no_op(conn: psycopg.Connection[Any], queue: str) -> None:
    one(conn, "select pgque.send('q', 'x')")
    tick(conn, queue)
    msg = receive_one(conn)
    assert nack(conn, msg) == 1
    assert nack(conn, msg) == 1
    assert one(conn, "select count(*) from pgque.retry_queue") == 1
    # The batch stays open until ack.
    assert one(conn, "select sub_batch from pgque.subscription") == msg[1]


def test_nack_by_id_and_errors(conn: psycopg.Connection[Any], queue: str) -> None:
    one(conn, "select pgque.send('q', 'x')")
    tick(conn, queue)
    msg = receive_one(conn)
    assert one(conn, "select pgque.nack(%s, %s::bigint)", msg[1], msg[0]) == 1
    with pytest.raises(RAISE, match=f"msg_id 424242 not found in batch {msg[1]}"):
        conn.execute("select pgque.nack(%s, 424242::bigint)", (msg[1],))
    with pytest.raises(RAISE, match=f"msg_id <NULL> not found in batch {msg[1]}"):
        conn.execute("select pgque.nack(%s, null::bigint)", (msg[1],))
    with pytest.raises(RAISE, match="retry_after must be a non-negative interval"):
        conn.execute("select pgque.nack(%s, %s::bigint, '-1 second')", (msg[1], msg[0]))
    one(conn, "select pgque.ack(%s)", msg[1])
    with pytest.raises(RAISE, match=f"batch not found: {msg[1]}"):
        conn.execute("select pgque.nack(%s, %s::bigint)", (msg[1], msg[0]))


def test_retry_after_delays_redelivery(conn: psycopg.Connection[Any], queue: str) -> None:
    one(conn, "select pgque.send('q', 'x')")
    tick(conn, queue)
    msg = receive_one(conn)
    one(conn, "select pgque.nack(%s, %s::bigint, '1 hour')", msg[1], msg[0])
    one(conn, "select pgque.ack(%s)", msg[1])
    cycle(conn, queue)
    assert rows(conn, "select * from pgque.receive('q', 'c')") == []
    assert one(conn, "select ev_retry_after > now() + interval '59 minutes' from pgque.retry_queue")


def dead_letter_one(conn: psycopg.Connection[Any], queue: str, payload: str) -> int:
    one(conn, "select pgque.set_queue_config('q', 'max_retries', '0')")
    one(conn, "select pgque.send('q', 'job', %s, 'e1', 'e2', null, null)", payload)
    tick(conn, queue)
    msg = receive_one(conn)
    nack(conn, msg)
    one(conn, "select pgque.ack(%s)", msg[1])
    return int(one(conn, "select max(dl_id) from pgque.dead_letter"))


def test_dlq_replay(conn: psycopg.Connection[Any], queue: str) -> None:
    dl_id = dead_letter_one(conn, queue, "p1")
    new_id = one(conn, "select pgque.dlq_replay(%s)", dl_id)
    assert one(conn, "select count(*) from pgque.dead_letter") == 0
    tick(conn, queue)
    msg = receive_one(conn)
    assert (msg[0], msg[2], msg[3], msg[4], msg[6], msg[7]) == (
        new_id,
        "job",
        "p1",
        None,
        "e1",
        "e2",
    )
    with pytest.raises(RAISE, match=f"dead letter entry not found: {dl_id}"):
        conn.execute("select pgque.dlq_replay(%s)", (dl_id,))


def test_concurrent_replays_make_one_event(
    connect: Any, conn: psycopg.Connection[Any], queue: str
) -> None:
    dl_id = dead_letter_one(conn, queue, "once")
    first = connect(autocommit=False)
    one(first, "select pgque.dlq_replay(%s)", dl_id)
    second = connect()
    pid = one(second, "select pg_backend_pid()")
    errors: list[BaseException] = []

    def replay() -> None:
        try:
            second.execute("select pgque.dlq_replay(%s)", (dl_id,))
        except psycopg.Error as exc:
            errors.append(exc)

    waiter = threading.Thread(target=replay)
    waiter.start()
    for _ in range(500):
        if one(conn, "select wait_event_type = 'Lock' from pg_stat_activity where pid = %s", pid):
            break
        threading.Event().wait(0.01)
    first.commit()
    waiter.join(10)
    assert len(errors) == 1 and "dead letter entry not found" in str(errors[0])
    assert one(conn, "select count(*) from pgque.event_template where ev_data = 'once'") == 2


def test_dlq_replay_all_and_purge(conn: psycopg.Connection[Any], queue: str) -> None:
    dead_letter_one(conn, queue, "a")
    dead_letter_one(conn, queue, "b")
    assert rows(conn, "select * from pgque.dlq_replay_all('q')") == [(2, 0, None)]
    tick(conn, queue)
    replayed = rows(conn, "select batch_id, payload from pgque.receive('q', 'c')")
    assert [r[1] for r in replayed] == ["a", "b"]
    one(conn, "select pgque.ack(%s)", replayed[0][0])
    dead_letter_one(conn, queue, "c")
    assert one(conn, "select pgque.dlq_purge('q')") == 0
    conn.execute("update pgque.dead_letter set dl_time = now() - interval '31 days'")
    assert one(conn, "select pgque.dlq_purge('q')") == 1
    assert rows(conn, "select * from pgque.dlq_inspect('nope')") == []


def test_event_dead_is_idempotent(conn: psycopg.Connection[Any], queue: str) -> None:
    one(conn, "select pgque.send('q', 'x')")
    tick(conn, queue)
    msg = receive_one(conn)
    for _ in range(2):
        assert (
            one(
                conn,
                "select pgque.event_dead(%s, %s, 'manual', now(), null, 0, 't', 'd')",
                msg[1], msg[0],
            )
            == 1
        )  # fmt: skip
    assert one(conn, "select count(*) from pgque.dead_letter") == 1
    with pytest.raises(RAISE, match="batch not found: 424242"):
        conn.execute("select pgque.event_dead(424242, 1, 'r', now(), null, 0, 't', 'd')")


def test_dead_letters_go_with_queue_and_consumer(conn: psycopg.Connection[Any], queue: str) -> None:
    dead_letter_one(conn, queue, "x")
    one(conn, "select pgque.unsubscribe('q', 'c')")
    assert one(conn, "select count(*) from pgque.dead_letter") == 0
