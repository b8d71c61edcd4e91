"""Typed monitoring views: what ``pgque status``, the web console, ``/metrics`` and
``client.health()`` read, and the one ranking of health statuses they share.

The statuses are ordered ``ok < unknown < warning < critical``:

- ``unknown`` says a judgement could not be made (the checks could not be
  read, or a check this version of pgque does not know). It is never taken
  for ``ok``: an overall status with an ``unknown`` part is at least
  ``unknown``.
- It ranks below ``warning``: only something seen to be wrong warns or
  fails a probe (``pgque status --fail-on warning`` and ``/healthz`` keep
  their meaning).
- ``/metrics`` exports the rank itself (``pgque_health_status``: 0 ok,
  1 unknown, 2 warning, 3 critical).

The views are frozen dataclasses built, here and only here, from the rows of
the statements in ``queries.sql``: ``queue_health``, ``queue_stats`` and
``consumer_stats`` through the client's calls (:func:`read_snapshot`),
``ticker_leader`` and ``monitoring_config`` through the executor
(:func:`read_ticker_lease`, :func:`read_config`); each read has an async twin
(``aread_*``) for the console.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import psycopg

from pgque import _async_executor, _executor
from pgque.records import ConsumerStats, QueueStats

__all__ = [
    "ConsumerHealth",
    "HealthCheck",
    "MonitoringConfig",
    "QueueHealth",
    "Snapshot",
    "Status",
    "TickerLeader",
    "TickerLease",
    "aread_config",
    "aread_snapshot",
    "aread_ticker_lease",
    "read_config",
    "read_snapshot",
    "read_ticker_lease",
    "worst",
]


class Status(enum.IntEnum):
    """A health status, ordered from best to worst (its value is its rank)."""

    OK = 0
    UNKNOWN = 1
    WARNING = 2
    CRITICAL = 3

    @property
    def text(self) -> str:
        """The status as pgque writes it: ``ok``, ``unknown``, ``warning``, ``critical``."""
        return self.name.lower()

    @classmethod
    def of(cls, text: str | Status | None) -> Status:
        """The status named ``text``; any other text (or None) is ``UNKNOWN``."""
        if isinstance(text, Status):
            return text
        try:
            return cls[str(text).upper()]
        except KeyError:
            return cls.UNKNOWN


def worst(statuses: Iterable[str | Status]) -> Status:
    """The worst of ``statuses`` (``OK`` when there is none)."""
    return max((Status.of(s) for s in statuses), default=Status.OK)


@dataclass(frozen=True)
class HealthCheck:
    """One row of ``pgque.queue_health()``.

    Attributes:
        queue: The queue, or ``"system"`` for checks of the whole install.
        name: The check (``ticker_running``, ``consumer_lag:<consumer>``, ...).
        status: ``"ok"``, ``"warning"`` or ``"critical"``.
        detail: What was seen, for people.
    """

    queue: str | None
    name: str
    status: str
    detail: str | None = None

    @property
    def level(self) -> Status:
        """:attr:`status` as a :class:`Status` (a status pgque does not know is ``UNKNOWN``)."""
        return Status.of(self.status)

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> HealthCheck:
        """The check from a row of the ``queue_health`` statement."""
        queue, name, status, detail = row
        return cls(None if queue is None else str(queue), str(name), str(status), detail)


@dataclass(frozen=True)
class TickerLeader:
    """The session holding (or last holding) the ticker lease, from ``pgque.ticker_leader()``.

    Attributes:
        application_name: Its ``application_name`` when it last renewed.
        pid: Its server process.
        client_addr: Its client address as text (None over a unix socket).
        since: When it started leading.
        renewed: When it last renewed the lease.
        expires: When the lease runs out (None once resigned).
        active: Whether the lease is held now.
    """

    application_name: str | None
    pid: int | None
    client_addr: str | None
    since: datetime | None
    renewed: datetime | None
    expires: datetime | None
    active: bool

    def as_json(self) -> dict[str, Any]:
        """The leader as ``pgque status --json`` prints it."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class TickerLease:
    """Who leads ticking: the holder (None when no session ever led) and the server's clock."""

    leader: TickerLeader | None
    now: datetime

    @property
    def leading(self) -> bool:
        """A ticker holds the lease now."""
        return self.leader is not None and self.leader.active

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> TickerLease:
        """The lease from a row of the ``ticker_leader`` statement."""
        app, pid, addr, since, renewed, expires, active, now = row
        if pid is None:
            return cls(None, now)
        leader = TickerLeader(app, pid, None if addr is None else str(addr), since, renewed,
                              expires, bool(active))  # fmt: skip
        return cls(leader, now)


@dataclass(frozen=True)
class MonitoringConfig:
    """``pgque.config``'s scheduler, its job ids and the tick period (``monitoring_config``)."""

    scheduler: str | None
    ticker_job_id: int | None
    maint_job_id: int | None
    tick_period_ms: int | None


