"""start() / stop() with a real pg_cron (Debian 12's 1.4.2), US-8, and a minute of traffic.

Runs only on PostgreSQL 15 (see conftest.py); each test gets the pg_cron database
of a session cluster, reset, with pgque installed.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from collections.abc import Callable
from importlib import resources
from typing import Any

import psycopg
import pytest
from lifecycle_helpers import CRON_DB, CronServer, collect_messages, install_timetable

import pgque
from _engine import one, rows
from _wait import wait_for

pytestmark = pytest.mark.pg_cron

Conn = psycopg.Connection[Any]
ConnectTo = Callable[..., Conn]

NAMES = ["pgque_ticker", "pgque_retry_events", "pgque_maint", "pgque_rotate_step2", "pgque_vacuum"]


def cron_jobs(conn: Conn) -> list[tuple[Any, ...]]:
    """pgque's rows of cron.job: (jobid, name, schedule, command, database, username, active)."""
    return rows(
        conn,
        "select jobid, jobname, schedule, command, database, username, active from cron.job"
        " where jobname like 'pgque\\_%' order by jobid",
    )


def config(conn: Conn) -> tuple[Any, ...]:
    row = conn.execute(
        "select ticker_job_id, maint_job_id, scheduler, tick_period_ms from pgque.config"
    ).fetchone()
    assert row is not None
    return tuple(row)


def clear_of_minute_boundary(margin: float = 5.0) -> None:
    """Sleep past the next minute boundary if it is less than ``margin`` seconds away.

    pg_cron 1.4 starts every pgque job at second 0; tests that read run records
    must not race the runs of a boundary.
    """
    left = 60 - time.time() % 60
    if left < margin:
        time.sleep(left + 1.5)


def ticker_lock_holders(conn: Conn) -> list[int]:
    """The pid of the session leading through the ticker lease, if one does."""
    return [r[0] for r in rows(conn, "select pid from pgque.ticker_leader() where active")]


def test_start_schedules_the_minute_jobs_of_pg_cron_14(cron_db: str, connect_to: ConnectTo) -> None:
    conn = connect_to(cron_db)
    assert one(conn, "select extversion from pg_extension where extname = 'pg_cron'") == "1.4-1"
    seen = collect_messages(conn)
    conn.execute("select pgque.start()")
    jobs = cron_jobs(conn)
    expected = rows(conn, "select * from pgque._cron_jobs('1.4-1')")
    assert [r[1:4] for r in jobs] == expected
    assert [r[1] for r in jobs] == NAMES
    assert {r[1]: r[2] for r in jobs}["pgque_ticker"] == "* * * * *"
    assert {r[1]: r[3] for r in jobs}["pgque_ticker"] == "CALL pgque.ticker_loop_for(58)"
    assert {r[4:] for r in jobs} == {(CRON_DB, "postgres", True)}

    ids = {r[1]: r[0] for r in jobs}
    assert config(conn) == (ids["pgque_ticker"], ids["pgque_maint"], "pg_cron", 100)
    # This cluster runs jobs in background workers, where pg_cron 1.4 stalls.
    warnings = [text for severity, text in seen if severity == "WARNING"]
    assert len(warnings) == 1
    assert warnings[0].startswith("pgque.start: pg_cron 1.4-1 runs jobs in background workers")
    assert (
        "NOTICE",
        f"pgque started: ticker={ids['pgque_ticker']} (10.00 ticks/sec),"
        f" retry_events={ids['pgque_retry_events']}, maint={ids['pgque_maint']},"
        f" rotate_step2={ids['pgque_rotate_step2']}, vacuum={ids['pgque_vacuum']}",
    ) in seen
    status = {r[0]: r[1:] for r in rows(conn, "select * from pgque.status()")}
    assert status["scheduler"] == (
        "pg_cron",
        f"ticker_job_id={ids['pgque_ticker']}, maint_job_id={ids['pgque_maint']},"
        " tick_period_ms=100 (10.00 ticks/sec)",
    )
    assert status["ticker"] == (
        "scheduled",
        f"scheduler=pg_cron, job_id={ids['pgque_ticker']}, tick_period_ms=100 (10.00 ticks/sec)",
    )
    assert status["maintenance"] == ("scheduled", f"scheduler=pg_cron, job_id={ids['pgque_maint']}")
    assert "pg_cron" not in status


