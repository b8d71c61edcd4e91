"""Upstream PgQue's behaviour where it differs from PgQ's or ours before it.

Partition-slot leases (claimed, renewed and fenced by the wall clock),
``partition_slot_status``, ``touch_subconsumer``'s clock and the legacy
``next_batch`` of a cooperative group without members. Concurrency is shown
with two connections.
"""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest

from _engine import make_queue, one, rows, tick

RAISE = psycopg.errors.RaiseException
Conn = psycopg.Connection[Any]


@pytest.fixture
def slots(conn: Conn) -> str:
    """Queue q with partitioned consumer w of three slots, 0 and 1 subscribed."""
    make_queue(conn, "q")
    for slot in (0, 1):
        conn.execute("select pgque.subscribe_slot('q', 'w', %s, 3)", (slot,))
    return "q"


def lease(conn: Conn, slot: int = 0) -> tuple[Any, ...]:
    """(owner, until, ttl, epoch) of a slot's lease row."""
    (row,) = rows(
        conn,
        "select lease_owner, lease_until, lease_ttl, epoch from pgque.partition_slot"
        " where co_name = 'w' and slot = %s",
        slot,
    )
    return row


def expire(conn: Conn, slot: int = 0) -> None:
    """Move a lease's end into the past (only the owner can write the table)."""
    conn.execute(
        "update pgque.partition_slot set lease_until = clock_timestamp() - interval '1 second'"
        " where co_name = 'w' and slot = %s",
        (slot,),
    )


# -- claim_slot -----------------------------------------------------------------


def test_a_live_lease_of_another_worker_gives_null_and_changes_nothing(
    conn: Conn, slots: str
) -> None:
    assert one(conn, "select pgque.claim_slot('q', 'w', 0, 'A')") == 1
    before = lease(conn)
    assert one(conn, "select pgque.claim_slot('q', 'w', 0, 'B', '1 hour')") is None
    assert lease(conn) == before
    # The caller moves on to a free slot.
    assert one(conn, "select pgque.claim_slot('q', 'w', 1, 'B')") == 1


def test_the_owner_renews_with_the_same_epoch_even_after_expiry(conn: Conn, slots: str) -> None:
    assert one(conn, "select pgque.claim_slot('q', 'w', 0, 'A')") == 1
    expire(conn)
    assert one(conn, "select pgque.claim_slot('q', 'w', 0, 'A', '2 minutes')") == 1
    owner, until, ttl, epoch = lease(conn)
    assert (owner, str(ttl), epoch) == ("A", "0:02:00", 1)
    assert one(conn, "select %s > clock_timestamp() + interval '1 minute'", until)


def test_an_expired_lease_is_taken_over_with_the_next_epoch(conn: Conn, slots: str) -> None:
    assert one(conn, "select pgque.claim_slot('q', 'w', 0, 'A')") == 1
    expire(conn)
    assert one(conn, "select pgque.claim_slot('q', 'w', 0, 'B')") == 2
    assert lease(conn)[0] == "B"
    # Release keeps the epoch; the next holder gets the one after.
    assert one(conn, "select pgque.release_slot('q', 'w', 0, 'B')") is True
    assert lease(conn)[3] == 2
    assert one(conn, "select pgque.claim_slot('q', 'w', 0, 'A')") == 3


def test_expiry_and_renewal_follow_the_wall_clock_inside_one_transaction(
    conn: Conn, slots: str
) -> None:
    with conn.transaction():
        assert one(conn, "select pgque.claim_slot('q', 'w', 0, 'A')") == 1
        # A lease ending after this transaction began but before now is
        # expired: the transaction's start time would still call it live.
        conn.execute(
            "update pgque.partition_slot set lease_until = clock_timestamp()"
            " where co_name = 'w' and slot = 0"
        )
        assert one(conn, "select pgque.claim_slot('q', 'w', 0, 'B')") == 2
        # Each call moves the lease forward, later in the same transaction too.
        first = lease(conn)[1]
        rows(conn, "select * from pgque.receive_partitioned('q', 'w', 0, 3, 'B')")
        second = lease(conn)[1]
        one(conn, "select pgque.ack_partitioned('q', 'w', 0, 3, 'B')")
        third = lease(conn)[1]
        assert first < second < third


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ("'q', 'w', 0, ''", "worker id must not be empty"),
        ("'q', 'w', 0, 'A', '0.5 seconds'", "lease ttl must be >= 1 second"),
        ("'nope', 'w', 0, 'A'", "consumer w on queue nope is not a partitioned consumer"),
        ("'q', 'nobody', 0, 'A'", "consumer nobody on queue q is not a partitioned consumer"),
        ("'q', 'w', 3, 'A'", r"slot 3 of consumer w on queue q is out of range 0\.\.2"),
        ("'q', 'w', null, 'A'", r"slot NULL of consumer w on queue q is out of range"),
        ("'q', 'w', 2, 'A'", "slot 2 of consumer w on queue q is not subscribed"),
    ],
)
def test_claim_slot_checks_in_upstream_order(
    conn: Conn, slots: str, args: str, message: str
) -> None:
    with pytest.raises(RAISE, match=message) as caught:
        conn.execute(f"select pgque.claim_slot({args})")
    if "nope" in args:  # upstream's text; the code still tells the missing queue
        assert caught.value.diag.message_detail == "pgque:queue_not_found"


