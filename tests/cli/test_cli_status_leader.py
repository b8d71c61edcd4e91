"""``pgque status`` says who leads ticking (the ticker lease), or that nobody does.

Runs the real ``pgque`` command beside a real :class:`pgque.Ticker`.
"""

from __future__ import annotations

from typing import Any

import psycopg
from cli_helpers import run
from psycopg.conninfo import conninfo_to_dict, make_conninfo

import pgque
from _engine import one
from _wait import wait_for
from pgque.cli import ExitCode


def ticking_line(text: str) -> str:
    lines = [" ".join(line.split()) for line in text.splitlines()
             if line.strip().startswith("Ticking:")]  # fmt: skip
    assert len(lines) == 1, text
    return lines[0]


def test_nobody_leads(db: str) -> None:
    done = run("status", dsn=db)
    assert done.code == ExitCode.OK, done.stderr
    assert ticking_line(done.stdout) == (
        "Ticking: nobody leads: no Ticker, `pgque ticker` or scheduled ticker loop holds"
        " the ticker lease"
    )
    assert run("status", "--json", dsn=db).json()["ticker_leader"] is None


def test_the_leader_is_named_and_its_lapse_said(db: str, conn: psycopg.Connection[Any]) -> None:
    dsn = make_conninfo(**(conninfo_to_dict(db) | {"application_name": "billing-ticker"}))
    ticker = pgque.Ticker(dsn, lease=0.5).start()
    try:
        wait_for(lambda: one(conn, "select active from pgque.ticker_leader()"), 30,
                 "the ticker leads")  # fmt: skip
        pid = one(conn, "select pid from pgque.ticker_leader()")
        done = run("status", dsn=db)
        assert done.code == ExitCode.OK, done.stderr
        line = ticking_line(done.stdout)
        assert line.startswith(f"Ticking: led by billing-ticker (pid {pid}) since "), line
        assert "lease renewed" in line, line
        leader = run("status", "--json", dsn=db).json()["ticker_leader"]
        assert leader["application_name"] == "billing-ticker" and leader["pid"] == pid
        assert leader["active"] is True
        assert set(leader) == {"application_name", "pid", "client_addr", "since", "renewed",
                               "expires", "active"}  # fmt: skip
    finally:
        ticker.stop()
    wait_for(lambda: not one(conn, "select coalesce(active, false) from pgque.ticker_leader()"),
             30, "the lease ends")  # fmt: skip
    line = ticking_line(run("status", dsn=db).stdout)
    assert line.startswith("Ticking: nobody leads: billing-ticker (pid "), line
