"""OpenTelemetry end to end: one trace from producer to consumer, and queue metrics.

The client puts the current span's trace context into the message (an
extra field); the handler continues that trace. pgque's gauges from
``pgque.otel_metrics()`` (depth, lag, dead letters, throughput) are read by
observable instruments. Both go to console exporters here; point an OTLP
exporter at your collector instead.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable

import psycopg
from opentelemetry import metrics, trace
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

import pgque
from pgque import tracing

DSN = sys.argv[1] if len(sys.argv) > 1 else os.environ["PGQUE_DSN"]

spans = TracerProvider()
spans.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(formatter=lambda s: (
    json.dumps({"span": s.name, "trace_id": f"{s.context.trace_id:032x}",
                "parent": f"{s.parent.span_id:016x}" if s.parent else None}) + "\n"
))))  # fmt: skip
trace.set_tracer_provider(spans)
tracer = trace.get_tracer("shop")

with psycopg.connect(DSN, autocommit=True) as conn:
    pgque.install(conn)
    conn.execute("select pgque.create_queue('traced')")
    conn.execute("select pgque.subscribe('traced', 'worker')")

# -- metrics: pgque's gauges, read when the exporter collects -------------------------
monitor = psycopg.connect(DSN, autocommit=True)


def pgque_gauges(name: str):  # type: ignore[no-untyped-def]
    def observe(options: CallbackOptions) -> Iterable[Observation]:
        rows = monitor.execute(
            "select value, labels from pgque.otel_metrics() where metric_name = %s", (name,)
        ).fetchall()
        return [Observation(float(value), labels) for value, labels in rows]

    return observe


reader = PeriodicExportingMetricReader(
    ConsoleMetricExporter(formatter=lambda m: json.dumps(json.loads(m.to_json()), indent=None)
                          + "\n"),
    export_interval_millis=60_000,
)  # fmt: skip
meter_provider = MeterProvider(metric_readers=[reader])
metrics.set_meter_provider(meter_provider)
meter = metrics.get_meter("pgque")
for metric in ("pgque.queue.depth", "pgque.consumer.lag_seconds", "pgque.message.dead_lettered"):
    meter.create_observable_gauge(metric, callbacks=[pgque_gauges(metric)])

# -- a traced request that sends a message --------------------------------------------
with (
    tracer.start_as_current_span("POST /checkout") as request_span,
    pgque.connect(DSN, autocommit=True) as client,
):
    client.send("traced", {"cart": 7}, type="checkout")  # the trace context goes along
producer_trace = f"{request_span.get_span_context().trace_id:032x}"

# -- the consumer continues the producer's trace --------------------------------------
consumer = pgque.Consumer(DSN, queue="traced", name="worker", poll_interval=0.5)
consumer_traces: list[str] = []


@consumer.on("checkout")
def checkout(msg: pgque.Message) -> None:
    context = tracing.extract(msg.extra1, msg.extra4)
    with tracer.start_as_current_span("handle checkout", context=context) as span:
        consumer_traces.append(f"{span.get_span_context().trace_id:032x}")
    consumer.stop()


consumer.start()
meter_provider.shutdown()  # exports the gauges one last time
monitor.close()
print(f"producer trace {producer_trace}, consumer trace {consumer_traces[0]}")
assert consumer_traces == [producer_trace]  # one trace across the queue
