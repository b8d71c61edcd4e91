"""The Ticker through a real PgBouncer in transaction mode (round robin).

With ``pooler=True`` it leads through the lease and ticks through the
pooler; a stopped leader, or one killed with SIGKILL (its lease just stops
being renewed), is replaced by a standby within ``lease + standby_interval``.
Without the option it stops at once with :attr:`pgque.Ticker.failure`, a
:class:`pgque.PgquePoolerError` naming the option.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import pgque
from _engine import make_queue, one, rows
from _wait import wait_for


@pytest.fixture
def queue(conn: psycopg.Connection[Any]) -> str:
    make_queue(conn, "q")
    one(conn, "select pgque.subscribe('q', 'c')")
    return "q"


@pytest.fixture
def tickers() -> Iterator[list[pgque.Ticker]]:
    started: list[pgque.Ticker] = []
    yield started
    for ticker in started:
        ticker.stop()


def ticked(conn: psycopg.Connection[Any], payload: int) -> None:
    """Send ``payload`` directly and wait until a tick lets consumer c receive it."""
    one(conn, "select pgque.send('q', %s::text::jsonb)", str(payload))
    receive = "select batch_id, payload from pgque.receive('q', 'c')"
    got = wait_for(lambda: rows(conn, receive), timeout=15, what=f"a tick after {payload}")
    assert [int(r[1]) for r in got] == [payload]
    one(conn, "select pgque.ack(%s)", got[0][0])


def test_a_pooled_ticker_leads_ticks_and_is_replaced(
    pooled: str, conn: psycopg.Connection[Any], queue: str, tickers: list[pgque.Ticker]
) -> None:
    options: dict[str, Any] = {"pooler": True, "standby_interval": 0.2, "lease": 1.0}
    first = pgque.Ticker(f"{pooled} application_name=first", **options).start()
    tickers.append(first)
    wait_for(lambda: first.leading, what="the first ticker leading")
    for n in range(3):
        ticked(conn, n)
    second = pgque.Ticker(f"{pooled} application_name=second", **options).start()
    tickers.append(second)
    ticked(conn, 3)
    assert first.leading and not second.leading and first.failure is None
    first.stop()
    wait_for(lambda: second.leading, timeout=5, what="the standby taking over")
    ticked(conn, 4)
    assert second.failure is None
    assert rows(conn, "select application_name, active from pgque.ticker_leader()") == [
        ("second", True)
    ]


def test_a_killed_pooled_leader_is_replaced_within_the_lease(
    pooled: str, conn: psycopg.Connection[Any], queue: str, tickers: list[pgque.Ticker]
) -> None:
    script = textwrap.dedent("""
        import sys, time, pgque
        ticker = pgque.Ticker(sys.argv[1], pooler=True).start()
        while not ticker.leading:
            time.sleep(0.01)
        print("leading", flush=True)
        time.sleep(600)
    """)
    dsn = f"{pooled} application_name=doomed"
    doomed = subprocess.Popen([sys.executable, "-c", script, dsn], stdout=subprocess.PIPE)
    try:
        assert doomed.stdout is not None and doomed.stdout.readline() == b"leading\n"
        standby = pgque.Ticker(f"{pooled} application_name=standby", pooler=True).start()
        tickers.append(standby)
        ticked(conn, 1)
        assert not standby.leading
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(10)
        # The lease (2 s) runs out, the standby's next try (every 2 s) takes it.
        wait_for(lambda: standby.leading, timeout=10, what="the standby taking over")
        ticked(conn, 2)
    finally:
        if doomed.poll() is None:
            doomed.kill()
            doomed.wait(10)


def test_without_the_option_the_ticker_stops_naming_it(
    pooled: str, conn: psycopg.Connection[Any], queue: str, tickers: list[pgque.Ticker]
) -> None:
    ticker = pgque.Ticker(pooled).start()
    tickers.append(ticker)
    ticks = (
        "select count(*) from pgque.tick"
        " where tick_queue = (select queue_id from pgque.queue where queue_name = 'q')"
    )
    for n in range(20):  # events to tick: its statements repeat and get prepared
        before = one(conn, ticks)
        one(conn, "select pgque.send('q', %s::text::jsonb)", str(n))
        wait_for(lambda before=before: ticker.failure is not None or one(conn, ticks) > before,
                 timeout=10, what="a tick or the failure")  # fmt: skip
        if ticker.failure is not None:
            break
    wait_for(lambda: ticker.failure is not None, timeout=15, what="the ticker's failure")
    assert isinstance(ticker.failure, pgque.PgquePoolerError)
    assert "pooler=True" in str(ticker.failure)
    assert ticker._thread is not None
    ticker._thread.join(5)
    assert not ticker._thread.is_alive() and not ticker.leading
