"""Consumers with ``partitions=``: slots claimed by lease, worked in turn, taken over.

Every test runs against both twins. Slots are subscribed in SQL before the
messages are sent (a slot starts at the tick current when it is subscribed);
lease expiry is driven by moving ``lease_until`` into the past.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any

import psycopg
import pytest
from twins import force_tick, handle, make

import pgque
from _engine import make_queue, one, rows
from _wait import wait_for

Conn = psycopg.Connection[Any]


def slotted_queue(conn: Conn, n: int) -> None:
    """Queue q with partitioned consumer w of ``n`` slots, all subscribed."""
    make_queue(conn, "q")
    for slot in range(n):
        conn.execute("select pgque.subscribe_slot('q', 'w', %s, %s)", (slot, n))


def send_keyed(conn: Conn, count: int, keys: int = 5) -> None:
    for i in range(count):
        one(conn, "select pgque.send('q', 't', %s, %s)", str(i), f"key-{i % keys}")
    force_tick(conn)


def owners(conn: Conn) -> dict[int, str | None]:
    """Each slot's live lease owner."""
    return dict(rows(conn, "select slot, lease_owner from pgque.partition_slot_status"))


class Seen:
    """What the handlers saw, thread-safe: payloads per key, and by whom."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_key: dict[str | None, list[int]] = defaultdict(list)
        self.by_worker: dict[str, int] = defaultdict(int)

    def handler(self, worker: str) -> Any:
        def record(msg: pgque.Message) -> None:
            with self.lock:
                self.by_key[msg.extra1].append(int(msg.payload))
                self.by_worker[worker] += 1

        return record

    def count(self) -> int:
        with self.lock:
            return sum(len(p) for p in self.by_key.values())


def test_one_worker_works_every_slot_in_key_order(
    kind: str, db: str, conn: Conn, start: Any
) -> None:
    slotted_queue(conn, 3)
    send_keyed(conn, 30)
    consumer = make(kind, db, name="w", partitions=3, worker_id="A", poll_interval=0.1)
    seen = Seen()
    handle(consumer, seen.handler("A"))
    start(consumer)
    wait_for(lambda: seen.count() == 30, what="all 30 messages handled")
    assert sorted(p for ps in seen.by_key.values() for p in ps) == list(range(30))
    for payloads in seen.by_key.values():
        assert payloads == sorted(payloads)
    assert owners(conn) == {0: "A", 1: "A", 2: "A"}
    wait_for(
        lambda: one(conn, "select count(*) from pgque.subscription where sub_batch is null") == 3,
        what="every slot's batch acked",
    )


def test_two_workers_share_the_slots_and_each_message_once(
    kind: str, db: str, conn: Conn, start: Any
) -> None:
    slotted_queue(conn, 4)
    send_keyed(conn, 40, keys=8)
    seen = Seen()
    for worker in ("A", "B"):
        consumer = make(kind, db, name="w", partitions=4, max_slots=2, worker_id=worker,
                        poll_interval=0.1)  # fmt: skip
        handle(consumer, seen.handler(worker))
        start(consumer)
    wait_for(lambda: seen.count() == 40, what="all 40 messages handled")
    assert sorted(p for ps in seen.by_key.values() for p in ps) == list(range(40))
    held = list(owners(conn).values())
    assert sorted(held) == ["A", "A", "B", "B"]


def test_slots_of_a_stopped_worker_are_taken_over(
    kind: str, db: str, conn: Conn, start: Any
) -> None:
    slotted_queue(conn, 2)
    first = make(kind, db, name="w", partitions=2, worker_id="A", poll_interval=0.1)
    handle(first, lambda msg: None)
    running = start(first)
    wait_for(lambda: owners(conn) == {0: "A", 1: "A"}, what="A holds both slots")
    running.stop()
    assert running.outcome(10) is None
    # A's leases run out (driven here): B claims both, with the next epoch.
    conn.execute("update pgque.partition_slot set lease_until = clock_timestamp() - interval '1s'")
    send_keyed(conn, 10)
    seen = Seen()
    second = make(kind, db, name="w", partitions=2, worker_id="B", poll_interval=0.1)
    handle(second, seen.handler("B"))
    start(second)
    wait_for(lambda: seen.count() == 10, what="B handles the 10 messages")
    assert rows(conn, "select slot, lease_owner, epoch from pgque.partition_slot_status") == [
        (0, "B", 2),
        (1, "B", 2),
    ]


def test_a_worker_fenced_off_a_slot_moves_to_a_free_one(
    kind: str, db: str, conn: Conn, start: Any
) -> None:
    slotted_queue(conn, 2)
    consumer = make(kind, db, name="w", partitions=2, max_slots=1, worker_id="A",
                    poll_interval=0.1)  # fmt: skip
    seen = Seen()
    handle(consumer, seen.handler("A"))
    start(consumer)
    [slot] = wait_for(
        lambda: [s for s, o in owners(conn).items() if o == "A"], what="A claims a slot"
    )
    # Another worker takes A's slot over; A's next receive there is fenced.
    # Expiry and takeover in one transaction: the row lock keeps A's own
    # renewal (every poll) from slipping in between.
    with conn.transaction():
        conn.execute(
            "update pgque.partition_slot set lease_until = clock_timestamp() - interval '1s'"
            " where slot = %s",
            (slot,),
        )
        assert one(conn, "select pgque.claim_slot('q', 'w', %s, 'X')", slot) is not None
    send_keyed(conn, 20)
    wait_for(lambda: owners(conn) == {slot: "X", 1 - slot: "A"}, what="A moves to the other slot")
    # A handles the other slot's share, and nothing of X's slot.
    share = [
        i
        for i in range(20)
        if one(conn, "select pgque._partition_slot(%s, 2)", f"key-{i % 5}") == 1 - slot
    ]
    assert share, "the test needs keys in both slots"
    wait_for(lambda: seen.count() == len(share), what="A handles its new slot's messages")
    assert sorted(p for ps in seen.by_key.values() for p in ps) == share


def test_a_worker_does_not_wait_for_a_slot_busy_with_another_workers_batch(
    kind: str, db: str, conn: Conn, start: Any
) -> None:
    slotted_queue(conn, 2)
    keys = {one(conn, "select pgque._partition_slot(%s, 2)", f"key-{i}"): f"key-{i}"
            for i in range(10)}  # fmt: skip
    assert set(keys) == {0, 1}
    one(conn, "select pgque.send('q', 't', '1', %s)", keys[0])
    force_tick(conn)
    entered, proceed = threading.Event(), threading.Event()

    def slow(msg: pgque.Message) -> None:
        entered.set()
        assert proceed.wait(20)

    first = make(kind, db, name="w", partitions=2, max_slots=1, worker_id="A",
                 poll_interval=0.1)  # fmt: skip
    handle(first, slow)
    conn.execute("select pgque.claim_slot('q', 'w', 0, 'A')")  # A works slot 0
    start(first)
    assert entered.wait(10)
    # A's batch holds slot 0's row lock. B claims slot 1 and works it meanwhile.
    one(conn, "select pgque.send('q', 't', '2', %s)", keys[1])
    force_tick(conn)
    seen = Seen()
    second = make(kind, db, name="w", partitions=2, worker_id="B", poll_interval=0.1)
    handle(second, seen.handler("B"))
    start(second)
    try:
        wait_for(lambda: seen.count() == 1, what="B handles slot 1 while A's batch is open")
    finally:
        proceed.set()
    assert dict(seen.by_key) == {keys[1]: [2]}


def test_nack_and_dead_letter_go_through_the_slot(
    kind: str, db: str, conn: Conn, start: Any
) -> None:
    slotted_queue(conn, 1)
    one(conn, "select pgque.send('q', 'retry', 'r', 'k')")
    one(conn, "select pgque.send('q', 'poison', 'p', 'k')")
    force_tick(conn)
    consumer = make(kind, db, name="w", partitions=1, worker_id="A", poll_interval=0.1,
                    retry_after=3600)  # fmt: skip

    def work(msg: pgque.Message) -> None:
        if msg.type == "poison":
            msg.dead_letter("cannot parse")
        else:
            raise RuntimeError("try later")

    handle(consumer, work)
    start(consumer)
    wait_for(
        lambda: (
            one(conn, "select count(*) from pgque.dead_letter") == 1
            and one(conn, "select count(*) from pgque.retry_queue") == 1
        ),
        what="one dead letter and one retry",
    )
    assert rows(conn, "select ev_type, dl_reason from pgque.dead_letter") == [
        ("poison", "cannot parse")
    ]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"partitions": 2, "subconsumer": "s"}, "exclude each other"),
        ({"partitions": 2, "max_messages": 10}, "max_messages cannot be combined"),
        ({"max_slots": 2}, "need partitions="),
        ({"worker_id": "A"}, "need partitions="),
        ({"partitions": 0}, "partitions must be an integer >= 1"),
        ({"partitions": 2, "max_slots": 0}, "max_slots must be an integer >= 1"),
        ({"partitions": 2, "lease_ttl": 0.5}, "lease_ttl must be at least 1 second"),
        ({"partitions": 2, "worker_id": ""}, "worker_id must be a non-empty string"),
    ],
)
def test_bad_partition_options_are_refused(
    kind: str, db: str, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        make(kind, db, name="w", **options)


def test_a_partitioned_consumer_polls_within_a_third_of_its_lease(kind: str, db: str) -> None:
    assert make(kind, db, name="w", partitions=2, lease_ttl=6).wait_interval == 2
    assert make(kind, db, name="w", poll_interval=30).wait_interval == 30


def test_the_client_slot_calls(conn: Conn, db: str) -> None:
    slotted_queue(conn, 2)
    one(conn, "select pgque.send('q', 't', 'x', 'key-1')")
    force_tick(conn)
    slot = one(conn, "select pgque._partition_slot('key-1', 2)")
    with pgque.connect(db, autocommit=True) as client:
        assert client.claim_slot("q", "w", slot, "A", 60) == 1
        assert client.claim_slot("q", "w", slot, "B") is None
        [msg] = client.receive_partitioned("q", "w", slot, 2, "A")
        assert msg.payload == "x"
        with pytest.raises(pgque.PgqueFenced):
            client.ack_partitioned("q", "w", slot, 2, "B")
        assert client.nack_partitioned("q", "w", slot, 2, "A", msg, retry_after=5) == 1
        assert client.ack_partitioned("q", "w", slot, 2, "A") == 1
        assert client.release_slot("q", "w", slot, "B") is False
        assert client.release_slot("q", "w", slot, "A") is True
        client.unsubscribe_slot("q", "w", 1 - slot)
        client.subscribe_slot("q", "w", 1 - slot, 2)
    assert one(conn, "select count(*) from pgque.retry_queue") == 1
