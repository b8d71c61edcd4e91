"""Periodic schedules (functions/schedule.sql): cron, exactly once, missed runs.

A schedule's occurrences are computed by ``_cron_next``; whatever ticks
sends each due one in the transaction that moves the schedule on, taking
its row FOR UPDATE SKIP LOCKED. Time is driven by moving a schedule's next
run into the past, never by waiting for the clock.
"""

from __future__ import annotations

import threading
from datetime import datetime, timezone
from typing import Any

import psycopg
import pytest

from _engine import make_queue, one, rows
from _wait import wait_for

Conn = psycopg.Connection[Any]


@pytest.mark.parametrize(
    ("cron", "time_zone", "after", "expected"),
    [
        ("*/5 * * * *", "UTC", "2026-11-28 10:03:00+00", "2026-11-28 10:05"),
        ("*/5 * * * *", "UTC", "2026-11-28 10:05:00+00", "2026-11-28 10:10"),
        ("0 9 * * mon-fri", "Europe/Paris", "2026-11-28 10:03:00+00", "2026-11-30 08:00"),
        ("@monthly", "UTC", "2026-11-28 10:03:00+00", "2026-12-01 00:00"),
        ("@hourly", "UTC", "2026-11-28 10:03:00+00", "2026-11-28 11:00"),
        ("0 0 29 2 *", "UTC", "2026-11-28 00:00:00+00", "2028-02-29 00:00"),
        # Restricted day of month and day of week: either one matches.
        ("0 0 13 * fri", "UTC", "2026-11-28 00:00:00+00", "2026-12-04 00:00"),
        ("15,45 */6 1-7 jan,jul *", "UTC", "2026-11-28 00:00:00+00", "2027-01-01 00:15"),
        ("0 0 * * 7", "UTC", "2026-11-28 00:00:00+00", "2026-11-29 00:00"),  # 7 is Sunday
        # 02:30 does not exist in Paris on 28 March 2027: PostgreSQL reads it as 03:30.
        ("30 2 * * *", "Europe/Paris", "2027-03-27 12:00:00+00", "2027-03-28 01:30"),
    ],
)
def test_the_next_occurrence(
    conn: Conn, cron: str, time_zone: str, after: str, expected: str
) -> None:
    got = one(
        conn,
        "select to_char(pgque._cron_next(%s, %s::timestamptz, %s) at time zone 'UTC',"
        " 'YYYY-MM-DD HH24:MI')",
        cron,
        after,
        time_zone,
    )
    assert got == expected


@pytest.mark.parametrize(
    ("cron", "message"),
    [
        ("* * * *", "cron '* * * *': expected five fields"),
        ("60 * * * *", "cron '60 * * * *': the minute field '60' is out of range (0 to 59"),
        ("* * 0 * *", "the day of month field '0' is out of range (1 to 31"),
        ("a * * * *", "cron 'a * * * *': 'a' is not a minute (0 to 59)"),
        ("*/0 * * * *", "the minute field '*/0' is out of range"),
        ("0 0 31 2 *", "cron '0 0 31 2 *': no date ever matches it"),
        ("0 0 * * fri-mon", "the day of week field 'fri-mon' is out of range"),
    ],
)
def test_a_bad_cron_is_refused_with_what_is_wrong(conn: Conn, cron: str, message: str) -> None:
    make_queue(conn, "q")
    with pytest.raises(psycopg.errors.RaiseException) as caught:
        conn.execute("select pgque.schedule('q', 's', %s, '{}'::jsonb)", (cron,))
    assert message in (caught.value.diag.message_primary or "")
    assert caught.value.diag.message_detail == "pgque:invalid_argument"
    assert rows(conn, "select * from pgque.schedules()") == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("nope", "s", "* * * * *", "{}", None, "UTC"), "queue not found: nope"),
        (("q", " s", "* * * * *", "{}", None, "UTC"), "a schedule name is 1 to 200 characters"),
        (("q", "s", "* * * * *", "{}", None, "Mars/Base"), "unknown time zone 'Mars/Base'"),
    ],
)
def test_bad_arguments_are_refused(conn: Conn, args: tuple[Any, ...], message: str) -> None:
    make_queue(conn, "q")
    with pytest.raises(psycopg.errors.RaiseException) as caught:
        conn.execute("select pgque.schedule(%s, %s, %s, %s::jsonb, %s, %s)", args)
    assert message in (caught.value.diag.message_primary or "")


def make_due(conn: Conn, ago: str = "1 second") -> None:
    """Move every schedule's next run back to the start of the minute ``ago`` ago (an
    occurrence of a minutely cron, as next runs are)."""
    conn.execute(
        "update pgque.schedule set sc_next_run = date_trunc('minute', now() - %s::interval)",
        (ago,),
    )


def sent(conn: Conn) -> list[tuple[Any, ...]]:
    return rows(
        conn,
        "select ev_type, ev_data, ev_extra2, ev_extra3 from pgque.event_1 order by ev_id",
    )


