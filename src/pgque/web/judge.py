"""Badges with their reasons: each health check named in words, and a consumer's lag
judged against a threshold an operator sets and sees.

``queue_health()`` warns about a consumer only past half the queue's
rotation period (1 h by default): it guards the event tables. The console
also warns once a consumer with pending events is more than
``ConsoleSettings.lag_warning`` behind (5 minutes by default), and says so
beside the badge.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from pgque.monitoring import HealthCheck, worst
from pgque.records import ConsumerStats
from pgque.web.formatting import age

__all__ = ["check_label", "consumer_verdict", "reasons"]

_LABELS = {
    "ticker_running": "ticking",
    "rotation_health": "rotation",
    "dlq_health": "dead letters",
    "pg_cron_ticker": "ticking",
    "pg_cron_maint": "maintenance",
}


def check_label(name: str) -> str:
    """A health check's name as an operator reads it (``consumer_lag:w`` is ``consumer w``)."""
    if name.startswith("consumer_lag:"):
        return "consumer " + name.partition(":")[2]
    return _LABELS.get(name, name)


def reasons(checks: Sequence[HealthCheck]) -> list[dict[str, str]]:
    """Every check that is not ok: its status and, in words, what it found."""
    return [
        {"status": c.status, "check": c.name,
         "text": f"{check_label(c.name)}: {c.detail or c.status}"}
        for c in checks
        if c.status != "ok"
    ]  # fmt: skip


def consumer_verdict(
    stats: ConsumerStats,
    check: HealthCheck | None,
    rotation_period: timedelta | None,
    lag_warning: float,
) -> dict[str, Any]:
    """A consumer's status (the worse of ``queue_health()``'s and the console's lag
    threshold) and the reason, with the thresholds it was judged against."""
    pending = stats.pending_events or 0
    behind = stats.lag.total_seconds() if stats.lag is not None else 0.0
    threshold = f"warning past {age(lag_warning)} behind"
    if rotation_period is not None:
        threshold += f"; critical past {age(rotation_period)} (the rotation period)"
    console = "warning" if pending > 0 and behind > lag_warning else "ok"
    database = "ok" if check is None else check.status
    status = worst([console, database]).text
    if pending == 0:
        reason = "caught up"
    else:
        reason = f"{pending} events pending, {age(behind)} behind"
        if console != "ok":
            reason += f": more than {age(lag_warning)}"
        if database != "ok" and rotation_period is not None:
            half = rotation_period / 2
            reason += (
                f"; past {age(rotation_period if database == 'critical' else half)}"
                " of the rotation period, old event tables cannot be recycled"
            )
    return {"status": status, "reason": reason, "threshold": threshold}
