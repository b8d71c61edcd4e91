"""Lifecycle without pg_cron: start() refusing, manual mode, ticker loops and lock, status()."""

from __future__ import annotations

import re
import threading
import time
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from lifecycle_helpers import NewRole, collect_messages

from _engine import make_queue, one, rows
from _wait import wait_for

START_TEXT = (
    "pg_cron extension is not installed. PgQue itself works without pg_cron, but"
    " pgque.start() schedules cron jobs. Install pg_cron first, or run pgque.ticker()"
    " and pgque.maint() manually."
)
KEY = 1885827444
DIVISORS = [1, 2, 4, 5, 8, 10, 20, 25, 40, 50, 100, 125, 200, 250, 500, 1000]

Conn = psycopg.Connection[Any]


def config(conn: Conn) -> tuple[Any, ...]:
    row = conn.execute(
        "select ticker_job_id, maint_job_id, scheduler, tick_period_ms from pgque.config"
    ).fetchone()
    assert row is not None
    return tuple(row)


def tick_count(conn: Conn, queue: str = "q") -> int:
    return int(
        one(
            conn,
            "select count(*) from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue"
            " where q.queue_name = %s",
            queue,
        )
    )


def ticker_lock_holders(conn: Conn) -> list[int]:
    """The pid of the session leading through the ticker lease, if one does."""
    return [r[0] for r in rows(conn, "select pid from pgque.ticker_leader() where active")]


# -- start() without pg_cron: manual mode -------------------------------------


def test_start_without_pg_cron_raises_upstreams_text_and_changes_nothing(conn: Conn) -> None:
    with pytest.raises(psycopg.errors.RaiseException) as caught:
        conn.execute("select pgque.start()")
    assert caught.value.diag.message_primary == START_TEXT
    assert caught.value.diag.message_detail == "pgque:scheduler_missing"
    assert config(conn) == (None, None, None, 100)
    assert one(conn, "select count(*) from pg_namespace where nspname = 'cron'") == 0


def test_manual_mode_delivers_with_ticker_and_maint(conn: Conn) -> None:
    """Upstream's story without pg_cron: start() fails, then everything by hand."""
    with pytest.raises(psycopg.errors.RaiseException, match="PgQue itself works without pg_cron"):
        conn.execute("select pgque.start()")
    assert one(conn, "select pgque.create_queue('orders')") == 1
    assert one(conn, "select pgque.subscribe('orders', 'app')") == 1
    ids = [one(conn, "select pgque.send('orders', %s::jsonb)", f'{{"id": {i}}}') for i in (1, 2)]
    one(conn, "select pgque.force_next_tick('orders')")
    assert one(conn, "select pgque.ticker()") == 1
    one(conn, "select pgque.maint()")
    got = rows(conn, "select msg_id, payload, batch_id from pgque.receive('orders', 'app', 10)")
    assert [(r[0], r[1]) for r in got] == [(ids[0], '{"id": 1}'), (ids[1], '{"id": 2}')]
    assert one(conn, "select pgque.ack(%s)", got[0][2]) == 1

    # A retry comes back through maint() and the ticker, again by hand.
    one(conn, "select pgque.send('orders', '{\"id\": 3}'::jsonb)")
    one(conn, "select pgque.force_next_tick('orders')")
    one(conn, "select pgque.ticker()")
    msg = conn.execute("select * from pgque.receive('orders', 'app', 10)").fetchone()
    assert msg is not None
    one(conn, "select pgque.nack(%s, %s::bigint, '0 seconds')", msg[1], msg[0])
    one(conn, "select pgque.ack(%s)", msg[1])
    assert one(conn, "select pgque.maint()") >= 1
    one(conn, "select pgque.force_next_tick('orders')")
    one(conn, "select pgque.ticker()")
    again = rows(conn, "select msg_id, retry_count from pgque.receive('orders', 'app', 10)")
    assert again == [(msg[0], 1)]


def test_stop_without_pg_cron_is_a_harmless_noop(conn: Conn) -> None:
    seen = collect_messages(conn)
    conn.execute("select pgque.stop()")
    conn.execute("select pgque.stop()")
    assert config(conn) == (None, None, None, 100)
    assert seen == []


# -- status() -----------------------------------------------------------------


