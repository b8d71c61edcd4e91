"""Sending from SQLAlchemy 2 code, on the session's own connection and transaction.

With an engine on the psycopg (3) driver (``postgresql+psycopg://...``),
:func:`send` and :func:`send_batch` write the message through the DBAPI
connection the :class:`~sqlalchemy.orm.Session` (or
:class:`~sqlalchemy.engine.Connection`) already holds: it commits or rolls
back with the session's writes (a ``begin_nested()`` savepoint too), with
no second connection. :func:`async_send` and :func:`async_send_batch` do
the same for :class:`~sqlalchemy.ext.asyncio.AsyncSession` and
:class:`~sqlalchemy.ext.asyncio.AsyncConnection`. Other drivers (psycopg2,
asyncpg, ...) are refused with :class:`~pgque.errors.PgqueInvalidArgument`
saying what to change.

Install with ``pip install '.[sqlalchemy]'`` from a clone (for asyncio,
SQLAlchemy's ``asyncio`` extra too: ``pip install 'sqlalchemy[asyncio]'``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import psycopg

try:
    from sqlalchemy.engine import Connection
    from sqlalchemy.orm import Session
except ImportError as exc:
    raise ImportError(
        f"pgque.sqlalchemy needs SQLAlchemy 2 ({exc}); install it from the pgque clone"
        " with: pip install '.[sqlalchemy]'"
    ) from exc

from pgque.async_producer import AsyncProducer
from pgque.errors import PgqueInvalidArgument
from pgque.producer import Extras, Producer

if TYPE_CHECKING:  # imported when used: SQLAlchemy's asyncio needs greenlet
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

__all__ = ["async_send", "async_send_batch", "send", "send_batch"]

_SYNC_DRIVERS = {"psycopg"}
_ASYNC_DRIVERS = {"psycopg", "psycopg_async"}


def _check_driver(conn: Connection | AsyncConnection, drivers: set[str]) -> None:
    dialect = conn.dialect
    if dialect.name == "postgresql" and dialect.driver in drivers:
        return
    raise PgqueInvalidArgument(
        f"pgque.sqlalchemy needs PostgreSQL on the psycopg (3) driver; this engine is"
        f" {dialect.name}+{dialect.driver}: create it with a 'postgresql+psycopg://' URL"
        " (pip install 'psycopg[binary]')"
    )


def _sync_connection(bind: Session | Connection) -> psycopg.Connection[Any]:
    """The psycopg connection under a session or connection, in its transaction."""
    if isinstance(bind, Session):
        conn = bind.connection()  # begins the session's transaction if none is open
    elif isinstance(bind, Connection):
        conn = bind
        if not conn.in_transaction():
            conn.begin()  # as SQLAlchemy's own execute() would: commit() then commits it
    else:
        raise TypeError(
            "pgque.sqlalchemy.send needs a sqlalchemy.orm.Session or a sqlalchemy Connection,"
            f" got {type(bind).__name__} (for AsyncSession use pgque.sqlalchemy.async_send)"
        )
    _check_driver(conn, _SYNC_DRIVERS)
    raw = conn.connection.driver_connection
    if not isinstance(raw, psycopg.Connection):
        raise PgqueInvalidArgument(
            f"the session's driver connection is a {type(raw).__name__}, not a"
            " psycopg.Connection: use a 'postgresql+psycopg://' engine"
        )
    return raw


async def _async_connection(bind: AsyncSession | AsyncConnection) -> psycopg.AsyncConnection[Any]:
    """The psycopg async connection under an async session or connection."""
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

    if isinstance(bind, AsyncSession):
        conn = await bind.connection()
    elif isinstance(bind, AsyncConnection):
        conn = bind
        if not conn.in_transaction():
            await conn.begin()
    else:
        raise TypeError(
            "pgque.sqlalchemy.async_send needs an AsyncSession or an AsyncConnection,"
            f" got {type(bind).__name__} (for a Session use pgque.sqlalchemy.send)"
        )
    _check_driver(conn, _ASYNC_DRIVERS)
    raw = (await conn.get_raw_connection()).driver_connection
    if not isinstance(raw, psycopg.AsyncConnection):
        raise PgqueInvalidArgument(
            f"the session's driver connection is a {type(raw).__name__}, not a"
            " psycopg.AsyncConnection: use create_async_engine('postgresql+psycopg://...')"
        )
    return raw


def send(
    bind: Session | Connection,
    queue: str,
    payload: Any,
    *,
    type: str = "default",
    extras: Extras | None = None,
) -> int:
    """Send one message in the transaction of ``bind``; returns its event id.

    Args:
        bind: A :class:`~sqlalchemy.orm.Session` or :class:`~sqlalchemy.engine.Connection`
            on a ``postgresql+psycopg`` engine.
        queue: The queue.
        payload: The message, encoded as JSON.
        type: The message type. Defaults to ``"default"``.
        extras: ``(extra1, extra2, extra3, extra4)``, or None.

    Raises:
        PgqueInvalidArgument: Another driver than psycopg 3, or a bad argument.
        PgqueQueueNotFound: No such queue.
    """
    return Producer(_sync_connection(bind)).send(queue, payload, type=type, extras=extras)


def send_batch(
    bind: Session | Connection,
    queue: str,
    payloads: Iterable[Any],
    *,
    type: str = "default",
    types: Sequence[str | None] | None = None,
    extras: Sequence[Extras | None] | None = None,
) -> list[int]:
    """Send many messages in one statement in the transaction of ``bind``; returns their
    event ids in input order (all or none are sent).

    Args:
        bind: A Session or Connection on a ``postgresql+psycopg`` engine.
        queue: The queue.
        payloads: The messages.
        type: The type of every message without one in ``types``.
        types: One type per payload (None: ``type``), or None.
        extras: One 4-tuple (or None) per payload, or None.
    """
    producer = Producer(_sync_connection(bind))
    return producer.send_batch(queue, payloads, type=type, types=types, extras=extras)


async def async_send(
    bind: AsyncSession | AsyncConnection,
    queue: str,
    payload: Any,
    *,
    type: str = "default",
    extras: Extras | None = None,
) -> int:
    """:func:`send` for an :class:`~sqlalchemy.ext.asyncio.AsyncSession` or
    :class:`~sqlalchemy.ext.asyncio.AsyncConnection`; returns the event id."""
    producer = AsyncProducer(await _async_connection(bind))
    return await producer.send(queue, payload, type=type, extras=extras)


async def async_send_batch(
    bind: AsyncSession | AsyncConnection,
    queue: str,
    payloads: Iterable[Any],
    *,
    type: str = "default",
    types: Sequence[str | None] | None = None,
    extras: Sequence[Extras | None] | None = None,
) -> list[int]:
    """:func:`send_batch` for an AsyncSession or AsyncConnection; returns the event ids."""
    producer = AsyncProducer(await _async_connection(bind))
    return await producer.send_batch(queue, payloads, type=type, types=types, extras=extras)