def test_start_twice_leaves_one_set_of_jobs(cron_db: str, connect_to: ConnectTo) -> None:
    conn = connect_to(cron_db)
    conn.execute("select pgque.start()")
    first = cron_jobs(conn)
    conn.execute("select pgque.start()")
    second = cron_jobs(conn)
    assert [r[1:] for r in second] == [r[1:] for r in first]
    assert {r[0] for r in second}.isdisjoint({r[0] for r in first})
    assert config(conn)[0] == second[0][0]


def test_stop_removes_every_job_and_is_harmless_twice(cron_db: str, connect_to: ConnectTo) -> None:
    conn = connect_to(cron_db)
    conn.execute("select cron.schedule('someone_elses', '0 3 * * *', 'select 1')")
    conn.execute("select pgque.start()")
    seen = collect_messages(conn)
    conn.execute("select pgque.stop()")
    assert cron_jobs(conn) == []
    assert config(conn) == (None, None, None, 100)
    assert seen == []
    conn.execute("select pgque.stop()")
    assert seen == [
        ("NOTICE", f"pgque.stop: {name[6:]} job not found (OK on first install)") for name in NAMES
    ]
    assert rows(conn, "select jobname from cron.job") == [("someone_elses",)]


def test_stop_cancels_a_ticker_run_in_progress(cron_db: str, connect_to: ConnectTo) -> None:
    """A minute loop still running when its job is removed is cancelled, not left ticking."""
    conn = connect_to(cron_db)
    clear_of_minute_boundary(10)
    conn.execute("select pgque.start()")
    # Stand in for pg_cron's own run: the job's command in a session of this
    # database, recorded in cron.job_run_details as pg_cron records it.
    looper = connect_to(cron_db)
    command = one(conn, "select command from cron.job where jobname = 'pgque_ticker'")
    thread = threading.Thread(target=lambda: _run_swallowing(looper, command))
    thread.start()
    try:
        deadline = time.monotonic() + 5
        while ticker_lock_holders(conn) != [looper.info.backend_pid]:
            assert time.monotonic() < deadline, "the loop never took the ticker lock"
            time.sleep(0.05)
        conn.execute(
            "insert into cron.job_run_details (jobid, runid, job_pid, database, username,"
            " command, status, start_time)"
            " select jobid, nextval('cron.runid_seq'), %s, database, username, command, 'running',"
            " now() from cron.job where jobname = 'pgque_ticker'",
            (looper.info.backend_pid,),
        )
        conn.execute("select pgque.stop()")
    finally:
        thread.join(10)
    assert not thread.is_alive()
    # A cancelled loop cannot resign: its lease runs out (2 s).
    wait_for(lambda: ticker_lock_holders(conn) == [], timeout=5, what="the lease to expire")


def _run_swallowing(conn: Conn, command: str) -> None:
    with contextlib.suppress(psycopg.errors.QueryCanceled):
        conn.execute(command)


def test_switching_between_pg_timetable_and_pg_cron(cron_db: str, connect_to: ConnectTo) -> None:
    conn = connect_to(cron_db)
    install_timetable(conn)
    conn.execute("select pgque.start_timetable(5)")
    assert one(conn, "select count(*) from timetable.chain") == 5
    conn.execute("select pgque.start()")
    assert one(conn, "select count(*) from timetable.chain") == 0
    assert [r[1] for r in cron_jobs(conn)] == NAMES
    assert config(conn)[2:] == ("pg_cron", 200)  # the tick period stays
    conn.execute("select pgque.start_timetable()")
    assert cron_jobs(conn) == []
    assert one(conn, "select count(*) from timetable.chain") == 5
    assert config(conn)[2:] == ("pg_timetable", 100)
    conn.execute("select pgque.stop()")
    assert cron_jobs(conn) == []
    assert one(conn, "select count(*) from timetable.chain") == 0