def test_status_rows_texts_and_order_in_manual_mode(conn: Conn) -> None:
    make_queue(conn, "a")
    make_queue(conn, "b")
    for queue, consumer in [("a", "c1"), ("a", "c2"), ("b", "c1")]:
        one(conn, "select pgque.subscribe(%s, %s)", queue, consumer)
    got = rows(conn, "select component, status, detail from pgque.status()")
    assert got == [
        ("postgresql", "info", one(conn, "select version()")),
        ("pgque", "info", one(conn, "select pgque.version()")),
        (
            "scheduler",
            "manual",
            "ticker_job_id=NULL, maint_job_id=NULL, tick_period_ms=100 (10.00 ticks/sec)",
        ),
        ("ticker", "stopped", "not scheduled (tick_period_ms=100)"),
        ("maintenance", "stopped", "not scheduled"),
        (
            "pg_cron",
            "unavailable",
            "use pgque.start_timetable() for pg_timetable,"
            " or call pgque.ticker() / pgque.maint() manually",
        ),
        (
            "pg_timetable",
            "unavailable",
            "run pg_timetable against this database, then call pgque.start_timetable()",
        ),
        ("queues", "info", "2 queues configured"),
        ("consumers", "info", "3 active subscriptions"),
        (
            "ticker_leader",
            "none",
            "no ticker leads: nothing runs ticker_loop, a Ticker or pgque ticker",
        ),
    ]


def test_status_shows_the_tick_rate_with_two_decimals(conn: Conn) -> None:
    one(conn, "select pgque.set_tick_period_ms(8)")
    detail = one(conn, "select detail from pgque.status() where component = 'scheduler'")
    assert detail.endswith("tick_period_ms=8 (125.00 ticks/sec)")
    one(conn, "select pgque.set_tick_period_ms(1000)")
    detail = one(conn, "select detail from pgque.status() where component = 'ticker'")
    assert detail == "not scheduled (tick_period_ms=1000)"


# -- set_tick_period_ms -------------------------------------------------------


def test_set_tick_period_ms_accepts_every_exact_divisor_of_1000(conn: Conn) -> None:
    for period in DIVISORS:
        assert one(conn, "select pgque.set_tick_period_ms(%s)", period) == period
        assert config(conn)[3] == period


@pytest.mark.parametrize("bad", [0, 1001, None, 251, 750, -5, 3])
def test_set_tick_period_ms_refuses_other_values(conn: Conn, bad: int | None) -> None:
    with pytest.raises(psycopg.errors.RaiseException) as caught:
        conn.execute("select pgque.set_tick_period_ms(%s)", (bad,))
    shown = "NULL" if bad is None else str(bad)
    assert caught.value.diag.message_primary == (
        f"tick_period_ms must be an exact divisor of 1000 between 1 and 1000 (got {shown})"
    )
    assert caught.value.diag.message_detail == "pgque:invalid_argument"
    assert config(conn)[3] == 100


def test_set_tick_period_ms_logs_the_change(conn: Conn) -> None:
    conn.execute("set client_min_messages = log")
    seen = collect_messages(conn)
    one(conn, "select pgque.set_tick_period_ms(200)")
    one(conn, "select pgque.set_tick_period_ms(200)")  # unchanged: no second line
    assert seen.count(("LOG", "pgque [info] lifecycle: tick period changed")) == 1


# -- the ticker loops ---------------------------------------------------------


@pytest.mark.parametrize(("period", "ticks"), [(100, 10), (250, 4), (1000, 1)])
def test_ticker_loop_calls_ticker_1000_over_period_times_in_about_a_second(
    conn: Conn, period: int, ticks: int
) -> None:
    """On a loaded machine a slow round makes the loop wait longer (nine times the
    round, see the next test), so it may tick less: up to three tries, one must
    tick exactly ``ticks`` times in about a second; none may tick more."""
    make_queue(conn, "q")  # eager: every ticker() call ticks
    one(conn, "select pgque.set_tick_period_ms(%s)", period)
    tries = []
    for _ in range(3):
        before = tick_count(conn)
        started = time.monotonic()
        conn.execute("call pgque.ticker_loop()")
        elapsed = time.monotonic() - started
        tries.append((tick_count(conn) - before, round(elapsed, 3)))
        assert 1 <= tries[-1][0] <= ticks, tries
        assert ticker_lock_holders(conn) == []
        if tries[-1][0] == ticks:
            break
    got, elapsed = tries[-1]
    assert got == ticks, f"(ticks, seconds) of each try: {tries}"
    assert (ticks - 1) * period / 1000 - 0.05 <= elapsed < 1.5, tries