def test_a_second_worker_waiting_on_the_lock_sees_the_committed_lease(
    connect: Any, slots: str
) -> None:
    first, second = connect(), connect()
    results: list[Any] = []
    with first.transaction():
        assert one(first, "select pgque.claim_slot('q', 'w', 0, 'A')") == 1
        waiter = threading.Thread(
            target=lambda: results.append(one(second, "select pgque.claim_slot('q', 'w', 0, 'B')"))
        )
        waiter.start()
        waiter.join(0.2)
        assert waiter.is_alive(), "B's claim must wait for A's row lock"
    waiter.join(10)
    assert results == [None]
    assert lease(first)[0] == "A"


# -- the lease guard of receive / ack / nack ---------------------------------------


def test_the_guard_fences_every_other_worker_and_renews_the_owner(conn: Conn, slots: str) -> None:
    with pytest.raises(RAISE, match="slot 0 of consumer w on queue q is not leased"):
        rows(conn, "select * from pgque.receive_partitioned('q', 'w', 0, 3, 'A')")
    assert one(conn, "select pgque.claim_slot('q', 'w', 0, 'A')") == 1
    expire(conn)
    # An expired owner is still the owner: others are fenced, not told "not leased".
    for call in (
        "select * from pgque.receive_partitioned('q', 'w', 0, 3, 'B')",
        "select pgque.ack_partitioned('q', 'w', 0, 3, 'B')",
    ):
        with pytest.raises(RAISE, match="held by worker A, not B; fenced"):
            conn.execute(call)
    # The owner's own call renews its expired lease by the stored ttl.
    rows(conn, "select * from pgque.receive_partitioned('q', 'w', 0, 3, 'A')")
    assert one(
        conn,
        "select lease_until > clock_timestamp() + interval '20 seconds' from pgque.partition_slot"
        " where co_name = 'w' and slot = 0",
    )
    # A wrong slot count is reported before the lease.
    with pytest.raises(RAISE, match="pinned n=3, caller passed n=2"):
        rows(conn, "select * from pgque.receive_partitioned('q', 'w', 0, 2, 'B')")


def test_nack_without_an_open_batch_says_so(conn: Conn, slots: str) -> None:
    one(conn, "select pgque.claim_slot('q', 'w', 0, 'A')")
    one(conn, "select pgque.send('q', 't', 'x', null)")
    tick(conn, "q")
    (msg,) = rows(conn, "select m from pgque.receive_partitioned('q', 'w', 0, 3, 'A') m")
    assert one(conn, "select pgque.ack_partitioned('q', 'w', 0, 3, 'A')") == 1
    with pytest.raises(RAISE, match="slot 0 of consumer w on queue q has no open batch to nack"):
        conn.execute("select pgque.nack_partitioned('q', 'w', 0, 3, 'A', %s)", (msg[0],))


# -- release_slot, unsubscribe_slot ------------------------------------------------


