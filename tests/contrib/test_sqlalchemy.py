"""pgque.sqlalchemy: send on the session's own connection and transaction."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from _django_db import received
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

import pgque.sqlalchemy as pgsa
from pgque.errors import PgqueInvalidArgument, PgqueQueueNotFound

Conn = psycopg.Connection[Any]


def url(dsn: str, driver: str = "psycopg") -> str:
    """A SQLAlchemy URL for a libpq DSN (its parts as query arguments)."""
    parts = psycopg.conninfo.conninfo_to_dict(dsn)
    return str(
        sa.engine.URL.create(
            f"postgresql+{driver}",
            username=str(parts.pop("user", "")) or None,
            password=str(parts.pop("password", "")) or None,
            database=str(parts.pop("dbname")),
            query={k: str(v) for k, v in parts.items()},
        ).render_as_string(hide_password=False)
    )


@pytest.fixture
def orders(conn: Conn) -> Conn:
    conn.execute("select pgque.create_queue('orders')")
    conn.execute("select pgque.subscribe('orders', 'watch')")
    conn.execute("create table receipt (item text primary key)")
    return conn


def receipts(conn: Conn) -> list[str]:
    return [r[0] for r in conn.execute("select item from receipt order by item").fetchall()]


def test_session_commit_and_rollback(db: str, orders: Conn) -> None:
    engine = sa.create_engine(url(db))
    with Session(engine) as session:
        session.execute(sa.text("insert into receipt values ('kept')"))
        assert pgsa.send(session, "orders", {"item": "kept"}, type="order.created") > 0
        session.commit()
        session.execute(sa.text("insert into receipt values ('gone')"))
        pgsa.send_batch(session, "orders", [{"item": "gone"}, {"item": "gone too"}])
        session.rollback()
    engine.dispose()
    assert received(orders) == [{"item": "kept"}]
    assert receipts(orders) == ["kept"]


def test_a_nested_savepoint_rolled_back_drops_only_its_events(db: str, orders: Conn) -> None:
    engine = sa.create_engine(url(db))
    with Session(engine) as session, session.begin():
        pgsa.send(session, "orders", {"n": 1})
        nested = session.begin_nested()
        pgsa.send(session, "orders", {"n": 2})
        nested.rollback()
        pgsa.send(session, "orders", {"n": 3})
    engine.dispose()
    assert received(orders) == [{"n": 1}, {"n": 3}]


def test_a_core_connection_and_a_pool_without_prepared_statements(db: str, orders: Conn) -> None:
    for engine in (
        sa.create_engine(url(db), connect_args={"prepare_threshold": None}, pool_size=1),
        sa.create_engine(url(db), connect_args={"prepare_threshold": None}, poolclass=NullPool),
    ):
        for n in range(3):  # the same connection again: no prepared statement is needed
            with engine.begin() as connection:
                pgsa.send(connection, "orders", {"n": n})
                pgsa.send_batch(connection, "orders", [{"n": n}], extras=[("a", None, None, None)])
        engine.dispose()
    assert received(orders) == [{"n": n} for _ in (1, 2) for n in range(3) for _ in (1, 2)]


def test_a_connection_without_a_transaction_commits_as_you_go(db: str, orders: Conn) -> None:
    engine = sa.create_engine(url(db))
    with engine.connect() as connection:
        pgsa.send(connection, "orders", {"n": "committed"})
        connection.commit()
        pgsa.send(connection, "orders", {"n": "closed without commit"})
    engine.dispose()
    assert received(orders) == [{"n": "committed"}]


def test_a_missing_queue_leaves_the_transaction_for_rollback(db: str, orders: Conn) -> None:
    engine = sa.create_engine(url(db))
    with Session(engine) as session:
        session.execute(sa.text("insert into receipt values ('x')"))
        with pytest.raises(PgqueQueueNotFound):
            pgsa.send(session, "missing", {})
        session.rollback()
    engine.dispose()
    assert receipts(orders) == []


def test_async_session(db: str, orders: Conn) -> None:
    async def main() -> None:
        engine = create_async_engine(url(db))
        async with AsyncSession(engine) as session:
            await session.execute(sa.text("insert into receipt values ('async')"))
            await pgsa.async_send(session, "orders", {"item": "async"})
            await session.commit()
            await pgsa.async_send_batch(session, "orders", [{"item": "rolled back"}])
            await session.rollback()
            async with engine.connect() as connection:
                await pgsa.async_send(connection, "orders", {"item": "core"})
                await connection.commit()
        await engine.dispose()

    asyncio.run(main())
    assert received(orders) == [{"item": "async"}, {"item": "core"}]
    assert receipts(orders) == ["async"]


def test_other_drivers_are_refused_naming_the_url_to_use(db: str, orders: Conn) -> None:
    lite = sa.create_engine("sqlite://")
    with Session(lite) as session, pytest.raises(PgqueInvalidArgument, match=r"sqlite\+pysqlite"):
        pgsa.send(session, "orders", {})

    async def on_asyncpg() -> None:
        engine = create_async_engine(url(db, "asyncpg"))
        try:
            async with AsyncSession(engine) as session:
                await pgsa.async_send(session, "orders", {})
        finally:
            await engine.dispose()

    with pytest.raises(PgqueInvalidArgument, match=r"postgresql\+asyncpg.*postgresql\+psycopg://"):
        asyncio.run(on_asyncpg())
    with pytest.raises(TypeError, match="async_send"):
        pgsa.send(AsyncSession(create_async_engine(url(db))), "orders", {})  # type: ignore[arg-type]
    assert received(orders) == []
