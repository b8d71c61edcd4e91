"""What commands print: rich consoles, JSON documents, compact figures, health colours."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any, TypeVar, cast

import click
from rich.console import Console
from rich.text import Text

from pgque import monitoring

__all__ = [
    "as_dicts",
    "emit_json",
    "err",
    "format_rate",
    "format_seconds",
    "listing",
    "out",
    "plural",
    "seconds",
    "styled",
    "to_json",
    "worst",
]


# Without a terminal (and without COLUMNS) nothing is wrapped: a line of
# output is a line of text, whatever its length.
_UNWRAPPED = 10_000


def _is_terminal(stream: Any) -> bool:
    return hasattr(stream, "isatty") and bool(stream.isatty())


def _width(stream: Any) -> int | None:
    """Rich's own width on a terminal or with COLUMNS set; else no wrapping."""
    if os.environ.get("COLUMNS") or _is_terminal(stream):
        return None
    return _UNWRAPPED


class _TrimmedLines:
    """A text stream that drops the spaces rich pads lines with, for pipes and files."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        """Write ``text`` with each line's trailing spaces removed."""
        self._stream.write("\n".join(line.rstrip(" ") for line in text.split("\n")))
        return len(text)

    def flush(self) -> None:
        """Flush the underlying stream."""
        self._stream.flush()

    def isatty(self) -> bool:
        """Never a terminal."""
        return False

    def fileno(self) -> int:
        """The underlying stream's descriptor."""
        return int(self._stream.fileno())


def _console(stream: Any) -> Console:
    """A console that prints strings as text: queue names, payloads and hints such as
    ``pip install '.[web]'`` hold brackets and colons that rich would read as markup
    or emoji codes. Styles come only from :class:`rich.text.Text` objects."""
    file = stream if _is_terminal(stream) else cast("IO[str]", _TrimmedLines(stream))
    return Console(file=file, highlight=False, markup=False, emoji=False, width=_width(stream))


def out() -> Console:
    """A rich console on the current stdout (colour only on a terminal)."""
    return _console(sys.stdout)


def err() -> Console:
    """A rich console on the current stderr."""
    return _console(sys.stderr)


def plural(count: int, singular: str, plural_form: str | None = None) -> str:
    """``1 event``, ``2 events``: the count with its noun in the right number."""
    return f"{count} {singular if count == 1 else plural_form or singular + 's'}"


def _json_default(value: Any) -> Any:
    if isinstance(value, dt.timedelta):
        return round(value.total_seconds(), 6)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def to_json(value: Any, *, indent: int | None = 2) -> str:
    """JSON text: intervals as seconds, timestamps as ISO 8601, numerics as numbers."""
    return json.dumps(value, default=_json_default, indent=indent, ensure_ascii=False)


def emit_json(value: Any, *, lines: bool = False) -> None:
    """Print a JSON document (``lines``: one compact line, for streams)."""
    click.echo(to_json(value, indent=None if lines else 2))
    if lines:
        sys.stdout.flush()


def as_dicts(rows: Sequence[Any]) -> list[dict[str, Any]]:
    """Dataclass rows (:mod:`pgque.records`) as dicts keyed by their SQL column names."""
    return [dataclasses.asdict(row) for row in rows]


_Row = TypeVar("_Row")


def listing(
    rows: Sequence[_Row],
    as_json: bool,
    empty: str,
    json_rows: Callable[[Sequence[_Row]], Any] = as_dicts,
) -> Console | None:
    """Answer a listing command with ``--json`` (``json_rows`` of its rows) or without
    rows (``empty``, printed); else the console to print the rows on (None: answered)."""
    if as_json:
        emit_json(json_rows(rows))
        return None
    console = out()
    if not rows:
        console.print(empty)
        return None
    return console


def seconds(value: Any) -> float | None:
    """Seconds of an interval (or None)."""
    if value is None:
        return None
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    return float(value)


def format_seconds(value: Any, *, empty: str = "-") -> str:
    """A compact duration for tables: ``850ms``, ``2.1s``, ``3m45s``, ``1h23m``, ``2d4h``."""
    secs = seconds(value)
    if secs is None:
        return empty
    if secs == 0:
        return "0s"
    if secs < 1:
        return f"{secs * 1000:.0f}ms"
    if secs < 60:
        return f"{secs:.1f}s"
    whole = int(secs)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d{whole % 86400 // 3600}h"


def format_rate(value: Any) -> str:
    """Events per second for tables: ``150/s``, ``0.4/s``, ``0.0/s`` (one decimal below 10)."""
    if value is None:
        return "-"
    rate = float(value)
    return f"{rate:.0f}/s" if rate >= 10 else f"{rate:.1f}/s"


STATUS_STYLE = {"ok": "green", "unknown": "magenta", "warning": "yellow", "critical": "bold red"}


def worst(statuses: Iterator[str] | Sequence[str]) -> str:
    """The worst of ``statuses`` by :class:`pgque.monitoring.Status` (ok < unknown <
    warning < critical; ``ok`` when there is none)."""
    return monitoring.worst(statuses).text


def styled(status: str) -> Text:
    """``status`` as text coloured by health."""
    return Text(status, style=STATUS_STYLE.get(status, ""))