def test_ticker_loop_waits_nine_times_as_long_as_a_round_took(conn: Conn) -> None:
    """The loop's next slot is on the tick_period_ms grid and not before the time the
    last round's cost asks for (``ticker_loop_for`` passes now + 9 x the round)."""
    one(conn, "select pgque.set_tick_period_ms(100)")
    next_slot = (
        "select extract(epoch from pgque._ticker_next_slot(now() - interval '50 ms', %s)"
        " - now())::numeric(6, 3)"
    )
    # Not before 420 ms from now: the first grid slot after it, at 450 ms.
    assert str(one(conn, next_slot.replace("%s", "now() + interval '420 ms'"))) == "0.450"
    # A cheap round asks for nothing: the next slot on the grid, 50 ms from now.
    assert str(one(conn, next_slot.replace("%s", "now() - interval '1 hour'"))) == "0.050"


def test_ticker_loop_commits_after_every_tick(conn: Conn, connect: Any) -> None:
    make_queue(conn, "q")
    looper = connect()
    thread = threading.Thread(target=looper.execute, args=("call pgque.ticker_loop_for(2)",))
    before = tick_count(conn)
    thread.start()
    try:
        wait_for(lambda: tick_count(conn) - before >= 2, what="two ticks while it runs")
        midway = tick_count(conn) - before
        assert 2 <= midway < 20  # committed, seen by another session, while it runs
        assert ticker_lock_holders(conn) == [looper.info.backend_pid]
        assert one(conn, "select pgque.ticker_lead('another', '1 s')") is False
    finally:
        thread.join(10)
    # 20 on a quiet machine; a slow round makes the loop wait longer (the count
    # itself: test_ticker_loop_calls_ticker_1000_over_period_times_in_about_a_second)
    assert midway < tick_count(conn) - before <= 20
    assert ticker_lock_holders(conn) == []


def test_ticker_loop_is_a_procedure_that_needs_its_own_transaction(
    conn: Conn, connect: Any
) -> None:
    make_queue(conn, "q")
    before = tick_count(conn)
    tx = connect(autocommit=False)
    with pytest.raises(psycopg.errors.InvalidTransactionTermination):
        tx.execute("call pgque.ticker_loop()")
    tx.rollback()
    assert ticker_lock_holders(conn) == []  # not left behind in that session
    assert tick_count(conn) == before


@pytest.mark.parametrize("bad", [0, -1, 3601, None])
def test_ticker_loop_for_refuses_bad_durations(conn: Conn, bad: int | None) -> None:
    with pytest.raises(psycopg.errors.RaiseException) as caught:
        conn.execute("call pgque.ticker_loop_for(%s)", (bad,))
    shown = "NULL" if bad is None else str(bad)
    assert caught.value.diag.message_primary == (
        f"ticker_loop_for: seconds must be between 1 and 3600, got {shown}"
    )


def test_the_loop_reads_the_tick_period_every_round(conn: Conn, connect: Any) -> None:
    make_queue(conn, "q")
    one(conn, "select pgque.set_tick_period_ms(1000)")
    looper = connect()
    thread = threading.Thread(target=looper.execute, args=("call pgque.ticker_loop_for(3)",))
    before = tick_count(conn)
    thread.start()
    try:
        # The first round ticked once; the loop now waits for the next second.
        wait_for(lambda: tick_count(conn) - before >= 1, what="the first round's tick")
        one(conn, "select pgque.set_tick_period_ms(100)")
    finally:
        thread.join(10)
    assert tick_count(conn) - before > 10  # 1 tick, then about 10 per second for 2 s


def test_ticker_lock_key_is_documented_and_distinct(conn: Conn) -> None:
    assert one(conn, "select pgque.ticker_lock_key()") == KEY
    assert KEY not in (1885827445, 1885827446)
    assert (
        one(
            conn,
            "select provolatile from pg_proc where oid = 'pgque.ticker_lock_key()'::regprocedure",
        )
        == "i"
    )


