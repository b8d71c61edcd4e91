"""Sending to a queue nobody subscribed to is said once (issue 34, item 5).

PgQ's rule stays (such an event is received by nobody); every way of sending
from Python warns once per queue and per producer or client, after that
queue's first send, and never again for it.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg import sql

import pgque
from _engine import one


def warnings_for(caplog: pytest.LogCaptureFixture, queue: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "pgque.producer" and r.levelno == logging.WARNING
        and f"queue '{queue}' has no consumers" in r.getMessage()
    ]  # fmt: skip


def sync_producer(db: str) -> None:
    with pgque.Producer(db) as producer:
        for _ in range(3):
            producer.send("lonely", {"n": 1})
        producer.send_batch("lonely", [{"n": 2}, {"n": 3}])
        producer.send("busy", {"n": 1})


def async_producer(db: str) -> None:
    async def main() -> None:
        async with pgque.AsyncProducer(db) as producer:
            for _ in range(3):
                await producer.send("lonely", {"n": 1})
            await producer.send_batch("lonely", [{"n": 2}])
            await producer.send("busy", {"n": 1})

    asyncio.run(main())


def sync_client(db: str) -> None:
    with pgque.connect(db, autocommit=True) as client:
        for _ in range(3):
            client.send("lonely", {"n": 1})
        client.send_batch("lonely", "default", [{"n": 2}])
        client.send("busy", {"n": 1})


def async_client(db: str) -> None:
    async def main() -> None:
        client = await pgque.connect_async(db, autocommit=True)
        try:
            for _ in range(3):
                await client.send("lonely", {"n": 1})
            await client.send_batch("lonely", "default", [{"n": 2}])
            await client.send("busy", {"n": 1})
        finally:
            await client.conn.close()

    asyncio.run(main())


@pytest.mark.parametrize("send", [sync_producer, async_producer, sync_client, async_client])
def test_warned_once_per_queue(
    db: str, conn: psycopg.Connection[Any], caplog: pytest.LogCaptureFixture,
    send: Callable[[str], None],
) -> None:  # fmt: skip
    for queue in ("lonely", "busy"):
        one(conn, "select pgque.create_queue(%s)", queue)
    one(conn, "select pgque.subscribe('busy', 'c')")
    caplog.set_level(logging.WARNING)
    send(db)
    [warning] = warnings_for(caplog, "lonely")
    assert "received by nobody" in warning and "pgque subscribe lonely CONSUMER" in warning
    assert warnings_for(caplog, "busy") == []


def test_a_writer_alone_sends_in_its_transaction_without_a_failure(
    db: str, conn: psycopg.Connection[Any], caplog: pytest.LogCaptureFixture
) -> None:
    # The look at the consumers runs in the caller's transaction: it must not
    # fail there for a role that may not read them.
    one(conn, "select pgque.create_queue('lonely')")
    role = f"only_writer_{uuid.uuid4().hex[:8]}"  # roles are the whole server's
    conn.execute(sql.SQL("create role {} in role pgque_writer").format(sql.Identifier(role)))
    try:
        with psycopg.connect(db) as mine:
            mine.execute(sql.SQL("set role {}").format(sql.Identifier(role)))
            with pgque.Producer(mine) as producer:
                producer.send("lonely", {"n": 1}, conn=mine)
                producer.send("lonely", {"n": 2}, conn=mine)
            mine.execute("select 1")  # the transaction is still usable
            mine.commit()
        assert one(conn, "select count(*) from pgque.event_1") == 2
        assert warnings_for(caplog, "lonely") == []
    finally:
        conn.execute(sql.SQL("drop role {}").format(sql.Identifier(role)))
