"""Consumer names with ``#`` belong to pgque: no public function opens, closes,
registers or moves them.

A partition slot's subscription is named ``<consumer>#<slot>/<n>`` and is
consumed only by the worker holding the slot's lease (``receive_partitioned``,
``ack_partitioned`` ...). A reader who names that subscription in the plain
API (``next_batch('ps', 'pc#0/2')`` then ``finish_batch``) consumed the slot's
events outside the lease (issue 33, item 8). Every public function taking a
consumer name, or the id of a slot's batch, refuses now; reading functions
(``get_consumer_info``, ``get_batch_info``, the views) still show the slots.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from _engine import make_queue, one, rows, tick

Conn = psycopg.Connection[Any]

SLOT = "pc#0/2"
N = 2


@pytest.fixture
def slotted(conn: Conn) -> Conn:
    """Queue ``ps`` with a two-slot partitioned consumer ``pc`` (worker ``A`` holds
    slot 0), a cooperative group ``grp`` and six events in one ticked batch."""
    make_queue(conn, "ps")
    for slot in range(N):
        conn.execute("select pgque.subscribe_slot('ps', 'pc', %s, %s)", (slot, N))
    one(conn, "select pgque.register_subconsumer('ps', 'grp', 'w1')")
    assert one(conn, "select pgque.claim_slot('ps', 'pc', 0, 'A')") == 1
    for key in range(6):
        one(conn, "select pgque.send('ps', 't', %s::text, %s)", str(key), str(key))
    tick(conn, "ps")
    return conn


def slot_position(conn: Conn) -> tuple[Any, ...]:
    """The slot subscription's batch and position."""
    (row,) = rows(
        conn,
        "select s.sub_batch, s.sub_last_tick, s.sub_next_tick, s.sub_role"
        " from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer"
        " where c.co_name = %s",
        SLOT,
    )
    return row


def slot_keys(conn: Conn, slot: int) -> list[str]:
    """What the lease holder of ``slot`` receives and acks."""
    worker = "A" if slot == 0 else "B"
    if slot != 0:
        one(conn, "select pgque.claim_slot('ps', 'pc', %s, %s)", slot, worker)
    got = rows(
        conn,
        "select payload from pgque.receive_partitioned('ps', 'pc', %s, %s, %s)",
        slot,
        N,
        worker,
    )
    assert one(conn, "select pgque.ack_partitioned('ps', 'pc', %s, %s, %s)", slot, N, worker) == 1
    return sorted(p for (p,) in got)


def refused(conn: Conn, statement: str, code: str) -> psycopg.Error:
    with pytest.raises(psycopg.Error) as info:
        conn.execute(statement)
    assert info.value.diag.message_detail == f"pgque:{code}", (statement, str(info.value))
    return info.value


def test_a_reader_cannot_open_and_finish_a_slots_batch(slotted: Conn, login_as: Any) -> None:
    reader = login_as("reader")
    error = refused(reader, f"select pgque.next_batch('ps', '{SLOT}')", "partition_slot")
    assert "receive_partitioned" in str(error)
    assert slot_position(slotted)[0] is None
    # Both slots' workers get every event of their slot, together all six.
    zero, one_ = slot_keys(slotted, 0), slot_keys(slotted, 1)
    assert sorted(zero + one_) == [str(k) for k in range(6)]


def test_a_slots_open_batch_is_closed_only_by_its_lease_holder(
    slotted: Conn, login_as: Any
) -> None:
    got = rows(
        slotted, "select msg_id, batch_id from pgque.receive_partitioned('ps', 'pc', 0, 2, 'A')"
    )
    batch, msg = got[0][1], got[0][0]
    before = slot_position(slotted)
    reader, admin = login_as("reader"), login_as("admin")
    for who, statement in [
        (reader, f"select pgque.finish_batch({batch})"),
        (reader, f"select pgque.ack({batch})"),
        (reader, f"select pgque.event_retry({batch}, {msg}, 0)"),
        (reader, f"select pgque.event_retry({batch}, {msg}, now())"),
        (reader, f"select * from pgque.get_batch_events({batch})"),
        (reader, f"select pgque.nack({batch}, {msg}::bigint)"),
        (reader, f"select pgque.dead_letter_event({batch}, {msg}, 'x')"),
        (admin, f"select pgque.batch_retry({batch}, 0)"),
        (admin, f"select pgque.event_dead({batch}, {msg}, 'x', now(), null, 0, 't', 'd')"),
    ]:
        refused(who, statement, "partition_slot")
    assert slot_position(slotted) == before
    assert one(slotted, "select count(*) from pgque.retry_queue") == 0
    assert one(slotted, "select count(*) from pgque.dead_letter") == 0
    # Reading about the batch is still allowed.
    assert one(reader, f"select consumer_name from pgque.get_batch_info({batch})") == SLOT
    assert one(slotted, "select pgque.ack_partitioned('ps', 'pc', 0, 2, 'A')") == 1


