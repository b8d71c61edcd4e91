"""Idempotency keys are the sender's: no role below it reads one back.

``send_idem`` stored every key in the event's ``ev_extra2``, which every
reader sees through ``receive``, ``recent_events`` and the event tables
(issue 33, item 9). Deduplication needs only a digest of the key: that is
what ``pgque.idem`` keeps now, and the event carries no key at all.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from _engine import make_queue, one, rows, tick

Conn = psycopg.Connection[Any]

KEYS = ["order-secret-42", "customer 7 / invoice 2024-0001 " * 30]


def everything_readable(conn: Conn) -> str:
    """Every row of every pgque table ``conn``'s role may read, as one text."""
    tables = rows(
        conn,
        "select c.oid::regclass::text from pg_catalog.pg_class c"
        " where c.relnamespace = 'pgque'::regnamespace and c.relkind in ('r', 'p', 'v')"
        " and pg_catalog.has_table_privilege(c.oid, 'select') order by 1",
    )
    assert len(tables) > 10
    seen = []
    for (table,) in tables:
        query = sql.SQL("select t::text from {} t").format(sql.SQL(table))
        seen.extend(r[0] for r in rows(conn, query.as_string(conn)))
    return "\n".join(seen)


def test_no_reader_sees_an_idempotency_key(conn: Conn, login_as: Any) -> None:
    make_queue(conn, "orders")
    reader, writer = login_as("reader"), login_as("writer")
    one(reader, "select pgque.subscribe('orders', 'billing')")
    sent = [
        rows(writer, "select * from pgque.send_idem('orders', 't', 'body', %s)", key)[0]
        for key in KEYS
    ]
    assert [deduped for _, deduped in sent] == [False, False]
    # Deduplication still works, for either key.
    for key, (event_id, _) in zip(KEYS, sent, strict=True):
        again = rows(writer, "select * from pgque.send_idem('orders', 't', 'other', %s)", key)
        assert again == [(event_id, True)]
    tick(conn, "orders")

    received = rows(reader, "select * from pgque.receive('orders', 'billing', 100)")
    assert sorted(r[0] for r in received) == sorted(event_id for event_id, _ in sent)
    recent = rows(reader, "select * from pgque.recent_events('orders', 50, null)")
    assert len(recent) == 2
    # Retry copies and dead letters carry what the event carries.
    batch_id, msg_id = received[0][1], received[0][0]
    one(reader, "select pgque.nack(%s, %s::bigint, '1 hour')", batch_id, msg_id)
    one(reader, "select pgque.dead_letter_event(%s, %s, 'test')", batch_id, received[1][0])
    shown = repr(received) + repr(recent) + everything_readable(reader)
    assert one(reader, "select count(*) from pgque.retry_queue") == 1
    assert one(reader, "select count(*) from pgque.dead_letter") == 1
    for key in KEYS:
        assert key not in shown
        assert key[:15] not in shown
    # Not even the owner finds a key in pgque.idem.
    stored = " ".join(k for (k,) in rows(conn, "select idem_key from pgque.idem"))
    for key in KEYS:
        assert key[:15] not in stored
    assert one(conn, "select count(*) from pgque.idem") == 2
