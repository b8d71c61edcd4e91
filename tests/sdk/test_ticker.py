"""The SDK Ticker: it alone delivers, retries, rotates; one leader per database."""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from twins import handle, make

import _wait
import pgque
from _engine import one, rows
from pgque._consumer.ticking import ticker_wanted
from pgque._queries import query
from pgque.ticker import _next_scan

wait_for = functools.partial(_wait.wait_for, timeout=15.0)  # a ticker's rounds take time


@pytest.fixture
def tickers() -> Iterator[list[pgque.Ticker]]:
    started: list[pgque.Ticker] = []
    yield started
    for ticker in started:
        ticker.stop()


def start(tickers: list[pgque.Ticker], dsn: str, **kwargs: Any) -> pgque.Ticker:
    ticker = pgque.Ticker(dsn, **kwargs).start()
    tickers.append(ticker)
    return ticker


@pytest.fixture
def plain_queue(conn: psycopg.Connection[Any]) -> str:
    """A queue with default thresholds (3 s max lag): only eager ticking is fast."""
    one(conn, "select pgque.create_queue('q')")
    one(conn, "select pgque.subscribe('q', 'c')")
    return "q"


def test_ticker_alone_delivers_fast(
    db: str, conn: psycopg.Connection[Any], plain_queue: str, tickers: list[pgque.Ticker]
) -> None:
    start(tickers, db)
    wait_for(lambda: tickers[0].leading)
    one(conn, "select pgque.send('q', '{\"n\": 1}'::jsonb)")
    sent = time.monotonic()
    wait_for(lambda: rows(conn, "select * from pgque.receive('q', 'c')") != [], timeout=5)
    # Far below the queue's 3 s max_lag: the eager rule ticked it.
    assert time.monotonic() - sent < 2.5


def test_ticker_moves_retries_and_rotates(
    db: str, conn: psycopg.Connection[Any], plain_queue: str, tickers: list[pgque.Ticker]
) -> None:
    one(conn, "select pgque.set_queue_config('q', 'rotation_period', '1 microsecond')")
    start(tickers, db, retry_interval=0.05, maint_interval=0.1)
    one(conn, "select pgque.send('q', '{}'::jsonb)")
    wait_for(lambda: (msgs := rows(conn, "select * from pgque.receive('q', 'c')")) != []
             and one(conn, "select pgque.nack(%s, %s::bigint, '0 seconds')", msgs[0][1], msgs[0][0])
             and one(conn, "select pgque.ack(%s)", msgs[0][1]) == 1)  # fmt: skip
    wait_for(lambda: rows(conn, "select retry_count from pgque.receive('q', 'c')") == [(1,)])
    # Consumed up to date, so maint() can rotate (both steps) again and again.
    start_table = one(conn, "select queue_switch_step1 from pgque.queue")

    def rotated() -> bool:
        for (batch_id,) in rows(conn, "select distinct batch_id from pgque.receive('q', 'c')"):
            one(conn, "select pgque.ack(%s)", batch_id)
        return one(conn, "select queue_switch_step1 from pgque.queue") != start_table

    wait_for(rotated)


def test_one_leader_and_handover(
    db: str, conn: psycopg.Connection[Any], plain_queue: str, tickers: list[pgque.Ticker]
) -> None:
    first = start(tickers, f"{db} application_name=leader1")
    wait_for(lambda: first.leading)
    second = start(tickers, f"{db} application_name=leader2")
    time.sleep(1.5)  # two standby rounds: it must still not lead
    assert not second.leading
    conn.execute(
        "select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'leader1'"
    )
    wait_for(lambda: second.leading or first.leading)
    assert first.leading != second.leading


def hold_horizon(holder: psycopg.Connection[Any], how: str) -> None:
    """Hold the xmin horizon: with a transaction id, or a read-only snapshot only."""
    if how == "xid":
        one(holder, "select pg_current_xact_id()")
    else:
        holder.execute("set transaction isolation level repeatable read")
        one(holder, "select 1")


@pytest.mark.parametrize("how", ["xid", "snapshot"])
def test_xmin_horizon_names_the_holder(
    connect: Any, conn: psycopg.Connection[Any], how: str
) -> None:
    assert one(conn, "select pgque.xmin_horizon()") is None  # idle sessions hold nothing
    holder = connect(autocommit=False)
    hold_horizon(holder, how)
    pid = holder.info.backend_pid
    held = one(conn, "select coalesce(backend_xid, backend_xmin)::text from pg_stat_activity"
                     " where pid = %s", pid)  # fmt: skip
    assert held is not None
    assert one(conn, "select pgque.xmin_horizon()") == held
    holder.rollback()
    assert one(conn, "select pgque.xmin_horizon()") is None


