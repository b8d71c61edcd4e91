"""Browsing through the clients: a queue's recent events and one dead letter.

``recent_events`` must stay bounded on a queue of millions: the plan test
reads the statements the function runs (auto_explain, nested statements)
and checks that every event table is read backwards along its index with a
limit, never scanned whole.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo
from test_client_admin import dead_letters, open_client

import pgque
from _engine import make_queue, one, rows


@pytest.fixture(params=["sync", "async"])
def client(request: pytest.FixtureRequest, db: str) -> Iterator[Any]:
    """A client on an autocommit connection to ``db``: sync, or async driven by a loop."""
    with open_client(request.param, db) as opened:
        yield opened


def rotate(conn: psycopg.Connection[Any], queue: str) -> None:
    """Switch ``queue`` to its next event table (both rotation steps)."""
    one(conn, "select pgque.set_queue_config(%s, 'rotation_period', '1 microsecond')", queue)
    assert one(conn, "select pgque.maint_rotate_tables_step1(%s)", queue) == 0
    one(conn, "select pgque.maint_rotate_tables_step2()")


def test_recent_events_newest_first_across_tables(
    client: Any, conn: psycopg.Connection[Any]
) -> None:
    make_queue(conn, "q")
    first = client.send("q", {"n": 1}, type="a")
    rotate(conn, "q")
    second = client.send("q", {"n": 2}, type="b", extras=("x1", None, None, "x4"))
    rotate(conn, "q")
    with conn.transaction():  # one transaction, two events: the later id first
        third = one(conn, "select pgque.send('q', 'a', '{\"n\": 3}'::jsonb)")
        fourth = one(conn, "select pgque.send('q', 'b', '{\"n\": 4}'::jsonb)")
    assert len(set(rows(conn, "select distinct ev_txid from pgque.recent_events('q')"))) == 3
    events = client.recent_events("q")
    assert [e.ev_id for e in events] == [fourth, third, second, first]
    assert all(isinstance(e, pgque.EventRecord) for e in events)
    assert events[2].ev_type == "b"
    assert events[2].ev_data == '{"n": 2}'
    assert (events[2].ev_extra1, events[2].ev_extra4) == ("x1", "x4")
    assert events[0].ev_txid == events[1].ev_txid > events[2].ev_txid
    assert [e.ev_id for e in client.recent_events("q", limit=2)] == [fourth, third]
    assert [e.ev_id for e in client.recent_events("q", type="a")] == [third, first]
    assert [e.ev_id for e in client.recent_events("q", type="b", limit=1)] == [fourth]
    assert client.recent_events("q", type="nothing of the kind") == []


def test_recent_events_of_an_empty_queue(client: Any, conn: psycopg.Connection[Any]) -> None:
    make_queue(conn, "q")
    assert client.recent_events("q") == []


@pytest.mark.parametrize("limit", [0, -1, 1001])
def test_recent_events_limit_bounds(client: Any, conn: psycopg.Connection[Any], limit: int) -> None:
    make_queue(conn, "q")
    client.send("q", {"n": 1})
    with pytest.raises(pgque.PgqueInvalidArgument, match=rf"between 1 and 1000, got {limit}"):
        client.recent_events("q", limit=limit)
    assert len(client.recent_events("q", limit=1000)) == 1


def test_recent_events_unknown_queue(client: Any) -> None:
    with pytest.raises(pgque.PgqueQueueNotFound, match="queue not found: nosuch"):
        client.recent_events("nosuch")


def test_dead_letter_by_id(client: Any, conn: psycopg.Connection[Any]) -> None:
    make_queue(conn, "q")
    one(conn, "select pgque.subscribe('q', 'c')")
    ids = dead_letters(client, conn, 2)
    listed = client.dlq_inspect("q")
    found = client.dead_letter(listed[0].dl_id)
    assert found == listed[0]
    assert isinstance(found, pgque.DeadLetter)
    assert found.ev_id == ids[1]
    assert found.dl_reason == "r1"
    assert client.dead_letter(max(d.dl_id for d in listed) + 1000) is None


@pytest.fixture
def reader(conn: psycopg.Connection[Any], db: str, connect_to: Any) -> Iterator[Any]:
    """A client logged in as a role that is only a member of pgque_reader."""
    role = f"browse_reader_{uuid.uuid4().hex[:8]}"
    conn.execute(sql.SQL("create role {} login in role pgque_reader").format(sql.Identifier(role)))
    try:
        yield pgque.PgqueClient(connect_to(make_conninfo(db, user=role)))
    finally:
        conn.execute(sql.SQL("drop owned by {} cascade").format(sql.Identifier(role)))
        conn.execute(sql.SQL("drop role {}").format(sql.Identifier(role)))


def test_a_reader_browses_and_hostile_names_are_values(
    reader: Any, conn: psycopg.Connection[Any]
) -> None:
    hostile = "q'; drop table pgque.queue; --"
    make_queue(conn, hostile)
    one(conn, "select pgque.subscribe(%s, 'c')", hostile)
    one(conn, "select pgque.send(%s, %s, '{}'::jsonb)", hostile, "t'); delete from x; --")
    [event] = reader.recent_events(hostile, type="t'); delete from x; --")
    assert event.ev_type == "t'); delete from x; --"
    assert reader.recent_events(hostile, type="t") == []
    assert reader.dead_letter(1) is None
    with pytest.raises(pgque.PgqueQueueNotFound):
        reader.recent_events("q")
    assert one(conn, "select count(*) from pgque.queue") == 1


def event_tables(conn: psycopg.Connection[Any], queue: str) -> list[str]:
    """The names of the queue's child event tables."""
    queue_id = one(conn, "select queue_id from pgque.queue where queue_name = %s", queue)
    return [f"event_{queue_id}_{i}" for i in range(3)]


