"""Cooperative consumers: subconsumers sharing one consumer's stream."""

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


@pytest.fixture
def group(conn: psycopg.Connection[Any], queue: str) -> str:
    """Queue q with cooperative consumer g and members s1, s2 (registered before any send)."""
    for sub in ("s1", "s2"):
        one(conn, "select pgque.register_subconsumer('q', 'g', %s)", sub)
    return queue


def receive_coop(
    conn: psycopg.Connection[Any], sub: str, dead: str | None = None
) -> list[tuple[Any, ...]]:
    return rows(
        conn, "select * from pgque.receive_coop('q', 'g', %s, 100, %s::interval)", sub, dead
    )


def test_registration(conn: psycopg.Connection[Any], queue: str) -> None:
    assert one(conn, "select pgque.subscribe_subconsumer('q', 'g', 's1')") == 1
    assert one(conn, "select pgque.subscribe_subconsumer('q', 'g', 's1')") == 0
    assert one(conn, "select pgque.register_subconsumer('q', 'g', 's2')") == 1
    assert rows(
        conn,
        "select c.co_name, s.sub_role from pgque.subscription s"
        " join pgque.consumer c on c.co_id = s.sub_consumer order by 1",
    ) == [("g", "coop_main"), ("g.s1", "coop_member"), ("g.s2", "coop_member")]
    assert len({r[0] for r in rows(conn, "select sub_id from pgque.subscription")}) == 1


def test_each_batch_goes_to_one_member(conn: psycopg.Connection[Any], group: str) -> None:
    for i in range(4):
        one(conn, "select pgque.send('q', %s)", str(i))
        tick(conn, "q")
    got: dict[str, list[str]] = {"s1": [], "s2": []}
    for _ in range(3):
        for sub in ("s1", "s2"):
            msgs = receive_coop(conn, sub)
            got[sub] += [m[3] for m in msgs]
            if msgs:
                assert one(conn, "select pgque.ack(%s)", msgs[0][1]) == 1
    assert sorted(got["s1"] + got["s2"]) == ["0", "1", "2", "3"]
    assert got["s1"] and got["s2"]


def test_open_batch_comes_back_to_its_member(conn: psycopg.Connection[Any], group: str) -> None:
    one(conn, "select pgque.send('q', 'a')")
    tick(conn, "q")
    first = receive_coop(conn, "s1")
    assert receive_coop(conn, "s1") == first
    assert receive_coop(conn, "s2") == []


