"""Retry delays: the range ``pgque.nack`` accepts, and the check that names it.

A leaf module: :mod:`pgque.message` (``msg.nack``) and the consumers' options
both check delays with it.
"""

from __future__ import annotations

__all__ = ["MAX_RETRY_AFTER", "RANGE", "check_delay"]

#: The longest retry delay in seconds: ``pgque.nack``'s bound of 100 years, as
#: PostgreSQL compares intervals (a year of 360 days).
MAX_RETRY_AFTER = 3_110_400_000
#: How error messages state the range.
RANGE = f"from 0 to {MAX_RETRY_AFTER} (100 years)"


def check_delay(name: str, value: object) -> float:
    """``value`` as seconds of delay, or an error naming ``name`` and the range."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds {RANGE}, got {value!r}")
    if not 0 <= value <= MAX_RETRY_AFTER:  # NaN fails this too
        raise ValueError(f"{name} must be seconds {RANGE}, got {value!r}")
    return value