def test_ticker_loop_idles_while_another_ticker_leads(conn: Conn, connect: Any) -> None:
    make_queue(conn, "q")
    holder = connect()
    assert one(holder, "select pgque.ticker_lead('another ticker', '1 hour')") is True
    before = tick_count(conn)
    conn.execute("call pgque.ticker_loop()")
    assert tick_count(conn) == before

    # It resigns mid-run: the loop takes over and ticks for the rest of it.
    looper = connect()
    thread = threading.Thread(target=looper.execute, args=("call pgque.ticker_loop_for(2)",))
    thread.start()
    try:
        time.sleep(0.7)
        assert tick_count(conn) == before
        released_at = one(conn, "select clock_timestamp()")
        assert one(holder, "select pgque.ticker_resign('another ticker')") is True
    finally:
        thread.join(10)
    new = rows(conn, "select tick_time from pgque.tick where tick_time > %s", released_at)
    assert 5 <= len(new) <= 14
    assert tick_count(conn) - before == len(new)
    assert ticker_lock_holders(conn) == []


def test_ticker_loop_takes_over_from_a_leader_whose_lease_ran_out(conn: Conn, connect: Any) -> None:
    """A leader that vanished, or sits idle in a pooled session, never renews: the
    loop leads once its lease has expired, and says so in the server log."""
    make_queue(conn, "q")
    stalled = connect()
    assert one(stalled, "select pgque.ticker_lead('stalled ticker', '300 ms')") is True
    expires = one(conn, "select expires from pgque.ticker_leader()")
    conn.execute("set client_min_messages = log")
    seen = collect_messages(conn)
    before = tick_count(conn)
    conn.execute("call pgque.ticker_loop_for(2)")
    new = rows(conn, "select tick_time from pgque.tick order by tick_id")[before:]
    assert len(new) >= 10
    assert min(t for (t,) in new) >= expires - timedelta(milliseconds=50)
    assert ("LOG", "pgque [warning] ticker: took over an expired lease") in seen
    # The loop resigned at its end: the lease is free for anyone.
    assert one(stalled, "select pgque.ticker_lead('stalled ticker', '300 ms')") is True


def test_ticker_loop_keeps_ticking_through_errors_and_then_fails_the_run(conn: Conn) -> None:
    make_queue(conn, "q")
    conn.execute(
        "create function public.odd_ticks_only() returns trigger language plpgsql as $$"
        " begin if new.tick_id % 2 = 0 then raise exception 'even tick %', new.tick_id; end if;"
        " return new; end $$"
    )
    conn.execute(
        "create trigger odd_ticks_only before insert on pgque.tick"
        " for each row execute function public.odd_ticks_only()"
    )
    conn.execute("set client_min_messages = log")
    seen = collect_messages(conn)
    before = tick_count(conn)
    with pytest.raises(psycopg.errors.RaiseException) as caught:
        conn.execute("call pgque.ticker_loop()")
    message = caught.value.diag.message_primary or ""
    # About ten rounds in the loop's second (fewer on a loaded machine), every other
    # one failing on an even tick id.
    counted = re.match(r"pgque ticker loop: ticker\(\) failed in (\d+) of (\d+) rounds;", message)
    assert counted, message
    failed, rounds = int(counted[1]), int(counted[2])
    assert 5 <= rounds <= 10 and abs(2 * failed - rounds) <= 1, message
    assert "last error: even tick" in message
    assert caught.value.diag.message_detail == "pgque:ticker_failed"
    assert tick_count(conn) - before == rounds - failed  # the good rounds stayed committed
    assert seen.count(("LOG", "pgque [error] ticker: ticker() failed in the ticker loop")) == 1
    assert ticker_lock_holders(conn) == []


def test_admin_can_run_the_loops_reader_cannot(conn: Conn, new_role: NewRole) -> None:
    make_queue(conn, "q")
    admin, reader = new_role("pgque_admin"), new_role("pgque_reader")
    before = tick_count(conn)
    conn.execute(f'set role "{admin}"')
    conn.execute("call pgque.ticker_loop()")
    conn.execute("reset role")
    assert tick_count(conn) - before == 10
    conn.execute(f'set role "{reader}"')
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("call pgque.ticker_loop()")
    conn.execute("reset role")


