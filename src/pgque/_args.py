"""Arguments of the clients' admin calls, converted to what the SQL functions take.

Shared by :class:`~pgque.PgqueClient` and :class:`~pgque.AsyncPgqueClient`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from psycopg.types.json import Jsonb

from pgque.errors import PgqueInvalidArgument

__all__ = ["ConfigValue", "config_text", "interval", "queue_options"]

ConfigValue = str | int | float | bool | timedelta | None
"""A queue setting's value: text as ``set_queue_config`` takes it, or a Python value."""


def config_text(value: ConfigValue) -> str | None:
    """A setting's value as ``set_queue_config`` takes it: booleans as ``true``/``false``,
    a :class:`~datetime.timedelta` as whole microseconds, None as None (the column's
    default)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, timedelta):
        # Exact, and never in exponent notation ("1e-06 seconds" does not parse).
        return f"{value // timedelta(microseconds=1)} microseconds"
    if isinstance(value, float) and "e" in repr(value):
        return f"{value:.6f}"  # 1e-06 would not parse as a number of seconds
    if isinstance(value, (int, float)):
        return str(value)
    raise PgqueInvalidArgument(
        f"a queue setting must be str, int, float, bool, timedelta or None,"
        f" got {type(value).__name__}"
    )


def queue_options(options: Mapping[str, ConfigValue] | None) -> Jsonb:
    """``create_queue``'s options as a JSON object of ``set_queue_config`` texts."""
    return Jsonb({name: config_text(value) for name, value in (options or {}).items()})


def interval(value: timedelta | float, what: str) -> timedelta:
    """A duration given as a timedelta or as seconds."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return timedelta(seconds=value)
        except (OverflowError, ValueError):
            raise PgqueInvalidArgument(f"{what} is out of range: {value!r} seconds") from None
    raise PgqueInvalidArgument(f"{what} must be a timedelta or seconds, got {type(value).__name__}")
