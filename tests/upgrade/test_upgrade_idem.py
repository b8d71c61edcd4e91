"""An upgrade keeps deduplicating the idempotency keys sent before it.

``pgque-6e2ef03.sql`` stored keys as given in ``pgque.idem`` (and in the
event's ``ev_extra2``). The current pgque stores only their digests; its
install converts the stored keys, so a key sent before the upgrade is still
deduplicated within its window after it, and ``pgque.idem`` holds no key.
"""

from __future__ import annotations

from typing import Any

import psycopg
from test_upgrade_catalog import HERE, install_with_psql

import pgque
from _db import PgServer
from _engine import one, rows

Conn = psycopg.Connection[Any]

KEYS = ["order-42", "", "x" * 600, "\x01sha256:not-a-digest"]


def test_keys_sent_before_the_upgrade_stay_deduplicated(
    pg_server: PgServer, empty_db: str, connect_to: Any
) -> None:
    install_with_psql(pg_server, HERE / "pgque-6e2ef03.sql", empty_db)
    conn: Conn = connect_to(empty_db)
    assert one(conn, "select pgque.create_queue('orders')") == 1
    sent = {
        key: one(conn, "select event_id from pgque.send_idem('orders', 't', 'b', %s)", key)
        for key in KEYS
    }
    assert one(conn, "select count(*) from pgque.idem where idem_key = 'order-42'") == 1

    assert pgque.install(conn) == pgque.__version__

    stored = [k for (k,) in rows(conn, "select idem_key from pgque.idem order by 1")]
    assert len(stored) == len(KEYS)
    assert all(k.startswith("\x01sha256:") and len(k) == 72 for k in stored), stored
    for key, event_id in sent.items():
        again = rows(conn, "select * from pgque.send_idem('orders', 't', 'b', %s)", key)
        assert again == [(event_id, True)], key
    assert one(conn, "select pgque.upgrade_schema()") == 0