@dataclass(frozen=True)
class QueueHealth:
    """A queue's figures and the worst of its health checks."""

    stats: QueueStats
    checks: tuple[HealthCheck, ...]

    @property
    def status(self) -> Status:
        """The worst of the queue's checks (``OK`` without checks)."""
        return worst(c.status for c in self.checks)

    def as_json(self) -> dict[str, Any]:
        """``pgque queues --json``'s row: the stats' columns and ``health``."""
        return {**dataclasses.asdict(self.stats), "health": self.status.text}


@dataclass(frozen=True)
class ConsumerHealth:
    """A consumer's figures and its lag check (``consumer_lag:<name>``), if any."""

    stats: ConsumerStats
    check: HealthCheck | None

    @property
    def status(self) -> Status:
        """The status of its lag check (``OK`` without one)."""
        return Status.OK if self.check is None else self.check.level

    def as_json(self) -> dict[str, Any]:
        """``pgque consumers --json``'s row: the stats' columns and ``status``."""
        return {**dataclasses.asdict(self.stats), "status": self.status.text}


@dataclass(frozen=True)
class Snapshot:
    """The health checks, queues and consumers, read together."""

    checks: tuple[HealthCheck, ...]
    queues: tuple[QueueStats, ...]
    consumers: tuple[ConsumerStats, ...]

    @property
    def status(self) -> Status:
        """The worst of every check."""
        return worst(c.status for c in self.checks)

    def checks_of(self, queue: str | None) -> tuple[HealthCheck, ...]:
        """The checks of ``queue`` (``"system"``: the install's own)."""
        return tuple(c for c in self.checks if c.queue == queue)

    def check(self, queue: str | None, name: str) -> HealthCheck | None:
        """The check ``name`` of ``queue``, if there is one."""
        return next((c for c in self.checks if c.queue == queue and c.name == name), None)

    def queue_health(self) -> list[QueueHealth]:
        """Every queue with its checks."""
        return [QueueHealth(q, self.checks_of(q.queue_name)) for q in self.queues]

    def consumer_health(self) -> list[ConsumerHealth]:
        """Every consumer with its lag check."""
        return [
            ConsumerHealth(c, self.check(c.queue_name, f"consumer_lag:{c.consumer_name}"))
            for c in self.consumers
        ]

    def consumers_of(self, queue: str) -> list[ConsumerStats]:
        """The consumers of ``queue``."""
        return [c for c in self.consumers if c.queue_name == queue]


class _Reader(Protocol):
    """The client calls a snapshot is read with (:class:`pgque.PgqueClient`)."""

    def queue_health(self) -> list[HealthCheck]: ...
    def queue_stats(self, queue: str | None = None) -> list[QueueStats]: ...
    def consumer_stats(self, queue: str | None = None) -> list[ConsumerStats]: ...


class _AsyncReader(Protocol):
    """The client calls a snapshot is read with (:class:`pgque.AsyncPgqueClient`)."""

    async def queue_health(self) -> list[HealthCheck]: ...
    async def queue_stats(self, queue: str | None = None) -> list[QueueStats]: ...
    async def consumer_stats(self, queue: str | None = None) -> list[ConsumerStats]: ...


def read_snapshot(client: _Reader, queue: str | None = None) -> Snapshot:
    """Every health check, and the queues and consumers (of ``queue``, if given)."""
    checks = tuple(client.queue_health())
    return Snapshot(checks, tuple(client.queue_stats(queue)), tuple(client.consumer_stats(queue)))


async def aread_snapshot(client: _AsyncReader, queue: str | None = None) -> Snapshot:
    """:func:`read_snapshot` for an async client."""
    checks = tuple(await client.queue_health())
    queues = tuple(await client.queue_stats(queue))
    return Snapshot(checks, queues, tuple(await client.consumer_stats(queue)))


def read_ticker_lease(conn: psycopg.Connection[Any]) -> TickerLease:
    """Who leads ticking (``pgque.ticker_leader()``), with the server's clock."""
    row = _executor.fetch_one(conn, "ticker_leader")
    assert row is not None  # a function returning a record gives one row
    return TickerLease.from_row(row)


async def aread_ticker_lease(conn: psycopg.AsyncConnection[Any]) -> TickerLease:
    """:func:`read_ticker_lease` on an async connection."""
    row = await _async_executor.fetch_one(conn, "ticker_leader")
    assert row is not None
    return TickerLease.from_row(row)


def read_config(conn: psycopg.Connection[Any]) -> MonitoringConfig:
    """The scheduler, its job ids and the tick period (``pgque.config``)."""
    row = _executor.fetch_one(conn, "monitoring_config")
    assert row is not None  # pgque.config holds one row
    return MonitoringConfig(*row)


async def aread_config(conn: psycopg.AsyncConnection[Any]) -> MonitoringConfig:
    """:func:`read_config` on an async connection."""
    row = await _async_executor.fetch_one(conn, "monitoring_config")
    assert row is not None
    return MonitoringConfig(*row)