def test_a_failed_start_leaves_no_new_job(cron_db: str, connect_to: ConnectTo) -> None:
    conn = connect_to(cron_db)
    conn.execute(
        "create function public.refuse_maint() returns trigger language plpgsql as $$"
        " begin if new.jobname = 'pgque_maint' and current_setting('t.refuse', true) = 'on'"
        " then raise exception 'refused'; end if; return new; end $$"
    )
    conn.execute(
        "create trigger refuse_maint before insert on cron.job"
        " for each row execute function public.refuse_maint()"
    )
    conn.execute("set t.refuse = on")
    with pytest.raises(psycopg.errors.RaiseException, match="refused"):
        conn.execute("select pgque.start()")
    assert cron_jobs(conn) == []
    assert config(conn)[2] is None

    conn.execute("set t.refuse = off")
    conn.execute("select pgque.start()")
    before = cron_jobs(conn)
    conn.execute("set t.refuse = on")
    with pytest.raises(psycopg.errors.RaiseException, match="refused"):
        conn.execute("select pgque.start()")
    assert cron_jobs(conn) == before  # the earlier jobs are untouched
    assert config(conn)[0] == before[0][0]


def test_the_pg_cron_job_commands_run_directly(cron_db: str, connect_to: ConnectTo) -> None:
    conn = connect_to(cron_db)
    clear_of_minute_boundary(15)
    conn.execute("select pgque.create_queue('q')")
    conn.execute("select pgque.set_queue_config('q', 'ticker_max_lag', '1 microsecond')")
    conn.execute("select pgque.set_queue_config('q', 'ticker_idle_period', '1 microsecond')")
    conn.execute("select pgque.start()")
    ticks = "select count(*) from pgque.tick"
    for name, command in rows(conn, "select jobname, command from cron.job order by jobid"):
        before = one(conn, ticks)
        if name != "pgque_ticker":
            conn.execute(command)
            continue
        # The minute loop: let it tick for a moment, then cancel it.
        looper = connect_to(cron_db)
        thread = threading.Thread(target=_run_swallowing, args=(looper, command))
        thread.start()
        try:
            time.sleep(1.0)
            assert one(conn, ticks) - before >= 5
        finally:
            conn.execute("select pg_cancel_backend(%s)", (looper.info.backend_pid,))
            thread.join(10)
    assert one(
        conn,
        "select last_vacuum is not null from pg_stat_user_tables"
        " where relid = 'pgque.tick'::regclass",
    )


def test_queue_health_reads_the_pg_cron_jobs(cron_db: str, connect_to: ConnectTo) -> None:
    conn = connect_to(cron_db)
    clear_of_minute_boundary(10)
    conn.execute("select pgque.start()")
    ticker_id, maint_id = config(conn)[:2]

    def system() -> dict[str, tuple[str, str]]:
        return {
            r[0]: (r[1], r[2])
            for r in rows(
                conn,
                "select check_name, status, detail from pgque.queue_health()"
                " where queue_name = 'system'",
            )
        }

    assert system() == {
        "pg_cron_ticker": ("ok", f"job_id={ticker_id} (pg_cron), no run yet"),
        "pg_cron_maint": ("ok", f"job_id={maint_id} (pg_cron), no run yet"),
    }
    conn.execute(
        "insert into cron.job_run_details (jobid, runid, database, username, command, status,"
        " return_message, start_time) select jobid, nextval('cron.runid_seq'), database, username,"
        " command, 'failed', 'ERROR: boom', now() from cron.job where jobid = %s",
        (maint_id,),
    )
    status, detail = system()["pg_cron_maint"]
    assert status == "warning"
    assert detail.startswith(f"last run of maintenance job {maint_id} (started ")
    assert detail.endswith("failed: ERROR: boom")

    conn.execute("select cron.alter_job(%s, active => false)", (maint_id,))
    assert system()["pg_cron_maint"] == (
        "critical",
        f"maintenance job {maint_id} is inactive in cron.job",
    )
    conn.execute("select cron.unschedule(%s)", (ticker_id,))
    assert system()["pg_cron_ticker"] == (
        "critical",
        f"ticker job {ticker_id} no longer exists in cron.job: run pgque.start() again",
    )


