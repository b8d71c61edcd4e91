"""The suite's one way to wait: on observable state, never a fixed sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest


def wait_for(
    condition: Callable[[], Any], timeout: float = 10.0, what: str = "", interval: float = 0.02
) -> Any:
    """Call ``condition`` until it returns something true, and return that; fail the
    test after ``timeout`` seconds, saying ``what`` was awaited."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout} s: {what or 'the condition'}")
        time.sleep(interval)
