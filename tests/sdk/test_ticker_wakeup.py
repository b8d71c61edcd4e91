"""The Ticker waits for the database: idle it runs no statements, a producer's commit
wakes it, and a standby waits for the leader's resignation instead of polling."""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest

import _wait
import pgque
from _engine import one, rows

wait_for = functools.partial(_wait.wait_for, timeout=15.0)


@pytest.fixture
def tickers() -> Iterator[list[pgque.Ticker]]:
    started: list[pgque.Ticker] = []
    yield started
    for ticker in started:
        ticker.stop()


@pytest.fixture
def queue(conn: psycopg.Connection[Any]) -> str:
    """Default thresholds (3 s max lag, 1 min idle period): only a wakeup ticks fast."""
    one(conn, "select pgque.create_queue('q')")
    one(conn, "select pgque.subscribe('q', 'c')")
    return "q"


def start(tickers: list[pgque.Ticker], dsn: str, name: str, **kwargs: Any) -> pgque.Ticker:
    ticker = pgque.Ticker(f"{dsn} application_name={name}", **kwargs).start()
    tickers.append(ticker)
    return ticker


def last_statement(conn: psycopg.Connection[Any], name: str) -> datetime | None:
    """When the ticker's own session (the first one named ``name``; the leader's
    maintenance connects later) last started or ended a statement (None: no session)."""
    got = rows(conn, "select state_change from pg_stat_activity where application_name = %s"
                     " order by backend_start limit 1", name)  # fmt: skip
    return got[0][0] if got else None


def quiet_for(conn: psycopg.Connection[Any], name: str, seconds: float) -> bool:
    """True once the session has been idle, without a statement, for ``seconds``."""
    changed = last_statement(conn, name)
    if changed is None:
        return False
    since = "select clock_timestamp() - %s >= make_interval(secs => %s)"
    return one(conn, since, changed, seconds) is True


def test_an_idle_leader_runs_no_statements(
    db: str, conn: psycopg.Connection[Any], queue: str, tickers: list[pgque.Ticker]
) -> None:
    ticker = start(tickers, db, "idle_leader", idle_poll_interval=30)
    wait_for(lambda: ticker.leading)
    led_by = one(conn, "select clock_timestamp()")  # after the lease's taking
    # The leader's own session: the first of that name (its maintenance connects later,
    # and runs statements of its own; while the leader's is busy, it is the idle one).
    leader = one(conn, "select pid from pg_stat_activity where application_name = 'idle_leader'"
                       " order by backend_start limit 1")  # fmt: skip
    last = "select state_change, query from pg_stat_activity where state = 'idle' and pid = %s"
    # A renewal a second past the taking: the leader's first rounds (the queue new to
    # it, ticked every period for half a second) are over. The taking is a ticker_lead
    # too, which a loaded machine shows for a while before the rounds.
    settled = led_by + timedelta(seconds=1)
    wait_for(lambda: any("ticker_lead(" in statement and changed > settled
                         for changed, statement in rows(conn, last, leader)),
             what="a renewal once the first rounds are over")  # fmt: skip
    # Only the lease's renewals, every quarter of it (0.5 s): the old ticker polled
    # every 5 ms while idle, 200 statements in a second.
    seen: set[tuple[Any, ...]] = set()
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        seen.update(rows(conn, last, leader))
        time.sleep(0.01)
    assert len(seen) <= 4, seen
    assert all("ticker_lead(" in statement for _, statement in seen), seen


def test_a_commit_wakes_the_idle_leader(
    db: str, conn: psycopg.Connection[Any], queue: str, tickers: list[pgque.Ticker], connect: Any
) -> None:
    ticker = start(tickers, db, "woken", idle_poll_interval=30)
    wait_for(lambda: ticker.leading)
    wait_for(lambda: quiet_for(conn, "woken", 0.2))
    ticks = one(conn, "select count(*) from pgque.tick")
    producer = connect(autocommit=False)
    one(producer, "select pgque.send('q', '{\"n\": 1}'::jsonb)")
    sent = time.monotonic()
    producer.commit()
    wait_for(lambda: rows(conn, "select * from pgque.receive('q', 'c')") != [], timeout=5)
    # Far below the 30 s safety poll and the queue's 3 s max lag: the commit woke it.
    assert time.monotonic() - sent < 2.0
    assert one(conn, "select count(*) from pgque.tick") > ticks


