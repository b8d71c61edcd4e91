"""Producer spans, trace carriers and metrics (OpenTelemetry SDK, in-memory exporters)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import SpanKind, StatusCode

import pgque
from _engine import rows
from pgque import otel, tracing


class Otel:
    """A tracer provider and a meter provider that keep everything in memory."""

    def __init__(self, sampler: Any = None) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider(**({"sampler": sampler} if sampler else {}))
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def metrics(self) -> dict[str, list[Any]]:
        data = self.reader.get_metrics_data()
        found: dict[str, list[Any]] = {}
        assert data is not None
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                assert scope.scope.name == "pgque"
                for metric in scope.metrics:
                    found.setdefault(metric.name, []).extend(metric.data.data_points)
        return found

    def producer(self, source: Any, **kwargs: Any) -> pgque.Producer:
        return pgque.Producer(
            source,
            tracer_provider=self.tracer_provider,
            meter_provider=self.meter_provider,
            **kwargs,
        )


@pytest.fixture
def telemetry() -> Iterator[Otel]:
    t = Otel()
    yield t
    t.tracer_provider.shutdown()


def carrier(span: ReadableSpan) -> str:
    """The traceparent of ``span`` (trace flags as the SDK sets them: 01, or 03 when random)."""
    ctx = span.context
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def stored(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return rows(conn, "select ev_id, ev_extra1, ev_extra4 from pgque.event_template order by ev_id")


def test_send_span_is_the_messages_creation_context(
    telemetry: Otel, db: str, conn: psycopg.Connection[Any], queue: str
) -> None:
    with telemetry.producer(db) as producer:
        event_id = producer.send("q", {"a": 1})
        keyed = producer.send("q", {"a": 2}, extras=("customer:7", None, None, None))
    (send, send_keyed) = telemetry.spans()
    assert send.name == "send q" and send.kind == SpanKind.PRODUCER
    assert dict(send.attributes or {}) == {
        "messaging.system": "pgque",
        "messaging.operation.name": "send",
        "messaging.operation.type": "send",
        "messaging.destination.name": "q",
        "messaging.message.id": str(event_id),
    }
    got = stored(conn)
    assert got[0][0] == event_id and got[0][2] is None
    assert got[0][1] == carrier(send)
    assert got[1][0] == keyed and got[1][1] == "customer:7"  # the key keeps extra1
    assert got[1][2] == carrier(send_keyed)
    ctx = tracing.extract(got[0][1])
    assert ctx is not None
    assert trace.get_current_span(ctx).get_span_context().span_id == send.context.span_id


def test_send_joins_the_ambient_trace(
    telemetry: Otel, db: str, conn: psycopg.Connection[Any], queue: str
) -> None:
    tracer = telemetry.tracer_provider.get_tracer("app")
    with telemetry.producer(db) as producer, tracer.start_as_current_span("request") as request:
        producer.send("q", {})
    send = next(s for s in telemetry.spans() if s.name == "send q")
    assert send.parent is not None and send.parent.span_id == request.get_span_context().span_id
    assert send.context.trace_id == request.get_span_context().trace_id


def test_batch_links_create_spans(
    telemetry: Otel, db: str, conn: psycopg.Connection[Any], queue: str
) -> None:
    with telemetry.producer(db) as producer:
        ids = producer.send_batch(
            "q", [1, 2, 3], extras=[None, ("key", None, None, None), ("a", None, None, "b")]
        )
    spans = telemetry.spans()
    creates = [s for s in spans if s.name == "create q"]
    (send,) = [s for s in spans if s.name == "send q"]
    assert [s.kind for s in creates] == [SpanKind.PRODUCER] * 3
    assert [dict(s.attributes or {})["messaging.message.id"] for s in creates] == [
        str(i) for i in ids
    ]
    assert dict(creates[0].attributes or {})["messaging.operation.type"] == "create"
    assert send.kind == SpanKind.CLIENT
    attrs = dict(send.attributes or {})
    assert attrs["messaging.batch.message_count"] == 3
    assert attrs["messaging.operation.type"] == "send"
    assert "messaging.message.id" not in attrs
    assert [link.context.span_id for link in send.links] == [s.context.span_id for s in creates]
    got = stored(conn)
    assert got[0][1] == carrier(creates[0])
    assert got[1][1] == "key"
    assert got[1][2] == carrier(creates[1])
    assert (got[2][1], got[2][2]) == ("a", "b")  # no free field: no carrier


def test_batch_without_create_spans_carries_the_send_span(
    telemetry: Otel, db: str, conn: psycopg.Connection[Any], queue: str
) -> None:
    with telemetry.producer(db, create_spans=False) as producer:
        producer.send_batch("q", [1, 2])
        with producer.batch("q") as batch:
            batch.send(3)
    first, second = telemetry.spans()
    assert [first.name, second.name] == ["send q", "send q"]
    assert first.links == () and first.kind == SpanKind.CLIENT
    expected = carrier(first)
    assert [g[1] for g in stored(conn)] == [expected, expected, carrier(second)]


def test_failures_are_recorded(
    telemetry: Otel, db: str, conn: psycopg.Connection[Any], queue: str
) -> None:
    with telemetry.producer(db) as producer:
        with pytest.raises(pgque.PgqueQueueNotFound):
            producer.send("nope", {})
        with pytest.raises(pgque.PgqueQueueNotFound):
            producer.send_batch("nope", [1, 2])
        producer.send_batch("q", [1, 2, 3])
        producer.send("q", 4)
    failed = [s for s in telemetry.spans() if s.name == "send nope"]
    assert len(failed) == 2
    for span in failed:
        assert span.status.status_code == StatusCode.ERROR
        assert dict(span.attributes or {})["error.type"] == "pgque.PgqueQueueNotFound"
        assert [e.name for e in span.events] == ["exception"]
    creates = [s for s in telemetry.spans() if s.name == "create nope"]
    assert len(creates) == 2 and all(s.status.status_code == StatusCode.ERROR for s in creates)

    found = telemetry.metrics()
    sent = {
        (p.attributes["messaging.destination.name"], p.attributes.get("error.type")): p.value
        for p in found["messaging.client.sent.messages"]
    }
    assert sent == {("q", None): 4, ("nope", "pgque.PgqueQueueNotFound"): 3}
    durations = found["messaging.client.operation.duration"]
    assert sum(p.count for p in durations) == 4
    ok = next(p for p in durations if p.attributes["messaging.destination.name"] == "q")
    assert dict(ok.attributes) == {
        "messaging.system": "pgque",
        "messaging.operation.name": "send",
        "messaging.operation.type": "send",
        "messaging.destination.name": "q",
    }
    assert ok.explicit_bounds[0] == 0.005 and ok.explicit_bounds[-1] == 10.0


def test_nothing_per_message_without_tracing(
    db: str, conn: psycopg.Connection[Any], queue: str
) -> None:
    from opentelemetry.trace import NoOpTracerProvider

    tel = otel.Telemetry(tracer_provider=NoOpTracerProvider())
    assert tel.tracing is False
    assert tel.create("q", 1000) is None
    with tel.span("send", "q") as span:
        assert span is trace.INVALID_SPAN
    with pgque.Producer(db, tracer_provider=NoOpTracerProvider()) as producer:
        producer.send_batch("q", [1, 2])
        producer.send("q", 3)
    assert [g[1:] for g in stored(conn)] == [(None, None)] * 3

    # Sampled out: one create span is tried and none kept; the messages carry
    # the unsampled context (sampled flag off), so consumers keep the decision.
    sampled_out = Otel(sampler=ALWAYS_OFF)
    assert sampled_out.producer(conn)._telemetry.create("q", 5) is None
    sampled_out.producer(conn).send_batch("q", [4, 5])
    assert sampled_out.spans() == []
    first, second = (g[1] for g in stored(conn)[-2:])
    assert first == second and int(first[-2:], 16) & 1 == 0


def test_global_providers_are_used_by_default() -> None:
    tel = otel.telemetry()
    assert tel is otel.telemetry()
    assert otel.telemetry(tracer_provider=TracerProvider()) is not tel
    expected = not isinstance(
        trace.get_tracer_provider(), (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
    )
    assert tel.tracing is expected
    assert otel.error_type(ValueError("x")) == "ValueError"
    assert otel.error_type(pgque.PgqueQueueNotFound()) == "pgque.PgqueQueueNotFound"