def test_start_and_stop_are_logged(cron_db: str, connect_to: ConnectTo) -> None:
    conn = connect_to(cron_db)
    conn.execute("set client_min_messages = log")
    seen = collect_messages(conn)
    conn.execute("select pgque.start()")
    conn.execute("select pgque.stop()")
    logged = [text for severity, text in seen if severity == "LOG"]
    assert logged == ["pgque [info] lifecycle: started", "pgque [info] lifecycle: stopped"]


def test_us8_install_on_managed_postgresql(cron_cluster: CronServer, connect_to: ConnectTo) -> None:
    """US-8: install the single file, start with pg_cron, use, stop, uninstall."""
    dsn = cron_cluster.reset()
    conn = connect_to(dsn)
    pgque.uninstall(conn)
    # From nothing, the single file, as `\\i pgque.sql` runs it.
    install_file = resources.files("pgque") / "sql" / "pgque.sql"
    subprocess.run(
        [
            str(cron_cluster.cluster.bin_dir / "psql"),
            "-X",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            "-f",
            str(install_file),
            dsn,
        ],
        check=True,
        capture_output=True,
    )
    assert pgque.installed_version(conn) == pgque.__version__

    clear_of_minute_boundary(10)
    conn.execute("select pgque.start()")
    status = {r[0]: r[1] for r in rows(conn, "select component, status from pgque.status()")}
    assert (status["ticker"], status["maintenance"], status["scheduler"]) == (
        "scheduled",
        "scheduled",
        "pg_cron",
    )

    assert one(conn, "select pgque.create_queue('orders')") == 1
    assert one(conn, "select pgque.subscribe('orders', 'app')") == 1
    sent = one(conn, "select pgque.send('orders', '{\"id\": 1}'::jsonb)")
    one(conn, "select pgque.force_next_tick('orders')")
    assert one(conn, "select pgque.ticker('orders')") is not None
    got = rows(conn, "select msg_id, batch_id, payload from pgque.receive('orders', 'app', 10)")
    assert [(r[0], r[2]) for r in got] == [(sent, '{"id": 1}')]
    assert one(conn, "select pgque.ack(%s)", got[0][1]) == 1

    health = rows(conn, "select queue_name, check_name, status from pgque.queue_health()")
    assert {r[2] for r in health} == {"ok"}, health
    assert len(health) == 6

    conn.execute("select pgque.stop()")
    assert cron_jobs(conn) == []
    conn.execute("select pgque.uninstall()")
    assert one(conn, "select count(*) from pg_namespace where nspname = 'pgque'") == 0
    assert one(conn, "select count(*) from pg_proc where proname like 'ticker%'") == 0
    assert one(conn, "select count(*) from cron.job where jobname like 'pgque%'") == 0


def test_uninstall_removes_the_pg_cron_jobs(cron_db: str, connect_to: ConnectTo) -> None:
    conn = connect_to(cron_db)
    conn.execute("select pgque.start()")
    pgque.uninstall(conn)  # the script calls pgque.stop() first
    assert cron_jobs(conn) == []
    pgque.install(conn)
    conn.execute("select pgque.start()")
    conn.execute("select pgque.uninstall()")
    assert cron_jobs(conn) == []


# -- a real minute ------------------------------------------------------------


