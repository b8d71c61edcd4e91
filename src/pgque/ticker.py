"""The SDK's ticker: ticks, retries, delayed delivery and maintenance in-process.

One ticker leads per database: it holds the advisory lock
``pgque.ticker_lock_key()`` (also taken by the ``ticker_loop`` procedure and
``pgque ticker``); the others stand by and take over when the leader's
connection goes. The leader

* polls every queue's event sequence (one read-only query about every
  millisecond) and ticks a queue whose sequence moved as soon as its
  consumers have taken the previous tick, else after ``max_wait``, so batches
  grow under load (``pgque.ticker_eager``);
* calls ``pgque.ticker()`` every ``tick_period_ms`` (``pgque.config``) for
  PgQ's own rules, idle ticks included;
* moves due retries and delayed messages about every second, and runs
  ``CALL pgque.run_maint()`` and VACUUMs ``maint_tables_to_vacuum()`` about
  every 30 seconds, each as its own statement. A ticker built from a
  connection string does that on a connection and a thread of its own, so a
  slow maintenance round never delays a tick; one given a pool or a
  connection does it between ticks (none of it waits on a lock an
  application holds);
* ticks at most every ``tick_period_ms`` while the database's xmin horizon
  (``pgque.xmin_horizon()``: sessions, read-only snapshots included,
  prepared transactions, replication slots) has not moved for
  ``held_xmin_after`` (0.25 s), so batches, and the subscription row
  versions each one leaves, do not pile up where VACUUM cannot remove them.

Ticks commit with ``synchronous_commit = off``: a later synchronous commit
flushes them, and a lost tick is only retaken.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool

from pgque._queries import LiteralString, query

__all__ = ["Ticker"]

_XMIN_CHECK_INTERVAL = 0.05
"""Seconds between reads of the xmin horizon while leading."""

logger = logging.getLogger("pgque.ticker")


@dataclass
class _Schedule:
    """When each periodic job of the leader is next due (monotonic seconds)."""

    ticker: float = 0.0
    xmin_check: float = 0.0
    period_check: float = 0.0
    standby: float = 0.0
    period: float = 0.1
    xmin: str | None = None
    xmin_since: float = field(default_factory=time.monotonic)


class Ticker:
    """Ticks and maintains pgque from a background thread or the calling one.

    Args:
        source: Where the leader's connection comes from; the role needs
            pgque_admin. A connection string (the ticker connects, and
            reconnects after errors); a :class:`~psycopg_pool.ConnectionPool`
            (the ticker borrows one connection for as long as it runs, in
            autocommit mode, and borrows another after an error); or an
            autocommit :class:`psycopg.Connection` you own (the ticker stops
            when it breaks). The ticker holds a session-level advisory lock
            on it: give it a pool or connection of its own, never a
            PgBouncer transaction-mode one.
        poll_interval: Seconds between sequence polls. Defaults to 0.001.
        idle_poll_interval: Seconds between polls once no queue has moved for
            half a second. Defaults to 0.005.
        max_wait: Seconds a tick may wait for batches to grow while consumers
            are busy. Defaults to 0.005.
        retry_interval: Seconds between retry and delayed-delivery moves.
            Defaults to 1.
        maint_interval: Seconds between ``maint()`` + VACUUM rounds. Defaults to 30.
        held_xmin_after: Seconds the database's xmin horizon
            (``pgque.xmin_horizon()``) may stay put before ticking slows to
            ``tick_period_ms``. Defaults to 0.25: each eager tick adds two
            row versions to ``pgque.subscription`` per consumer, which VACUUM
            cannot remove while the horizon is held.
    """

    def __init__(
        self,
        source: str | ConnectionPool[Any] | psycopg.Connection[Any],
        *,
        poll_interval: float = 0.001,
        idle_poll_interval: float = 0.005,
        max_wait: float = 0.005,
        retry_interval: float = 1.0,
        maint_interval: float = 30.0,
        held_xmin_after: float = 0.25,
    ) -> None:
        if poll_interval <= 0 or max_wait < 0 or retry_interval <= 0 or maint_interval <= 0:
            raise ValueError("Ticker intervals must be positive")
        if isinstance(source, psycopg.Connection) and not source.autocommit:
            raise ValueError("the Ticker needs an autocommit connection (VACUUM and its commits)")
        if not isinstance(source, (str, ConnectionPool, psycopg.Connection)):
            raise TypeError(
                "source must be a connection string, a psycopg_pool.ConnectionPool"
                f" or a psycopg.Connection, got {type(source).__name__}"
            )
        self.source = source
        #: The connection string, when the ticker was given one.
        self.dsn: str | None = source if isinstance(source, str) else None
        self.poll_interval = poll_interval
        self.idle_poll_interval = max(idle_poll_interval, poll_interval)
        self._last_activity = 0.0
        self.max_wait = max_wait
        self.retry_interval = retry_interval
        self.maint_interval = maint_interval
        self.held_xmin_after = held_xmin_after
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: True while this ticker holds the leader lock.
        self.leading = False

    # -- running -------------------------------------------------------------

    def start(self) -> Ticker:
        """Run in a daemon thread; returns self."""
        self._thread = threading.Thread(target=self.run, name="pgque-ticker", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float | None = 5.0) -> None:
        """Stop the loop (thread-safe) and wait for the thread, if any."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def run(self) -> None:
        """Tick until :meth:`stop`; reconnects after database errors."""
        delay = 0.1
        while not self._stop.is_set():
            try:
                with self._connection() as conn:
                    delay = 0.1
                    self._session(conn)
            except psycopg.errors.InsufficientPrivilege as exc:
                logger.warning("ticker: this role may not tick (grant it pgque_admin): %s", exc)
                self.leading = False
                return
            except psycopg.Error as exc:
                if self.leading:
                    logger.warning("ticker: lost leadership: %s", exc)
                self.leading = False
                logger.warning("ticker: database error, retrying in %.1fs: %s", delay, exc)
                if isinstance(self.source, psycopg.Connection) and self.source.closed:
                    logger.error("ticker: its connection is closed; stopping")
                    return
                self._stop.wait(delay)
                delay = min(delay * 2, 30.0)

    @contextlib.contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        """The leader's connection, ``synchronous_commit`` off while the ticker has it."""
        if isinstance(self.source, str):
            with psycopg.connect(self.source, autocommit=True) as conn:
                conn.execute(query("set_synchronous_commit"), ("off",))
                yield conn
            return
        if isinstance(self.source, psycopg.Connection):
            yield from _borrowed(self.source)
            return
        with self.source.connection() as conn:
            autocommit = conn.autocommit
            conn.autocommit = True
            try:
                yield from _borrowed(conn)
            finally:
                if not conn.closed:
                    conn.autocommit = autocommit

    # -- one connection ------------------------------------------------------

    def _session(self, conn: psycopg.Connection[Any]) -> None:
        due = _Schedule()
        seen: dict[str, int] = {}
        pending: set[str] = set()
        maintenance: _Maintenance | None = None
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                if not self.leading:
                    if now >= due.standby:
                        self.leading = bool(_value(conn, query("ticker_try_lead")))
                        due.standby = now + 1.0
                        if self.leading:
                            logger.info("ticker: leading (pid %s)", conn.info.backend_pid)
                            maintenance = _Maintenance(self)
                            if isinstance(self.source, str):
                                maintenance.start()
                    if not self.leading:
                        self._stop.wait(0.1)
                        continue
                self._lead_once(conn, due, seen, pending, now)
                if maintenance is not None and maintenance.thread is None:
                    maintenance.run_due(conn, now)  # a pool or a given connection
                busy = pending or now - self._last_activity < 0.5
                self._stop.wait(self.poll_interval if busy else self.idle_poll_interval)
        finally:
            if maintenance is not None:
                maintenance.stop()
            if self.leading and not conn.closed:
                with contextlib.suppress(psycopg.Error):
                    conn.execute(query("ticker_resign"))
                logger.info("ticker: stopped leading")
            self.leading = False

    def _lead_once(
        self,
        conn: psycopg.Connection[Any],
        due: _Schedule,
        seen: dict[str, int],
        pending: set[str],
        now: float,
    ) -> None:
        held = due.xmin is not None and now - due.xmin_since >= self.held_xmin_after
        if not held:
            for name, value in conn.execute(query("ticker_sequences")).fetchall():
                if seen.get(name) != value:
                    seen[name] = value
                    pending.add(name)
                    self._last_activity = now
            wait = f"{self.max_wait} seconds"
            for name in sorted(pending):
                # NULL: still letting the batch grow; otherwise ticked or covered.
                if _value(conn, query("ticker_eager"), (name, wait)) is not None:
                    pending.discard(name)
        if now >= due.ticker:
            conn.execute(query("ticker_all"))
            due.ticker = now + due.period
        if now >= due.xmin_check:
            xmin = _value(conn, query("ticker_xmin"))
            if xmin != due.xmin:
                due.xmin, due.xmin_since = xmin, now
            due.xmin_check = now + _XMIN_CHECK_INTERVAL
        if now >= due.period_check:
            due.period = int(_value(conn, query("tick_period_ms")) or 100) / 1000.0
            due.period_check = now + 1.0


