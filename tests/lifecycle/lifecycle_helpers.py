"""Helpers shared by the lifecycle tests: pg_cron servers, the pg_timetable stand-in, messages."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg

import pgque
from pgque._cluster import TempCluster

CRON_DB = "pgque_cron"
"""The database pg_cron works in (cron.database_name) on the pg_cron test clusters."""

NewRole = Callable[..., str]
"""The ``new_role`` fixture: ``new_role(*member_of)`` returns a fresh role's name."""

# The job API of pg_timetable 5 with its signatures: add_job creates a chain
# of one autonomous task and returns its id; delete_job removes a chain by
# name. Jobs are kept in timetable.chain so tests can read them.
TIMETABLE_STAND_IN = """
create schema timetable;
create domain timetable.cron as text;
create type timetable.command_kind as enum ('SQL', 'PROGRAM', 'BUILTIN');
create table timetable.chain (
    chain_id bigserial primary key,
    chain_name text not null unique,
    run_at timetable.cron,
    command text,
    kind timetable.command_kind,
    parameters jsonb,
    client_name text,
    max_instances integer,
    live boolean,
    self_destruct boolean,
    ignore_error boolean,
    exclusive_execution boolean,
    on_error text,
    autonomous boolean not null default true
);
create function timetable.add_job(
    job_name text,
    job_schedule timetable.cron,
    job_command text,
    job_parameters jsonb default null,
    job_kind timetable.command_kind default 'SQL',
    job_client_name text default null,
    job_max_instances integer default null,
    job_live boolean default true,
    job_self_destruct boolean default false,
    job_ignore_errors boolean default true,
    job_exclusive boolean default false,
    job_on_error text default null)
returns bigint language sql as $$
    insert into timetable.chain (chain_name, run_at, command, kind, parameters, client_name,
                                 max_instances, live, self_destruct, ignore_error,
                                 exclusive_execution, on_error)
    values (job_name, job_schedule, job_command, job_kind, job_parameters, job_client_name,
            job_max_instances, job_live, job_self_destruct, job_ignore_errors,
            job_exclusive, job_on_error)
    returning chain_id
$$;
create function timetable.delete_job(job_name text) returns boolean language sql as $$
    with gone as (delete from timetable.chain where chain_name = job_name returning 1)
    select count(*) > 0 from gone
$$;
"""


def install_timetable(conn: psycopg.Connection[Any]) -> None:
    """Install the pg_timetable stand-in through ``conn``."""
    conn.execute(TIMETABLE_STAND_IN)


def collect_messages(conn: psycopg.Connection[Any]) -> list[tuple[str, str]]:
    """Collect (severity, text) of every notice or log message ``conn`` receives from now on."""
    seen: list[tuple[str, str]] = []
    conn.add_notice_handler(lambda d: seen.append((d.severity or "", d.message_primary or "")))
    return seen


@dataclass
class CronServer:
    """A PostgreSQL 15 cluster with pg_cron preloaded, working in database ``CRON_DB``."""

    cluster: TempCluster
    mode: str  # "background workers" or "libpq"

    def dsn(self, dbname: str = CRON_DB) -> str:
        return self.cluster.dsn(dbname)

    def reset(self) -> str:
        """Remove every job, run record and schema of earlier tests; install pgque. Return DSN."""
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute("select cron.unschedule(jobid) from cron.job")
            # Runs still in progress (a ticker loop) end with their session.
            conn.execute(
                "select pg_terminate_backend(pid) from pg_stat_activity"
                " where datname = current_database() and pid <> pg_backend_pid()"
                " and backend_type <> 'pg_cron launcher'"
            )
            conn.execute("delete from cron.job_run_details")
            # Functions tests left in public (and the triggers they back, on cron.job).
            conn.execute(
                "do $$ declare f regprocedure; begin"
                " for f in select p.oid from pg_proc p"
                "  where p.pronamespace = 'public'::regnamespace and not exists"
                "  (select 1 from pg_depend d where d.objid = p.oid and d.deptype = 'e')"
                " loop execute format('drop function %s cascade', f); end loop; end $$"
            )
            conn.execute("set client_min_messages = warning")
            conn.execute("drop schema if exists pgque cascade")
            conn.execute("drop schema if exists timetable cascade")
            conn.execute("reset client_min_messages")
            pgque.install(conn)
        return self.dsn()
