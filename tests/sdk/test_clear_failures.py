"""Failures that say what to do (issue 34, item 6).

A database without pgque names ``pgque install`` for producers and clients as
for consumers; a consumer whose DSN can never connect (no such database or
role, a wrong password) fails at start instead of retrying for ever; a payload
JSON cannot hold says how to send it; queue names a table or a log line cannot
show are refused.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import decimal
import json
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from twins import make

import pgque
from _engine import one
from pgque.errors import PgqueConnectionError, PgqueInvalidArgument, PgqueNotInstalledError


def test_producer_and_client_without_pgque_say_to_install(empty_db: str) -> None:
    with pgque.Producer(empty_db) as producer, pytest.raises(PgqueNotInstalledError) as caught:
        producer.send("orders", {"id": 1})
    assert "pgque install" in str(caught.value), caught.value
    with pgque.Producer(empty_db) as producer, pytest.raises(PgqueNotInstalledError) as caught:
        producer.send_batch("orders", [{"id": 1}])
    assert "pgque install" in str(caught.value)
    with pgque.connect(empty_db) as client, pytest.raises(PgqueNotInstalledError) as caught:
        client.send("orders", {"id": 1})
    assert "pgque install" in str(caught.value)

    async def main() -> None:
        async with pgque.AsyncProducer(empty_db) as producer:
            with pytest.raises(PgqueNotInstalledError) as caught:
                await producer.send("orders", {"id": 1})
            assert "pgque install" in str(caught.value)
        client = await pgque.connect_async(empty_db, autocommit=True)
        try:
            with pytest.raises(PgqueNotInstalledError) as caught:
                await client.send("orders", {"id": 1})
            assert "pgque install" in str(caught.value)
        finally:
            await client.conn.close()

    asyncio.run(main())


def _with(dsn: str, **change: str) -> str:
    return make_conninfo(**(conninfo_to_dict(dsn) | change))


@pytest.mark.parametrize("wrong", ["dbname", "user"])
def test_a_consumer_that_can_never_connect_fails_at_start(
    kind: str, db: str, start: Any, wrong: str
) -> None:
    dsn = _with(db, **{wrong: "no_such_" + wrong})
    running = start(make(kind, dsn))
    error = running.outcome(timeout=30)  # before: reconnecting with backoff for ever
    assert isinstance(error, PgqueConnectionError), repr(error)
    text = str(error)
    assert f'"no_such_{wrong}" does not exist' in text, text
    assert "check the DSN" in text and "not retried" in text, text


def test_a_consumer_still_retries_a_server_that_is_away(kind: str, db: str, start: Any) -> None:
    # A server that does not answer (yet) is transient: retried as before.
    dsn = _with(db, host="/nonexistent-socket-dir")
    running = start(make(kind, dsn))
    with pytest.raises(pytest.fail.Exception):
        running.outcome(timeout=2)
    assert running.alive and running.consumer.reconnects >= 1


@pytest.mark.parametrize("value", [dt.datetime(2024, 1, 2, 3, 4, 5), decimal.Decimal("1.5"),
                                   {1, 2}])  # fmt: skip
def test_a_payload_json_cannot_hold_says_what_to_do(
    db: str, conn: psycopg.Connection[Any], value: object
) -> None:
    with pgque.Producer(db) as producer, pytest.raises(TypeError) as caught:
        producer.send("orders", {"at": value})
    text = str(caught.value)
    assert f"Object of type {type(value).__name__} is not JSON serializable" in text, text
    assert "serializer=" in text and "pgque.serializers.Serializer" in text, text
    assert "default=str" in text, text
    # What the message says works.
    one(conn, "select pgque.create_queue('orders')")
    with pgque.Producer(db, serializer=pgque.serializers.json_with(default=str)) as producer:
        ev_id = producer.send("orders", {"at": value})
    data = one(conn, "select ev_data from pgque.event_1 where ev_id = %s", ev_id)
    assert json.loads(data) == {"at": str(value)}


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("nl\nx", 'queue name "nl\\nx" must not contain control characters'),
        ("tab\tx", 'queue name "tab\\tx" must not contain control characters'),
        (" lead", 'queue name " lead" must not begin or end with a space'),
        ("trail ", 'queue name "trail " must not begin or end with a space'),
    ],
)
def test_names_a_table_cannot_show_are_refused(
    conn: psycopg.Connection[Any], name: str, says: str
) -> None:
    with pytest.raises(PgqueInvalidArgument) as caught:
        pgque.PgqueClient(conn).create_queue(name)
    assert str(caught.value).startswith(says), caught.value
    assert one(conn, "select count(*) from pgque.queue") == 0
    one(conn, "select pgque.create_queue('in side')")  # a space inside is a name
