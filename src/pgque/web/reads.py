"""The console's own reads (``web_*`` statements of ``queries.sql``): payload
previews cut in the database, one event by id, who leads ticking.

The previews return plain dicts, the lease and configuration the typed views
of :mod:`pgque.monitoring`; database errors become pgque's errors as the
client's calls do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from pgque._queries import LiteralString, query
from pgque.async_client import AsyncPgqueClient
from pgque.errors import from_database_error
from pgque.monitoring import MonitoringConfig, TickerLease, aread_config, aread_ticker_lease

__all__ = [
    "EVENT_PAGE_CUT",
    "PREVIEW_CUT",
    "event_history",
    "fetch",
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


async def fetch(
    client: AsyncPgqueClient,
    statement: sql.Composed | LiteralString,
    params: Sequence[Any] | Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The rows of ``statement`` as dicts."""
    try:
        async with client.conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(statement, params)
            return list(await cur.fetchall())
    except psycopg.Error as exc:
        raise from_database_error(exc) from exc


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
    rows = await fetch(client, query("web_backend"), (pid,))
    return rows[0] if rows else None


async def preview_events(
    client: AsyncPgqueClient, queue: str, limit: int, type: str | None
) -> list[dict[str, Any]]:
    """The queue's newest events, payload and extras cut to :data:`PREVIEW_CUT` characters
    (``ev_size``: the payload's whole size in bytes)."""
    params = {"cut": PREVIEW_CUT, "queue": queue, "limit": limit, "type": type}
    return await fetch(client, query("web_recent_events"), params)


async def preview_dead_letters(
    client: AsyncPgqueClient, queue: str, limit: int
) -> list[dict[str, Any]]:
    """The queue's newest dead letters, payload cut to :data:`PREVIEW_CUT` characters."""
    return await fetch(
        client, query("web_dead_letters"), {"cut": PREVIEW_CUT, "queue": queue, "limit": limit}
    )


async def event_history(
    client: AsyncPgqueClient, queue_id: int, ev_id: int
) -> dict[str, list[dict[str, Any]]]:
    """Everything about one event of a queue: its copies in the event tables (the
    original and each retry copy), its pending retries and its dead letters."""
    params = {"cut": EVENT_PAGE_CUT, "queue_id": queue_id, "ev_id": ev_id}
    table = sql.Identifier("pgque", f"event_{int(queue_id)}")
    copies_sql = sql.SQL(query("web_event_copies")).format(table=table)
    conn = client.conn
    try:
        async with conn.transaction():
            await conn.execute(query("web_lookup_timeout"), (str(EVENT_LOOKUP_TIMEOUT_MS),))
            copies = await fetch(client, copies_sql, params)
    except psycopg.Error as exc:
        raise from_database_error(exc) from exc
    return {
        "copies": copies,
        "retries": await fetch(client, query("web_event_retries"), params),
        "dead_letters": await fetch(client, query("web_event_dead_letters"), params),
    }
