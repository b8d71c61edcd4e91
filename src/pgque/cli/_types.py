"""The command line's value types: durations and ``key=value`` pairs."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import click

__all__ = ["Duration", "KeyValue"]

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


if TYPE_CHECKING:
    _DurationBase = click.ParamType[float]  # type: ignore[type-arg, unused-ignore]
    _KeyValueBase = click.ParamType[tuple[str, str]]  # type: ignore[type-arg, unused-ignore]
else:  # ParamType is generic only in recent click
    _DurationBase = _KeyValueBase = click.ParamType


class Duration(_DurationBase):
    """A duration: ``500ms``, ``5s``, ``2m``, ``1h30m``, ``7d``; a bare number is seconds.

    ``minimum`` (seconds): shorter durations are refused, e.g. the pause of a
    loop, which must not spin.
    """

    name = "duration"

    def __init__(self, minimum: float = 0.0) -> None:
        self.minimum = minimum

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The duration in seconds, as a float."""
        if isinstance(value, (int, float)):
            return self._checked(float(value), value, param, ctx)
        text = str(value).strip().lower().replace(" ", "")
        try:
            return self._checked(float(text), value, param, ctx)
        except ValueError:
            pass
        pos, total = 0, 0.0
        for match in _DURATION_PART.finditer(text):
            if match.start() != pos:
                break
            total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
            pos = match.end()
        if not text or pos != len(text):
            self.fail(f"{value!r} is not a duration: write e.g. 30s, 5m, 1h30m or 7d", param, ctx)
        return self._checked(total, value, param, ctx)

    def _checked(
        self, seconds: float, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if seconds < self.minimum:
            self.fail(
                f"{value!r} is too short: the pause between looks must be at least"
                f" {self.minimum * 1000:g}ms (e.g. 1s)",
                param,
                ctx,
            )
        return seconds


class KeyValue(_KeyValueBase):
    """``key=value``, as a (key, value) pair of strings."""

    name = "key=value"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """Split at the first ``=``; the key must not be empty."""
        if isinstance(value, tuple):
            return value
        key, sep, text = str(value).partition("=")
        if not sep or not key.strip():
            self.fail(f"{value!r} is not key=value: write e.g. --option max_retries=3", param, ctx)
        return key.strip(), text