@pytest.mark.parametrize("how", ["xid", "snapshot"])
def test_held_xmin_slows_ticking(
    db: str, connect: Any, conn: psycopg.Connection[Any], plain_queue: str,
    tickers: list[pgque.Ticker], how: str,
) -> None:  # fmt: skip
    holder = connect(autocommit=False)
    hold_horizon(holder, how)
    ticker = start(tickers, db, held_xmin_after=0.3)
    wait_for(lambda: ticker.leading)
    time.sleep(1.0)  # past held_xmin_after with the horizon pinned
    before = one(conn, "select count(*) from pgque.tick")
    for _ in range(20):
        one(conn, "select pgque.send('q', '{}'::jsonb)")
        time.sleep(0.01)
    after = one(conn, "select count(*) from pgque.tick")
    # Eager ticking would tick about once per send; held, it ticks by ticker() only.
    assert after - before <= 3
    holder.rollback()
    # Released: eager again, a send is delivered far below the queue's 3 s max lag.
    one(conn, "select pgque.send('q', '{}'::jsonb)")
    sent = time.monotonic()
    wait_for(lambda: one(conn, "select count(*) from pgque.tick") > after, timeout=5)
    assert time.monotonic() - sent < 2.5


def test_a_consumers_open_batch_does_not_slow_ticking(
    db: str, connect: Any, conn: psycopg.Connection[Any], plain_queue: str,
    tickers: list[pgque.Ticker],
) -> None:  # fmt: skip
    """A batch is work, not a transaction left open: a consumer whose batch lasts past
    held_xmin_after does not slow the ticks another consumer of the queue waits for."""
    one(conn, "select pgque.subscribe('q', 'other')")
    one(conn, "select pgque.send('q', '{}'::jsonb)")
    one(conn, "select pgque.force_tick('q')")
    one(conn, "select pgque.ticker('q')")
    busy = connect(autocommit=False)  # a consumer inside a long handler
    assert rows(busy, "select msg_id from pgque.receive('q', 'c', 10)") != []
    one(busy, "select pg_current_xact_id()")  # and it wrote something
    assert one(conn, "select pgque.xmin_horizon()") is None
    ticker = start(tickers, db, held_xmin_after=0.3)
    wait_for(lambda: ticker.leading)
    time.sleep(1.0)  # past held_xmin_after with the batch still open
    before = one(conn, "select count(*) from pgque.tick")
    for _ in range(20):
        one(conn, "select pgque.send('q', '{}'::jsonb)")
        time.sleep(0.01)
    wait_for(lambda: one(conn, "select count(*) from pgque.tick") - before > 3, timeout=5)
    assert not ticker.held_xmin
    busy.rollback()
    # Any other transaction left open holds it.
    one(busy, "select pg_current_xact_id()")
    assert one(conn, "select pgque.xmin_horizon()") is not None
    busy.rollback()


def test_consumer_auto_ticker(
    kind: str, db: str, conn: psycopg.Connection[Any], plain_queue: str, start: Any
) -> None:
    """``ticker="auto"`` without a scheduler: the consumer ticks for itself (either twin)."""
    consumer = make(kind, db, ticker="auto", poll_interval=30)
    got: list[int] = []
    handle(consumer, lambda msg: got.append(msg.msg_id))
    running = start(consumer)
    one(conn, "select pgque.send('q', '{}'::jsonb)")  # never ticked by the test
    wait_for(lambda: got != [], timeout=10)
    running.stop()
    assert running.outcome(timeout=5) is None
    conn.execute("update pgque.config set scheduler = 'pg_cron'")
    row = conn.execute(query("scheduler")).fetchone()  # what the consumers read to decide
    assert ticker_wanted("auto", row) is False


def test_eager_tick_sees_a_new_queues_first_event(
    conn: psycopg.Connection[Any], plain_queue: str
) -> None:
    """The first event leaves PgQ's sequence gauge at 1: ticker_eager must still tick it."""
    last = one(conn, "select max(tick_id) from pgque.tick")
    assert one(conn, "select pgque.ticker_eager('q', '0')") == last  # nothing yet
    one(conn, "select pgque.send('q', '{}'::jsonb)")
    ticked = one(conn, "select pgque.ticker_eager('q', '0')")
    assert ticked == last + 1
    assert one(conn, "select pgque.ticker_eager('q', '0')") == ticked  # covered now
    assert len(rows(conn, "select * from pgque.receive('q', 'c')")) == 1


def test_ticker_from_a_pool_borrows_one_connection_and_gives_it_back(
    db: str, conn: psycopg.Connection[Any], plain_queue: str, tickers: list[pgque.Ticker]
) -> None:
    from psycopg_pool import ConnectionPool

    with ConnectionPool(db, min_size=1, max_size=1, open=True) as pool:
        with pool.connection() as pooled:  # a session setting of the pool's own
            pooled.execute("set synchronous_commit = local")
        ticker = pgque.Ticker(pool).start()
        tickers.append(ticker)
        wait_for(lambda: ticker.leading)
        assert pool.get_stats()["pool_size"] - pool.get_stats()["pool_available"] == 1
        one(conn, "select pgque.send('q', '{\"n\": 1}'::jsonb)")
        wait_for(lambda: rows(conn, "select * from pgque.receive('q', 'c')") != [], timeout=5)
        ticker.stop()
        assert not ticker.leading
        with pool.connection() as pooled:  # back in the pool, in its own mode
            assert pooled.autocommit is False
            assert pooled.execute("show synchronous_commit").fetchone() == ("local",)
        assert one(conn, "select active from pgque.ticker_leader()") is False  # resigned