def nested_plans(conn: psycopg.Connection[Any], query: str, *params: Any) -> str:
    """Run ``query`` with auto_explain reporting every nested statement's plan; the plans."""
    plans: list[str] = []
    conn.add_notice_handler(lambda diag: plans.append(diag.message_primary or ""))
    conn.execute("load 'auto_explain'")
    conn.execute("set auto_explain.log_min_duration = 0")
    conn.execute("set auto_explain.log_nested_statements = on")
    conn.execute("set auto_explain.log_level = 'notice'")
    conn.execute(query, params or None)
    conn.execute("set auto_explain.log_min_duration = -1")
    return "\n".join(plans)


@pytest.mark.slow
@pytest.mark.parametrize("type_filter", [None, "t7"])
def test_recent_events_plan_is_bounded(
    conn: psycopg.Connection[Any], type_filter: str | None
) -> None:
    make_queue(conn, "big")
    tables = event_tables(conn, "big")
    # 200k events over the three tables, each in a transaction of its own
    # (written straight into the tables: sending them one by one is slow).
    for n, table in enumerate(tables):
        conn.execute(
            sql.SQL(
                "insert into pgque.{} (ev_id, ev_time, ev_txid, ev_type, ev_data)"
                " select g, now(), (g + 1000)::text::xid8, 't' || (g %% 10), g::text"
                " from pg_catalog.generate_series(%s, %s) g"
            ).format(sql.Identifier(table)),
            (n * 70_000 + 1, min((n + 1) * 70_000, 200_000)),
        )
    plans = nested_plans(conn, "select * from pgque.recent_events('big', 20, %s)", type_filter)
    for table in tables:
        assert f"Index Scan Backward using {table}_txid_idx on {table}" in plans, plans
        assert f"Seq Scan on {table}" not in plans, plans
    assert "Limit" in plans, plans
    events = [
        r[0]
        for r in rows(conn, "select ev_id from pgque.recent_events('big', 20, %s)", type_filter)
    ]
    if type_filter is None:
        assert events == list(range(200_000, 199_980, -1))
    else:
        assert events == [g for g in range(200_000, 199_700, -1) if g % 10 == 7][:20]
