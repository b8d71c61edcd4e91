"""Run a consumer test against both twins: :class:`pgque.Consumer` and :class:`pgque.AsyncConsumer`.

A test takes the ``kind`` fixture (``"sync"`` or ``"async"``, from
``conftest.py``), makes its consumer with :func:`make`, registers plain
functions as handlers with :func:`handle` (wrapped in a coroutine function
for the async consumer; an awaitable they return is awaited, so ``return
pause(kind, s)`` sleeps the right way) and runs it with the ``start``
fixture: :class:`Running` runs ``start()`` in a thread of its own (in an
event loop of its own for the async twins), so the test body is the same
for both.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

import pgque
from _engine import one
from pgque._consumer.async_batch import AsyncBatchOpener
from pgque._consumer.batch import BatchOpener

KINDS = ["sync", "async"]

AnyConsumer = pgque.Consumer | pgque.AsyncConsumer


def consumer_class(kind: str) -> type[Any]:
    """The consumer class of that kind."""
    return pgque.Consumer if kind == "sync" else pgque.AsyncConsumer


def multi_class(kind: str) -> type[Any]:
    """The multi-queue consumer class of that kind."""
    return pgque.MultiQueueConsumer if kind == "sync" else pgque.AsyncMultiQueueConsumer


def opener_class(kind: str) -> type[Any]:
    """The class that opens the consumer's batches (its ``receive`` reads them)."""
    return BatchOpener if kind == "sync" else AsyncBatchOpener


def make(kind: str, dsn: Any, *, queue: str = "q", name: str = "c", **options: Any) -> Any:
    """A consumer of that kind (``ticker=False`` unless asked for)."""
    options.setdefault("ticker", False)
    return consumer_class(kind)(dsn, queue=queue, name=name, **options)


def handle(consumer: Any, func: Callable[..., Any], type: str = "*", **on: Any) -> None:
    """Register ``func`` for ``type`` with the options ``on`` (wrapped in a coroutine
    function for the async consumer, which awaits what it returns when awaitable)."""
    if isinstance(consumer, pgque.AsyncConsumer):

        async def handler(*args: Any) -> Any:
            result = func(*args)
            return await result if inspect.isawaitable(result) else result

        consumer.on(type, **on)(handler)
    else:
        consumer.on(type, **on)(func)


def pause(kind: str, seconds: float) -> Any:
    """Sleep in a handler: ``return pause(kind, s)`` (the async wrapper awaits it)."""
    if kind == "async":
        return asyncio.sleep(seconds)
    time.sleep(seconds)
    return None


def force_tick(conn: psycopg.Connection[Any], queue: str = "q") -> None:
    """Tick ``queue`` now (``force_next_tick`` and ``ticker``)."""
    one(conn, "select pgque.force_next_tick(%s)", queue)
    one(conn, "select pgque.ticker(%s)", queue)


def batch_done(conn: psycopg.Connection[Any]) -> bool:
    """True once consumer ``c`` acked a batch of queue ``q`` and holds none open."""
    return bool(one(conn, "select sub_batch is null and sub_last_tick > 1 from pgque.subscription"))


class Running:
    """A consumer's (or multi-queue consumer's) ``start()`` in a thread of its own, with a
    thread-safe :meth:`stop`."""

    def __init__(self, consumer: Any) -> None:
        self.consumer = consumer
        self.error: BaseException | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._main, daemon=True)
        self.thread.start()
        assert self._ready.wait(5), "the consumer's thread did not start"

    def _main(self) -> None:
        try:
            if inspect.iscoroutinefunction(self.consumer.start):
                asyncio.run(self._amain())
            else:
                self._ready.set()
                self.consumer.start()
        except BaseException as exc:  # the test looks at it
            self.error = exc
        finally:
            self._ready.set()

    async def _amain(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._ready.set()
        await self.consumer.start()

    def stop(self, *, now: bool = False) -> None:
        """Ask the consumer to stop, from any thread."""
        if self.loop is None:
            self.consumer.stop(now=now)
            return
        with contextlib.suppress(RuntimeError):  # the loop has ended already
            self.loop.call_soon_threadsafe(lambda: self.consumer.stop(now=now))

    def outcome(self, timeout: float) -> BaseException | None:
        """Wait for ``start()`` to end; the exception it raised (None: it returned)."""
        self.thread.join(timeout)
        if self.thread.is_alive():
            pytest.fail(f"start() still runs after {timeout} s")
        return self.error

    @property
    def alive(self) -> bool:
        """True while ``start()`` runs."""
        return self.thread.is_alive()
