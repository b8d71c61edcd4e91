"""``start`` / ``stop`` (scheduler jobs) and the ``ticker`` service."""

from __future__ import annotations

import signal
import subprocess
import threading
from typing import Any

import psycopg
from cli_helpers import Pgque, invoke, one_error_line, spawn

from _engine import one, rows
from _wait import wait_for
from pgque.cli import ExitCode

# A stand-in for pg_timetable's job API (what pgque.start_timetable() calls),
# owned by the superuser the tests connect as.
TIMETABLE = """
create schema timetable;
create table timetable.jobs (id bigserial primary key, name text unique, schedule text,
                             command text);
create function timetable.add_job(job_name text, job_schedule text, job_command text,
                                  job_max_instances integer default null)
returns bigint language sql as $$
    insert into timetable.jobs (name, schedule, command)
    values (job_name, job_schedule, job_command) returning id $$;
create function timetable.delete_job(job_name text) returns boolean language sql as $$
    with gone as (delete from timetable.jobs j where j.name = job_name returning 1)
    select exists (select from gone) $$;
"""


def test_start_without_pg_cron_is_refused(pgque: Pgque) -> None:
    run = pgque("start")
    assert run.code == ExitCode.REFUSED
    assert "pgque ticker" in one_error_line(run)


def test_start_and_stop_with_pg_timetable(pgque: Pgque, conn: psycopg.Connection[Any]) -> None:
    conn.execute(TIMETABLE)
    run = pgque("start", "--timetable", "20", "--json")
    assert run.code == ExitCode.OK, run.stderr
    status = {r["component"]: r for r in run.json()["status"]}
    assert status["scheduler"]["status"] == "pg_timetable"
    assert status["ticker"]["status"] == "scheduled"
    assert one(conn, "select tick_period_ms from pgque.config") == 50
    assert one(conn, "select count(*) from timetable.jobs") == 5
    assert pgque("status", "--json").json()["scheduler"] == "pg_timetable"

    stopped = pgque("stop")
    assert stopped.code == ExitCode.OK, stopped.stderr
    assert "removed" in stopped.stdout
    assert one(conn, "select count(*) from timetable.jobs") == 0
    assert pgque("status", "--json").json()["scheduler"] == "manual"


def test_stop_is_harmless(pgque: Pgque) -> None:
    run = pgque("stop", "--json")
    assert run.code == ExitCode.OK, run.stderr
    assert {r["component"]: r["status"] for r in run.json()["status"]} == {
        "scheduler": "manual", "ticker": "stopped", "maintenance": "stopped",
    }  # fmt: skip


def wait_log(proc: subprocess.Popen[str], text: str, log: list[str]) -> None:
    """Read the process's stderr until a line contains ``text`` (lines kept in ``log``)."""
    assert proc.stderr is not None
    found = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            log.append(line)
            if text in line:
                found.set()
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=30)
    assert found.is_set(), f"{text!r} not logged; got: {''.join(log)}"


def test_two_tickers_one_leader_and_clean_handover(
    db: str, conn: psycopg.Connection[Any], processes: list[subprocess.Popen[str]]
) -> None:
    one(conn, "select pgque.create_queue('q')")  # default thresholds: only a ticker delivers
    one(conn, "select pgque.subscribe('q', 'c')")
    first = spawn("ticker", dsn=db)
    processes.append(first)
    first_log: list[str] = []
    wait_log(first, "leader:", first_log)
    second = spawn("ticker", dsn=db)
    processes.append(second)
    second_log: list[str] = []
    wait_log(second, "standing by", second_log)

    one(conn, "select pgque.send('q', '{\"n\": 1}'::jsonb)")
    wait_for(lambda: rows(conn, "select payload from pgque.receive('q', 'c')"), timeout=10,
             what="the leader ticked the event")  # fmt: skip

    first.send_signal(signal.SIGTERM)
    _, err = first.communicate(timeout=30)
    assert first.returncode == ExitCode.OK, err
    assert "stopped leading" in err and "Traceback" not in err
    wait_log(second, "leader:", second_log)  # the stand-by takes over

    second.send_signal(signal.SIGINT)
    _, err = second.communicate(timeout=30)
    assert second.returncode == ExitCode.OK, err
    assert "pgque ticker stopped" in err
    # Both resigned: nobody leads.
    assert one(conn, "select active from pgque.ticker_leader()") is False


def test_ticker_needs_a_database(empty_db: str) -> None:
    run = invoke("ticker", dsn=empty_db)
    assert run.code == ExitCode.NOT_INSTALLED
    one_error_line(run)
