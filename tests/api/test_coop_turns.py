"""Cooperative members taking batches: a registered member does not lock the group's row
to register again, and members racing for batches still never share one."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest

from _engine import make_queue, one, rows


def tick(conn: psycopg.Connection[Any], queue: str) -> None:
    one(conn, "select pgque.force_tick(%s)", queue)
    one(conn, "select pgque.ticker(%s)", queue)


@pytest.fixture
def group(conn: psycopg.Connection[Any]) -> str:
    make_queue(conn, "q")
    for member in ("s1", "s2", "s3"):
        one(conn, "select pgque.register_subconsumer('q', 'g', %s)", member)
    return "g"


def test_a_registered_member_with_an_open_batch_takes_no_group_lock(
    conn: psycopg.Connection[Any], connect: Any, group: str
) -> None:
    one(conn, "select pgque.send('q', 'a')")
    tick(conn, "q")
    member = connect()
    first = rows(member, "select batch_id, payload from pgque.receive_coop('q', 'g', 's1')")
    assert [r[1] for r in first] == ["a"]
    holder = connect(autocommit=False)  # holds the group's main row, as another member would
    one(holder, "select count(*) from (select 1 from pgque.subscription s"
                " join pgque.consumer c on c.co_id = s.sub_consumer"
                " where c.co_name = 'g' for no key update of s) x")  # fmt: skip
    member.execute("set lock_timeout = '2s'")
    again = rows(member, "select batch_id, payload from pgque.receive_coop('q', 'g', 's1')")
    assert again == first  # its open batch, without waiting for the group's row
    holder.rollback()


def test_a_new_member_is_still_registered_by_receive_coop(
    conn: psycopg.Connection[Any], group: str
) -> None:
    one(conn, "select pgque.send('q', 'b')")
    tick(conn, "q")
    got = rows(conn, "select payload from pgque.receive_coop('q', 'g', 'newcomer')")
    assert got == [("b",)]
    assert one(conn, "select count(*) from pgque.consumer where co_name = 'g.newcomer'") == 1


@pytest.mark.concurrency
def test_three_members_racing_share_no_event(
    conn: psycopg.Connection[Any], connect: Any, group: str
) -> None:
    for i in range(150):
        one(conn, "select pgque.send('q', %s)", str(i))
        if i % 3 == 2:
            tick(conn, "q")
    seen: dict[str, list[str]] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(3)

    def member(sub: str) -> None:
        try:
            c = connect()
            barrier.wait()
            mine: list[str] = []
            while msgs := rows(c, "select * from pgque.receive_coop('q', 'g', %s)", sub):
                mine += [m[3] for m in msgs]
                one(c, "select pgque.ack(%s)", msgs[0][1])
            seen[sub] = mine
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=member, args=(s,)) for s in ("s1", "s2", "s3")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    everything = seen["s1"] + seen["s2"] + seen["s3"]
    assert sorted(everything, key=int) == [str(i) for i in range(150)]
