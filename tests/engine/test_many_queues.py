"""Thousands of queues: the insert routers keep their size, open sessions keep sending.

The routers are a tree of fixed shape (``insert_router.sql``): a top with a
branch per 2,048 queue ids, a middle router per 2,048 ids with a branch per
16, and a leaf per 16 ids holding the static INSERTs. The batch readers
(``batch_reader.sql``) are a router with a branch per 16 ids below 2,048 and
a leaf per 16 ids holding the static queries. These tests pin the shapes, the
one path a session's first send and read run, and what other sessions see
when queues come and go; the costs are measured by the benchmark suite's
``scale`` case.
"""

from __future__ import annotations

from typing import Any

import psycopg

from _engine import one, rows

Conn = psycopg.Connection[Any]


def create_queues(conn: Conn, prefix: str, count: int) -> list[str]:
    """``count`` queues named ``<prefix><n>``, 100 per transaction; their names."""
    names = [f"{prefix}{n:04d}" for n in range(count)]
    for start in range(0, count, 100):
        conn.execute(
            "select pgque.create_queue(n) from unnest(%s::text[]) n",
            (names[start : start + 100],),
        )
    return names


def routers(conn: Conn) -> dict[str, tuple[int, int, str]]:
    """Every insert router: name -> (source length, queue branches, row version)."""
    return {
        name: (length, branches, version)
        for name, length, branches, version in rows(
            conn,
            "select p.proname, length(p.prosrc),"
            " (select count(*) from regexp_matches(p.prosrc, 'i_queue_id = [0-9]+', 'g')),"
            " p.xmin::text from pg_proc p"
            " where p.pronamespace = 'pgque'::regnamespace and p.proname ~ '^_route_'",
        )
    }


def readers(conn: Conn) -> dict[str, tuple[int, str]]:
    """Every batch reader leaf: name -> (queue branches, row version)."""
    return {
        name: (branches, version)
        for name, branches, version in rows(
            conn,
            "select p.proname,"
            " (select count(*) from regexp_matches(p.prosrc, 'i_queue_id = [0-9]+', 'g')),"
            " p.xmin::text from pg_proc p"
            " where p.pronamespace = 'pgque'::regnamespace and p.proname ~ '^_read_l[0-9]+$'",
        )
    }


SHAPE = ("_router_fanout", "_router_leaf_size")
"""The tree's shape: constants, evaluated when a statement using them is planned."""


def send_calls(connect: Any, queue: str) -> list[tuple[Any, ...]]:
    """The pgque functions one send to ``queue`` calls in a new session: (name, calls).

    A new session each time: the transaction's view also counts what earlier
    transactions of the session have not reported yet."""
    sender = connect()
    sender.execute("set track_functions = 'all'")
    with sender.transaction():
        sender.execute("select pgque.send(%s, 'sent')", (queue,))
        called: list[tuple[Any, ...]] = rows(
            sender,
            "select funcname, calls from pg_stat_xact_user_functions"
            " where schemaname = 'pgque' order by funcname",
        )
    return called


def placed(conn: Conn, names: list[str]) -> dict[str, list[str]]:
    """Per queue, the tables (``event_<id>_<n>``) its events are in."""
    found: dict[str, list[str]] = {}
    for queue, table in rows(
        conn,
        "select q.queue_name, c.relname from pgque.event_template e"
        " join pg_class c on c.oid = e.tableoid"
        " join pgque.queue q on c.relname like 'event\\_' || q.queue_id || '\\_%%'"
        " where q.queue_name = any(%s) order by q.queue_name, e.ev_id",
        names,
    ):
        found.setdefault(queue, []).append(table)
    return found


