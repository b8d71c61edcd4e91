"""How the console shows values: ages, rates, payloads, trace ids, and JSON-ready rows.

No I/O here; the templates use these as filters and the JSON API uses
:func:`jsonable` on the same rows.
"""

from __future__ import annotations

import contextlib
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
    "preview",
    "queue_path",
    "rate",
    "size",
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
    """A duration read at a glance: ``850 ms``, ``15.6 s``, ``1 min 44 s``, ``2 h``,
    ``2 h 5 min``, ``4 d 3 h`` (``-`` when unknown)."""
    if value is None:
        return "-"
    secs = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if secs < 1:
        return f"{secs * 1000:.0f} ms"
    if secs < 59.95:
        return f"{secs:.1f} s"
    mins, secs = divmod(round(secs), 60)
    if mins < 60:
        return f"{mins} min {secs} s" if secs else f"{mins} min"
    hours, mins = divmod(mins, 60)
    if hours < 48:
        return f"{hours} h {mins} min" if mins else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def rate(value: Decimal | float | None) -> str:
    """Events per second, one decimal: ``12.5/s`` (``-`` when unknown)."""
    return "-" if value is None else f"{float(value):.1f}/s"


def pretty_payload(data: str | None) -> str:
    """A payload for reading: JSON indented, anything else as stored."""
    if data is None:
        return "(null)"
    try:
        return json.dumps(json.loads(data), indent=2, ensure_ascii=False, sort_keys=True)
    except (ValueError, RecursionError):
        return data


def size(n_bytes: int | None) -> str:
    """A size in bytes for people: ``850 B``, ``12.3 kB``, ``10.5 MB``."""
    if n_bytes is None:
        return "-"
    value = float(n_bytes)
    for unit in ("B", "kB", "MB"):
        if value < 1000 or unit == "MB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")  # pragma: no cover


def preview(data: str | None, whole_size: int | None, cut: int = 200) -> str:
    """One line of a payload already cut to ``cut`` characters: JSON compacted when
    it is whole, newlines as spaces, and ``…`` where it was cut."""
    if data is None:
        return "(null)"
    text = data
    whole = whole_size is None or len(data.encode()) >= whole_size
    if whole:
        with contextlib.suppress(ValueError, RecursionError):
            text = json.dumps(json.loads(data), ensure_ascii=False, separators=(", ", ": "))
    text = " ".join(text.split())
    if len(text) > cut:
        text, whole = text[:cut], False
    return text if whole else text + " …"


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
