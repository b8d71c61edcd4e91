"""The SDK's ticker: ticks, retries, delayed delivery and maintenance in-process.

One ticker leads per database: it holds the ticker lease
(``pgque.ticker_lead(holder, lease)``, a row with an expiry, taken by the
``ticker_loop`` procedure, the scheduler jobs and ``pgque ticker`` too) and
renews it as it runs (every round, at most every quarter of a second; the
server writes only once half the ``lease`` has passed). The others stand by,
LISTENing for the leader's resignation (``pgque.ticker_resign``, which a
stopping leader calls) and trying the lease every ``standby_interval`` (2 s).
A leader that vanishes, or whose connection sits idle in a pool, stops
renewing: a standby takes over within ``lease + standby_interval`` (4 s by
default) of its last renewal. A leader that finds the lease taken (it
stalled longer than the lease) stands by again. No session state is needed,
so leadership works through a transaction-mode pooler too (``pooler=True``:
no LISTEN, no session settings, no prepared statements; standbys and the
idle leader poll). The leader

* waits for a wakeup from the database: producers NOTIFY
  ``pgque_ticker_wake`` when they commit, one notification per wait
  (``functions/wakeup.sql``); it polls every ``idle_poll_interval`` (1 s) as
  a safety net, so an idle ticker runs a few statements a second;
* when woken, arms the wakeup again and reads every queue's event sequence
  (one statement), and ticks a queue whose sequence moved as soon as its
  consumers have taken the previous tick, else after ``max_wait``, polling
  every ``poll_interval`` meanwhile, so batches grow under load
  (``pgque.ticker_eager``); each tick NOTIFYs the queue's consumers. The
  wakeup is armed on every such round, also while a tick waits, so that a
  consumer of this process, which ticks its own queue, is woken by the
  next commit rather than by the leader's poll;
* calls ``pgque.ticker()`` every ``tick_period_ms`` (``pgque.config``) while
  events flow, and every ``idle_poll_interval`` when idle, for PgQ's own
  rules, idle ticks included;
* spaces its rounds over every queue (the sequences, ``pgque.ticker()``) by
  their cost: one that took 2 ms or more waits nine times as long, so that
  thousands of idle queues cost at most a tenth of a core;
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
  The horizon is read while events flow, not while idle.

Ticks commit with ``synchronous_commit = off`` (not through a pooler, where
no session setting may stay): a later synchronous commit flushes them, and a
lost tick is only retaken.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from pgque._compat import notifications
from pgque._executor import execute, fetch_all, fetch_value
from pgque._maintenance import Maintenance
from pgque.errors import PgqueError, PgquePoolerError, pooler_error, pooler_symptom

__all__ = ["WAKE_CHANNEL", "Ticker"]

_XMIN_CHECK_INTERVAL = 0.05
"""Seconds between reads of the xmin horizon while events flow."""
_ACTIVE_FOR = 0.5
"""Seconds after the last movement of a sequence during which events count as flowing."""
_STRAGGLERS_FOR = 0.05
"""Seconds the leader polls for a ticked queue's stragglers before leaving them to the
safety round (a long transaction holds them back)."""
_SELF_TICKED_FOR = 0.005
"""Seconds after a consumer of this process ticked its queue itself during which the
leader leaves that queue to it: no tick, no straggler check, and a round over every
queue at most this often while only such queues move."""
_SELF_BUSY_FOR = 0.5
"""Seconds at most the leader leaves a queue to a consumer of this process while that
consumer works through a batch (between its tick and the end of its poll): a tick then
would only cut its next batch smaller, not bring it sooner. The bound serves other
consumers of the queue (PgQ's own rules, ``pgque.ticker()``, still tick meanwhile)."""
_WAIT_SLICE = 0.5
"""The longest a wait for a notification goes without looking at the stop flag."""
_SCAN_SPACING = 9.0
_SCAN_SPACED_FROM = 0.002
"""A round over every queue (their sequences, or ``pgque.ticker()``) that took d seconds,
d of at least ``_SCAN_SPACED_FROM``, is not repeated for ``_SCAN_SPACING`` x d: with
thousands of idle queues the leader then spends at most a tenth of a core on them."""
WAKE_CHANNEL = "pgque_ticker_wake"
"""The channel producers NOTIFY to wake a waiting ticker (``functions/wakeup.sql``)."""
_RESIGN_CHANNEL = "pgque_ticker_resign"
_RENEW_EVERY = 0.25
"""The leader renews its lease at most this often (the server writes only past half)."""

logger = logging.getLogger("pgque.ticker")


class _LeaseLost(Exception):
    """The leader found the lease held by another ticker (it stalled past its expiry)."""


def _next_scan(started: float, ended: float) -> float:
    """When a round over every queue that ran from ``started`` to ``ended`` may run again."""
    took = ended - started
    return ended + (_SCAN_SPACING * took if took >= _SCAN_SPACED_FROM else 0.0)


@dataclass
class _Schedule:
    """When each periodic job of the leader is next due (monotonic seconds)."""

    ticker: float = 0.0
    sequences: float = 0.0
    xmin_check: float = 0.0
    period_check: float = 0.0
    period: float = 0.1
    xmin: str | None = None
    xmin_since: float = field(default_factory=time.monotonic)
    held: bool = False


class Ticker:
    """Ticks and maintains pgque from a background thread or the calling one.

    Args:
        source: Where the leader's connection comes from; the role needs
            pgque_admin. A connection string (the ticker connects, and
            reconnects after errors); a :class:`~psycopg_pool.ConnectionPool`
            (the ticker borrows one connection for as long as it runs, in
            autocommit mode, and borrows another after an error); or an
            autocommit :class:`psycopg.Connection` you own (the ticker stops
            when it breaks). Leadership is a lease renewed by statements, not
            a session lock: with ``pooler=True`` any of these may go through
            a transaction-mode pooler.
        poll_interval: Seconds between sequence polls while a tick waits for
            its batch to grow. Defaults to 0.001.
        idle_poll_interval: Seconds between safety polls while the leader
            waits for a producer's wakeup (a wakeup lost with a rolled-back
            transaction is found by the next one). Defaults to 1.
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
        standby_interval: Seconds between a standby's tries of the lease; a
            leader that stops resigns with a NOTIFY, taken over at once (not
            through a pooler: there standbys only poll). Defaults to 2.
        lease: Seconds the lease lasts without renewal (50 ms to 1 hour): a
            leader that vanishes is replaced within ``lease +
            standby_interval``. The leader renews it at least every quarter
            of it. Defaults to 2.
        pooler: The source goes through a transaction-mode pooler (PgBouncer,
            Supavisor, RDS Proxy): no prepared statements
            (``prepare_threshold=None`` on every connection), no session
            settings (ticks commit synchronously), no LISTEN (the idle leader
            and the standbys poll). Without it, a pooler's symptoms stop the
            ticker with :attr:`failure` set. Defaults to False.
    """

    def __init__(
        self,
        source: str | ConnectionPool[Any] | psycopg.Connection[Any],
        *,
        poll_interval: float = 0.001,
        idle_poll_interval: float = 1.0,
        max_wait: float = 0.005,
        retry_interval: float = 1.0,
        maint_interval: float = 30.0,
        held_xmin_after: float = 0.25,
        standby_interval: float = 2.0,
        lease: float = 2.0,
        pooler: bool = False,
    ) -> None:
        intervals = (poll_interval, idle_poll_interval, retry_interval, maint_interval,
                     standby_interval)  # fmt: skip
        if min(intervals) <= 0 or max_wait < 0:
            raise ValueError("Ticker intervals must be positive")
        if not 0.05 <= lease <= 3600:
            raise ValueError(f"lease must be from 0.05 to 3600 seconds, got {lease!r}")
        if not isinstance(pooler, bool):
            raise TypeError(f"pooler must be True or False, got {pooler!r}")
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
        self.standby_interval = standby_interval
        self.lease = lease
        self.pooler = pooler
        #: This ticker's token in the lease (``pgque.ticker_lead``).
        self.holder = f"pgque.Ticker:{uuid.uuid4()}"
        #: Why the ticker stopped on its own: a transaction-mode pooler met without
        #: ``pooler=True`` (None while it runs or stopped when asked).
        self.failure: PgquePoolerError | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: True while this ticker holds the lease.
        self.leading = False
        #: True while the xmin horizon is held and ticking is slowed (while leading).
        self.held_xmin = False
        self._self_ticked: dict[str, float] = {}
        self._busy: dict[str, int] = {}  # queue: its consumers of this process inside a poll
        self._renew_at = 0.0

    def note_self_tick(self, queue: str) -> None:
        """Say that a consumer of this process ticks ``queue`` itself before a poll (its
        tick also arms the wakeup): the leader leaves that queue to it for a moment, and
        while the poll works through a batch, until :meth:`note_poll_done`."""
        self._self_ticked[queue] = time.monotonic()
        self._busy[queue] = self._busy.get(queue, 0) + 1

    def note_poll_done(self, queue: str) -> None:
        """Say that the poll of a consumer that ticked ``queue`` itself ended."""
        left = self._busy.get(queue, 0) - 1
        if left > 0:
            self._busy[queue] = left
        else:
            self._busy.pop(queue, None)

    def _left_to_consumer(self, queue: str, now: float) -> bool:
        ticked = self._self_ticked.get(queue)
        if ticked is None:
            return False
        return now - ticked < (_SELF_BUSY_FOR if queue in self._busy else _SELF_TICKED_FOR)

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
            except (psycopg.Error, PgqueError) as exc:
                if exc.sqlstate == "42501":  # insufficient_privilege
                    logger.warning("ticker: this role may not tick (grant it pgque_admin): %s", exc)
                    self.leading = False
                    return
                if (isinstance(exc, PgquePoolerError) or pooler_symptom(exc)) and not self.pooler:
                    self.failure = exc if isinstance(exc, PgquePoolerError) else pooler_error(exc)
                    if self.failure is not exc:
                        self.failure.__cause__ = exc
                    logger.error("ticker: stopped: %s", self.failure)
                    self.leading = False
                    return
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
        """The leader's connection, ``synchronous_commit`` off while the ticker has it
        (with ``pooler``: no session setting, nothing prepared)."""
        if isinstance(self.source, str):
            if self.pooler:
                with psycopg.connect(self.source, autocommit=True, prepare_threshold=None) as c:
                    yield c
                return
            with psycopg.connect(self.source, autocommit=True) as conn:
                execute(conn, "set_synchronous_commit", ("off",))
                yield conn
            return
        if isinstance(self.source, psycopg.Connection):
            yield from _borrowed(self.source, pooler=self.pooler)
            return
        with self.source.connection() as conn:
            autocommit = conn.autocommit
            conn.autocommit = True
            try:
                yield from _borrowed(conn, pooler=self.pooler)
            finally:
                if not conn.closed:
                    conn.autocommit = autocommit

    # -- one connection ------------------------------------------------------

    def _session(self, conn: psycopg.Connection[Any]) -> None:
        """Stand by, lead while the lease is ours, stand by again, until stopped."""
        try:
            while not self._stop.is_set():
                self._listen(conn, _RESIGN_CHANNEL)
                while not self._stop.is_set() and not self._take_lease(conn):
                    self._wait(conn, self.standby_interval)
                if self._stop.is_set():
                    return
                self.leading = True
                logger.info("ticker: leading (pid %s)", conn.info.backend_pid)
                self._unlisten(conn, _RESIGN_CHANNEL)
                self._listen(conn, WAKE_CHANNEL)
                self._lead(conn)
                self._unlisten(conn, WAKE_CHANNEL)
        finally:
            if not conn.closed:
                with contextlib.suppress(psycopg.Error, PgqueError):
                    for channel in (WAKE_CHANNEL, _RESIGN_CHANNEL):  # a borrowed one's own stay
                        self._unlisten(conn, channel)
                    if self.leading:
                        execute(conn, "ticker_resign", (self.holder,))
                        logger.info("ticker: stopped leading")
            self.leading = False
            self.held_xmin = False

    def _take_lease(self, conn: psycopg.Connection[Any]) -> bool:
        """Take or renew the lease; whether this ticker leads."""
        lease = f"{self.lease} seconds"
        return bool(fetch_value(conn, "ticker_lead", (self.holder, lease)))

    def _listen(self, conn: psycopg.Connection[Any], channel: str) -> None:
        if not self.pooler:  # a pooler lends the session to others between statements
            execute(conn, "listen", identifiers=[channel])

    def _unlisten(self, conn: psycopg.Connection[Any], channel: str) -> None:
        if not self.pooler:
            execute(conn, "unlisten", identifiers=[channel])

    def _wait(self, conn: psycopg.Connection[Any], timeout: float) -> bool:
        """Wait for a notification (none through a pooler: just wait), at most ``timeout``;
        whether one came."""
        if self.pooler:
            self._stop.wait(max(timeout, 0.0))
            return False
        return _wait_for_notify(conn, timeout, self._stop)

    def _lead(self, conn: psycopg.Connection[Any]) -> None:
        """Lead until stopped or the lease is lost (renewed on the way)."""
        due = _Schedule()
        seen: dict[str, int] = {}
        pending: set[str] = set()
        watch: dict[str, float] = {}
        maintenance = Maintenance(self)
        if isinstance(self.source, str):
            maintenance.start()
        self._renew_at = time.monotonic() + _RENEW_EVERY
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                self._renew(conn, now)
                quiet: bool | None = self._lead_once(conn, due, seen, pending, now, watch)
                if quiet and watch and not due.held:  # held: ticker() ticks them
                    quiet = self._stragglers(conn, watch, now)
                if maintenance.thread is None:
                    maintenance.run_due(conn, now)  # a pool or a given connection
                self._pause(conn, due, pending, quiet=quiet, maintenance=maintenance)
        except _LeaseLost:
            logger.warning("ticker: lost the lease (it expired, and another ticker took it"
                           " over); standing by")  # fmt: skip
            self.leading = False
        finally:
            maintenance.stop()
            self.held_xmin = False

    def _pause(
        self,
        conn: psycopg.Connection[Any],
        due: _Schedule,
        pending: set[str],
        *,
        quiet: bool | None,
        maintenance: Maintenance,
    ) -> None:
        """Wait after a round: for the next periodic job while the horizon is held, a
        ``poll_interval`` while a tick waits (or stragglers run: ``quiet`` None), for a
        wakeup (armed) when all is quiet."""
        now = time.monotonic()
        until = min(due.ticker, due.period_check)
        if maintenance.thread is None:
            until = min(until, maintenance.next_due())
        if due.held:
            self._hold(conn, min(until, due.xmin_check), notify=False)
        elif pending or quiet is None:
            self._stop.wait(min(self.poll_interval, max(0.0, until - now)))
        elif quiet:
            self._hold(conn, until, notify=True)
        elif due.sequences > now:  # too soon to arm again (many queues)
            self._hold(conn, min(until, due.sequences), notify=False)

    def _hold(self, conn: psycopg.Connection[Any], until: float, *, notify: bool) -> None:
        """Wait until ``until`` (monotonic), or a notification with ``notify``, renewing
        the lease on the way (every quarter of it at least)."""
        while not self._stop.is_set():
            now = time.monotonic()
            self._renew(conn, now)
            if now >= until:
                return
            step = min(until - now, self.lease / 4)
            if notify and self._wait(conn, step):
                return
            if not notify:
                self._stop.wait(step)

    def _renew(self, conn: psycopg.Connection[Any], now: float) -> None:
        """Renew the lease when due; :class:`_LeaseLost` when another ticker holds it."""
        if now < self._renew_at:
            return
        if not self._take_lease(conn):
            raise _LeaseLost
        self._renew_at = now + _RENEW_EVERY

    def _stragglers(
        self, conn: psycopg.Connection[Any], watch: dict[str, float], now: float
    ) -> bool | None:
        """Tick the watched queues whose last tick left out a transaction that has
        committed since (``pgque._tick_stragglers``). True when none is left to
        watch closely (wait for a wakeup), None while one may still commit within
        :data:`_STRAGGLERS_FOR` (poll), False when one was ticked (go round again)."""
        ticked, close = False, False
        for name, until in list(watch.items()):
            if self._left_to_consumer(name, now):
                close = True  # looked at once its consumer waits
                continue
            state = fetch_value(conn, "ticker_stragglers", (name,))
            if state == 1:
                ticked = True
            if state != 2:
                del watch[name]
            elif now < until:
                close = True  # still running: most producers commit within a moment
        if ticked:
            return False
        return None if close else True

    def _lead_once(
        self,
        conn: psycopg.Connection[Any],
        due: _Schedule,
        seen: dict[str, int],
        pending: set[str],
        now: float,
        watch: dict[str, float],
    ) -> bool:
        """One round of the leader; True when it armed the wakeup and no tick waits
        (the leader may wait for a wakeup: a commit after the arming notifies). A
        queue that moved is watched for stragglers.

        Every round that reads the sequences arms the wakeup, also while a tick
        waits for its batch to grow. A queue that a consumer of this process
        ticks itself (:meth:`note_self_tick`) is left to it while it does: the
        leader then reads the sequences every few milliseconds, not on every
        commit, and takes the queue back once the consumer waits."""
        scan = now >= due.sequences  # else wait for it (_pause): arming reads every sequence
        rows: list[tuple[str, int, int | None]] = []
        if scan:
            if not self.pooler:
                _drain_notifies(conn)  # older than the arming: what they announce is read now
            started = time.monotonic()
            rows = fetch_all(conn, "ticker_arm_wake")
            due.sequences = _next_scan(started, time.monotonic())
        moved_self, moved_elsewhere = False, False
        for name, value, ticked in rows:
            if seen.get(name) == value:
                continue
            self._last_activity = now
            if self._left_to_consumer(name, now):
                # Its consumer ticks it before every poll. Not marked seen: once the
                # consumer waits, a later round takes what is left (a tick it let
                # wait for other consumers, stragglers).
                moved_self = True
                continue
            seen[name] = value
            moved_elsewhere = True
            watch[name] = now + _STRAGGLERS_FOR
            # Covered by the last tick (a consumer of this process ticked it, say):
            # nothing to do. A first event leaves the gauge at 1: ticker_eager decides.
            if ticked is None or value > ticked or value <= 1:
                pending.add(name)
        deferred = moved_self and not moved_elsewhere
        if deferred:
            # Only queues that their consumers tick moved: their ticks arm the wakeup
            # and wake this leader on every commit. Look again (not at every wakeup)
            # once they may have stopped.
            due.sequences = max(due.sequences, now + _SELF_TICKED_FOR)
        active = bool(pending) or now - self._last_activity < _ACTIVE_FOR
        if active and now >= due.xmin_check:
            xmin = fetch_value(conn, "ticker_xmin")
            if xmin != due.xmin:
                due.xmin, due.xmin_since = xmin, now
            due.xmin_check = now + _XMIN_CHECK_INTERVAL
        due.held = due.xmin is not None and now - due.xmin_since >= self.held_xmin_after
        self.held_xmin = due.held
        if not due.held:
            wait = f"{self.max_wait} seconds"
            for name in sorted(pending):
                # NULL: still letting the batch grow; otherwise ticked or covered.
                if fetch_value(conn, "ticker_eager", (name, wait)) is not None:
                    pending.discard(name)
        if now >= due.ticker:
            started = time.monotonic()
            execute(conn, "ticker_all")
            due.ticker = max(
                now + (due.period if active else max(due.period, self.idle_poll_interval)),
                _next_scan(started, time.monotonic()),
            )
        if now >= due.period_check:
            due.period = int(fetch_value(conn, "tick_period_ms") or 100) / 1000.0
            due.period_check = now + max(1.0, self.idle_poll_interval)
        return scan and not pending and not deferred


def _borrowed(conn: psycopg.Connection[Any], *, pooler: bool) -> Iterator[psycopg.Connection[Any]]:
    """Lend a connection someone else owns, restoring its ``synchronous_commit`` after
    (with ``pooler``: its ``prepare_threshold``, and no session setting at all)."""
    if pooler:
        threshold = conn.prepare_threshold
        conn.prepare_threshold = None
        try:
            yield conn
        finally:
            conn.prepare_threshold = threshold
        return
    previous = fetch_value(conn, "synchronous_commit")
    execute(conn, "set_synchronous_commit", ("off",))
    try:
        yield conn
    finally:
        if not conn.closed:
            with contextlib.suppress(psycopg.Error, PgqueError):
                execute(conn, "set_synchronous_commit", (previous,))


def _drain_notifies(conn: psycopg.Connection[Any]) -> None:
    """Drop the notifications received so far (without waiting)."""
    for _ in conn.notifies(timeout=0):
        pass


def _wait_for_notify(conn: psycopg.Connection[Any], timeout: float, stop: threading.Event) -> bool:
    """Return on a notification on ``conn`` (one received earlier included: True), after
    ``timeout`` seconds, or within :data:`_WAIT_SLICE` of ``stop`` being set."""
    deadline = time.monotonic() + timeout
    while not stop.is_set():
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        if notifications(conn, min(left, _WAIT_SLICE)):
            return True
    return False


Ticker.__module__ = "pgque"
