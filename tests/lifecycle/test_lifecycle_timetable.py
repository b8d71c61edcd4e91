"""pg_timetable scheduling (against a stand-in of its job API), uninstall()."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from lifecycle_helpers import NewRole, collect_messages

import pgque
from _engine import make_queue, one, rows

Conn = psycopg.Connection[Any]

NOT_INSTALLED = (
    "pg_timetable schema/API is not installed. Run pg_timetable against this database"
    " first, or use pgque.start() for pg_cron."
)
VACUUM = (
    "VACUUM (SKIP_LOCKED) pgque.subscription, pgque.consumer, pgque.queue, pgque.tick,"
    " pgque.retry_queue, pgque.delayed_events, pgque.dead_letter"
)
UNINSTALLED = (
    "pgque uninstalled. Run DROP ROLE IF EXISTS pgque_reader, pgque_writer, pgque_admin;"
    " manually if needed."
)


def jobs(conn: Conn) -> list[tuple[Any, ...]]:
    return rows(
        conn,
        "select chain_id, chain_name, run_at, command, kind::text, max_instances"
        " from timetable.chain order by chain_id",
    )


def config(conn: Conn) -> tuple[Any, ...]:
    row = conn.execute(
        "select ticker_job_id, maint_job_id, scheduler, tick_period_ms from pgque.config"
    ).fetchone()
    assert row is not None
    return tuple(row)


def raises_text(conn: Conn, query: str, *params: Any) -> str:
    with pytest.raises(psycopg.errors.RaiseException) as caught:
        conn.execute(query, params or None)
    return caught.value.diag.message_primary or ""


# -- start_timetable ----------------------------------------------------------


def test_start_timetable_without_pg_timetable_says_so(conn: Conn) -> None:
    assert raises_text(conn, "select pgque.start_timetable()") == NOT_INSTALLED
    conn.execute("create schema timetable")  # a schema without the job API
    assert raises_text(conn, "select pgque.start_timetable()") == NOT_INSTALLED
    assert config(conn) == (None, None, None, 100)


def test_start_timetable_schedules_five_jobs(timetable: Conn) -> None:
    conn = timetable
    seen = collect_messages(conn)
    conn.execute("select pgque.start_timetable()")
    got = jobs(conn)
    assert [r[1:] for r in got] == [
        ("pgque_ticker", "@every 1 second", "CALL pgque.ticker_loop()", "SQL", 1),
        ("pgque_retry_events", "@every 30 seconds", "SELECT pgque.maint_retry_events()", "SQL", 1),
        ("pgque_maint", "@every 30 seconds", "CALL pgque.run_maint()", "SQL", 1),
        (
            "pgque_rotate_step2",
            "@every 10 seconds",
            "SELECT pgque.maint_rotate_tables_step2()",
            "SQL",
            1,
        ),
        ("pgque_vacuum", "@every 30 seconds", VACUUM, "SQL", 1),
    ]
    ids = {r[1]: r[0] for r in got}
    assert config(conn) == (ids["pgque_ticker"], ids["pgque_maint"], "pg_timetable", 100)
    assert (
        "NOTICE",
        f"pgque started with pg_timetable: ticker={ids['pgque_ticker']} (10 ticks/sec),"
        f" retry_events={ids['pgque_retry_events']}, maint={ids['pgque_maint']},"
        f" rotate_step2={ids['pgque_rotate_step2']}, vacuum={ids['pgque_vacuum']}",
    ) in seen

    status = {r[0]: r[1:] for r in rows(conn, "select * from pgque.status()")}
    assert status["scheduler"] == (
        "pg_timetable",
        f"ticker_job_id={ids['pgque_ticker']}, maint_job_id={ids['pgque_maint']},"
        " tick_period_ms=100 (10.00 ticks/sec)",
    )
    assert status["ticker"] == (
        "scheduled",
        f"scheduler=pg_timetable, job_id={ids['pgque_ticker']},"
        " tick_period_ms=100 (10.00 ticks/sec)",
    )
    assert status["maintenance"] == (
        "scheduled",
        f"scheduler=pg_timetable, job_id={ids['pgque_maint']}",
    )
    assert "pg_timetable" not in status


def test_start_timetable_twice_and_the_tick_rate(timetable: Conn) -> None:
    conn = timetable
    conn.execute("select pgque.start_timetable(10)")
    conn.execute("select pgque.start_timetable(4)")
    assert len(jobs(conn)) == 5
    assert config(conn)[2:] == ("pg_timetable", 250)
    conn.execute("select pgque.start_timetable(1000)")
    assert config(conn)[3] == 1


@pytest.mark.parametrize("bad", [0, -1, 7, 1001, None])
def test_start_timetable_refuses_bad_tick_rates(timetable: Conn, bad: int | None) -> None:
    shown = "NULL" if bad is None else str(bad)
    text = raises_text(timetable, "select pgque.start_timetable(%s)", bad)
    assert text == (
        f"ticks_per_second must be an exact divisor of 1000 between 1 and 1000 (got {shown})"
    )
    assert jobs(timetable) == []
    assert config(timetable) == (None, None, None, 100)


def test_an_untrusted_timetable_schema_is_refused_first(timetable: Conn, new_role: NewRole) -> None:
    conn = timetable
    stranger = new_role()
    conn.execute(f'alter schema timetable owner to "{stranger}"')
    for query in ("select pgque.start_timetable()", "select pgque.start_timetable(7)"):
        assert raises_text(conn, query) == f"untrusted pg_timetable schema owner: {stranger}"
    assert jobs(conn) == []


def test_a_job_api_not_owned_by_the_schema_owner_is_refused(
    timetable: Conn, new_role: NewRole
) -> None:
    conn = timetable
    stranger = new_role()
    conn.execute(
        f"alter function timetable.add_job(text, timetable.cron, text, jsonb,"
        f" timetable.command_kind, text, integer, boolean, boolean, boolean, boolean, text)"
        f' owner to "{stranger}"'
    )
    assert raises_text(conn, "select pgque.start_timetable()") == (
        "untrusted pg_timetable API owner: add_job/delete_job must be owned by timetable"
        " schema owner"
    )


def test_the_timetable_job_commands_run_as_written(timetable: Conn) -> None:
    conn = timetable
    make_queue(conn, "q")
    conn.execute("select pgque.start_timetable(10)")
    before = one(conn, "select count(*) from pgque.tick")
    for _id, name, _at, command, _kind, _max in jobs(conn):
        conn.execute(command)
        if name == "pgque_ticker":
            # ten ticks in its second; a slow round on a loaded machine makes the
            # loop wait longer: up to two more tries, one must tick ten times
            counts = [one(conn, "select count(*) from pgque.tick") - before]
            while counts[-1] != 10 and len(counts) < 3:
                assert 1 <= counts[-1] < 10, counts
                before = one(conn, "select count(*) from pgque.tick")
                conn.execute(command)
                counts.append(one(conn, "select count(*) from pgque.tick") - before)
            assert counts[-1] == 10, counts


# -- stop_timetable and stop --------------------------------------------------


def test_stop_timetable_removes_the_jobs_and_stop_delegates(timetable: Conn) -> None:
    conn = timetable
    conn.execute("select pgque.start_timetable()")
    conn.execute("select pgque.stop_timetable()")
    assert jobs(conn) == []
    assert config(conn)[:3] == (None, None, None)
    conn.execute("select pgque.start_timetable()")
    conn.execute("select pgque.stop()")
    assert jobs(conn) == []
    assert config(conn)[:3] == (None, None, None)
    conn.execute("select pgque.stop()")  # twice: fine


def test_stop_timetable_does_nothing_unless_pg_timetable_is_active(
    timetable: Conn, new_role: NewRole
) -> None:
    conn = timetable
    one(conn, "select timetable.add_job('pgque_ticker', '@every 1 second', 'select 1')")
    conn.execute(f'alter schema timetable owner to "{new_role()}"')  # not even trusted
    conn.execute("select pgque.stop_timetable()")
    assert len(jobs(conn)) == 1


def test_stop_timetable_refuses_a_schema_that_became_untrusted(
    timetable: Conn, new_role: NewRole
) -> None:
    conn = timetable
    conn.execute("select pgque.start_timetable()")
    stranger = new_role()
    conn.execute(f'alter function timetable.delete_job(text) owner to "{stranger}"')
    assert raises_text(conn, "select pgque.stop_timetable()") == (
        "untrusted pg_timetable API owner: delete_job must be owned by timetable schema owner"
    )
    conn.execute("alter function timetable.delete_job(text) owner to current_user")
    conn.execute(f'alter schema timetable owner to "{stranger}"')
    assert raises_text(conn, "select pgque.stop()") == (
        f"untrusted pg_timetable schema owner: {stranger}"
    )
    assert len(jobs(conn)) == 5
    assert config(conn)[2] == "pg_timetable"


def test_stop_timetable_after_the_schema_is_gone_clears_the_config(timetable: Conn) -> None:
    conn = timetable
    conn.execute("select pgque.start_timetable()")
    conn.execute("drop schema timetable cascade")
    conn.execute("select pgque.stop_timetable()")
    assert config(conn)[:3] == (None, None, None)


def test_start_fails_without_pg_cron_and_keeps_the_timetable_jobs(timetable: Conn) -> None:
    conn = timetable
    conn.execute("select pgque.start_timetable()")
    with pytest.raises(psycopg.errors.RaiseException, match="pg_cron extension is not installed"):
        conn.execute("select pgque.start()")
    assert len(jobs(conn)) == 5
    assert config(conn)[2] == "pg_timetable"


def test_timetable_scheduling_is_logged(timetable: Conn) -> None:
    conn = timetable
    conn.execute("set client_min_messages = log")
    seen = collect_messages(conn)
    conn.execute("select pgque.start_timetable()")
    conn.execute("select pgque.stop()")
    logged = [text for severity, text in seen if severity == "LOG"]
    assert logged == ["pgque [info] lifecycle: started", "pgque [info] lifecycle: stopped"]


# -- uninstall ----------------------------------------------------------------


def test_uninstall_by_the_owner_drops_the_schema_and_keeps_the_roles(conn: Conn) -> None:
    make_queue(conn, "q")
    seen = collect_messages(conn)
    conn.execute("select pgque.uninstall()")
    assert seen == [("NOTICE", UNINSTALLED)]
    assert one(conn, "select count(*) from pg_namespace where nspname = 'pgque'") == 0
    assert (
        one(
            conn,
            "select count(*) from pg_roles"
            " where rolname in ('pgque_reader', 'pgque_writer', 'pgque_admin')",
        )
        == 3
    )


def test_uninstall_removes_the_timetable_jobs(timetable: Conn) -> None:
    conn = timetable
    conn.execute("select pgque.start_timetable()")
    conn.execute("select pgque.uninstall()")
    assert jobs(conn) == []


def test_uninstall_is_refused_to_admins_and_other_roles(conn: Conn, new_role: NewRole) -> None:
    admin, other = new_role("pgque_admin"), new_role()
    conn.execute(f'set role "{admin}"')
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
        conn.execute("select pgque.uninstall()")
    conn.execute("reset role")
    # Even with EXECUTE granted, only the owner may.
    conn.execute(f'grant usage on schema pgque to "{other}"')
    conn.execute(f'grant execute on function pgque.uninstall() to "{other}"')
    conn.execute(f'set role "{other}"')
    with pytest.raises(psycopg.errors.InsufficientPrivilege) as caught:
        conn.execute("select pgque.uninstall()")
    conn.execute("reset role")
    assert caught.value.diag.message_primary == (
        "pgque.uninstall: only the owner of schema pgque (postgres) or a superuser may"
        f" uninstall pgque, not {other}"
    )
    assert caught.value.diag.message_detail == "pgque:not_owner"
    assert one(conn, "select count(*) from pg_namespace where nspname = 'pgque'") == 1


def test_a_failing_stop_aborts_uninstall_and_the_uninstall_script(
    timetable: Conn, new_role: NewRole
) -> None:
    conn = timetable
    conn.execute("select pgque.start_timetable()")
    stranger = new_role()
    conn.execute(f'alter schema timetable owner to "{stranger}"')
    with pytest.raises(psycopg.errors.RaiseException, match="untrusted pg_timetable"):
        conn.execute("select pgque.uninstall()")
    with pytest.raises(pgque.PgqueInstallError, match="untrusted pg_timetable schema owner"):
        pgque.uninstall(conn)
    assert one(conn, "select count(*) from pg_namespace where nspname = 'pgque'") == 1
    assert len(jobs(conn)) == 5

    conn.execute("alter schema timetable owner to current_user")
    pgque.uninstall(conn)  # the script: stops the jobs, then drops the schema
    assert jobs(conn) == []
    assert one(conn, "select count(*) from pg_namespace where nspname = 'pgque'") == 0
    pgque.uninstall(conn)  # again, without the schema: fine


def test_the_stand_in_keeps_pg_timetables_signatures(timetable: Conn) -> None:
    sigs = rows(
        timetable,
        "select p.oid::regprocedure::text, pg_get_function_result(p.oid) from pg_proc p"
        " where p.pronamespace = 'timetable'::regnamespace order by 1",
    )
    assert sigs == [
        (
            "timetable.add_job(text,timetable.cron,text,jsonb,timetable.command_kind,text,"
            "integer,boolean,boolean,boolean,boolean,text)",
            "bigint",
        ),
        ("timetable.delete_job(text)", "boolean"),
    ]
