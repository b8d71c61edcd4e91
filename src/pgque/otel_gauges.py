"""``pgque.otel_metrics()`` as OpenTelemetry observable gauges.

The queue figures the database computes (depth, oldest message age,
consumer lag and pending events, dead letters, throughput) become gauges
named as ``otel_metrics()`` names them (``pgque.queue.depth`` ...), with its
labels as attributes. One query serves every gauge of a collection; results
are reused for ``min_interval`` seconds, so a fast exporter does not turn
into a fast poller.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

import psycopg
from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

from pgque._executor import fetch_all
from pgque._version import __version__
from pgque.errors import PgqueError

__all__ = ["GAUGES", "QueueGauges"]

logger = logging.getLogger("pgque.otel")

#: The gauges ``pgque.otel_metrics()`` reports, with their units.
GAUGES: dict[str, str] = {
    "pgque.queue.depth": "{message}",
    "pgque.queue.oldest_message_age_seconds": "s",
    "pgque.consumer.lag_seconds": "s",
    "pgque.consumer.pending_events": "{message}",
    "pgque.message.dead_lettered": "{message}",
    "pgque.queue.throughput": "{message}/s",
}


class QueueGauges:
    """Registers the gauges on a meter provider and reads them from the database.

    Args:
        dsn: Connection string; the role needs pgque_reader.
        meter_provider: Defaults to the global provider.
        min_interval: Seconds a reading is reused. Defaults to 10.
    """

    def __init__(
        self,
        dsn: str,
        *,
        meter_provider: metrics.MeterProvider | None = None,
        min_interval: float = 10.0,
    ) -> None:
        self.dsn = dsn
        self.min_interval = min_interval
        self._lock = threading.Lock()
        self._read_at = -float("inf")
        self._rows: list[tuple[str, float, dict[str, Any]]] = []
        provider = meter_provider or metrics.get_meter_provider()
        meter = provider.get_meter("pgque", __version__)
        for name, unit in GAUGES.items():
            meter.create_observable_gauge(
                name, callbacks=[self._callback(name)], unit=unit,
                description=f"{name} from pgque.otel_metrics()",
            )  # fmt: skip

    def _callback(self, name: str) -> Any:
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(value, labels) for metric, value, labels in self._read()
                    if metric == name]  # fmt: skip

        return observe

    def _read(self) -> list[tuple[str, float, dict[str, Any]]]:
        with self._lock:
            if time.monotonic() - self._read_at >= self.min_interval:
                try:
                    with psycopg.connect(self.dsn, autocommit=True) as conn:
                        rows = fetch_all(conn, "otel_metrics")
                    self._rows = [
                        (name, float(value) if isinstance(value, Decimal) else value, labels or {})
                        for name, value, labels in rows
                        if value is not None
                    ]
                except (psycopg.Error, PgqueError) as exc:
                    logger.warning("pgque gauges: cannot read pgque.otel_metrics(): %s", exc)
                    self._rows = []
                self._read_at = time.monotonic()
            return self._rows
