"""The threaded side of the primitives the SDK's sync modules use.

The generated sync modules import these names where their async sources
import :mod:`pgque._acompat`'s (``tools/async_to_sync.py``); the list of
names and :data:`SIGNALS` are that module's.
"""

from __future__ import annotations

import selectors
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import Any, Literal

import psycopg

from pgque import _acompat
from pgque._acompat import SIGNALS as SIGNALS

#: :mod:`pgque._acompat`'s names (but the two only the async side has), for threads.
__all__ = [name for name in _acompat.__all__ if name not in ("ASYNC", "CANCEL_GRACE")]

Event = threading.Event
#: What :meth:`Interrupter.interrupt` raises in the interrupted code.
Interrupted = KeyboardInterrupt
Lock = threading.Lock
sleep = time.sleep


def wait_event(event: threading.Event, timeout: float) -> bool:
    """Wait until ``event`` is set or ``timeout`` seconds passed; whether it is set."""
    return event.wait(timeout)


def notifications(conn: psycopg.Connection[Any], timeout: float) -> list[psycopg.Notify]:
    """The notifications received on ``conn``, waiting up to ``timeout`` seconds for
    its socket to have something (then possibly none: other messages come too).

    A selector watches the socket: psycopg's own ``notifies(timeout=...)``
    wakes hundreds of times a second while it waits (2 ms of CPU per
    second of waiting, measured), which an idle listener should not cost.
    """
    notes = list(conn.notifies(timeout=0))
    if notes or timeout <= 0:
        return notes
    with selectors.DefaultSelector() as selector:
        selector.register(conn.fileno(), selectors.EVENT_READ)
        if not selector.select(timeout):
            return []
    return list(conn.notifies(timeout=0))


def run_lanes(calls: Sequence[Callable[[], None]], limit: int) -> None:
    """Run the calls in threads, at most ``limit`` at once; wait for all of them, then
    raise the first error (in the calls' order).

    ``limit`` worker threads (fewer for fewer calls) take the calls in turn, each
    running one call after another: no future per call."""
    workers = min(limit, len(calls))
    if workers:
        pool = ThreadPoolExecutor(workers, thread_name_prefix="pgque-worker")
        errors = _run_in(pool, calls, workers)
        pool.shutdown()  # before raising: the threads end with the batch
        _raise_first(errors)


def _run_in(
    pool: ThreadPoolExecutor, calls: Sequence[Callable[[], None]], workers: int
) -> dict[int, BaseException]:
    """Run the calls in ``workers`` threads of ``pool``; their errors by call index.
    Interrupted, the pool is shut down without waiting for the running calls."""
    errors: dict[int, BaseException] = {}
    turns = iter(enumerate(calls))
    taking = threading.Lock()
    stopped = threading.Event()  # interrupted: take no further call

    def worker() -> None:
        while not stopped.is_set():
            with taking:
                turn = next(turns, None)
            if turn is None:
                return
            index, call = turn
            try:
                call()
            except BaseException as exc:
                errors[index] = exc

    try:
        wait([pool.submit(worker) for _ in range(workers)])
    except BaseException:  # interrupted: do not wait for the running calls
        stopped.set()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    return errors


def _raise_first(errors: dict[int, BaseException]) -> None:
    if errors:
        raise errors[min(errors)]


class Lanes:
    """Runs a consumer's batches' lanes, at most ``limit`` at once (:func:`run_lanes`),
    in ``limit`` worker threads kept from one batch to the next (started on the first,
    ended when the consumer is collected or the interpreter exits)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._pool: ThreadPoolExecutor | None = None

    def run(self, calls: Sequence[Callable[[], None]]) -> None:
        """Run one batch's calls; see :func:`run_lanes`. Interrupted, the threads are
        left to their calls and the next batch gets new ones."""
        workers = min(self.limit, len(calls))
        if not workers:
            return
        pool, self._pool = self._pool, None  # given back unless interrupted
        if pool is None:
            pool = ThreadPoolExecutor(self.limit, thread_name_prefix="pgque-worker")
        errors = _run_in(pool, calls, workers)
        self._pool = pool
        _raise_first(errors)


def call_with_timeout(
    call: Callable[[], Any], timeout: float, name: str
) -> Literal["done", "stopped", "running"]:
    """Run ``call`` in a daemon thread for up to ``timeout`` seconds.

    ``"done"`` when it finished in time (its error is raised), else
    ``"running"``: a thread cannot be stopped, it is abandoned.
    """
    done = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:
            failure.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, name=name, daemon=True).start()
    if not done.wait(timeout):
        return "running"
    if failure:
        raise failure[0]
    return "done"


@contextmanager
def signal_handlers(handler: Callable[[int], None]) -> Iterator[None]:
    """Call ``handler(signum)`` on SIGTERM and SIGINT inside the block, when it runs on
    the main thread; the previous handlers are restored afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in SIGNALS}
    for sig in SIGNALS:
        signal.signal(sig, lambda signum, frame: handler(signum))
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


class Interrupter:
    """Stops the main thread where it is, e.g. in a handler at a second Ctrl-C: raises
    :data:`Interrupted` (``KeyboardInterrupt``) from the signal handler, as Python's own
    Ctrl-C does. Handlers running in other threads cannot be stopped."""

    def __init__(self) -> None:
        #: True once :meth:`interrupt` was called.
        self.fired = False

    def interrupt(self) -> None:
        """Raise :data:`Interrupted` in the main thread (called by its signal handler)."""
        self.fired = True
        raise KeyboardInterrupt

    def caught(self) -> None:
        """Nothing to undo for a thread."""
