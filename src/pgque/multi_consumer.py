"""Several consumers on one connection, higher-priority queues drained first."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import psycopg
from psycopg import sql

from pgque import _consumer_policy as policy
from pgque.consumer import Consumer, _ConnectionAbandoned
from pgque.errors import PgqueError

__all__ = ["MultiQueueConsumer"]

logger = logging.getLogger("pgque")


class MultiQueueConsumer:
    """Runs several consumers on one connection, draining higher-priority queues first.

    ``consumers`` are in priority order: after every batch the loop starts
    again from the first, so a lower-priority queue gets a batch only while
    every queue before it is empty. All consumers must share one DSN; each
    keeps its own handlers and options. The in-process ticker follows the
    first consumer's ``ticker`` setting, decided on every (re)connection;
    setup errors and giving up end :meth:`start` as for one consumer.

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
        """Consume until :meth:`stop` (or SIGTERM/SIGINT on the main thread).

        Raises what :meth:`pgque.Consumer.start` raises.
        """
        first = self._first
        for consumer in self.consumers:
            consumer._stop.clear()
            consumer._hard_stop.clear()
            consumer._settles = policy.SettleFailures(consumer.max_settle_failures)
        first._backoff.reset()
        with first._signals(), first._ticker, contextlib.ExitStack() as stack:
            for consumer in self.consumers:
                stack.enter_context(consumer._workers())
            while not first._stop.is_set():
                try:
                    self._session()
                except (psycopg.Error, PgqueError, _ConnectionAbandoned) as exc:
                    first._recover(exc)

    def _session(self) -> None:
        first = self._first
        with first._connection() as conn, contextlib.ExitStack() as stack:
            for consumer in self.consumers:
                with consumer._setup_errors(conn):
                    consumer._subscribe(conn)
            first._ticker.set(first._wants_ticker(conn))  # decided on every connection
            listener = None
            listen_dsn = first.listen_dsn or first.dsn
            if first.listen and isinstance(listen_dsn, str):
                listener = stack.enter_context(psycopg.connect(listen_dsn, autocommit=True))
                for consumer in self.consumers:
                    listener.execute(
                        sql.SQL("listen {}").format(sql.Identifier(f"pgque_{consumer.queue}"))
                    )
            while not first._stop.is_set():
                polled = any(self._poll(c, conn) for c in self.consumers)
                first._backoff.reset()  # a healthy poll: the next reconnect pause starts small
                if polled:
                    continue  # start again from the highest priority
                first.poll_interval = min(c.poll_interval for c in self.consumers)
                first._wait_for_work(listener)

    @staticmethod
    def _poll(consumer: Consumer, conn: psycopg.Connection[Any]) -> int | None:
        with consumer._setup_errors(conn):
            return consumer._poll_once(conn)


MultiQueueConsumer.__module__ = "pgque"
