"""client.health(): pgque.queue_health() rows plus the client's state, degrading gracefully."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.pq import TransactionStatus

import pgque
from _engine import make_queue, one


@pytest.fixture
def roles(conn: psycopg.Connection[Any]) -> Iterator[tuple[str, str]]:
    """Two NOLOGIN roles: a member of pgque_reader, and one of no pgque role."""
    suffix = uuid.uuid4().hex[:8]
    reader, nobody = f"t_health_reader_{suffix}", f"t_health_nobody_{suffix}"
    for role in (reader, nobody):
        conn.execute(sql.SQL("create role {} nologin").format(sql.Identifier(role)))
    conn.execute(sql.SQL("grant pgque_reader to {}").format(sql.Identifier(reader)))
    try:
        yield reader, nobody
    finally:
        for role in (reader, nobody):
            conn.execute(sql.SQL("drop role {}").format(sql.Identifier(role)))


def health_as(db: str, role: str) -> pgque.Health:
    with pgque.connect(db) as client:
        client.conn.execute(sql.SQL("set role {}").format(sql.Identifier(role)))
        health = client.health()
        assert client.conn.info.transaction_status == TransactionStatus.INTRANS
        client.conn.rollback()
    return health


def test_health_reads_the_checks(db: str, conn: psycopg.Connection[Any]) -> None:
    make_queue(conn, "q")
    one(conn, "select pgque.subscribe('q', 'c')")
    one(conn, "select pgque.ticker('q')")
    with pgque.connect(db) as client:
        health = client.health()
        assert client.conn.info.transaction_status == TransactionStatus.IDLE  # nothing left open
    assert health.connected and health.transaction_status == "idle"
    assert health.autocommit is False
    assert health.pgque_version == one(conn, "select pgque.version()")
    assert health.server_version == conn.info.server_version
    assert isinstance(health.backend_pid, int)
    assert health.notes == []
    names = {(c.queue, c.name) for c in health.checks}
    assert {("q", "ticker_running"), ("q", "consumer_lag:c"), ("q", "dlq_health")} <= names
    assert all(c.status in ("ok", "warning", "critical") for c in health.checks)
    worst = max(("ok", "warning", "critical").index(c.status) for c in health.checks)
    assert health.status == ("ok", "warning", "critical")[worst]
    assert health.ok is (health.status == "ok")
    assert health.failing() == [c for c in health.checks if c.status != "ok"]
    assert (health.listening, health.last_poll_at, health.reconnects) == (None, None, None)


def test_health_keeps_the_callers_transaction(db: str, conn: psycopg.Connection[Any]) -> None:
    conn.execute("create table app (x int)")
    with pgque.connect(db) as client:
        client.conn.execute("insert into app values (1)")
        health = client.health()
        assert health.transaction_status == "intrans" and health.checks
        assert client.conn.info.transaction_status == TransactionStatus.INTRANS
        client.conn.commit()
        assert one(conn, "select count(*) from app") == 1

        with pytest.raises(psycopg.errors.DivisionByZero):
            client.conn.execute("select 1 / 0")
        failed = client.health()  # reads nothing in a failed transaction
        assert failed.status == "unknown" and failed.checks == []
        assert failed.notes[0].startswith("transaction_failed:")
        assert client.conn.info.transaction_status == TransactionStatus.INERROR
        client.conn.rollback()

    closed = client.health()
    assert closed.status == "critical" and not closed.connected
    assert closed.notes[0].startswith("connection_closed:")


def test_health_without_queue_health(
    empty_db: str, db: str, conn: psycopg.Connection[Any], roles: tuple[str, str]
) -> None:
    """No pgque (or a pgque without the function): client state and a note, no error."""
    with pgque.connect(empty_db, autocommit=True) as client:
        health = client.health()
    assert health.status == "unknown" and health.connected and health.checks == []
    assert health.pgque_version is None
    assert [n.split(":")[0] for n in health.notes] == [
        "pgque_health_unavailable", "pgque_not_installed",
    ]  # fmt: skip
    assert "does not exist" in health.notes[0]

    # A role of no pgque role may not execute it; a reader may.
    make_queue(conn, "q")
    reader, nobody = roles
    health = health_as(db, nobody)
    assert health.status == "unknown" and health.checks == [] and health.pgque_version is None
    assert health.notes == [
        "pgque_health_unavailable: this role may not execute pgque.queue_health()"
        " (grant it pgque_reader)"
    ]
    health = health_as(db, reader)
    assert health.notes == [] and health.checks and health.pgque_version is not None


def test_async_health(db: str, empty_db: str, conn: psycopg.Connection[Any]) -> None:
    make_queue(conn, "q")

    async def main() -> tuple[pgque.Health, pgque.Health, pgque.Health]:
        async with await pgque.connect_async(db) as client:
            good = await client.health()
            assert client.conn.info.transaction_status == TransactionStatus.IDLE
        async with await pgque.connect_async(empty_db, autocommit=True) as client:
            missing = await client.health()
        closed = await client.health()
        return good, missing, closed

    good, missing, closed = asyncio.run(main())
    assert good.connected and good.notes == [] and good.pgque_version
    assert ("q", "ticker_running") in {(c.queue, c.name) for c in good.checks}
    assert missing.status == "unknown" and missing.notes[0].startswith("pgque_health_unavailable")
    assert closed.status == "critical"
