"""W3C trace context in a message's extra fields (the field map).

pgque carries the producer's trace context in one of ``ev_extra1..4``:
``ev_extra1`` holds a partition or ordering key when there is one (upstream's
convention), so the trace context goes to ``ev_extra1`` when it is free and
to ``ev_extra4`` otherwise. The value is the ``traceparent`` header, or a
small JSON object ``{"traceparent": ..., "tracestate": ...}`` when there is
trace state. Readers accept only those two shapes, so the table name a CDC
trigger writes into ``ev_extra1`` is never taken for a trace.
"""

from __future__ import annotations

import json
import re
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.context import Context

__all__ = ["current_carrier", "extract", "trace_fields"]

_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")


def current_carrier() -> str | None:
    """The current span's context as text for an extra field, or None without a valid span."""
    if not trace.get_current_span().get_span_context().is_valid:
        return None
    headers: dict[str, str] = {}
    propagate.inject(headers)
    traceparent = headers.get("traceparent")
    if traceparent is None:
        return None
    if headers.get("tracestate"):
        return json.dumps({"traceparent": traceparent, "tracestate": headers["tracestate"]})
    return traceparent


def _headers(value: str | None) -> dict[str, str] | None:
    if not value:
        return None
    if _TRACEPARENT.match(value):
        return {"traceparent": value}
    if value.startswith("{"):
        try:
            carrier: Any = json.loads(value)
        except ValueError:
            return None
        if (
            isinstance(carrier, dict)
            and isinstance(carrier.get("traceparent"), str)
            and _TRACEPARENT.match(carrier["traceparent"])
        ):
            return {k: v for k, v in carrier.items() if isinstance(v, str)}
    return None


def extract(*values: str | None) -> Context | None:
    """The trace context found in the first field holding a valid carrier, else None."""
    for value in values:
        headers = _headers(value)
        if headers is not None:
            return propagate.extract(headers)
    return None


def trace_fields(
    extras: tuple[str | None, str | None, str | None, str | None], carrier: str | None
) -> tuple[str | None, str | None, str | None, str | None]:
    """``extras`` with ``carrier`` placed by the field map (extra1 if free, else extra4)."""
    if carrier is None:
        return extras
    if extras[0] is None:
        return (carrier, extras[1], extras[2], extras[3])
    if extras[3] is None:
        return (extras[0], extras[1], extras[2], carrier)
    return extras
