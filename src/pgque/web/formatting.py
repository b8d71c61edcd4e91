"""How the console shows values: ages, rates, payloads, trace ids, and JSON-ready rows.

No I/O here; the templates use these as filters and the JSON API uses
:func:`jsonable` on the same rows.
"""

from __future__ import annotations

import dataclasses
import json
import re
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import quote

from pgque.errors import PgqueInvalidArgument

__all__ = [
    "age",
    "duration_seconds",
    "jsonable",
    "pretty_payload",
    "queue_path",
    "rate",
    "trace_id",
]

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(s|m|h|d|w)")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$")


def jsonable(value: Any) -> Any:
    """``value`` with dataclasses as dicts, datetimes as ISO text, durations as seconds
    and decimals as floats: what the JSON API sends."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return round(value.total_seconds(), 3)
    if isinstance(value, Decimal):
        return float(value)
    return value


def age(value: timedelta | float | None) -> str:
    """A duration for people: ``850 ms``, ``42 s``, ``3 m 5 s``, ``2 h 10 m``, ``4 d 3 h``."""
    if value is None:
        return "-"
    secs = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if secs < 1:
        return f"{secs * 1000:.0f} ms"
    if secs < 60:
        return f"{secs:.0f} s"
    mins, secs = divmod(int(secs), 60)
    if mins < 60:
        return f"{mins} m {secs} s"
    hours, mins = divmod(mins, 60)
    if hours < 48:
        return f"{hours} h {mins} m"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h"


def rate(value: Decimal | float | None) -> str:
    """Events per second, one decimal: ``12.5/s`` (``-`` when unknown)."""
    return "-" if value is None else f"{float(value):.1f}/s"


def pretty_payload(data: str | None) -> str:
    """A payload for reading: JSON indented, anything else as stored."""
    if data is None:
        return "(null)"
    try:
        return json.dumps(json.loads(data), indent=2, ensure_ascii=False, sort_keys=True)
    except ValueError:
        return data


def trace_id(*extras: str | None) -> str | None:
    """The trace id of the first extra field holding a trace context (see
    :mod:`pgque.tracing`), or None."""
    for value in extras:
        if not value:
            continue
        header: Any = value
        if value.startswith("{"):
            try:
                header = json.loads(value).get("traceparent")
            except (ValueError, AttributeError):
                continue
        match = _TRACEPARENT.match(header) if isinstance(header, str) else None
        if match:
            return match.group(1)
    return None


def queue_path(queue: str, *rest: str) -> str:
    """The console's path of a queue's page (``/queues/<name>/...``), the name
    percent-encoded whole, so names with ``/``, ``?`` or ``#`` keep working."""
    return "/".join(("/queues", quote(queue, safe=""), *rest))


def duration_seconds(text: str | float | None, what: str) -> float:
    """A duration given as seconds or as text such as ``30s``, ``1h30m``, ``7d``."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        seconds = float(text)
    else:
        raw = str(text if text is not None else "").strip().lower().replace(" ", "")
        try:
            seconds = float(raw)
        except ValueError:
            pos, seconds = 0, 0.0
            for match in _DURATION_PART.finditer(raw):
                if match.start() != pos:
                    break
                seconds += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
                pos = match.end()
            if not raw or pos != len(raw):
                raise PgqueInvalidArgument(
                    f"{what} must be a duration such as 30s, 12h, 7d or 0 (all), got {text!r}"
                ) from None
    if not 0 <= seconds < 10**9:
        raise PgqueInvalidArgument(f"{what} must be from 0 to 10^9 seconds, got {text!r}")
    return seconds