def test_a_due_occurrence_is_sent_by_the_ticker_with_its_time(conn: Conn) -> None:
    make_queue(conn, "q")
    next_run = one(
        conn, "select pgque.schedule('q', 'report', '* * * * *', '{\"n\": 1}', 'report.tick')"
    )
    assert next_run > one(conn, "select now()")
    one(conn, "select pgque.ticker()")
    assert sent(conn) == []  # not due yet
    make_due(conn)
    one(conn, "select pgque.ticker()")
    [(type_, data, name, at)] = sent(conn)
    assert (type_, data, name) == ("report.tick", '{"n": 1}', "report")
    occurrence = datetime.strptime(at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    [(last_run, last_event, moved_on)] = rows(
        conn, "select last_run, last_event_id, next_run > now() from pgque.schedules()"
    )
    assert last_run == occurrence and last_event is not None and moved_on


def test_missed_occurrences_are_sent_once_the_latest(conn: Conn) -> None:
    make_queue(conn, "q")
    one(conn, "select pgque.schedule('q', 'minutely', '* * * * *', '{}')")
    make_due(conn, "3 days")
    one(conn, "select pgque.ticker()")
    one(conn, "select pgque.ticker()")
    [(_, _, _, at)] = sent(conn)
    latest = one(conn, "select to_char(date_trunc('minute', now()) at time zone 'UTC',"
                       " 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')")  # fmt: skip
    assert at == latest


def test_each_occurrence_is_sent_once_by_tickers_racing(conn: Conn, connect: Any) -> None:
    """Four sessions calling ticker() and one a consumer's own tick, all at once."""
    make_queue(conn, "q")
    one(conn, "select pgque.subscribe('q', 'c')")
    one(conn, "select pgque.schedule('q', 'race', '* * * * *', '{}')")
    stop = threading.Event()
    errors: list[BaseException] = []

    def tick(statement: str) -> None:
        session = connect()
        while not stop.is_set():
            try:
                session.execute(statement)
            except psycopg.Error as exc:  # pragma: no cover - reported below
                errors.append(exc)
                return

    statements = ["select pgque.ticker()"] * 4 + ["select pgque._consumer_tick('q', '5 ms')"]
    threads = [threading.Thread(target=tick, args=(s,)) for s in statements]
    for thread in threads:
        thread.start()
    try:
        for round_ in range(1, 8):
            make_due(conn)
            wait_for(lambda: one(conn, "select next_run > now() from pgque.schedules()"),
                     what="the occurrence sent")  # fmt: skip
            assert len(sent(conn)) == round_
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
    assert errors == []


def test_a_queue_refusing_inserts_skips_the_occurrence_and_ticks_on(conn: Conn) -> None:
    make_queue(conn, "q")
    one(conn, "select pgque.schedule('q', 's', '* * * * *', '{}')")
    one(conn, "select pgque.set_queue_config('q', 'disable_insert', 'true')")
    make_due(conn)
    one(conn, "select pgque.ticker()")  # raises nothing
    assert sent(conn) == []
    assert one(conn, "select next_run > now() from pgque.schedules()") is True


def test_replacing_keeps_the_next_run_unless_the_timing_changes(conn: Conn) -> None:
    make_queue(conn, "q")
    one(conn, "select pgque.schedule('q', 's', '@daily', '{\"v\": 1}')")
    conn.execute("update pgque.schedule set sc_next_run = now() + interval '1 hour'")
    kept = one(conn, "select next_run from pgque.schedules()")
    one(conn, "select pgque.schedule('q', 's', '@daily', '{\"v\": 2}')")
    assert rows(conn, "select payload, next_run from pgque.schedules()") == [('{"v": 2}', kept)]
    one(conn, "select pgque.schedule('q', 's', '@hourly', '{\"v\": 2}')")
    assert one(conn, "select next_run from pgque.schedules()") != kept
    assert one(conn, "select pgque.unschedule('q', 's')") is True
    assert one(conn, "select pgque.unschedule('q', 's')") is False
    assert rows(conn, "select * from pgque.schedules()") == []


def test_dropping_the_queue_drops_its_schedules(conn: Conn) -> None:
    make_queue(conn, "q")
    one(conn, "select pgque.schedule('q', 's', '@daily', '{}')")
    one(conn, "select pgque.drop_queue('q')")
    assert rows(conn, "select * from pgque.schedules()") == []


def test_admins_manage_schedules_readers_list_them(conn: Conn, new_role: Any) -> None:
    make_queue(conn, "q")
    one(conn, "select pgque.schedule('q', 's', '@daily', '{}')")
    for kind, can_list, can_manage in [("reader", True, False), ("writer", False, False),
                                       ("admin", True, True)]:  # fmt: skip
        conn.execute(f'set role "{new_role(f"pgque_{kind}")}"')
        try:
            for statement, allowed in [
                ("select * from pgque.schedules()", can_list),
                ("select pgque.schedule('q', 's', '@daily', '{}')", can_manage),
                ("select pgque.unschedule('q', 'nothing')", can_manage),
            ]:
                if allowed:
                    conn.execute(statement)
                else:
                    with pytest.raises(psycopg.errors.InsufficientPrivilege):
                        conn.execute(statement)
        finally:
            conn.execute("reset role")
