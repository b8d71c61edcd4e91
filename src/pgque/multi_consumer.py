"""Several consumers on one connection, higher-priority queues drained first."""

from __future__ import annotations

import contextlib
import logging
import random

import psycopg
from psycopg import sql

from pgque.consumer import (
    _BACKOFF_CAP,
    _BACKOFF_START,
    Consumer,
    ConsumerGaveUp,
    _ConnectionAbandoned,
)
from pgque.errors import PgqueError

__all__ = ["MultiQueueConsumer"]

logger = logging.getLogger("pgque")


class MultiQueueConsumer:
    """Runs several consumers on one connection, draining higher-priority queues first.

    ``consumers`` are in priority order: after every batch the loop starts
    again from the first, so a lower-priority queue gets a batch only while
    every queue before it is empty. All consumers must share one DSN; each
    keeps its own handlers and options. The in-process ticker follows the
    first consumer's ``ticker`` setting.

    Args:
        consumers: The consumers, highest priority first.
    """

    def __init__(self, consumers: list[Consumer]) -> None:
        if not consumers:
            raise ValueError("MultiQueueConsumer needs at least one consumer")
        if len({c.dsn for c in consumers}) != 1:
            raise ValueError("MultiQueueConsumer's consumers must share one dsn")
        if any(c.subconsumer is not None for c in consumers):
            raise ValueError("MultiQueueConsumer does not take cooperative subconsumers")
        self.consumers = consumers
        self._first = consumers[0]

    def stop(self, *, now: bool = False) -> None:
        """Stop every consumer (thread-safe)."""
        for consumer in self.consumers:
            consumer.stop(now=now)

    def start(self) -> None:
        """Consume until :meth:`stop` (or SIGTERM/SIGINT on the main thread)."""
        first = self._first
        for consumer in self.consumers:
            consumer._stop.clear()
            consumer._hard_stop.clear()
        with first._signals(), first._maybe_ticker(), contextlib.ExitStack() as stack:
            for consumer in self.consumers:
                stack.enter_context(consumer._workers())
            delay = _BACKOFF_START
            while not first._stop.is_set():
                try:
                    self._session()
                    delay = _BACKOFF_START
                except (psycopg.Error, PgqueError, _ConnectionAbandoned) as exc:
                    if isinstance(exc, ConsumerGaveUp):
                        raise
                    pause = delay * random.uniform(0.8, 1.2)
                    logger.exception("multi-queue consumer: database error; retrying in %.1fs",
                                     pause)  # fmt: skip
                    first.reconnects += 1
                    first._wait(pause)
                    delay = min(delay * 2, _BACKOFF_CAP)

    def _session(self) -> None:
        first = self._first
        with first._connection() as conn, contextlib.ExitStack() as stack:
            listener = None
            listen_dsn = first.listen_dsn or first.dsn
            if first.listen and isinstance(listen_dsn, str):
                listener = stack.enter_context(psycopg.connect(listen_dsn, autocommit=True))
                for consumer in self.consumers:
                    listener.execute(
                        sql.SQL("listen {}").format(sql.Identifier(f"pgque_{consumer.queue}"))
                    )
            while not first._stop.is_set():
                if any(c._poll_once(conn) for c in self.consumers):
                    continue  # start again from the highest priority
                first.poll_interval = min(c.poll_interval for c in self.consumers)
                first._wait_for_work(listener)


MultiQueueConsumer.__module__ = "pgque"
