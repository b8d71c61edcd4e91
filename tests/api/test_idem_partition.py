"""Idempotent send and partition keys."""

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
    return "q"


def send_idem(
    conn: psycopg.Connection[Any], key: str | None, ttl: str = "1 hour"
) -> tuple[Any, ...]:
    (row,) = rows(
        conn, "select * from pgque.send_idem('q', 't', 'body', %s, %s::interval, 'pk')", key, ttl
    )
    return row


def test_send_idem_dedupes_within_ttl(conn: psycopg.Connection[Any], queue: str) -> None:
    event_id, deduped = send_idem(conn, "k1")
    assert deduped is False
    assert send_idem(conn, "k1") == (event_id, True)
    assert rows(
        conn, "select ev_extra1, ev_extra2 from pgque.event_template where ev_id = %s", event_id
    ) == [("pk", None)]  # the key stays with pgque.idem, as a digest
    assert one(conn, "select count(*) from pgque.event_template") == 1
    # After expiry the key is usable again.
    conn.execute("update pgque.idem set expires_at = now() - interval '1 second'")
    new_id, deduped = send_idem(conn, "k1")
    assert deduped is False and new_id != event_id


def test_send_idem_bad_input(conn: psycopg.Connection[Any], queue: str) -> None:
    with pytest.raises(RAISE, match="idem_key must not be null"):
        send_idem(conn, None)
    for ttl in ("0", "-1 second"):
        with pytest.raises(RAISE, match="ttl must be a positive interval"):
            send_idem(conn, "k", ttl)
    with pytest.raises(RAISE, match="queue not found: nope"):
        conn.execute("select * from pgque.send_idem('nope', 't', 'b', 'k')")
    assert one(conn, "select count(*) from pgque.idem") == 0


@pytest.mark.parametrize("first_commits", [True, False])
def test_concurrent_send_idem_of_one_key(
    connect: Any, conn: psycopg.Connection[Any], queue: str, first_commits: bool
) -> None:
    first = connect(autocommit=False)
    first_id, _ = send_idem(first, "shared")
    second = connect()
    pid = one(second, "select pg_backend_pid()")
    result: list[tuple[Any, ...]] = []
    waiter = threading.Thread(target=lambda: result.append(send_idem(second, "shared")))
    waiter.start()
    for _ in range(500):
        if one(conn, "select wait_event_type = 'Lock' from pg_stat_activity where pid = %s", pid):
            break
        threading.Event().wait(0.01)
    else:
        pytest.fail("the second send_idem never waited for the first")
    if first_commits:
        first.commit()
    else:
        first.rollback()
    waiter.join(10)
    if first_commits:
        assert result == [(first_id, True)]
    else:
        assert result[0][1] is False and result[0][0] != first_id
    assert one(conn, "select count(*) from pgque.event_template") == 1


def test_maint_reaps_expired_keys(conn: psycopg.Connection[Any], queue: str) -> None:
    send_idem(conn, "old")
    send_idem(conn, "young")
    assert rows(conn, "select queue_extra_maint from pgque.queue") == [(["pgque.maint_idem"],)]
    conn.execute("update pgque.idem set expires_at = now() - interval '1 minute'"
                 " where idem_key = pgque._idem_stored_key('old')")  # fmt: skip
    one(conn, "select pgque.maint()")
    assert rows(conn, "select idem_key = pgque._idem_stored_key('young') from pgque.idem") == [
        (True,)
    ]
    assert one(conn, "select pgque.maint_idem()") == 0


def test_partition_routing_and_order(conn: psycopg.Connection[Any], queue: str) -> None:
    n = 3
    for slot in range(n):
        conn.execute("select pgque.subscribe_slot('q', 'w', %s, %s)", (slot, n))
        assert one(conn, "select pgque.claim_slot('q', 'w', %s, %s)", slot, f"worker{slot}") == 1
    keys = [f"customer-{i % 5}" for i in range(30)] + [None]
    for i, key in enumerate(keys):
        one(conn, "select pgque.send('q', 't', %s, %s)", str(i), key)
    tick(conn, queue)
    seen: dict[str | None, list[int]] = {}
    for slot in range(n):
        msgs = rows(
            conn,
            "select payload, extra1 from pgque.receive_partitioned('q', 'w', %s, %s, %s)",
            slot, n, f"worker{slot}",
        )  # fmt: skip
        for payload, key in msgs:
            expected = (
                0 if key is None
                else one(conn, "select ((hashtextextended(%s, 0) %% %s + %s) %% %s)::int",
                         key, n, n, n)
            )  # fmt: skip
            assert expected == slot
            seen.setdefault(key, []).append(int(payload))
        assert one(conn, "select pgque.ack_partitioned('q', 'w', %s, %s, %s)", slot, n,
                   f"worker{slot}") == 1  # fmt: skip
    # Every message exactly once, each key's messages in send order.
    assert sorted(p for ps in seen.values() for p in ps) == list(range(len(keys)))
    for payloads in seen.values():
        assert payloads == sorted(payloads)
    assert one(conn, "select pgque.ack_partitioned('q', 'w', 0, 3, 'worker0')") == 0