class Traffic:
    """Producer and consumer on one pg_cron cluster; pg_cron does all ticking and maintenance."""

    def __init__(self, server: CronServer, connect_to: ConnectTo) -> None:
        self.server = server
        self.conn = connect_to(server.reset())
        conn = self.conn
        conn.execute("select pgque.create_queue('traffic')")
        conn.execute("select pgque.set_queue_config('traffic', 'ticker_max_lag', '200 ms')")
        conn.execute("select pgque.subscribe('traffic', 'app')")
        # A retry due at once: only the maintenance jobs bring it back.
        conn.execute(
            "select pgque.event_retry_raw('traffic', 'app', now(), null, now(), 1, 'retry',"
            " 'again', null, null, null, null)"
        )
        conn.execute("select pgque.start()")
        self.sent: dict[int, float] = {}
        self.received: dict[int, float] = {}
        self.retried: list[int] = []

    def step(self, *, send: bool = True) -> None:
        if send:
            ev_id = one(self.conn, "select pgque.send('traffic', '{\"n\": 1}'::jsonb)")
            self.sent[ev_id] = time.time()
        batch = rows(
            self.conn,
            "select msg_id, batch_id, type, retry_count from pgque.receive('traffic', 'app', 1000)",
        )
        now = time.time()
        for msg_id, _batch_id, ev_type, retry_count in batch:
            if ev_type == "retry":
                self.retried.append(retry_count)
            else:
                self.received.setdefault(msg_id, now)
        if batch:
            assert one(self.conn, "select pgque.ack(%s)", batch[0][1]) == 1

    def runs(self) -> dict[str, set[str]]:
        got: dict[str, set[str]] = {}
        for name, status in rows(
            self.conn,
            "select j.jobname, d.status from cron.job_run_details d join cron.job j using (jobid)",
        ):
            got.setdefault(name, set()).add(status)
        return got


@pytest.mark.slow
def test_a_minute_of_traffic_flows_with_pg_cron_alone(
    cron_cluster: CronServer, cron_cluster_libpq: CronServer, connect_to: ConnectTo
) -> None:
    """Both worker modes at once: wait for a minute boundary; pg_cron alone ticks and maintains.

    pg_cron 1.4.2 in background-worker mode starts no further job while the minute-long
    ticker run lasts (start() warns about it), so which maintenance jobs ran by the
    end of this test depends on its job order there: in that mode the test checks the
    ticking and that nothing failed; in libpq mode every job.
    """
    clusters = [Traffic(cron_cluster, connect_to), Traffic(cron_cluster_libpq, connect_to)]
    boundary = time.time() // 60 * 60 + 60
    end = boundary + 8
    while time.time() < end:
        for traffic in clusters:
            traffic.step()
        time.sleep(0.25)
    # Keep receiving at the same pace until the last sends arrive: a single
    # late receive would count its own delay as the events' wait.
    deadline = time.time() + 5
    while time.time() < deadline and any(set(t.received) != set(t.sent) for t in clusters):
        time.sleep(0.25)
        for traffic in clusters:
            traffic.step(send=False)

    for traffic in clusters:
        mode = traffic.server.mode
        assert set(traffic.received) == set(traffic.sent), f"{mode}: not everything arrived"
        # Nothing before the boundary (no ticker); then delivery within about max_lag.
        assert min(traffic.received.values()) >= boundary, mode
        after = [e for e, at in traffic.sent.items() if at >= boundary + 1]
        assert len(after) >= 20, mode
        waits = [traffic.received[e] - traffic.sent[e] for e in after]
        assert max(waits) < 1.5, f"{mode}: {sorted(waits)[-5:]}"
        runs = traffic.runs()
        assert runs.get("pgque_ticker") == {"running"}, f"{mode}: {runs}"
        assert not any("failed" in statuses for statuses in runs.values()), f"{mode}: {runs}"
        if mode == "libpq":
            for name in NAMES[1:]:
                assert runs.get(name) == {"succeeded"}, f"{mode}: {name} {runs}"
            assert traffic.retried == [1], f"{mode}: the retry did not come back"
            assert one(
                traffic.conn,
                "select last_vacuum is not null from pg_stat_user_tables"
                " where relid = 'pgque.subscription'::regclass",
            )
            checks = rows(traffic.conn, "select check_name, status from pgque.queue_health()")
            assert {r[1] for r in checks} == {"ok"}, f"{mode}: {checks}"

        traffic.conn.execute("select pgque.stop()")
        assert cron_jobs(traffic.conn) == []
        deadline = time.monotonic() + 5
        while ticker_lock_holders(traffic.conn):
            assert time.monotonic() < deadline, f"{mode}: the ticker loop outlived stop()"
            time.sleep(0.1)
