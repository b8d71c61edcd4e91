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
from datetime import datetime, timedelta
from typing import Any

from pgque.async_client import AsyncPgqueClient
from pgque.health import HealthCheck
from pgque.records import QueueStats
from pgque.web import reads
from pgque.web.formatting import age
from pgque.web.metrics import worst_status

__all__ = ["SYSTEM_CHECK_LABELS", "leader_kind", "ticking"]

#: What the system checks of ``queue_health()`` judge, as the console names them.
SYSTEM_CHECK_LABELS = {
    "pg_cron_ticker": "Ticking",
    "pg_cron_maint": "Maintenance",
}


def leader_kind(leader: dict[str, Any], backend: dict[str, Any] | None, scheduler: str) -> str:
    """What the leading session is, as far as the database tells."""
    app = (leader.get("application_name") or "").lower()
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


async def ticking(
    client: AsyncPgqueClient, stats: Sequence[QueueStats], checks: Sequence[HealthCheck]
) -> dict[str, Any]:
    """The ticker panel: who leads (kind, application name, pid, client address,
    since, last renewal), the last tick, the scheduled jobs, the system checks by
    what they judge, and every problem in words."""
    leader = await reads.ticker_leader(client)
    config = await reads.scheduler(client)
    now: datetime = leader["now"]
    problems: list[str] = []
    scheduler = config["scheduler"] or "manual"
    newest = max(
        (s for s in stats if s.last_tick_time is not None),
        key=lambda s: s.last_tick_time or now, default=None,
    )  # fmt: skip
    view: dict[str, Any] = {
        "leading": bool(leader["active"]),
        "leader": None,
        "scheduler": scheduler,
        "ticker_job_id": config["ticker_job_id"],
        "maint_job_id": config["maint_job_id"],
        "tick_period_ms": config["tick_period_ms"],
        "last_tick_age": None if newest is None else _ago(now, newest.last_tick_time),
        "last_tick_queue": None if newest is None else newest.queue_name,
        "last_leader": None,
    }
    if leader["active"]:
        backend = await reads.leader_backend(client, leader["pid"])
        view["leader"] = {
            "kind": leader_kind(leader, backend, scheduler),
            "application_name": leader["application_name"] or "",
            "pid": leader["pid"],
            "client_addr": None if leader["client_addr"] is None else str(leader["client_addr"]),
            "since": leader["since"],
            "since_age": _ago(now, leader["since"]),
            "renewed": leader["renewed"],
            "renewed_age": _ago(now, leader["renewed"]),
            "expires_in": max(leader["expires"] - now, timedelta(0)),
        }
    elif config["ticker_job_id"] is None:
        problems.append(
            "Nothing ticks: no ticker holds the ticker lease and no ticker job is scheduled."
            " Events sent now are not delivered until something ticks: run `pgque ticker`,"
            " a pgque.Ticker in an application, or pgque.start() where pg_cron is installed."
        )
    else:
        problems.append(
            f"No ticker holds the lease now, though {scheduler} job {config['ticker_job_id']}"
            " is scheduled to run pgque.ticker_loop() every second: between two runs this is"
            " normal; if it stays, the scheduler is not running the job."
        )
    if not leader["active"] and leader["renewed"] is not None:
        view["last_leader"] = {
            "application_name": leader["application_name"] or "",
            "pid": leader["pid"],
            "renewed_age": _ago(now, leader["renewed"]),
            "resigned": leader["expires"] is None,
        }
    system = []
    for check in checks:
        if check.queue != "system":
            continue
        label = SYSTEM_CHECK_LABELS.get(check.name, check.name)
        system.append({"label": label, "name": check.name, "status": check.status,
                       "detail": check.detail})  # fmt: skip
        if check.status != "ok":
            problems.append(f"{label}: {check.detail}")
    late = [c for c in checks if c.name == "ticker_running" and c.status != "ok"]
    for check in late:
        problems.append(f"Queue {check.queue} is ticked late: {check.detail}")
    view["system_checks"] = system
    view["problems"] = problems
    view["status"] = worst_status(
        [str(c["status"]) for c in system] + [c.status for c in late]
        + (["warning"] if not leader["active"] and config["ticker_job_id"] is None else [])
    )  # fmt: skip
    view["summary"] = _summary(view)
    return view


def _summary(view: dict[str, Any]) -> str:
    leader = view["leader"]
    if leader is None:
        return "No ticker leads."
    where = leader["client_addr"] or "a local socket"
    name = leader["application_name"] or "no application_name"
    return (
        f"{leader['kind'][0].upper()}{leader['kind'][1:]} leads: {name}, pid {leader['pid']},"
        f" from {where}, since {_at(leader['since'])} ({age(leader['since_age'])} ago)."
    )
