"""A periodic schedule with every kind of ticker at once (issue 36, "Done when").

Two SDK :class:`pgque.Ticker`s and pg_cron's ticker job (``CALL
pgque.ticker_loop_for(58)``, scheduled by ``pgque.start()`` on PostgreSQL 15
with pg_cron) run on one database with one schedule; the schedule's next run
is moved into the past (as the owner) round after round, each once the
previous occurrence was sent, and every round must add exactly one event.
Between rounds the leader goes (a leading SDK Ticker stops until the next
occurrence was sent, then starts again; pg_cron's job is killed), so the
occurrences are sent by the three tickers in turn and across restarts.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

import pgque
from _wait import wait_for

ROUNDS = 4
RENEWED_SINCE = "select renewed > %s from pgque.ticker_leader()"


def _one(conn: psycopg.Connection[Any], query: str, *params: Any) -> Any:
    row = conn.execute(query, params).fetchone()
    return None if row is None else row[0]


def _events(conn: psycopg.Connection[Any]) -> list[tuple[str, str]]:
    rows = conn.execute(
        "select ev_extra2, ev_extra3 from pgque.event_1 where ev_type = 'tick' order by ev_id"
    ).fetchall()
    return [(r[0], r[1]) for r in rows]


def _leader(conn: psycopg.Connection[Any]) -> str | None:
    return _one(conn, "select application_name from pgque.ticker_leader() where active")  # type: ignore[no-any-return]


@pytest.mark.slow
def test_each_occurrence_is_sent_once_by_two_tickers_and_the_pg_cron_job(cron_db: str) -> None:
    conn = psycopg.connect(cron_db, autocommit=True)
    tickers: dict[str, pgque.Ticker] = {}

    def start_ticker(name: str) -> None:
        ticker = pgque.Ticker(f"{cron_db} application_name={name}", idle_poll_interval=0.05,
                              standby_interval=0.1, lease=0.5)  # fmt: skip
        tickers[name] = ticker.start()

    try:
        with pgque.PgqueClient(conn) as client:
            client.create_queue("q")
            client.subscribe("q", "c")
            # Never due by itself during the test: only the rounds below make it due.
            client.schedule("q", "yearly", "0 0 1 1 *", {"n": 1}, type="tick")
            client.start_scheduler()  # pg_cron's ticker job: CALL pgque.ticker_loop_for(58)
        # pg_cron starts the job at the next minute boundary.
        wait_for(
            lambda: _one(conn, "select count(*) from pg_stat_activity"
                               " where query like 'CALL pgque.ticker_loop_for(%%'"),
            timeout=75, what="pg_cron's ticker job running",
        )  # fmt: skip
        start_ticker("ticker_a")
        start_ticker("ticker_b")
        leaders: list[str | None] = []
        stopped: str | None = None
        for round_ in range(1, ROUNDS + 1):
            conn.execute(
                "update pgque.schedule"
                " set sc_next_run = date_trunc('minute', now() - interval '1 s')"
            )
            wait_for(lambda: _one(conn, "select next_run > now() from pgque.schedules()"),
                     timeout=15, what=f"occurrence {round_} sent")  # fmt: skip
            leaders.append(_leader(conn))
            # Let every ticker run more rounds: nobody sends the occurrence again.
            renewed = _one(conn, "select renewed from pgque.ticker_leader()")
            wait_for(lambda r=renewed: _one(conn, RENEWED_SINCE, r),
                     timeout=15, what="the leader's next rounds")  # fmt: skip
            if stopped is not None:  # back, now that another one sent an occurrence
                start_ticker(stopped)
                stopped = None
            assert len(_events(conn)) == round_, _events(conn)
            # The leader goes: a leading SDK Ticker stops (and restarts after the next
            # round), pg_cron's job is killed (pg_cron runs it again next minute).
            # Another ticker sends the next occurrence.
            leading = leaders[-1]
            if leading in tickers:
                tickers.pop(leading).stop()
                stopped = leading
            else:
                conn.execute(
                    "select pg_terminate_backend(pid) from pg_stat_activity"
                    " where query like 'CALL pgque.ticker_loop_for(%'"
                )
        events = _events(conn)
        assert len(events) == ROUNDS and {name for name, _ in events} == {"yearly"}
        [(last_run, last_event)] = conn.execute(
            "select to_char(last_run at time zone 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),"
            " last_event_id from pgque.schedules()"
        ).fetchall()
        assert events[-1][1] == last_run and last_event is not None
        assert all(leader is not None for leader in leaders), leaders
        assert len(set(leaders)) >= 3, f"the occurrences' senders: {leaders}"
    finally:
        for ticker in tickers.values():
            ticker.stop()
        conn.execute("select pgque.stop()")
        conn.close()