def test_leases_fence_other_workers(conn: psycopg.Connection[Any], queue: str) -> None:
    conn.execute("select pgque.subscribe_slot('q', 'w', 0, 1)")
    with pytest.raises(RAISE, match="slot 0 of consumer w on queue q is not leased"):
        conn.execute("select * from pgque.receive_partitioned('q', 'w', 0, 1, 'A')")
    assert one(conn, "select pgque.claim_slot('q', 'w', 0, 'A')") == 1
    assert one(conn, "select pgque.claim_slot('q', 'w', 0, 'A')") == 1  # renewal
    assert one(conn, "select pgque.claim_slot('q', 'w', 0, 'B')") is None  # held: move on
    with pytest.raises(RAISE, match="held by worker A, not B; fenced"):
        conn.execute("select * from pgque.receive_partitioned('q', 'w', 0, 1, 'B')")
    # Expired: B takes over with the next epoch; A is fenced now.
    conn.execute("update pgque.partition_slot set lease_until = now() - interval '1 second'")
    assert one(conn, "select pgque.claim_slot('q', 'w', 0, 'B')") == 2
    with pytest.raises(RAISE, match="held by worker B, not A; fenced"):
        conn.execute("select pgque.ack_partitioned('q', 'w', 0, 1, 'A')")
    assert one(conn, "select pgque.release_slot('q', 'w', 0, 'A')") is False
    assert one(conn, "select pgque.release_slot('q', 'w', 0, 'B')") is True


def test_slot_count_is_pinned(conn: psycopg.Connection[Any], queue: str) -> None:
    conn.execute("select pgque.subscribe_slot('q', 'w', 0, 2)")
    with pytest.raises(RAISE, match="consumer w on queue q is pinned to n=2; got n=3"):
        conn.execute("select pgque.subscribe_slot('q', 'w', 1, 3)")
    one(conn, "select pgque.claim_slot('q', 'w', 0, 'A')")
    with pytest.raises(RAISE, match="pinned n=2, caller passed n=3"):
        conn.execute("select * from pgque.receive_partitioned('q', 'w', 0, 3, 'A')")
    with pytest.raises(RAISE, match=r"slot 2 of consumer w on queue q is out of range 0\.\.1"):
        conn.execute("select pgque.subscribe_slot('q', 'w', 2, 2)")
    conn.execute("select pgque.unsubscribe_slot('q', 'w', 0)")
    conn.execute("select pgque.subscribe_slot('q', 'w', 1, 3)")  # unpinned: any N again
    with pytest.raises(RAISE, match="is not a partitioned consumer"):
        conn.execute("select pgque.claim_slot('q', 'other', 0, 'A')")


def test_plain_api_refuses_slot_consumers(conn: psycopg.Connection[Any], queue: str) -> None:
    with pytest.raises(RAISE, match="must not contain the reserved character #: a#b"):
        conn.execute("select pgque.subscribe('q', 'a#b')")
    conn.execute("select pgque.subscribe_slot('q', 'w', 0, 1)")
    one(conn, "select pgque.claim_slot('q', 'w', 0, 'A')")
    one(conn, "select pgque.send('q', 't', 'x', null)")
    tick(conn, queue)
    with pytest.raises(RAISE, match=r"use pgque.receive_partitioned\(\)"):
        conn.execute("select * from pgque.receive('q', 'w#0/1')")
    (msg,) = rows(conn, "select * from pgque.receive_partitioned('q', 'w', 0, 1, 'A')")
    with pytest.raises(RAISE, match=r"use pgque.ack_partitioned\(\)"):
        conn.execute("select pgque.ack(%s)", (msg[1],))
    with pytest.raises(RAISE, match="nack_partitioned"):
        conn.execute("select pgque.nack(%s, %s::bigint)", (msg[1], msg[0]))
    assert (
        one(
            conn,
            "select pgque.nack_partitioned('q', 'w', 0, 1, 'A',"
            " (select m from pgque.receive_partitioned('q', 'w', 0, 1, 'A') m limit 1))",
        )
        == 1
    )
    assert one(conn, "select count(*) from pgque.retry_queue") == 1
    assert rows(
        conn, "select consumer, slot, n, lease_owner, epoch from pgque.partition_slot_status"
    ) == [("w", 0, 1, "A", 1)]
