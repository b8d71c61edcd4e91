"""The asyncio side of the primitives the SDK's async sources use.

``tools/async_to_sync.py`` turns ``pgque._acompat`` into :mod:`pgque._compat`
in the generated sync modules, which offers the same names for threads.
``ASYNC`` marks the code that differs (``if ASYNC: ... else: ...``); the
generated modules keep the ``else`` branch only.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, Literal

import psycopg

__all__ = [
    "ASYNC",
    "CANCEL_GRACE",
    "SIGNALS",
    "Event",
    "Interrupted",
    "Interrupter",
    "Lanes",
    "Lock",
    "call_with_timeout",
    "notifications",
    "run_lanes",
    "signal_handlers",
    "sleep",
    "wait_event",
]

#: True here; the generated sync modules keep the ``else`` of ``if ASYNC:``.
ASYNC = True
#: The signals that stop a consumer.
SIGNALS = (signal.SIGTERM, signal.SIGINT)
#: Seconds a cancelled handler gets to end before it counts as abandoned.
CANCEL_GRACE = 1.0

Event = asyncio.Event
#: What :meth:`Interrupter.interrupt` raises in the interrupted code.
Interrupted = asyncio.CancelledError
Lock = asyncio.Lock
sleep = asyncio.sleep


async def wait_event(event: asyncio.Event, timeout: float) -> bool:
    """Wait until ``event`` is set or ``timeout`` seconds passed; whether it is set."""
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(event.wait(), timeout)
    return event.is_set()


async def notifications(conn: psycopg.AsyncConnection[Any], timeout: float) -> list[psycopg.Notify]:
    """The notifications received on ``conn``, waiting up to ``timeout`` seconds for
    its socket to have something (then possibly none: other messages come too).

    The event loop watches the socket: psycopg's own ``notifies(timeout=...)``
    wakes hundreds of times a second while it waits (3.5 ms of CPU per
    second of waiting, measured), which an idle listener should not cost.
    """
    notes = [note async for note in conn.notifies(timeout=0)]
    if notes or timeout <= 0:
        return notes
    loop = asyncio.get_running_loop()
    readable: asyncio.Future[None] = loop.create_future()

    def ready() -> None:
        if not readable.done():
            readable.set_result(None)

    fd = conn.fileno()
    loop.add_reader(fd, ready)
    try:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(readable, timeout)
    finally:
        loop.remove_reader(fd)
    return [note async for note in conn.notifies(timeout=0)]


async def run_lanes(calls: Sequence[Callable[[], Awaitable[None]]], limit: int) -> None:
    """Run the calls, at most ``limit`` at once; wait for all of them, then raise the
    first error (in the calls' order).

    ``limit`` workers (fewer for fewer calls) take the calls in turn, each awaiting
    one call after another: no task, future or semaphore per call, which a batch of
    thousands of short handlers would pay for on every message."""
    errors: dict[int, BaseException] = {}
    turns = iter(enumerate(calls))  # shared: each call goes to the first free worker

    async def worker() -> None:
        for index, call in turns:
            try:
                await call()
            except asyncio.CancelledError as exc:
                errors[index] = exc  # this worker ends; the others take the rest
                raise
            except BaseException as exc:
                errors[index] = exc

    # Cancelling the gather (a stop now) cancels every worker.
    await asyncio.gather(*(worker() for _ in range(min(limit, len(calls)))),
                         return_exceptions=True)  # fmt: skip
    if errors:
        raise errors[min(errors)]


class Lanes:
    """Runs a consumer's batches' lanes, at most ``limit`` at once (:func:`run_lanes`);
    the threaded twin keeps its worker threads between batches."""

    def __init__(self, limit: int) -> None:
        self.limit = limit

    async def run(self, calls: Sequence[Callable[[], Awaitable[None]]]) -> None:
        """Run one batch's calls; see :func:`run_lanes`."""
        await run_lanes(calls, self.limit)


async def call_with_timeout(
    call: Callable[[], Awaitable[Any]], timeout: float, name: str
) -> Literal["done", "stopped", "running"]:
    """Run ``call`` as a task for up to ``timeout`` seconds.

    ``"done"`` when it finished in time (its error is raised), else it is
    cancelled: ``"stopped"`` when it ended within :data:`CANCEL_GRACE`,
    ``"running"`` when it still runs (abandoned).
    """
    task = asyncio.ensure_future(call())
    task.set_name(name)
    done, _ = await asyncio.wait({task}, timeout=timeout)
    if done:
        task.result()
        return "done"
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=CANCEL_GRACE)
    if done and not task.cancelled():
        task.exception()  # retrieved: an error while being cancelled is not logged
    return "stopped" if done else "running"


def _default_handler(handler: object) -> bool:
    """True when a signal is handled as by default: not by the application (Python's
    own SIGINT handler and asyncio.run's count as default)."""
    if handler is signal.SIG_DFL or handler is signal.default_int_handler:
        return True
    runner = getattr(asyncio.runners, "Runner", None)  # Python 3.11+
    on_sigint = getattr(runner, "_on_sigint", None)
    func = getattr(handler, "func", None)  # asyncio.run's: a partial of Runner._on_sigint
    return on_sigint is not None and getattr(func, "__func__", None) is on_sigint


@contextlib.contextmanager
def signal_handlers(handler: Callable[[int], None]) -> Iterator[None]:
    """Call ``handler(signum)`` on SIGTERM and SIGINT (in the event loop) inside the block,
    when it runs on the main thread; the previous handlers are restored afterwards.

    A signal the application handles itself (with ``signal.signal`` or the
    loop's ``add_signal_handler``) is left to it: it calls ``stop()``.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    loop = asyncio.get_running_loop()
    previous = {sig: signal.getsignal(sig) for sig in SIGNALS}
    added: list[signal.Signals] = []
    try:
        for sig in SIGNALS:
            if not _default_handler(previous[sig]):
                continue
            try:
                loop.add_signal_handler(sig, handler, sig)
            except (NotImplementedError, RuntimeError):
                break  # this loop takes no signal handlers: stop() it
            added.append(sig)
        yield
    finally:
        for sig in added:
            loop.remove_signal_handler(sig)
            signal.signal(sig, previous[sig])  # asyncio.run's own SIGINT handler, say


class Interrupter:
    """Stops the task that made it where it is, e.g. a handler at a second Ctrl-C: cancels
    it (an ``await`` in the handler raises :data:`Interrupted`; a handler that blocks
    without awaiting ends first)."""

    def __init__(self) -> None:
        self._task = asyncio.current_task()
        #: True once :meth:`interrupt` was called.
        self.fired = False

    def interrupt(self) -> None:
        """Cancel the task (called from the event loop's signal handler)."""
        self.fired = True
        if self._task is not None:
            self._task.cancel()

    def caught(self) -> None:
        """The cancellation was handled: the task goes on as not cancelled."""
        uncancel = getattr(self._task, "uncancel", None)  # Python 3.11+
        if uncancel is not None:
            uncancel()