# -- roles --------------------------------------------------------------------

ADMIN_ONLY = [
    "select pgque.stop()",
    "select * from pgque.status()",
    "select pgque.set_tick_period_ms(100)",
    "select pgque.stop_timetable()",
    "select pgque.ticker_lock_key()",
]


@pytest.mark.parametrize("query", ADMIN_ONLY)
def test_lifecycle_functions_are_for_admins(conn: Conn, new_role: NewRole, query: str) -> None:
    admin, reader, writer = (new_role(f"pgque_{k}") for k in ("admin", "reader", "writer"))
    for role in (reader, writer):
        conn.execute(f'set role "{role}"')
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(query)
        conn.execute("reset role")
    conn.execute(f'set role "{admin}"')
    conn.execute(query)
    conn.execute("reset role")


def test_admin_start_reaches_the_pg_cron_check(conn: Conn, new_role: NewRole) -> None:
    conn.execute(f'set role "{new_role("pgque_admin")}"')
    with pytest.raises(psycopg.errors.RaiseException, match="pg_cron extension is not installed"):
        conn.execute("select pgque.start()")


# -- the pg_cron schedules, by version (no pg_cron needed) --------------------

VACUUM = (
    "VACUUM (SKIP_LOCKED) pgque.subscription, pgque.consumer, pgque.queue, pgque.tick,"
    " pgque.retry_queue, pgque.delayed_events, pgque.dead_letter"
)
TIMEOUT = "SET statement_timeout = '25s'; "


@pytest.mark.parametrize("version", ["1.5", "1.6", "1.6.4", "1.10", "2.0"])
def test_pg_cron_15_and_later_get_second_schedules(conn: Conn, version: str) -> None:
    assert rows(conn, "select * from pgque._cron_jobs(%s)", version) == [
        ("pgque_ticker", "1 second", "CALL pgque.ticker_loop()"),
        ("pgque_retry_events", "30 seconds", TIMEOUT + "SELECT pgque.maint_retry_events()"),
        ("pgque_maint", "30 seconds", "CALL pgque.run_maint()"),
        ("pgque_rotate_step2", "10 seconds", "SELECT pgque.maint_rotate_tables_step2()"),
        ("pgque_vacuum", "30 seconds", VACUUM),
    ]


@pytest.mark.parametrize("version", ["1.4-1", "1.4", "1.3"])
def test_pg_cron_before_15_gets_minute_schedules_and_the_long_loop(
    conn: Conn, version: str
) -> None:
    assert rows(conn, "select * from pgque._cron_jobs(%s)", version) == [
        ("pgque_ticker", "* * * * *", "CALL pgque.ticker_loop_for(58)"),
        ("pgque_retry_events", "* * * * *", TIMEOUT + "SELECT pgque.maint_retry_events()"),
        ("pgque_maint", "* * * * *", "CALL pgque.run_maint()"),
        ("pgque_rotate_step2", "* * * * *", "SELECT pgque.maint_rotate_tables_step2()"),
        ("pgque_vacuum", "* * * * *", VACUUM),
    ]


@pytest.mark.parametrize(
    ("version", "message"),
    [
        (None, "pgque.start: cannot read the pg_cron version NULL"),
        ("devel", "pgque.start: cannot read the pg_cron version 'devel'"),
        (
            "1.2",
            "pgque.start: pg_cron 1.2 is too old; pgque needs pg_cron 1.3 or later (named jobs)",
        ),
    ],
)
def test_unusable_pg_cron_versions_are_refused(
    conn: Conn, version: str | None, message: str
) -> None:
    with pytest.raises(psycopg.errors.RaiseException) as caught:
        conn.execute("select * from pgque._cron_jobs(%s)", (version,))
    assert caught.value.diag.message_primary == message


def test_every_job_command_runs_as_written(conn: Conn) -> None:
    """The 1.5+ commands, run directly the way pg_cron sends them (one string each)."""
    make_queue(conn, "q")
    before = tick_count(conn)
    for name, _schedule, command in rows(conn, "select * from pgque._cron_jobs('1.5')"):
        conn.execute(command)  # no parameters: one simple query, as pg_cron sends it
        if name == "pgque_ticker":
            assert tick_count(conn) - before == 10
