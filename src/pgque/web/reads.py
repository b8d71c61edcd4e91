"""The console's own reads (``web_*`` statements of ``queries.sql``): payload
previews cut in the database, one event by id, who leads ticking.

The previews return plain dicts, the lease and configuration the typed views
of :mod:`pgque.monitoring`; every statement runs by name through the
executor (:mod:`pgque._async_executor`), which maps database errors to
pgque's as for the client's calls.
"""

from __future__ import annotations

from typing import Any

from pgque._async_executor import execute, fetch_dicts, mapped_errors
from pgque.async_client import AsyncPgqueClient
from pgque.monitoring import MonitoringConfig, TickerLease, aread_config, aread_ticker_lease

__all__ = [
    "EVENT_PAGE_CUT",
    "PREVIEW_CUT",
    "event_history",
    "leader_backend",
    "monitoring_config",
    "preview_dead_letters",
    "preview_events",
    "ticker_lease",
]

#: Characters of a payload (and of each extra field) the lists show.
PREVIEW_CUT = 200
#: Characters of a payload one event's page shows (the JSON API the same).
EVENT_PAGE_CUT = 1 << 20
#: Longest the lookup of one event by id may take (the event tables have no
#: index on ev_id), in milliseconds.
EVENT_LOOKUP_TIMEOUT_MS = 5000


async def ticker_lease(client: AsyncPgqueClient) -> TickerLease:
    """Who leads ticking (``pgque.ticker_leader()``), with the database's clock."""
    return await aread_ticker_lease(client.conn)


async def monitoring_config(client: AsyncPgqueClient) -> MonitoringConfig:
    """``pgque.config``'s scheduler, job ids and tick period."""
    return await aread_config(client.conn)


async def leader_backend(client: AsyncPgqueClient, pid: int | None) -> dict[str, Any] | None:
    """``pg_stat_activity``'s backend type and query of the leader's session (the query
    only where this role may see it), or None when that session is gone."""
    if pid is None:
        return None
    rows = await fetch_dicts(client.conn, "web_backend", (pid,))
    return rows[0] if rows else None


async def preview_events(
    client: AsyncPgqueClient, queue: str, limit: int, type: str | None
) -> list[dict[str, Any]]:
    """The queue's newest events, payload and extras cut to :data:`PREVIEW_CUT` characters
    (``ev_size``: the payload's whole size in bytes)."""
    params = {"cut": PREVIEW_CUT, "queue": queue, "limit": limit, "type": type}
    return await fetch_dicts(client.conn, "web_recent_events", params)


async def preview_dead_letters(
    client: AsyncPgqueClient, queue: str, limit: int
) -> list[dict[str, Any]]:
    """The queue's newest dead letters, payload cut to :data:`PREVIEW_CUT` characters."""
    params = {"cut": PREVIEW_CUT, "queue": queue, "limit": limit}
    return await fetch_dicts(client.conn, "web_dead_letters", params)


async def event_history(
    client: AsyncPgqueClient, queue_id: int, ev_id: int
) -> dict[str, list[dict[str, Any]]]:
    """Everything about one event of a queue: its copies in the event tables (the
    original and each retry copy), its pending retries and its dead letters."""
    params = {"cut": EVENT_PAGE_CUT, "queue_id": queue_id, "ev_id": ev_id}
    table = ("pgque", f"event_{int(queue_id)}")
    conn = client.conn
    with mapped_errors():  # the transaction's own begin and commit
        async with conn.transaction():
            await execute(conn, "web_lookup_timeout", (str(EVENT_LOOKUP_TIMEOUT_MS),))
            copies = await fetch_dicts(conn, "web_event_copies", params, identifiers=(table,))
    return {
        "copies": copies,
        "retries": await fetch_dicts(conn, "web_event_retries", params),
        "dead_letters": await fetch_dicts(conn, "web_event_dead_letters", params),
    }
