"""What ``client.health()`` returns: pgque's health checks plus the client's own state.

The checks are the rows of ``pgque.queue_health()`` (per queue:
``ticker_running``, ``consumer_lag:<consumer>``, ``rotation_health``,
``dlq_health``; then ``system`` rows for pg_cron jobs). When they cannot be
read (an older pgque without the function, a role without EXECUTE on it, a
closed connection or a failed transaction), :class:`Health` still describes
the client and says why in :attr:`Health.notes`, each note starting with a
stable code such as ``pgque_health_unavailable``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from pgque.monitoring import HealthCheck, worst

__all__ = ["Health", "HealthCheck"]

_TX_STATUS = {
    TransactionStatus.IDLE: "idle",
    TransactionStatus.ACTIVE: "active",
    TransactionStatus.INTRANS: "intrans",
    TransactionStatus.INERROR: "inerror",
    TransactionStatus.UNKNOWN: "unknown",
}


@dataclass
class Health:
    """The health of a client (or consumer) and of the pgque install it talks to.

    Attributes:
        status: The worst status: ``"ok"``, ``"warning"``, ``"critical"``, or
            ``"unknown"`` when the checks could not be read over a working
            connection. A closed or broken connection is ``"critical"``.
        checks: The rows of ``pgque.queue_health()`` (empty when unavailable).
        notes: Why something is missing, each ``"<code>: <explanation>"``
            (``pgque_health_unavailable``, ``connection_closed``, ...).
        connected: The connection is open and not broken.
        transaction_status: ``"idle"``, ``"intrans"``, ``"inerror"``,
            ``"active"`` or ``"unknown"``.
        autocommit: The connection's autocommit setting.
        server_version: PostgreSQL's version number (e.g. 180001), if connected.
        backend_pid: The server process of the connection, if connected.
        pgque_version: ``pgque.version()``, when readable.
        listening: (consumers) The LISTEN connection is up; None for a client.
        last_poll_at: (consumers) When the last poll completed, seconds since
            the epoch; None for a client or before the first poll.
        reconnects: (consumers) How often the consumer reconnected; None for a client.
    """

    status: str
    checks: list[HealthCheck] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    connected: bool = False
    transaction_status: str = "unknown"
    autocommit: bool = False
    server_version: int | None = None
    backend_pid: int | None = None
    pgque_version: str | None = None
    listening: bool | None = None
    last_poll_at: float | None = None
    reconnects: int | None = None

    @property
    def ok(self) -> bool:
        """True when :attr:`status` is ``"ok"``."""
        return self.status == "ok"

    def failing(self) -> list[HealthCheck]:
        """The checks whose status is not ``"ok"``."""
        return [c for c in self.checks if c.status != "ok"]


def client_state(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> Health:
    """The connection's own state, with no database round trip (status not yet final)."""
    health = Health(status="unknown")
    health.autocommit = bool(conn.autocommit)
    if conn.closed or conn.broken:
        health.status = "critical"
        health.notes.append("connection_closed: the client's connection is closed or broken")
        return health
    info = conn.info
    health.connected = True
    health.transaction_status = _TX_STATUS.get(info.transaction_status, "unknown")
    health.server_version = info.server_version
    health.backend_pid = info.backend_pid
    if info.transaction_status == TransactionStatus.INERROR:
        health.notes.append(
            "transaction_failed: the connection's transaction failed; roll it back"
            " (health checks not read)"
        )
    elif info.transaction_status == TransactionStatus.ACTIVE:
        health.notes.append("connection_busy: a query is running on the connection")
    return health


def can_query(health: Health) -> bool:
    """Whether the checks may be read now (connected, no failed or running transaction)."""
    return health.connected and health.transaction_status in ("idle", "intrans")


def probe_notes(health: Health, health_fn: str, version_fn: str) -> None:
    """Add notes for what ``health_probe`` found missing or denied."""
    if health_fn == "missing":
        health.notes.append(
            "pgque_health_unavailable: pgque.queue_health() does not exist in this database"
            " (pgque not installed, or older than the function)"
        )
    elif health_fn == "denied":
        health.notes.append(
            "pgque_health_unavailable: this role may not execute pgque.queue_health()"
            " (grant it pgque_reader)"
        )
    if version_fn == "missing":
        health.notes.append("pgque_not_installed: pgque.version() does not exist in this database")


def finish(health: Health, rows: list[tuple[Any, ...]] | None) -> Health:
    """Fill in the checks and the overall status."""
    if rows is not None:
        health.checks = [HealthCheck.from_row(r) for r in rows]
    if not health.connected:
        health.status = "critical"
    elif rows is None:
        health.status = "unknown"
    else:
        health.status = worst(c.status for c in health.checks).text
    return health


Health.__module__ = "pgque"
HealthCheck.__module__ = "pgque"
