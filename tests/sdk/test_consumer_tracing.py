"""A trace from the producer's span through the consumer's receive, process and settle
spans, for both consumer twins."""

from __future__ import annotations

from typing import Any

import psycopg
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from twins import handle, make

import pgque
from _engine import one
from _wait import wait_for


def send_in_a_trace(db: str, conn: psycopg.Connection[Any]) -> trace.Span:
    """Send one message to 'q' inside a span, and tick it; the span."""
    tracer = trace.get_tracer("test")
    with tracer.start_as_current_span("checkout") as parent, pgque.connect(db) as client:
        client.send("q", {"order": 1})
        client.conn.commit()
    one(conn, "select pgque.force_next_tick('q')")
    one(conn, "select pgque.ticker('q')")
    return parent


def test_process_span_continues_the_producer_trace(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, spans: InMemorySpanExporter,
    start: Any,
) -> None:  # fmt: skip
    parent = send_in_a_trace(db, conn)
    consumer = make(kind, db, poll_interval=0.2)
    calls: list[int] = []

    def handler(msg: pgque.Message) -> None:
        calls.append(msg.msg_id)
        if len(calls) == 1:
            raise RuntimeError("first delivery fails")

    handle(consumer, handler)
    running = start(consumer)
    wait_for(lambda: any(s.name == "ack q" for s in spans.get_finished_spans()), what="an ack")
    running.stop()
    assert running.outcome(timeout=5) is None

    assert_one_traced_delivery(spans, parent)
    (nack,) = [s for s in spans.get_finished_spans() if s.name == "nack q"]
    assert nack.attributes is not None
    assert nack.attributes["messaging.operation.type"] == "settle"
    assert nack.attributes["messaging.consumer.group.name"] == "c"
    (process,) = [s for s in spans.get_finished_spans() if s.name == "process q"]
    assert process.attributes is not None
    assert process.attributes["error.type"] == "RuntimeError"


def assert_one_traced_delivery(spans: InMemorySpanExporter, parent: trace.Span) -> None:
    """The delivery's spans: process continues the producer's trace, receive links to it."""
    by_name = {s.name: s for s in spans.get_finished_spans()}
    trace_id = parent.get_span_context().trace_id
    process = by_name["process q"]
    assert process.kind == trace.SpanKind.CONSUMER
    assert process.context.trace_id == trace_id
    assert (
        process.parent is not None and process.parent.span_id == parent.get_span_context().span_id
    )
    assert process.attributes["messaging.system"] == "pgque"
    assert process.attributes["messaging.destination.name"] == "q"
    (receive,) = [  # the poll that got the message (empty polls make spans too)
        s for s in spans.get_finished_spans()
        if s.name == "receive q" and "messaging.batch.message_count" in (s.attributes or {})
    ]  # fmt: skip
    assert receive.kind == trace.SpanKind.CLIENT
    assert receive.attributes["messaging.batch.message_count"] == 1
    assert [link.context.trace_id for link in receive.links] == [trace_id]
    assert by_name["ack q"].attributes["messaging.operation.type"] == "settle"
