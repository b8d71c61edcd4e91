"""otel_metrics() as observable gauges, read through an in-memory metric reader."""

from __future__ import annotations

from typing import Any

import psycopg
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from _engine import one
from pgque.otel_gauges import GAUGES, QueueGauges


def test_queue_figures_become_gauges(db: str, conn: psycopg.Connection[Any], queue: str) -> None:
    for _ in range(3):
        one(conn, "select pgque.send('q', '{}'::jsonb)")
    one(conn, "select pgque.ticker('q')")
    reader = InMemoryMetricReader()
    QueueGauges(db, meter_provider=MeterProvider(metric_readers=[reader]), min_interval=0)
    data = reader.get_metrics_data()
    assert data is not None
    points = {
        metric.name: [(p.value, dict(p.attributes or {})) for p in metric.data.data_points]
        for rm in data.resource_metrics for sm in rm.scope_metrics for metric in sm.metrics
    }  # fmt: skip
    assert set(points) == set(GAUGES)
    depth = points["pgque.queue.depth"]
    assert [labels["queue"] for _, labels in depth] == ["q"]
    assert depth[0][0] == one(conn, "select depth from pgque.queue_stats() where queue_name = 'q'")
    lag_labels = [labels for _, labels in points["pgque.consumer.lag_seconds"]]
    assert lag_labels == [{"queue": "q", "consumer": "c"}]