def test_events_keep_flowing_through_wakeups(
    db: str, conn: psycopg.Connection[Any], queue: str, tickers: list[pgque.Ticker]
) -> None:
    ticker = start(tickers, db, "flowing", idle_poll_interval=30)
    wait_for(lambda: ticker.leading)
    got: list[int] = []
    receive = "select payload, batch_id from pgque.receive('q', 'c')"
    for n in range(30):
        one(conn, "select pgque.send('q', %s::text::jsonb)", str(n))
        wait_for(lambda: (msgs := rows(conn, receive)) != []
                 and not got.extend(int(m[0]) for m in msgs)
                 and one(conn, "select pgque.ack(%s)", msgs[0][1]) == 1, timeout=5)  # fmt: skip
    assert got == list(range(30))


def standby_waiting_since(conn: psycopg.Connection[Any], name: str) -> datetime | None:
    """When the session ``name`` ended its last statement, if that was a try of the
    leader's lease and it has run nothing since (None otherwise): it is waiting."""
    got = rows(conn, "select state_change from pg_stat_activity where application_name = %s"
                     " and state = 'idle' and query like 'select pgque.ticker_lead(%%'"
                     " order by backend_start limit 1", name)  # fmt: skip
    return got[0][0] if got else None


def sent_and_ticked(conn: psycopg.Connection[Any], payload: str) -> None:
    """Send ``payload`` to queue q and wait for the leader's commit-woken tick."""
    ticks = one(conn, "select count(*) from pgque.tick")
    one(conn, "select pgque.send('q', %s::text::jsonb)", payload)
    wait_for(lambda: one(conn, "select count(*) from pgque.tick") > ticks, timeout=60,
             what=f"a tick after sending {payload}")  # fmt: skip


def test_a_standby_waits_quietly_and_takes_over_when_the_leader_resigns(
    db: str, conn: psycopg.Connection[Any], queue: str, tickers: list[pgque.Ticker]
) -> None:
    first = start(tickers, db, "first", idle_poll_interval=30)
    wait_for(lambda: first.leading, timeout=60, what="the first ticker leading")
    # An hour between its own tries: only the resignation can make it lead here.
    second = start(tickers, db, "second", idle_poll_interval=30, standby_interval=3600)
    waiting = wait_for(lambda: standby_waiting_since(conn, "second"), timeout=60,
                       what="the standby waiting")  # fmt: skip
    # While the leader works (woken by commits, ticking) and then for a second of
    # the server's clock, the standby runs nothing: a poll would change its state.
    for n in range(5):
        sent_and_ticked(conn, str(n))
    wait_for(lambda: standby_waiting_since(conn, "second") != waiting
             or quiet_for(conn, "second", 1.0), timeout=60, what="a quiet standby")  # fmt: skip
    assert standby_waiting_since(conn, "second") == waiting
    assert first.leading and not second.leading
    first.stop()
    wait_for(lambda: second.leading, timeout=60, what="the standby taking over")
    sent_and_ticked(conn, "5")


def test_a_standby_stops_promptly(db: str, queue: str, tickers: list[pgque.Ticker]) -> None:
    leader = start(tickers, db, "leader", idle_poll_interval=30)
    wait_for(lambda: leader.leading)
    standby = start(tickers, db, "standby", standby_interval=60)
    stopping = time.monotonic()
    standby.stop()
    assert standby._thread is not None and not standby._thread.is_alive()
    assert time.monotonic() - stopping < 2


def test_a_send_still_open_at_a_tick_is_delivered_soon_after_its_commit(
    db: str, conn: psycopg.Connection[Any], queue: str, tickers: list[pgque.Ticker], connect: Any
) -> None:
    ticker = start(tickers, db, "straggler", idle_poll_interval=30)
    wait_for(lambda: ticker.leading)
    # The leader's first round arms the wakeup. A send before it notifies nobody at its
    # commit, and its straggler is left to the idle rule (here 30 s): on a loaded machine
    # the test could send first.
    armed = "select pg_catalog.pg_sequence_last_value('pgque.ticker_wake_seq') = 0"
    wait_for(lambda: one(conn, armed))
    producer = connect(autocommit=False)
    one(producer, "select pgque.send('q', '{\"late\": 1}'::jsonb)")
    one(conn, "select pgque.send('q', '{\"early\": 1}'::jsonb)")  # ticked with the late one open
    wait_for(lambda: rows(conn, "select payload, batch_id from pgque.receive('q', 'c')")
             and one(conn, "select pgque.ack(batch_id) from pgque.receive('q', 'c') limit 1"),
             timeout=5)  # fmt: skip
    producer.commit()
    committed = time.monotonic()
    wait_for(lambda: rows(conn, "select * from pgque.receive('q', 'c')") != [], timeout=5)
    # Not the idle-tick rule's 1.5 s (max_lag / 2): the straggler was found and ticked.
    assert time.monotonic() - committed < 1.0
