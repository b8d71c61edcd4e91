"""Several consumers on one connection, higher-priority queues drained first."""

from __future__ import annotations

from pgque._acompat import Event
from pgque._consumer.async_runner import AsyncRunner
from pgque.async_consumer import AsyncConsumer

__all__ = ["AsyncMultiQueueConsumer"]


class AsyncMultiQueueConsumer:
    """Runs several consumers on one connection, draining higher-priority queues first.

    ``consumers`` are in priority order: after every batch the loop starts
    again from the first, so a lower-priority queue gets a batch only while
    every queue before it is empty. All consumers must share one DSN; each
    keeps its own handlers and options. The connection, the listener (on
    every queue), the in-process ticker and the signal handling follow the
    first consumer's options, decided on every (re)connection; the wait
    between polls is the shortest ``poll_interval``. They share the ``pooler``
    setting too (``pooler=True`` on each, behind a transaction-mode
    pooler). Setup errors and giving
    up end :meth:`start` as for one consumer. It drives the consumers
    through their public ``reset()``, ``prepare(conn)`` and ``poll(conn)``.

    Args:
        consumers: The consumers, highest priority first.
    """

    def __init__(self, consumers: list[AsyncConsumer]) -> None:
        if not consumers:
            raise ValueError("MultiQueueConsumer needs at least one consumer")
        if len({c.dsn for c in consumers}) != 1:
            raise ValueError("MultiQueueConsumer's consumers must share one dsn")
        if len({c.pooler for c in consumers}) != 1:
            raise ValueError("MultiQueueConsumer's consumers must share one pooler setting")
        if any(c.subconsumer is not None for c in consumers):
            raise ValueError("MultiQueueConsumer does not take cooperative subconsumers")
        self.consumers = consumers
        self._stop = Event()

    def stop(self, *, now: bool = False) -> None:
        """Stop every consumer (as :meth:`pgque.Consumer.stop`)."""
        self._stop.set()
        for consumer in self.consumers:
            consumer.stop(now=now)

    @property
    def stopping(self) -> bool:
        """True once :meth:`stop` was called."""
        return self._stop.is_set()

    async def start(self) -> None:
        """Consume until :meth:`stop` (or SIGTERM/SIGINT on the main thread).

        Raises what :meth:`pgque.Consumer.start` raises.
        """
        self._stop.clear()
        for consumer in self.consumers:
            consumer.reset()
        await AsyncRunner(self.consumers, stop=self._stop, owner=self).run()


AsyncMultiQueueConsumer.__module__ = "pgque"