def test_ticker_on_a_given_connection(
    db: str, conn: psycopg.Connection[Any], plain_queue: str, tickers: list[pgque.Ticker]
) -> None:
    with psycopg.connect(db) as not_autocommit, pytest.raises(ValueError, match="autocommit"):
        pgque.Ticker(not_autocommit)
    own = psycopg.connect(db, autocommit=True)
    ticker = pgque.Ticker(own).start()
    tickers.append(ticker)
    wait_for(lambda: ticker.leading)
    one(conn, "select pgque.send('q', '{\"n\": 1}'::jsonb)")
    wait_for(lambda: rows(conn, "select * from pgque.receive('q', 'c')") != [], timeout=5)
    own.close()  # the owner closes it: the ticker stops instead of reconnecting
    wait_for(lambda: ticker._thread is not None and not ticker._thread.is_alive())
    assert not ticker.leading
    with pytest.raises(TypeError, match="source must be"):
        pgque.Ticker(42)  # type: ignore[arg-type]


def test_a_blocked_maintenance_round_delays_no_tick(
    db: str, conn: psycopg.Connection[Any], plain_queue: str, tickers: list[pgque.Ticker],
    connect: Any,
) -> None:  # fmt: skip
    # An extra maintenance function that waits for a lock this test holds.
    conn.execute(
        "create function public.stuck_maint(q text) returns integer language plpgsql"
        " as $$ begin perform pg_advisory_xact_lock(4242); return 1; end $$"
    )
    one(conn, "select pgque.register_maint_function('public.stuck_maint(text)')")
    one(conn, "select pgque.set_queue_config('q', 'extra_maint', '{public.stuck_maint}')")
    blocker = connect()
    one(blocker, "select pg_advisory_lock(4242)")
    start(tickers, db, maint_interval=0.05)

    def maintenance_waits() -> bool:
        return bool(one(conn, "select count(*) from pg_locks where locktype = 'advisory'"
                              " and objid = 4242 and not granted"))  # fmt: skip

    wait_for(maintenance_waits)
    one(conn, "select pgque.send('q', '{\"n\": 1}'::jsonb)")
    wait_for(lambda: rows(conn, "select * from pgque.receive('q', 'c')") != [], timeout=5)
    assert maintenance_waits()  # still stuck, and the event was ticked all the same
    one(blocker, "select pg_advisory_unlock(4242)")


def test_a_handler_in_flight_holds_back_no_other_queue(
    db: str, conn: psycopg.Connection[Any], plain_queue: str, tickers: list[pgque.Ticker],
    connect: Any,
) -> None:  # fmt: skip
    # Queue "jobs" is due for rotation while a transactional handler holds
    # its batch; queue "q" must go on ticking, retrying and delivering.
    one(conn, "select pgque.create_queue('jobs')")
    one(conn, "select pgque.set_queue_config('jobs', 'rotation_period', '1 microsecond')")
    one(conn, "select pgque.subscribe('jobs', 'worker')")
    one(conn, "select pgque.send('jobs', 'a')")
    one(conn, "select pgque.force_next_tick('jobs')")
    one(conn, "select pgque.ticker('jobs')")
    handler = connect(autocommit=False)
    batch = one(handler, "select batch_id from pgque.receive('jobs', 'worker') limit 1")
    one(handler, "select pgque.ack(%s)", batch)
    start(tickers, db, retry_interval=0.05, maint_interval=0.05)
    one(conn, "select pgque.send('q', '{}'::jsonb)")
    wait_for(lambda: (msgs := rows(conn, "select * from pgque.receive('q', 'c')")) != []
             and one(conn, "select pgque.nack(%s, %s::bigint, '0 seconds')", msgs[0][1], msgs[0][0])
             and one(conn, "select pgque.ack(%s)", msgs[0][1]) == 1, timeout=5)  # fmt: skip
    wait_for(lambda: rows(conn, "select retry_count from pgque.receive('q', 'c')") == [(1,)],
             timeout=5)  # fmt: skip
    table = one(conn, "select queue_cur_table from pgque.queue where queue_name = 'jobs'")
    handler.commit()
    wait_for(
        lambda: (
            one(conn, "select queue_cur_table from pgque.queue where queue_name = 'jobs'") != table
        )
    )


def test_rounds_over_every_queue_space_out_by_their_cost() -> None:
    """A full round of 2 ms or more waits nine times as long; a cheaper one does not."""
    assert _next_scan(10.0, 10.001) == 10.001
    assert _next_scan(10.0, 10.05) == pytest.approx(10.05 + 9 * 0.05)
