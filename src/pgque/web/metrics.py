"""``/metrics`` and ``/healthz``: Prometheus text and a health verdict, from the client.

The gauges are ``pgque.otel_metrics()``'s rows, renamed by Prometheus
conventions (``pgque_`` prefix, underscores, the unit last). The health
verdict follows ``pgque status``: the worst of ``pgque.queue_health()``'s
checks; only ``critical`` fails (HTTP 503), as it makes ``pgque status`` exit 7.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pgque.monitoring import HealthCheck, Status, TickerLease, worst
from pgque.records import MetricSample

__all__ = ["PROMETHEUS_NAMES", "exposition", "health_verdict"]


@dataclass(frozen=True)
class PromMetric:
    """A Prometheus metric: its name, type and help text."""

    name: str
    type: str
    help: str


#: ``otel_metrics()``'s names and their Prometheus names (listed in docs/web.md).
PROMETHEUS_NAMES: dict[str, PromMetric] = {
    "pgque.queue.depth": PromMetric(
        "pgque_queue_depth", "gauge", "Events the slowest consumer of the queue has not finished."
    ),
    "pgque.queue.oldest_message_age_seconds": PromMetric(
        "pgque_queue_oldest_message_age_seconds", "gauge",
        "Age of the oldest event a consumer has not finished.",
    ),
    "pgque.consumer.lag_seconds": PromMetric(
        "pgque_consumer_lag_seconds", "gauge", "Age of the consumer's oldest unfinished event."
    ),
    "pgque.consumer.pending_events": PromMetric(
        "pgque_consumer_pending_events", "gauge", "Ticked events the consumer has not finished."
    ),
    "pgque.message.dead_lettered": PromMetric(
        "pgque_dead_letters", "gauge", "Dead letters stored for the queue."
    ),
    "pgque.queue.throughput": PromMetric(
        "pgque_queue_events_per_second", "gauge", "Events sent per second over the last minute."
    ),
}  # fmt: skip


def _prom_name(name: str, kind: str) -> PromMetric:
    known = PROMETHEUS_NAMES.get(name)
    if known is not None:
        return known
    flat = "".join(c if c.isalnum() else "_" for c in name)
    return PromMetric(flat if flat.startswith("pgque_") else f"pgque_{flat}", kind, name)


def _label_value(value: Any) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: Any) -> str:
    number = float(value)
    return str(int(number)) if number.is_integer() else repr(number)


def _leader_families(lease: TickerLease) -> dict[str, tuple[PromMetric, list[str]]]:
    """Who leads ticking (``pgque.ticker_leader()``): active 0/1 always; who and
    since when while a ticker leads."""
    active = lease.leading
    families = {
        "pgque_ticker_leader_active": (
            PromMetric("pgque_ticker_leader_active", "gauge",
                       "1 while a ticker holds the ticker lease, else 0."),
            [f"pgque_ticker_leader_active {int(active)}"],
        ),
    }  # fmt: skip
    leader = lease.leader
    if leader is None or not active or leader.since is None or leader.renewed is None:
        return families
    shown = {"application_name": leader.application_name, "client_addr": leader.client_addr,
             "pid": leader.pid}  # fmt: skip
    labels = ",".join(
        f'{key}="{_label_value(value if value is not None else "")}"'
        for key, value in shown.items()
    )
    since = _number(round((lease.now - leader.since).total_seconds(), 3))
    renewed = _number(round((lease.now - leader.renewed).total_seconds(), 3))
    families["pgque_ticker_leader_info"] = (
        PromMetric("pgque_ticker_leader_info", "gauge",
                   "The session leading ticking (value 1): application name, client address, pid."),
        [f"pgque_ticker_leader_info{{{labels}}} 1"],
    )  # fmt: skip
    families["pgque_ticker_leader_since_seconds"] = (
        PromMetric("pgque_ticker_leader_since_seconds", "gauge",
                   "Seconds the leading ticker has held the ticker lease."),
        [f"pgque_ticker_leader_since_seconds {since}"],
    )  # fmt: skip
    families["pgque_ticker_lease_renewed_age_seconds"] = (
        PromMetric("pgque_ticker_lease_renewed_age_seconds", "gauge",
                   "Seconds since the leading ticker last renewed its lease."),
        [f"pgque_ticker_lease_renewed_age_seconds {renewed}"],
    )  # fmt: skip
    return families


def exposition(
    samples: Sequence[MetricSample],
    health: Sequence[HealthCheck],
    lease: TickerLease | None = None,
) -> str:
    """Prometheus text format 0.0.4: every sample under its family's HELP and TYPE,
    plus ``pgque_health_status`` (0 ok, 1 unknown, 2 warning, 3 critical) per check
    and, given ``pgque.ticker_leader()``'s row, who leads ticking."""
    families: dict[str, tuple[PromMetric, list[str]]] = {}
    for sample in samples:
        metric = _prom_name(sample.metric_name, sample.metric_type)
        labels = ",".join(
            f'{key}="{_label_value(val)}"' for key, val in sorted(sample.labels.items())
        )
        line = f"{metric.name}{{{labels}}} {_number(sample.value)}"
        families.setdefault(metric.name, (metric, []))[1].append(line)
    if health:
        metric = PromMetric(
            "pgque_health_status", "gauge",
            "pgque.queue_health() checks: 0 ok, 1 unknown, 2 warning, 3 critical.",
        )  # fmt: skip
        lines = [
            f'pgque_health_status{{check="{_label_value(c.name)}",queue="{_label_value(c.queue)}"}}'
            f" {int(c.level)}"
            for c in health
        ]
        families[metric.name] = (metric, lines)
    if lease is not None:
        families.update(_leader_families(lease))
    out: list[str] = []
    for metric, lines in families.values():
        out.append(f"# HELP {metric.name} {metric.help}")
        out.append(f"# TYPE {metric.name} {metric.type}")
        out.extend(lines)
    return "\n".join(out) + "\n"


def health_verdict(checks: Sequence[HealthCheck]) -> tuple[dict[str, Any], int]:
    """``/healthz``'s body and HTTP status: 200 for ok and warning, 503 for critical."""
    status = worst(c.status for c in checks)
    body = {
        "status": status.text,
        "checks": len(checks),
        "failing": [
            {"queue": c.queue, "check": c.name, "status": c.status, "detail": c.detail}
            for c in checks
            if c.status != "ok"
        ],
    }
    return body, 503 if status is Status.CRITICAL else 200
