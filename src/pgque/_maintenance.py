"""The Ticker's maintenance: retries, delayed messages, ``run_maint()`` and VACUUM.

Run by the leading :class:`pgque.Ticker` (:mod:`pgque.ticker`), on a thread
and connection of its own or between its ticks.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import psycopg

from pgque._executor import execute, fetch_all, fetch_value
from pgque.errors import PgqueError

__all__ = ["Maintenance"]

logger = logging.getLogger("pgque.ticker")


class Maintenance:
    """The leader's retries, delayed messages, ``run_maint()`` and VACUUM.

    Started by the leader: on a connection and a thread of its own when the
    ticker has a connection string, so that ticking never waits for it; with
    a pool (which may have no second connection to give) or a borrowed
    connection, :meth:`run_due` runs between ticks instead.
    """

    def __init__(self, ticker: Any) -> None:
        self.ticker = ticker
        self.retries_due = 0.0
        self.maint_due = 0.0
        self.thread: threading.Thread | None = None
        self._stop = threading.Event()

    def start(self) -> None:
        """Run in a daemon thread of its own until :meth:`stop`."""
        self.thread = threading.Thread(target=self._run, name="pgque-maintenance", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """Stop the thread, if any (a round in progress finishes first)."""
        self._stop.set()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(5.0)

    def next_due(self) -> float:
        """When the next job is due (monotonic seconds)."""
        return min(self.retries_due, self.maint_due)

    def _run(self) -> None:
        delay = 0.1
        while not self._stop.is_set() and not self.ticker._stop.is_set():
            try:
                with self.ticker._connection() as conn:
                    while not self._stop.is_set() and not self.ticker._stop.is_set():
                        self.run_due(conn, time.monotonic())
                        delay = 0.1
                        # Until the next job: the leader's stop sets this event too.
                        self._stop.wait(max(self.next_due() - time.monotonic(), 0.0))
            except (psycopg.Error, PgqueError) as exc:
                logger.warning("ticker: maintenance failed, retrying in %.1fs: %s", delay, exc)
                self._stop.wait(delay)
                delay = min(delay * 2, 30.0)

    def run_due(self, conn: psycopg.Connection[Any], now: float) -> None:
        """Whatever maintenance is due at ``now``."""
        if now >= self.retries_due:
            while fetch_value(conn, "maint_retry_events"):
                pass
            execute(conn, "maint_deliver_delayed")
            self.retries_due = now + self.ticker.retry_interval
        if now >= self.maint_due:
            # Never waits on a lock an application holds; commits per step.
            execute(conn, "run_maint")
            for (table,) in fetch_all(conn, "maint_tables_to_vacuum"):
                schema, _, name = table.partition(".")
                try:
                    execute(conn, "vacuum", identifiers=[(schema, name)])
                except PgqueError as exc:
                    if exc.sqlstate != "42501":  # insufficient_privilege
                        raise
                    logger.debug("ticker: may not vacuum %s", table)
            self.maint_due = now + self.ticker.maint_interval
