"""Queue and consumer lifecycle: create, configure, register, unregister, drop."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from _engine import consume, make_queue, one, rows, tick


def test_create_queue_builds_tables_and_first_tick(conn: psycopg.Connection[Any]) -> None:
    assert one(conn, "select pgque.create_queue('orders')") == 1
    assert one(conn, "select pgque.create_queue('orders')") == 0
    queue_id = one(conn, "select queue_id from pgque.queue where queue_name = 'orders'")
    tables = {
        r[0]
        for r in rows(
            conn,
            "select relname from pg_class where relnamespace = 'pgque'::regnamespace"
            " and relname like %s",
            f"event\\_{queue_id}%",
        )
    }
    base = f"event_{queue_id}"
    assert {
        base,
        f"{base}_0",
        f"{base}_1",
        f"{base}_2",
        f"{base}_id_seq",
        f"{base}_tick_seq",
    } <= tables
    assert rows(conn, "select tick_id from pgque.tick where tick_queue = %s", queue_id) == [(1,)]
    assert one(conn, "select pgque.current_event_table('orders')") == f"pgque.{base}_0"


def test_register_and_unregister(conn: psycopg.Connection[Any]) -> None:
    make_queue(conn, "q")
    assert one(conn, "select pgque.register_consumer('q', 'c')") == 1
    assert one(conn, "select pgque.register_consumer('q', 'c')") == 0
    assert one(conn, "select sub_last_tick from pgque.subscription") == 1
    assert one(conn, "select pgque.unregister_consumer('q', 'c')") == 1
    assert one(conn, "select pgque.unregister_consumer('q', 'c')") == 0
    # The consumer name row goes with its last subscription.
    assert one(conn, "select count(*) from pgque.consumer") == 0


def test_consumer_name_shared_across_queues(conn: psycopg.Connection[Any]) -> None:
    make_queue(conn, "a")
    make_queue(conn, "b")
    one(conn, "select pgque.register_consumer('a', 'c')")
    one(conn, "select pgque.register_consumer('b', 'c')")
    assert one(conn, "select count(*) from pgque.consumer") == 1
    one(conn, "select pgque.unregister_consumer('a', 'c')")
    assert one(conn, "select count(*) from pgque.consumer") == 1
    one(conn, "select pgque.unregister_consumer('b', 'c')")
    assert one(conn, "select count(*) from pgque.consumer") == 0


def test_new_consumer_starts_at_latest_tick(conn: psycopg.Connection[Any]) -> None:
    make_queue(conn, "q")
    one(conn, "select pgque.register_consumer('q', 'early')")
    one(conn, "select pgque.insert_event('q', 't', 'before')")
    tick(conn, "q")
    one(conn, "select pgque.register_consumer('q', 'late')")
    one(conn, "select pgque.insert_event('q', 't', 'after')")
    tick(conn, "q")
    assert consume(conn, "q", "early") == ["before"]
    assert consume(conn, "q", "early") == ["after"]
    assert consume(conn, "q", "late") == ["after"]


def test_register_consumer_at_repositions(conn: psycopg.Connection[Any]) -> None:
    make_queue(conn, "q")
    one(conn, "select pgque.register_consumer('q', 'c')")
    one(conn, "select pgque.insert_event('q', 't', 'x')")
    start = tick(conn, "q")
    assert consume(conn, "q", "c") == ["x"]
    # Back to tick 1: the event comes again.
    assert one(conn, "select pgque.register_consumer_at('q', 'c', 1)") == 0
    assert one(conn, "select sub_last_tick from pgque.subscription") == 1
    assert consume(conn, "q", "c") == ["x"]
    assert start == 2
    # A new consumer registered at an explicit tick.
    assert one(conn, "select pgque.register_consumer_at('q', 'd', 1)") == 1
    assert consume(conn, "q", "d") == ["x"]


def test_register_consumer_at_drops_open_batch(conn: psycopg.Connection[Any]) -> None:
    make_queue(conn, "q")
    one(conn, "select pgque.register_consumer('q', 'c')")
    tick(conn, "q")
    batch_id = one(conn, "select pgque.next_batch('q', 'c')")
    assert batch_id is not None
    one(conn, "select pgque.register_consumer_at('q', 'c', 1)")
    assert rows(conn, "select sub_batch, sub_next_tick from pgque.subscription") == [(None, None)]


def test_drop_queue_refuses_with_consumers_unless_forced(conn: psycopg.Connection[Any]) -> None:
    make_queue(conn, "q")
    queue_id = one(conn, "select queue_id from pgque.queue")
    one(conn, "select pgque.register_consumer('q', 'c')")
    with pytest.raises(psycopg.errors.RaiseException, match="consumers still attached"):
        one(conn, "select pgque.drop_queue('q')")
    assert one(conn, "select pgque.drop_queue('q', true)") == 1
    assert one(conn, "select count(*) from pgque.queue") == 0
    assert one(conn, "select count(*) from pgque.tick") == 0
    assert one(conn, "select count(*) from pgque.subscription") == 0
    assert one(conn, "select count(*) from pgque.consumer") == 0
    assert one(conn, "select to_regclass(%s)", f"pgque.event_{queue_id}") is None
    assert one(conn, "select to_regclass(%s)", f"pgque.event_{queue_id}_id_seq") is None


def test_drop_queue_without_consumers(conn: psycopg.Connection[Any]) -> None:
    make_queue(conn, "q")
    one(conn, "select pgque.insert_event('q', 't', 'x')")
    assert one(conn, "select pgque.drop_queue('q')") == 1
    assert one(conn, "select pgque.create_queue('q')") == 1


def test_set_queue_config(conn: psycopg.Connection[Any]) -> None:
    make_queue(conn, "q", eager=False)
    settings = [
        ("ticker_max_count", "7", "queue_ticker_max_count", 7),
        ("ticker_paused", "true", "queue_ticker_paused", True),
        ("external_ticker", "true", "queue_external_ticker", True),
        ("max_retries", "3", "queue_max_retries", 3),
    ]
    for param, value, column, expected in settings:
        assert one(conn, "select pgque.set_queue_config('q', %s, %s)", param, value) == 1
        assert one(conn, f"select {column} from pgque.queue") == expected
    # The intervals must be above zero (upstream PgQue; PgQ takes 0): the
    # smallest step is accepted, zero and sums below zero are refused.
    defaults = {"ticker_max_lag": "3 seconds", "ticker_idle_period": "1 minute",
                "rotation_period": "2 hours"}  # fmt: skip
    for param, default in defaults.items():
        assert one(conn, "select pgque.set_queue_config('q', %s, '1 microsecond')", param) == 1
        assert one(conn, f"select queue_{param} = interval '1 microsecond' from pgque.queue")
        for value, shown in (("0", "00:00:00"), ("0 seconds", "00:00:00"),
                             ("1 day -25 hours", "1 day -25:00:00")):  # fmt: skip
            with pytest.raises(
                psycopg.errors.RaiseException,
                match=f"^set_queue_config: {param} must be > 0, got {shown}\n",
            ):
                conn.execute("select pgque.set_queue_config('q', %s, %s)", (param, value))
        # NULL puts the default back.
        one(conn, "select pgque.set_queue_config('q', %s, null)", param)
        assert one(conn, f"select queue_{param} = interval '{default}' from pgque.queue")
    one(conn, "select pgque.set_queue_config('q', 'ticker_max_count', null)")
    assert one(conn, "select queue_ticker_max_count from pgque.queue") == 500
    # Values that do not parse give the server's own cast errors.
    with pytest.raises(psycopg.errors.InvalidDatetimeFormat):
        conn.execute("select pgque.set_queue_config('q', 'rotation_period', 'soon')")
    with pytest.raises(psycopg.errors.InvalidTextRepresentation):
        conn.execute("select pgque.set_queue_config('q', 'ticker_max_count', 'many')")
    with pytest.raises(psycopg.errors.NumericValueOutOfRange):
        conn.execute("select pgque.set_queue_config('q', 'ticker_max_count', '9999999999')")
    # Exact lower-case names without the column prefix only.
    for name in ("Ticker_Max_Lag", "queue_ticker_max_lag"):
        with pytest.raises(
            psycopg.errors.RaiseException, match=f'cannot change parameter "{name}s"'
        ):
            conn.execute("select pgque.set_queue_config('q', %s, null)", (name,))


def test_reinstall_keeps_everything(conn: psycopg.Connection[Any]) -> None:
    import pgque

    make_queue(conn, "q")
    one(conn, "select pgque.register_consumer('q', 'c')")
    one(conn, "select pgque.insert_event('q', 't', 'kept')")
    tick(conn, "q")
    one(conn, "select pgque.set_queue_config('q', 'max_retries', '9')")
    conn.execute("update pgque.config set tick_period_ms = 50")
    before = {
        "queue": rows(conn, "select * from pgque.queue"),
        "tick": rows(conn, "select tick_queue, tick_id, tick_snapshot::text from pgque.tick"),
        "sub": rows(conn, "select * from pgque.subscription"),
        "config": rows(conn, "select * from pgque.config"),
    }
    pgque.install(conn)
    pgque.install(conn)
    after = {
        "queue": rows(conn, "select * from pgque.queue"),
        "tick": rows(conn, "select tick_queue, tick_id, tick_snapshot::text from pgque.tick"),
        "sub": rows(conn, "select * from pgque.subscription"),
        "config": rows(conn, "select * from pgque.config"),
    }
    assert after == before
    assert consume(conn, "q", "c") == ["kept"]


def test_insert_router_routes_every_queue_and_table(conn: psycopg.Connection[Any]) -> None:
    names = [f"r{i}" for i in range(20)]  # enough queues for a few levels of the search
    for name in names:
        make_queue(conn, name)
        one(conn, "select pgque.set_queue_config(%s, 'rotation_period', '1 microsecond')", name)
    one(conn, "select pgque.drop_queue('r7')")
    names.remove("r7")
    for name in names:  # one event alone, one in a batch (the batch router), per table
        one(conn, "select pgque.insert_event(%s, 't', %s)", name, f"{name}/0")
        one(conn, "select pgque.send_batch(%s, 't', array[%s])", name, f"{name}/0b")
        one(conn, "select pgque.maint_rotate_tables_step1(%s)", name)
        one(conn, "select pgque.insert_event(%s, 't', %s)", name, f"{name}/1")
        one(conn, "select pgque.send_batch(%s, 't', array[%s])", name, f"{name}/1b")
    placed = rows(
        conn,
        "select q.queue_name, c.relname, e.ev_data from pgque.event_template e"
        " join pg_class c on c.oid = e.tableoid"
        " join pgque.queue q on c.relname like 'event\\_' || q.queue_id || '\\_%'"
        " order by q.queue_id, e.ev_id",
    )
    expected = []
    for name in names:
        queue_id = one(conn, "select queue_id from pgque.queue where queue_name = %s", name)
        expected += [
            (name, f"event_{queue_id}_0", f"{name}/0"),
            (name, f"event_{queue_id}_0", f"{name}/0b"),
            (name, f"event_{queue_id}_1", f"{name}/1"),
            (name, f"event_{queue_id}_1", f"{name}/1b"),
        ]
    assert placed == expected


def test_insert_router_falls_back_for_unknown_queues(conn: psycopg.Connection[Any]) -> None:
    """A queue no router branch knows (an id beyond the tree) still inserts, dynamically."""
    make_queue(conn, "q")
    # The dynamic path finds the table by the queue's id; the top router sends
    # ids from 262,144 on (128 middle routers of 128 leaves of 16) there.
    conn.execute(
        "select pgque._insert_dynamic(1, 0, 77, now(), null, null,"
        " 't', 'fallback', null, null, null, null)"
    )
    assert one(conn, "select ev_data from pgque.event_1_0 where ev_id = 77") == "fallback"
    conn.execute(
        "select pgque._insert_batch_dynamic(1, 0, array[78, 79],"
        " array['a', 'b'], array[null, 'u'], 't', null, array['x', null], null, null)"
    )
    assert rows(
        conn, "select ev_id, ev_type, ev_data, ev_extra2 from pgque.event_1_0 where ev_id > 77"
        " order by ev_id",
    ) == [(78, "t", "a", "x"), (79, "u", "b", None)]  # fmt: skip
    with pytest.raises(psycopg.errors.NoDataFound):
        conn.execute(
            "select pgque._route_event(262144, 0, 80, now(), null, null,"
            " 't', 'no such queue', null, null, null, null)"
        )


def test_key_operations_write_structured_log_events(conn: psycopg.Connection[Any]) -> None:
    logged: list[tuple[str | None, str | None]] = []
    conn.add_notice_handler(lambda d: logged.append((d.message_primary, d.message_detail)))
    conn.execute("set client_min_messages = log")
    make_queue(conn, "q")
    one(conn, "select pgque.register_consumer('q', 'c')")
    one(conn, "select pgque.unregister_consumer('q', 'c')")
    one(conn, "select pgque.drop_queue('q')")
    ours = [(m, d) for m, d in logged if m and m.startswith("pgque [")]
    assert ours == [
        ("pgque [info] queue: created", '{"queue": "q"}'),
        ("pgque [info] consumer: registered", '{"tick": 1, "queue": "q", "consumer": "c"}'),
        ("pgque [info] consumer: unregistered", '{"queue": "q", "consumer": "c"}'),
        ("pgque [info] queue: dropped", '{"force": false, "queue": "q"}'),
    ]
    with pytest.raises(psycopg.errors.RaiseException, match="log_event: level must be one of"):
        conn.execute("select pgque.log_event('loud', 'x', 'y')")
