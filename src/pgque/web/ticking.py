"""Who ticks, told in words: the overview's ticker panel and ``/metrics``' leader gauges.

The truth is the ticker lease (``pgque.ticker_leader()``): whoever ticks,
pg_cron's ``ticker_loop``, an SDK ``Ticker``, a Consumer's ticker or
``pgque ticker``, leads through it. The scheduled jobs (``pgque.config``)
and the two system health checks (``pg_cron_ticker`` and ``pg_cron_maint``
in ``queue_health()``, which judge ticking and maintenance whatever runs
them) complete the picture.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from pgque.async_client import AsyncPgqueClient
from pgque.monitoring import HealthCheck, MonitoringConfig, Status, TickerLease, worst
from pgque.records import QueueStats
from pgque.web import reads
from pgque.web.formatting import age

__all__ = [
    "SYSTEM_CHECK_LABELS",
    "LastLeader",
    "Leader",
    "SystemCheck",
    "Ticking",
    "leader_kind",
    "ticking",
]

#: What the system checks of ``queue_health()`` judge, as the console names them.
SYSTEM_CHECK_LABELS = {
    "pg_cron_ticker": "Ticking",
    "pg_cron_maint": "Maintenance",
}


@dataclass(frozen=True)
class Leader:
    """The session leading ticking, as the panel shows it."""

    kind: str
    application_name: str
    pid: int | None
    client_addr: str | None
    since: datetime | None
    since_age: timedelta | None
    renewed: datetime | None
    renewed_age: timedelta | None
    expires_in: timedelta


@dataclass(frozen=True)
class LastLeader:
    """The session that led last, once nobody leads."""

    application_name: str
    pid: int | None
    renewed_age: timedelta | None
    resigned: bool


@dataclass(frozen=True)
class SystemCheck:
    """A system check of ``queue_health()``, named by what it judges."""

    label: str
    name: str
    status: str
    detail: str | None


@dataclass(frozen=True)
class Ticking:
    """The ticker panel (the overview's ``ticking``)."""

    leading: bool
    leader: Leader | None
    scheduler: str
    ticker_job_id: int | None
    maint_job_id: int | None
    tick_period_ms: int | None
    last_tick_age: timedelta | None
    last_tick_queue: str | None
    last_leader: LastLeader | None
    system_checks: list[SystemCheck]
    problems: list[str]
    status: str
    summary: str


def leader_kind(
    application_name: str | None, backend: dict[str, str | None] | None, scheduler: str
) -> str:
    """What the leading session is, as far as the database tells."""
    app = (application_name or "").lower()
    backend_type = ((backend or {}).get("backend_type") or "").lower()
    text = ((backend or {}).get("query") or "").lower()
    if app.startswith("pg_cron") or "pg_cron" in backend_type:
        return "the pg_cron job (pgque.ticker_loop())"
    if app.startswith("pg_timetable"):
        return "the pg_timetable job (pgque.ticker_loop())"
    if "ticker_loop" in text:
        return "pgque.ticker_loop(), called by a session"
    return "a ticker client (pgque.Ticker, a Consumer's ticker or pgque ticker)"


def _at(moment: datetime | None) -> str:
    return "-" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S")


def _ago(now: datetime, moment: datetime | None) -> timedelta | None:
    return None if moment is None else max(now - moment, timedelta(0))


async def _leader(client: AsyncPgqueClient, lease: TickerLease, scheduler: str) -> Leader | None:
    holder, now = lease.leader, lease.now
    if holder is None or not holder.active:
        return None
    backend = await reads.leader_backend(client, holder.pid)
    return Leader(
        kind=leader_kind(holder.application_name, backend, scheduler),
        application_name=holder.application_name or "", pid=holder.pid,
        client_addr=holder.client_addr, since=holder.since, since_age=_ago(now, holder.since),
        renewed=holder.renewed, renewed_age=_ago(now, holder.renewed),
        expires_in=timedelta(0) if holder.expires is None else max(holder.expires - now,
                                                                   timedelta(0)),
    )  # fmt: skip


def _no_leader_problem(config: MonitoringConfig, scheduler: str) -> str:
    if config.ticker_job_id is None:
        return (
            "Nothing ticks: no ticker holds the ticker lease and no ticker job is scheduled."
            " Events sent now are not delivered until something ticks: run `pgque ticker`,"
            " a pgque.Ticker in an application, or pgque.start() where pg_cron is installed."
        )
    return (
        f"No ticker holds the lease now, though {scheduler} job {config.ticker_job_id}"
        " is scheduled to run pgque.ticker_loop() every second: between two runs this is"
        " normal; if it stays, the scheduler is not running the job."
    )


async def ticking(
    client: AsyncPgqueClient, stats: Sequence[QueueStats], checks: Sequence[HealthCheck]
) -> Ticking:
    """The ticker panel: who leads (kind, application name, pid, client address,
    since, last renewal), the last tick, the scheduled jobs, the system checks by
    what they judge, and every problem in words."""
    lease = await reads.ticker_lease(client)
    config = await reads.monitoring_config(client)
    now = lease.now
    scheduler = config.scheduler or "manual"
    newest = max(
        (s for s in stats if s.last_tick_time is not None),
        key=lambda s: s.last_tick_time or now, default=None,
    )  # fmt: skip
    leader = await _leader(client, lease, scheduler)
    problems = [] if leader is not None else [_no_leader_problem(config, scheduler)]
    holder = lease.leader
    last_leader = None
    if not lease.leading and holder is not None and holder.renewed is not None:
        last_leader = LastLeader(holder.application_name or "", holder.pid,
                                 _ago(now, holder.renewed), holder.expires is None)  # fmt: skip
    system = [
        SystemCheck(SYSTEM_CHECK_LABELS.get(c.name, c.name), c.name, c.status, c.detail)
        for c in checks
        if c.queue == "system"
    ]
    problems += [f"{c.label}: {c.detail}" for c in system if c.status != "ok"]
    late = [c for c in checks if c.name == "ticker_running" and c.status != "ok"]
    problems += [f"Queue {c.queue} is ticked late: {c.detail}" for c in late]
    nothing_scheduled = not lease.leading and config.ticker_job_id is None
    status = worst(
        [c.status for c in system] + [c.status for c in late]
        + ([Status.WARNING] if nothing_scheduled else [])
    )  # fmt: skip
    return Ticking(
        leading=lease.leading, leader=leader, scheduler=scheduler,
        ticker_job_id=config.ticker_job_id, maint_job_id=config.maint_job_id,
        tick_period_ms=config.tick_period_ms,
        last_tick_age=None if newest is None else _ago(now, newest.last_tick_time),
        last_tick_queue=None if newest is None else newest.queue_name,
        last_leader=last_leader, system_checks=system, problems=problems,
        status=status.text, summary=_summary(leader),
    )  # fmt: skip


def _summary(leader: Leader | None) -> str:
    if leader is None:
        return "No ticker leads."
    where = leader.client_addr or "a local socket"
    name = leader.application_name or "no application_name"
    return (
        f"{leader.kind[0].upper()}{leader.kind[1:]} leads: {name}, pid {leader.pid},"
        f" from {where}, since {_at(leader.since)} ({age(leader.since_age)} ago)."
    )