def test_concurrent_members_never_share(
    connect: Any, conn: psycopg.Connection[Any], group: str
) -> None:
    for i in range(40):
        one(conn, "select pgque.send('q', %s)", str(i))
        tick(conn, "q")
    seen: dict[str, list[str]] = {}
    barrier = threading.Barrier(2)

    def member(sub: str) -> None:
        c = connect()
        barrier.wait()
        mine: list[str] = []
        while msgs := rows(c, "select * from pgque.receive_coop('q', 'g', %s)", sub):
            mine += [m[3] for m in msgs]
            one(c, "select pgque.ack(%s)", msgs[0][1])
        seen[sub] = mine

    threads = [threading.Thread(target=member, args=(s,)) for s in ("s1", "s2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    everything = seen["s1"] + seen["s2"]
    assert sorted(everything, key=int) == [str(i) for i in range(40)]


def test_dead_member_batch_is_taken_over(conn: psycopg.Connection[Any], group: str) -> None:
    one(conn, "select pgque.send('q', 'x')")
    tick(conn, "q")
    old = receive_coop(conn, "s1")
    receive_coop(conn, "s2")  # registers s2
    conn.execute(
        "update pgque.subscription set sub_active = now() - interval '1 hour'"
        " where sub_consumer = (select co_id from pgque.consumer where co_name = 'g.s1')"
    )
    new = receive_coop(conn, "s2", "1 minute")
    assert [m[3] for m in new] == ["x"]
    assert new[0][1] != old[0][1]
    with pytest.raises(RAISE, match=f"batch not found: {old[0][1]}"):
        conn.execute("select pgque.nack(%s, %s::bigint)", (old[0][1], old[0][0]))
    assert one(conn, "select pgque.ack(%s)", old[0][1]) == 0
    assert one(conn, "select pgque.ack(%s)", new[0][1]) == 1


def test_retries_and_dead_letters_belong_to_the_group(
    conn: psycopg.Connection[Any], group: str
) -> None:
    one(conn, "select pgque.set_queue_config('q', 'max_retries', '1')")
    one(conn, "select pgque.send('q', 'x')")
    tick(conn, "q")
    msg = receive_coop(conn, "s1")[0]
    one(conn, "select pgque.nack(%s, %s::bigint, '0 seconds')", msg[1], msg[0])
    one(conn, "select pgque.ack(%s)", msg[1])
    one(conn, "select pgque.maint()")
    tick(conn, "q")
    again = receive_coop(conn, "s2")[0]  # any member may get the retry
    assert (again[0], again[4]) == (msg[0], 1)
    one(conn, "select pgque.nack(%s, %s::bigint)", again[1], again[0])
    assert rows(
        conn,
        "select c.co_name from pgque.dead_letter d join pgque.consumer c"
        " on c.co_id = d.dl_consumer_id",
    ) == [("g",)]


def test_unregister_with_and_without_batch_handling(
    conn: psycopg.Connection[Any], group: str
) -> None:
    one(conn, "select pgque.send('q', 'x')")
    tick(conn, "q")
    msg = receive_coop(conn, "s1")[0]
    with pytest.raises(RAISE, match="cannot unregister active cooperative subconsumer q/g/s1"):
        conn.execute("select pgque.unsubscribe_subconsumer('q', 'g', 's1')")
    with pytest.raises(RAISE, match="unsupported batch_handling value: 2"):
        conn.execute("select pgque.unsubscribe_subconsumer('q', 'g', 's1', 2)")
    assert one(conn, "select pgque.unsubscribe_subconsumer('q', 'g', 's1', 1)") == 1
    assert rows(conn, "select ev_id, ev_retry from pgque.retry_queue") == [(msg[0], 1)]
    assert one(conn, "select pgque.unsubscribe_subconsumer('q', 'g', 's2')") == 1
    with pytest.raises(RAISE, match=f"batch not found: {msg[1]}"):
        conn.execute("select pgque.nack(%s, %s::bigint)", (msg[1], msg[0]))
    # The last member gone: the group is a normal consumer again.
    assert one(conn, "select sub_role from pgque.subscription") == "normal"
    assert one(conn, "select pgque.unsubscribe_subconsumer('q', 'g', 's1')") == 0


def test_guards_on_inherited_functions(conn: psycopg.Connection[Any], queue: str) -> None:
    one(conn, "select pgque.subscribe_subconsumer('q', 'g', 's1')")
    with pytest.raises(RAISE, match="is a cooperative main consumer"):
        conn.execute("select * from pgque.receive('q', 'g')")
    with pytest.raises(RAISE, match="is a cooperative main consumer"):
        conn.execute("select pgque.next_batch('q', 'g')")
    with pytest.raises(RAISE, match=r"consumer g\.s1 on queue q is a cooperative subconsumer"):
        conn.execute("select pgque.next_batch('q', 'g.s1')")
    with pytest.raises(
        RAISE, match="cannot unregister cooperative main consumer with registered subconsumers"
    ):
        conn.execute("select pgque.unregister_consumer('q', 'g')")


def test_conversion_of_a_normal_consumer(conn: psycopg.Connection[Any], queue: str) -> None:
    one(conn, "select pgque.subscribe('q', 'n')")
    with pytest.raises(RAISE, match="consumer n on queue q is already a normal consumer"):
        conn.execute("select pgque.register_subconsumer('q', 'n', 's')")
    one(conn, "select pgque.send('q', 'x')")
    tick(conn, "q")
    batch = rows(conn, "select batch_id from pgque.receive('q', 'n')")[0][0]
    with pytest.raises(RAISE, match="cannot convert active normal consumer n on queue q"):
        conn.execute("select pgque.register_subconsumer('q', 'n', 's', true)")
    one(conn, "select pgque.ack(%s)", batch)
    assert one(conn, "select pgque.register_subconsumer('q', 'n', 's', true)") == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ("'q', 'a.b', 's'", "cooperative consumer name must not contain dot: a.b"),
        ("'q', 'a', 's.t'", "cooperative subconsumer name must not contain dot: s.t"),
        ("'q', '', 's'", "consumer name must not be empty"),
        ("'q', 'a', ''", "subconsumer name must not be empty"),
        ("'', 'a', 's'", "queue name must not be empty"),
        ("'nope', 'a', 's'", "Event queue not created yet"),
    ],
)
def test_bad_names(conn: psycopg.Connection[Any], queue: str, args: str, message: str) -> None:
    with pytest.raises(RAISE, match=message):
        conn.execute(f"select pgque.register_subconsumer({args})")
    assert one(conn, "select count(*) from pgque.subscription") == 0
    with pytest.raises(RAISE, match="max_return must be >= 1, got 0"):
        conn.execute("select * from pgque.receive_coop('q', 'g', 's', 0)")


def test_touch_and_rotation_ignores_idle_members(conn: psycopg.Connection[Any], queue: str) -> None:
    one(conn, "select pgque.subscribe_subconsumer('q', 'g', 's1')")
    assert one(conn, "select pgque.touch_subconsumer('q', 'g', 's1')") == 1
    assert one(conn, "select pgque.touch_subconsumer('q', 'g', 'nobody')") == 0
    one(conn, "select pgque.set_queue_config('q', 'rotation_period', '1 microsecond')")
    for _ in range(3):
        one(conn, "select pgque.send('q', 'x')")
        tick(conn, "q")
        msgs = receive_coop(conn, "s1")
        one(conn, "select pgque.ack(%s)", msgs[0][1])
        one(conn, "select pgque.maint()")
    assert one(conn, "select queue_cur_table from pgque.queue") > 0


def test_forced_drop_takes_the_group_with_it(conn: psycopg.Connection[Any], group: str) -> None:
    # Members go before their main consumer, even one holding a batch.
    one(conn, "select pgque.subscribe('q', 'plain')")
    one(conn, "select pgque.send('q', 'x')")
    tick(conn, "q")
    assert receive_coop(conn, "s1") != []
    with pytest.raises(RAISE, match="consumers still attached"):
        conn.execute("select pgque.drop_queue('q')")
    assert one(conn, "select pgque.drop_queue('q', true)") == 1
    assert one(conn, "select count(*) from pgque.queue") == 0
    assert one(conn, "select count(*) from pgque.subscription") == 0
    assert one(conn, "select count(*) from pgque.retry_queue") == 0
