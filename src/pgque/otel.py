"""OpenTelemetry for pgque: spans and metrics after the messaging semantic conventions.

Only ``opentelemetry-api`` is needed (a core dependency); without an SDK and
a configured tracer provider every helper here is a cheap no-op, and nothing
is created per message. Spans are named ``{operation} {queue}`` and carry,
from their start, ``messaging.system = "pgque"``,
``messaging.operation.name``, ``messaging.operation.type`` and
``messaging.destination.name`` (the queue).

| operation | operation type | span kind | used for |
| --- | --- | --- | --- |
| ``send`` | ``send`` | PRODUCER | one message (its context travels with it) |
| ``send`` | ``send`` | CLIENT | a batch; links to the ``create`` spans |
| ``create`` | ``create`` | PRODUCER | one message of a batch |
| ``receive`` | ``receive`` | CLIENT | a batch read by a consumer |
| ``process`` | ``process`` | CONSUMER | a handler call |
| ``ack``, ``nack`` | ``settle`` | CLIENT | settling a batch or message |

Metrics: ``messaging.client.sent.messages`` (counter),
``messaging.client.operation.duration`` (histogram, seconds),
``messaging.client.consumed.messages`` (counter) and
``messaging.process.duration`` (histogram, seconds), each with the system,
operation, queue and, for a failed operation, ``error.type``.

Use :func:`telemetry` for the instance on the global providers, or
``Telemetry(tracer_provider=..., meter_provider=...)`` for explicit ones::

    tel = telemetry()
    with tel.operation("receive", queue, batch_count=len(msgs), links=links) as op:
        ...
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode

from pgque import tracing
from pgque._version import __version__

__all__ = [
    "BATCH_MESSAGE_COUNT",
    "CONSUMER_GROUP",
    "DESTINATION",
    "ERROR_TYPE",
    "MESSAGE_ID",
    "OPERATION_NAME",
    "OPERATION_TYPE",
    "SCOPE",
    "SYSTEM",
    "SYSTEM_NAME",
    "Creation",
    "Operation",
    "Telemetry",
    "error_type",
    "telemetry",
]

#: The instrumentation scope (tracer and meter name).
SCOPE = "pgque"
#: ``messaging.system`` value.
SYSTEM_NAME = "pgque"

SYSTEM = "messaging.system"
OPERATION_NAME = "messaging.operation.name"
OPERATION_TYPE = "messaging.operation.type"
DESTINATION = "messaging.destination.name"
MESSAGE_ID = "messaging.message.id"
BATCH_MESSAGE_COUNT = "messaging.batch.message_count"
CONSUMER_GROUP = "messaging.consumer.group.name"
ERROR_TYPE = "error.type"

_OPERATION_TYPES: dict[str, str] = {
    "send": "send",
    "create": "create",
    "receive": "receive",
    "process": "process",
    "ack": "settle",
    "nack": "settle",
    "dead_letter": "settle",
}
_DEFAULT_KINDS: dict[str, SpanKind] = {
    "send": SpanKind.PRODUCER,
    "create": SpanKind.PRODUCER,
    "receive": SpanKind.CLIENT,
    "process": SpanKind.CONSUMER,
    "settle": SpanKind.CLIENT,
}
# The conventions' advisory buckets for durations, in seconds.
_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                     10.0)  # fmt: skip


def _api_only(provider: metrics.MeterProvider) -> bool:
    """True for a meter provider of the OpenTelemetry API package itself: the global
    default before an SDK sets one (a proxy) or ``NoOpMeterProvider``. Both drop every
    measurement; an SDK's provider (``opentelemetry.sdk``, or another vendor's) comes
    from another module."""
    module = type(provider).__module__
    return module == "opentelemetry.metrics" or module.startswith("opentelemetry.metrics.")


def error_type(exc: BaseException) -> str:
    """The low-cardinality ``error.type`` of an exception: its (qualified) class name."""
    cls = type(exc)
    if cls.__module__ in ("builtins", "__main__"):
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def _histogram(meter: metrics.Meter, name: str, description: str) -> metrics.Histogram:
    try:
        return meter.create_histogram(
            name, unit="s", description=description,
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )  # fmt: skip
    except TypeError:  # pragma: no cover - opentelemetry-api before 1.23
        return meter.create_histogram(name, unit="s", description=description)


@dataclass
class Operation:
    """What :meth:`Telemetry.operation` yields: the span, and room for the outcome.

    Attributes:
        span: The operation's span (a non-recording one when tracing is off).
        attributes: Extra metric attributes (e.g. ``messaging.consumer.group.name``).
        error: The error type recorded when the block raised.
    """

    span: Span
    attributes: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def set_message_id(self, message_id: object) -> None:
        """Set ``messaging.message.id`` on the span (single-message operations)."""
        if self.span.is_recording():
            self.span.set_attribute(MESSAGE_ID, str(message_id))


@dataclass
class Creation:
    """The ``create`` spans of a batch and the trace carrier for each message.

    ``carriers[i]`` is the text to store in message ``i``'s trace field (see
    :mod:`pgque.tracing`); ``links`` go on the batch's ``send`` span. Call
    :meth:`end` once the ids are known.
    """

    carriers: list[str | None]
    links: list[Link]
    spans: list[Span]

    def end(self, ids: Sequence[int] | None = None, error: BaseException | None = None) -> None:
        """End the create spans, with ``messaging.message.id`` when ``ids`` are given."""
        for i, span in enumerate(self.spans):
            if ids is not None and i < len(ids):
                span.set_attribute(MESSAGE_ID, str(ids[i]))
            if error is not None:
                span.set_attribute(ERROR_TYPE, error_type(error))
                span.set_status(Status(StatusCode.ERROR, str(error)))
            span.end()


class Telemetry:
    """pgque's tracer, meter and instruments, on given or global providers.

    Args:
        tracer_provider: Where spans go. Defaults to the global provider (set
            with ``opentelemetry.trace.set_tracer_provider``), looked up at
            each span, so configuring OpenTelemetry after pgque is fine.
        meter_provider: Where metrics go. Defaults to the global provider.
    """

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider
        if tracer_provider is None:
            self.tracer = trace.get_tracer(SCOPE, __version__)
        else:
            self.tracer = tracer_provider.get_tracer(SCOPE, __version__)
        if meter_provider is None:
            self.meter = metrics.get_meter(SCOPE, __version__)
        else:
            self.meter = meter_provider.get_meter(SCOPE, __version__)
        self.sent_messages = self.meter.create_counter(
            "messaging.client.sent.messages", unit="{message}",
            description="Messages a producer attempted to send.",
        )  # fmt: skip
        self.consumed_messages = self.meter.create_counter(
            "messaging.client.consumed.messages", unit="{message}",
            description="Messages delivered to the application.",
        )  # fmt: skip
        self.operation_duration = _histogram(
            self.meter, "messaging.client.operation.duration",
            "Duration of a messaging operation (send, receive, ack...), not processing.",
        )  # fmt: skip
        self.process_duration = _histogram(
            self.meter, "messaging.process.duration", "Duration of processing one message."
        )

    # -- spans -----------------------------------------------------------------

    @property
    def tracing(self) -> bool:
        """False when spans would be dropped anyway (no SDK provider configured)."""
        provider = self._tracer_provider or trace.get_tracer_provider()
        return not isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider))

    @property
    def metering(self) -> bool:
        """False when measurements would be dropped anyway (no SDK meter provider configured)."""
        provider = self._meter_provider or metrics.get_meter_provider()
        return not _api_only(provider)

    @staticmethod
    def attributes(operation: str, queue: str) -> dict[str, Any]:
        """The attributes every span and metric of ``operation`` on ``queue`` starts with."""
        return {
            SYSTEM: SYSTEM_NAME,
            OPERATION_NAME: operation,
            OPERATION_TYPE: _OPERATION_TYPES.get(operation, operation),
            DESTINATION: queue,
        }

    @contextmanager
    def span(
        self,
        operation: str,
        queue: str,
        *,
        kind: SpanKind | None = None,
        links: Sequence[Link] | None = None,
        context: Context | None = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> Iterator[Span]:
        """A span ``{operation} {queue}``, current inside the block.

        An exception leaving the block is recorded on the span, with
        ``error.type`` and an error status, and re-raised. With tracing off
        the block gets a non-recording span and the current context is left
        as it is (so an ambient trace still propagates into messages).

        Args:
            operation: ``send``, ``create``, ``receive``, ``process``, ``ack``, ``nack``...
            queue: The queue (``messaging.destination.name``).
            kind: Span kind; defaults by operation type (see the module table).
            links: Links, set at span start (e.g. to the messages' creation contexts).
            context: The parent context; defaults to the current one.
            attributes: More attributes, set at start (``messaging.batch.message_count``...).
        """
        if not self.tracing:
            yield trace.INVALID_SPAN
            return
        attrs = self.attributes(operation, queue)
        if attributes:
            attrs.update(attributes)
        span_kind = kind if kind is not None else _DEFAULT_KINDS[attrs[OPERATION_TYPE]]
        span = self.tracer.start_span(
            f"{operation} {queue}", context=context, kind=span_kind, attributes=attrs,
            links=links, record_exception=False, set_status_on_exception=False,
        )  # fmt: skip
        with trace.use_span(span, end_on_exit=True, record_exception=False,
                            set_status_on_exception=False):  # fmt: skip
            try:
                yield span
            except BaseException as exc:
                if span.is_recording():
                    span.set_attribute(ERROR_TYPE, error_type(exc))
                    span.record_exception(exc)
                    span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
                raise

    @contextmanager
    def operation(
        self,
        operation: str,
        queue: str,
        *,
        kind: SpanKind | None = None,
        batch_count: int | None = None,
        links: Sequence[Link] | None = None,
        context: Context | None = None,
        attributes: Mapping[str, Any] | None = None,
        sent: int = 0,
    ) -> Iterator[Operation]:
        """A client operation: its span, ``messaging.client.operation.duration``
        and, with ``sent``, ``messaging.client.sent.messages``.

        Args:
            operation: As for :meth:`span`.
            queue: As for :meth:`span`.
            kind: As for :meth:`span`.
            batch_count: ``messaging.batch.message_count`` (batch operations only).
            links: As for :meth:`span`.
            context: As for :meth:`span`.
            attributes: Span attributes, also put on the metrics.
            sent: Messages this operation sends (counted whether it fails or not).
        """
        span_attrs: dict[str, Any] = dict(attributes or {})
        if batch_count is not None:
            span_attrs[BATCH_MESSAGE_COUNT] = batch_count
        start = time.perf_counter()
        op: Operation | None = None
        try:
            with self.span(
                operation, queue, kind=kind, links=links, context=context, attributes=span_attrs
            ) as span:
                op = Operation(span, dict(attributes or {}))
                try:
                    yield op
                except BaseException as exc:
                    op.error = error_type(exc)
                    raise
        finally:
            error = op.error if op is not None else None
            extra = op.attributes if op is not None else dict(attributes or {})
            self.record_operation(
                operation, queue, time.perf_counter() - start, error=error, attributes=extra
            )
            if sent:
                self.record_sent(queue, sent, error=error, attributes=extra)

    def create(self, queue: str, count: int) -> Creation | None:
        """Start one ``create`` span per message of a batch; None when tracing is off.

        Also None when the first span is not recording (sampled out): then
        nothing more is created, and the batch's ``send`` span context is
        the one to carry.
        """
        if not self.tracing or count == 0:
            return None
        attrs = self.attributes("create", queue)
        name = f"create {queue}"
        carriers: list[str | None] = []
        links: list[Link] = []
        spans: list[Span] = []
        for _ in range(count):
            span = self.tracer.start_span(name, kind=SpanKind.PRODUCER, attributes=attrs)
            if not span.is_recording():
                span.end()
                for started in spans:
                    started.end()
                return None
            span_context = span.get_span_context()
            token = otel_context.attach(trace.set_span_in_context(span))
            try:
                carriers.append(tracing.current_carrier())
            finally:
                otel_context.detach(token)
            spans.append(span)
            links.append(Link(span_context))
        return Creation(carriers, links, spans)

    # -- metrics ---------------------------------------------------------------

    def record_operation(
        self,
        operation: str,
        queue: str,
        seconds: float,
        *,
        error: str | None = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> None:
        """Record ``messaging.client.operation.duration`` for one operation."""
        attrs = self.attributes(operation, queue)
        if attributes:
            attrs.update(attributes)
        if error is not None:
            attrs[ERROR_TYPE] = error
        self.operation_duration.record(seconds, attrs)

    def record_sent(
        self,
        queue: str,
        count: int,
        *,
        error: str | None = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> None:
        """Add ``count`` to ``messaging.client.sent.messages``."""
        attrs = self.attributes("send", queue)
        if attributes:
            attrs.update(attributes)
        if error is not None:
            attrs[ERROR_TYPE] = error
        self.sent_messages.add(count, attrs)

    def record_consumed(
        self,
        queue: str,
        count: int,
        *,
        operation: str = "receive",
        attributes: Mapping[str, Any] | None = None,
    ) -> None:
        """Add ``count`` to ``messaging.client.consumed.messages`` (once per delivery)."""
        attrs = self.attributes(operation, queue)
        if attributes:
            attrs.update(attributes)
        self.consumed_messages.add(count, attrs)

    def record_process(
        self,
        queue: str,
        seconds: float,
        *,
        error: str | None = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> None:
        """Record ``messaging.process.duration`` for one handler call."""
        attrs = self.attributes("process", queue)
        if attributes:
            attrs.update(attributes)
        if error is not None:
            attrs[ERROR_TYPE] = error
        self.process_duration.record(seconds, attrs)


@cache
def _global() -> Telemetry:
    return Telemetry()


def telemetry(
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
) -> Telemetry:
    """The :class:`Telemetry` on the given providers (one shared instance for the globals)."""
    if tracer_provider is None and meter_provider is None:
        return _global()
    return Telemetry(tracer_provider, meter_provider)