def test_the_routers_do_not_grow_with_the_number_of_queues(conn: Conn) -> None:
    create_queues(conn, "a", 1)
    small = routers(conn)
    create_queues(conn, "b", 40)  # ids 2..41: leaves 0, 1 and 2
    grown = routers(conn)
    assert sorted(grown) == [
        "_route_batch", "_route_batch_l0", "_route_batch_l1", "_route_batch_l2",
        "_route_batch_m0", "_route_event", "_route_event_l0", "_route_event_l1",
        "_route_event_l2", "_route_event_m0",
    ]  # fmt: skip
    for name in ("_route_event", "_route_batch", "_route_event_m0", "_route_batch_m0"):
        assert grown[name][0] == small[name][0], f"{name} changed size"
        assert grown[name][1] == 0, f"{name} branches on queue ids"
    # A leaf holds the queues of its 16 ids: 1..15, 16..31, 32..41.
    assert [grown[f"_route_event_l{k}"][1] for k in range(3)] == [15, 16, 10]
    assert [grown[f"_route_batch_l{k}"][1] for k in range(3)] == [15, 16, 10]

    # One more queue (id 42) rewrites its own leaves and nothing else.
    create_queues(conn, "c", 1)
    after = routers(conn)
    changed = sorted(name for name in after if after[name][2] != grown[name][2])
    assert changed == ["_route_batch_l2", "_route_event_l2"]
    assert after["_route_event_l2"][1] == 11


def test_a_sessions_first_send_runs_one_router_per_level_whatever_the_queue_count(
    conn: Conn, connect: Any
) -> None:
    create_queues(conn, "near", 20)  # ids 1..20: leaves 0 and 1 of middle router 0
    # A big install without creating 5,000 queues: the next id is 5,001, in
    # leaf 312 of middle router 2 (the tree depends on queue ids alone).
    conn.execute("select setval(pg_get_serial_sequence('pgque.queue', 'queue_id'), 5000)")
    conn.execute("select pgque.create_queue('far')")
    called = send_calls(connect, "far")
    # The tree's shape is constant-folded once, when _insert_event is planned.
    assert ("_router_fanout", 1) in called and ("_router_leaf_size", 1) in called
    called = [c for c in called if c[0] not in SHAPE]
    # Nothing per queue: no proof of the table, no dynamic path, no lookup
    # among the routers; the one branch of each level.
    assert called == [
        ("_insert_event", 1), ("_route_event", 1), ("_route_event_l312", 1),
        ("_route_event_m2", 1), ("send", 1),
    ]  # fmt: skip
    assert placed(conn, ["far"]) == {"far": ["event_5001_0"]}
    # Below id 2,048 a single send skips the top: its branch leads to m0 alone.
    called = [c for c in send_calls(connect, "near0017") if c[0] not in SHAPE]
    assert called == [
        ("_insert_event", 1), ("_route_event_l1", 1), ("_route_event_m0", 1), ("send", 1),
    ]  # fmt: skip


def test_the_batch_readers_follow_the_queues_of_their_leaf(conn: Conn) -> None:
    create_queues(conn, "b", 41)  # ids 1..41: leaves 0, 1 and 2
    grown = readers(conn)
    assert {name: branches for name, (branches, _) in grown.items()} == {
        "_read_l0": 15, "_read_l1": 16, "_read_l2": 10,
    }  # fmt: skip
    # The router calls each leaf below id 2,048 by its name, and no queue's.
    router = one(conn, "select prosrc from pg_proc where oid = 'pgque._read_batch'::regproc")
    assert "pgque._read_l0(" in router and "pgque._read_l127(" in router
    assert "pgque._read_l128(" not in router and "i_queue_id =" not in router

    # One more queue (id 42) rewrites its own leaf and nothing else.
    create_queues(conn, "c", 1)
    after = readers(conn)
    assert sorted(name for name in after if after[name][1] != grown[name][1]) == ["_read_l2"]
    assert after["_read_l2"][0] == 11
    # A leaf goes with its last queue.
    for name in [f"b{n:04d}" for n in range(31, 41)] + ["c0000"]:
        conn.execute("select pgque.drop_queue(%s)", (name,))
    assert sorted(readers(conn)) == ["_read_l0", "_read_l1"]