# Every public function taking a consumer name, named with a reserved one:
# (role, statement, DETAIL code). The slot's subscription must not change.
BY_NAME = [
    ("reader", f"select pgque.next_batch('ps', '{SLOT}')", "partition_slot"),
    ("reader", f"select * from pgque.next_batch_info('ps', '{SLOT}')", "partition_slot"),
    (
        "reader",
        f"select * from pgque.next_batch_custom('ps', '{SLOT}', null, null, null)",
        "partition_slot",
    ),
    ("reader", f"select * from pgque.receive('ps', '{SLOT}')", "partition_slot"),
    ("reader", "select * from pgque.receive('ps', 'a#b')", "invalid_argument"),
    ("reader", f"select * from pgque.test_consume('ps', '{SLOT}', 't')", "partition_slot"),
    ("reader", f"select pgque.register_consumer('ps', '{SLOT}')", "invalid_argument"),
    ("reader", "select pgque.register_consumer('ps', 'new#1')", "invalid_argument"),
    (
        "reader",
        f"select pgque.register_consumer_at('ps', '{SLOT}', (select max(tick_id) from pgque.tick))",
        "invalid_argument",
    ),
    ("reader", f"select pgque.subscribe('ps', '{SLOT}')", "invalid_argument"),
    (
        "reader",
        f"select pgque.register_subconsumer('ps', '{SLOT}', 'w', true)",
        "invalid_argument",
    ),
    (
        "reader",
        f"select pgque.subscribe_subconsumer('ps', '{SLOT}', 'w', true)",
        "invalid_argument",
    ),
    ("reader", "select pgque.register_subconsumer('ps', 'grp', 'w#2')", "invalid_argument"),
    ("reader", f"select pgque.next_batch('ps', '{SLOT}', 'w')", "invalid_argument"),
    ("reader", "select pgque.next_batch('ps', 'grp', 'w#1')", "invalid_argument"),
    (
        "reader",
        f"select * from pgque.next_batch_custom('ps', '{SLOT}', 'w', null, null, null)",
        "invalid_argument",
    ),
    ("reader", f"select * from pgque.receive_coop('ps', '{SLOT}', 'w')", "invalid_argument"),
    ("reader", f"select pgque.spark_start_tick('ps', '{SLOT}', 'latest')", "invalid_argument"),
    ("reader", f"select pgque.spark_start_tick('ps', '{SLOT}')", "invalid_argument"),
    (
        "reader",
        f"select pgque.spark_advance('ps', '{SLOT}', (select max(tick_id) from pgque.tick))",
        "invalid_argument",
    ),
    (
        "admin",
        f"select pgque.event_retry_raw('ps', '{SLOT}', now(), null, now(), 0, 't', 'd',"
        " null, null, null, null)",
        "invalid_argument",
    ),
]


@pytest.mark.parametrize(("role", "statement", "code"), BY_NAME, ids=[s for _, s, _ in BY_NAME])
def test_every_function_taking_a_consumer_name_refuses_a_reserved_one(
    slotted: Conn, login_as: Any, role: str, statement: str, code: str
) -> None:
    before = slot_position(slotted)
    refused(login_as(role), statement, code)
    assert slot_position(slotted) == before
    assert one(slotted, "select count(*) from pgque.consumer where co_name like '%%#%%'") == N
    assert one(slotted, "select count(*) from pgque.retry_queue") == 0
    assert sorted(slot_keys(slotted, 0) + slot_keys(slotted, 1)) == [str(k) for k in range(6)]


def test_unregistering_a_slot_by_name_removes_the_slot(slotted: Conn, login_as: Any) -> None:
    """unregister_consumer of a slot's name (drop_queue's force path among others)
    removes it as unsubscribe_slot does: subscription, lease row and all."""
    reader = login_as("reader")
    assert one(reader, f"select pgque.unregister_consumer('ps', '{SLOT}')") == 1
    assert rows(slotted, "select slot from pgque.partition_slot order by slot") == [(1,)]
    assert one(reader, f"select pgque.unsubscribe('ps', '{SLOT}')") == 0
    assert one(slotted, "select pgque.drop_queue('ps', true)") == 1


def test_reading_functions_still_show_slots(slotted: Conn, login_as: Any) -> None:
    reader = login_as("reader")
    names = {r[0] for r in rows(reader, "select consumer_name from pgque.get_consumer_info('ps')")}
    assert {SLOT, "pc#1/2"} <= names
    assert one(reader, f"select count(*) from pgque.get_consumer_info('ps', '{SLOT}')") == 1
