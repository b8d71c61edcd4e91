"""Helpers of the Django and SQLAlchemy tests: Django's ``default`` pointed at a test
database, the test app's tables, and reading what reached a queue."""

from __future__ import annotations

from typing import Any

import psycopg
from django.db import connection, connections
from psycopg.conninfo import conninfo_to_dict

from pgque import PgqueClient


def point_default_at(dsn: str) -> None:
    """Make Django's ``default`` alias connect to ``dsn`` (closing its connection)."""
    connections.close_all()
    parts: dict[str, Any] = conninfo_to_dict(dsn)
    target = connections.settings["default"]
    target.update(
        NAME=parts.pop("dbname"),
        USER=parts.pop("user", ""),
        PASSWORD=parts.pop("password", ""),
        HOST=parts.pop("host", ""),
        PORT=parts.pop("port", ""),
        OPTIONS=parts,
    )


def create_app_tables() -> None:
    """The test app's tables, straight from its models."""
    from pgque_testapp.models import Handled, Order

    with connection.schema_editor() as editor:
        editor.create_model(Order)
        editor.create_model(Handled)


def received(
    conn: psycopg.Connection[Any], queue: str = "orders", consumer: str = "watch"
) -> list[Any]:
    """Tick ``queue`` and return the payloads of ``consumer``'s next batch (acked), in order."""
    conn.execute("select pgque.force_tick(%s)", (queue,))
    conn.execute("select pgque.ticker(%s)", (queue,))
    client = PgqueClient(conn)
    msgs = client.receive(queue, consumer, 1000)
    if msgs:
        client.ack(msgs[0].batch_id)
    return [m.json() for m in msgs]