def test_a_batch_is_read_through_its_leaf_near_and_far(conn: Conn, connect: Any) -> None:
    create_queues(conn, "near", 20)  # ids 1..20: leaves 0 and 1
    # The next id is 5,001, in leaf 312: beyond the router's branches, the
    # leaf is called by its name.
    conn.execute("select setval(pg_get_serial_sequence('pgque.queue', 'queue_id'), 5000)")
    conn.execute("select pgque.create_queue('far')")
    for name, leaf in (("near0017", "_read_l1"), ("far", "_read_l312")):
        conn.execute("select pgque.subscribe(%s, 'c')", (name,))
        conn.execute("select pgque.send(%s, 'x', %s)", (name, f"{name}/1"))
        conn.execute("select pgque.send(%s, 'x', %s)", (name, f"{name}/2"))
        conn.execute("select pgque.force_tick(%s)", (name,))
        conn.execute("select pgque.ticker(%s)", (name,))
        reader = connect()
        reader.execute("set track_functions = 'all'")
        with reader.transaction():
            received = rows(reader, "select payload from pgque.receive(%s, 'c', 1)", name)
            batch_id = one(reader, "select pgque.next_batch(%s, 'c')", name)
            events = rows(reader, "select ev_data from pgque.get_batch_events(%s)", batch_id)
            called = dict(
                rows(
                    reader,
                    "select funcname, calls from pg_stat_xact_user_functions"
                    " where funcname ~ '^_read_(batch|l[0-9]+)$'",
                )
            )
        assert received == [(f"{name}/1",)]
        assert events == [(f"{name}/1",), (f"{name}/2",)]
        assert called == {"_read_batch": 2, leaf: 2}


def test_a_session_older_than_100_new_queues_sends_to_all_of_them(conn: Conn, connect: Any) -> None:
    create_queues(conn, "old", 1)
    sender = connect()
    sender.execute("select pgque.send('old0000', 'compiles the routers')")
    names = create_queues(conn, "new", 100)
    for name in names:
        sender.execute("select pgque.send(%s, 'hello')", (name,))
        sender.execute("select pgque.send_batch(%s, array['a', 'b']::text[])", (name,))
    queue_ids = dict(rows(conn, "select queue_name, queue_id from pgque.queue"))
    assert placed(conn, names) == {name: [f"event_{queue_ids[name]}_0"] * 3 for name in names}


def test_dropping_one_of_1000_queues_leaves_the_others_sending_in_open_sessions(
    conn: Conn, connect: Any
) -> None:
    names = create_queues(conn, "q", 1000)
    sessions = [connect(), connect()]
    for session in sessions:  # each compiles every leaf
        for name in names:
            session.execute("select pgque.send(%s, 'before')", (name,))
    conn.execute("select pgque.drop_queue('q0500')")  # id 501: the leaf of ids 496..511
    names.remove("q0500")
    for session in sessions:
        for name in names:
            session.execute("select pgque.send(%s, 'after')", (name,))
        with session.transaction():
            session.execute("select pgque.send_batch('q0501', array['x']::text[])")
        try:
            session.execute("select pgque.send('q0500', 'gone')")
        except psycopg.errors.RaiseException as exc:
            assert "queue not found: q0500" in str(exc)
        else:
            raise AssertionError("a send to the dropped queue succeeded")
    counts = dict(
        rows(
            conn,
            "select q.queue_name, count(*) from pgque.event_template e"
            " join pg_class c on c.oid = e.tableoid"
            " join pgque.queue q on c.relname like 'event\\_' || q.queue_id || '\\_%'"
            " group by 1",
        )
    )
    assert counts == {name: 4 + (2 if name == "q0501" else 0) for name in names}


def test_ticker_ticks_only_due_queues_and_at_most_1000_per_call(conn: Conn) -> None:
    names = create_queues(conn, "t", 1001)
    conn.execute(
        "select pgque.set_queue_config(n, 'ticker_max_lag', '1 hour') from unnest(%s::text[]) n",
        (names,),
    )
    # Every queue has only its first tick: due at once (no back-off yet).
    assert one(conn, "select pgque.ticker()") == 1000
    assert one(conn, "select pgque.ticker()") == 1
    # Now all wait for max_lag or enough events, but the one that got them.
    assert one(conn, "select pgque.ticker()") == 0
    conn.execute("select pgque.force_tick('t0777')")
    assert one(conn, "select pgque.ticker()") == 1
    assert one(
        conn,
        "select count(*) from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue"
        " where q.queue_name = 't0777'",
    ) == 3  # fmt: skip
