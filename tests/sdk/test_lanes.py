"""run_lanes, both kinds: every call runs, at most ``limit`` at once, the first error
(in the calls' order) raised once all have ended."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from pgque import _acompat, _compat


class Lanes:
    """Calls that note how many run at once; call ``fail`` raises its error."""

    def __init__(self, count: int, fail: dict[int, BaseException] | None = None) -> None:
        self.count, self.fail = count, fail or {}
        self.ran: list[int] = []
        self.running = 0
        self.peak = 0
        self._lock = threading.Lock()

    def _enter(self, n: int) -> None:
        with self._lock:
            self.running += 1
            self.peak = max(self.peak, self.running)

    def _leave(self, n: int) -> None:
        with self._lock:
            self.running -= 1
            self.ran.append(n)
        if n in self.fail:
            raise self.fail[n]

    def sync_calls(self) -> list[Callable[[], None]]:
        def call(n: int) -> None:
            self._enter(n)
            time.sleep(0.002)
            self._leave(n)

        return [lambda n=n: call(n) for n in range(self.count)]  # type: ignore[misc]

    def async_calls(self) -> list[Callable[[], Any]]:
        async def call(n: int) -> None:
            self._enter(n)
            await asyncio.sleep(0.002)
            self._leave(n)

        return [lambda n=n: call(n) for n in range(self.count)]  # type: ignore[misc]


def run(kind: str, lanes: Lanes, limit: int) -> None:
    if kind == "async":
        asyncio.run(_acompat.run_lanes(lanes.async_calls(), limit))
    else:
        _compat.run_lanes(lanes.sync_calls(), limit)


@pytest.fixture(params=["async", "sync"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize(("count", "limit"), [(50, 8), (3, 8), (10, 1), (0, 4)])
def test_every_call_runs_at_most_limit_at_once(kind: str, count: int, limit: int) -> None:
    lanes = Lanes(count)
    run(kind, lanes, limit)
    assert sorted(lanes.ran) == list(range(count))
    assert lanes.peak <= limit
    if count >= limit > 1:
        assert lanes.peak > 1  # they overlap


def test_the_first_error_in_order_is_raised_after_all_ran(kind: str) -> None:
    lanes = Lanes(30, fail={7: ValueError("seven"), 3: KeyError("three")})
    with pytest.raises(KeyError, match="three"):
        run(kind, lanes, 4)
    assert sorted(lanes.ran) == list(range(30))


def test_cancelling_the_lanes_cancels_every_worker() -> None:
    started = 0

    async def slow() -> None:
        nonlocal started
        started += 1
        await asyncio.sleep(10)

    async def main() -> None:
        task = asyncio.ensure_future(_acompat.run_lanes([slow] * 20, 4))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    began = time.monotonic()
    asyncio.run(main())
    assert started == 4  # four workers took one call each, none took another
    assert time.monotonic() - began < 5


def test_the_threaded_lanes_keep_their_threads_from_batch_to_batch() -> None:
    """Threads are started once, not per batch (a batch of 64 lanes started 64)."""
    lanes = _compat.Lanes(4)
    seen: list[set[int]] = []
    for _ in range(3):
        idents: set[int] = set()

        def call(idents: set[int] = idents) -> None:
            idents.add(threading.get_ident())
            time.sleep(0.002)

        lanes.run([call] * 20)
        seen.append(idents)
    assert len(seen[0]) > 1
    assert seen[1] <= seen[0] and seen[2] <= seen[0]


def test_threaded_lanes_raise_the_first_error_and_go_on() -> None:
    lanes = _compat.Lanes(3)
    calls = Lanes(10, fail={4: RuntimeError("four")}).sync_calls()
    with pytest.raises(RuntimeError, match="four"):
        lanes.run(calls)
    again = Lanes(6)
    lanes.run(again.sync_calls())  # the threads serve the next batch
    assert sorted(again.ran) == list(range(6))
