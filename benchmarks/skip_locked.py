"""A SKIP LOCKED queue in PGMQ's style, written for the comparison from its design.

One table with an identity key and a visibility timestamp; a read claims up
to N visible rows with ``FOR UPDATE SKIP LOCKED`` in a CTE and pushes their
visibility out; the consumer then deletes the handled rows by id array.
"""

from __future__ import annotations

from typing import Any

import psycopg

Conn = psycopg.Connection[Any]

DDL = """
create table if not exists skq (
    msg_id bigint generated always as identity primary key,
    vt timestamptz not null default now(),
    read_ct integer not null default 0,
    enqueued_at timestamptz not null default now(),
    message text
)
"""

READ = """
with claimed as (
    select msg_id from skq where vt <= now() order by msg_id
    limit %s for update skip locked
)
update skq set vt = now() + interval '30 seconds', read_ct = read_ct + 1
from claimed where skq.msg_id = claimed.msg_id
returning skq.msg_id, skq.message
"""


def create(conn: Conn) -> None:
    """Create the queue table (idempotent)."""
    conn.execute(DDL)


def send(conn: Conn, message: str) -> int:
    """Insert one message; its id."""
    row = conn.execute("insert into skq (message) values (%s) returning msg_id", (message,))
    return int(row.fetchone()[0])  # type: ignore[index]


def send_batch(conn: Conn, messages: list[str]) -> None:
    """Insert many messages in one statement."""
    conn.execute("insert into skq (message) select unnest(%s::text[])", (messages,))


def read(conn: Conn, limit: int) -> list[tuple[int, str]]:
    """Claim up to ``limit`` visible messages."""
    return conn.execute(READ, (limit,)).fetchall()


def delete(conn: Conn, ids: list[int]) -> None:
    """Delete handled messages by id."""
    conn.execute("delete from skq where msg_id = any(%s)", (ids,))