class _Maintenance:
    """The leader's retries, delayed messages, ``run_maint()`` and VACUUM.

    Started by the leader: on a connection and a thread of its own when the
    ticker has a connection string, so that ticking never waits for it; with
    a pool (which may have no second connection to give) or a borrowed
    connection, :meth:`run_due` runs between ticks instead.
    """

    def __init__(self, ticker: Ticker) -> None:
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

    def _run(self) -> None:
        delay = 0.1
        while not self._stop.is_set() and not self.ticker._stop.is_set():
            try:
                with self.ticker._connection() as conn:
                    while not self._stop.is_set() and not self.ticker._stop.is_set():
                        self.run_due(conn, time.monotonic())
                        delay = 0.1
                        self._stop.wait(0.05)
            except psycopg.Error as exc:
                logger.warning("ticker: maintenance failed, retrying in %.1fs: %s", delay, exc)
                self._stop.wait(delay)
                delay = min(delay * 2, 30.0)

    def run_due(self, conn: psycopg.Connection[Any], now: float) -> None:
        """Whatever maintenance is due at ``now``."""
        if now >= self.retries_due:
            while _value(conn, query("maint_retry_events")):
                pass
            conn.execute(query("maint_deliver_delayed"))
            self.retries_due = now + self.ticker.retry_interval
        if now >= self.maint_due:
            # Never waits on a lock an application holds; commits per step.
            conn.execute(query("run_maint"))
            for (table,) in conn.execute(query("maint_tables_to_vacuum")).fetchall():
                schema, _, name = table.partition(".")
                try:
                    conn.execute(sql.SQL(query("vacuum")).format(sql.Identifier(schema, name)))
                except psycopg.errors.InsufficientPrivilege:
                    logger.debug("ticker: may not vacuum %s", table)
            self.maint_due = now + self.ticker.maint_interval


def _borrowed(conn: psycopg.Connection[Any]) -> Iterator[psycopg.Connection[Any]]:
    """Lend a connection someone else owns, restoring its ``synchronous_commit`` after."""
    previous = _value(conn, query("synchronous_commit"))
    conn.execute(query("set_synchronous_commit"), ("off",))
    try:
        yield conn
    finally:
        if not conn.closed:
            with contextlib.suppress(psycopg.Error):
                conn.execute(query("set_synchronous_commit"), (previous,))


def _value(conn: psycopg.Connection[Any], statement: LiteralString, params: Any = None) -> Any:
    """The first column of the statement's first row (None without rows)."""
    row = conn.execute(statement, params).fetchone()
    return None if row is None else row[0]


Ticker.__module__ = "pgque"