def test_release_slot(conn: Conn, slots: str) -> None:
    for args in ("'nope', 'w', 0, 'A'", "'q', 'nobody', 0, 'A'", "'q', 'w', 2, 'A'"):
        with pytest.raises(RAISE, match="is not subscribed"):
            conn.execute(f"select pgque.release_slot({args})")
    assert one(conn, "select pgque.release_slot('q', 'w', 0, 'A')") is False  # nobody holds it
    one(conn, "select pgque.claim_slot('q', 'w', 0, 'A')")
    assert one(conn, "select pgque.release_slot('q', 'w', 0, 'B')") is False
    assert one(conn, "select pgque.release_slot('q', 'w', 0, null)") is False
    assert lease(conn)[0] == "A"
    expire(conn)
    assert one(conn, "select pgque.release_slot('q', 'w', 0, 'A')") is True
    assert lease(conn) == (None, None, None, 1)


def test_unsubscribe_slot_of_nothing_partitioned_is_a_no_op(conn: Conn, slots: str) -> None:
    conn.execute("select pgque.unsubscribe_slot('nope', 'w', 0)")
    conn.execute("select pgque.unsubscribe_slot('q', 'nobody', 0)")
    assert one(conn, "select count(*) from pgque.partition_slot") == 2


# -- partition_slot_status ----------------------------------------------------------


def test_status_lists_every_slot_and_masks_expired_owners(conn: Conn, slots: str) -> None:
    one(conn, "select pgque.claim_slot('q', 'w', 0, 'A')")
    one(conn, "select pgque.claim_slot('q', 'w', 1, 'B')")
    expire(conn, 1)
    for _ in range(3):
        one(conn, "select pgque.send('q', 't', 'x', null)")
    tick(conn, "q")
    got = rows(
        conn,
        "select slot, n, lease_owner, lease_until is not null, epoch, pending_events"
        " from pgque.partition_slot_status where queue_name = 'q' and consumer = 'w'"
        " order by slot",
    )
    # Slot 2 was never subscribed: listed with no lease, epoch 0, nothing pending.
    assert [row[:5] for row in got] == [
        (0, 3, "A", True, 1),
        (1, 3, None, True, 1),
        (2, 3, None, False, 0),
    ]
    assert got[0][5] > 0 and got[1][5] > 0
    assert got[2][5] == 0
    assert one(conn, "select min(pending_events) >= 0 from pgque.partition_slot_status")


# -- cooperative consumers ----------------------------------------------------------


def test_touch_subconsumer_uses_the_wall_clock(conn: Conn) -> None:
    make_queue(conn, "q")
    with pytest.raises(RAISE, match="cooperative subconsumer name must not contain dot"):
        conn.execute("select pgque.touch_subconsumer('no such queue', 'g', 'a.b')")
    with conn.transaction():
        one(conn, "select pgque.register_subconsumer('q', 'g', 's1')")
        active = "select sub_active from pgque.subscription s join pgque.consumer c" \
            " on c.co_id = s.sub_consumer where c.co_name = 'g.s1'"  # fmt: skip
        registered = one(conn, active)
        assert one(conn, "select pgque.touch_subconsumer('q', 'g', 's1')") == 1
        touched = one(conn, active)
        assert one(conn, "select pgque.touch_subconsumer('q', 'g', 's1')") == 1
        assert registered < touched < one(conn, active)
    assert one(conn, "select pgque.touch_subconsumer('q', 'g', 'nobody')") == 0


def test_legacy_next_batch_of_a_group_without_members_opens_nothing(conn: Conn) -> None:
    make_queue(conn, "q")
    one(conn, "select pgque.register_subconsumer('q', 'g', 's1')")
    # Made by hand: pgque turns a group whose last member leaves back into a
    # normal consumer, but upstream keeps it, and a database may hold one.
    conn.execute(
        "delete from pgque.subscription where sub_role = 'coop_member';"
        " delete from pgque.consumer where co_name = 'g.s1'"
    )
    one(conn, "select pgque.send('q', 't', 'x')")
    tick(conn, "q")
    assert one(conn, "select pgque.next_batch('q', 'g')") is None
    assert rows(conn, "select * from pgque.next_batch_info('q', 'g')") == [(None,) * 7]
    assert rows(conn, "select * from pgque.receive('q', 'g')") == []
    assert (
        one(
            conn,
            "select count(*) from pgque.subscription where sub_role = 'coop_main'"
            " and sub_batch is null",
        )
        == 1
    )
    # With a member, the legacy call is refused as before.
    one(conn, "select pgque.register_subconsumer('q', 'g', 's2')")
    with pytest.raises(RAISE, match="is a cooperative main consumer"):
        conn.execute("select pgque.next_batch('q', 'g')")
