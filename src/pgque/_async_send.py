"""The one send path, its I/O: running a send planned by :mod:`pgque._send_plan` on a
connection, for the clients and the producers alike, and the look at a queue's
consumers after the first send to it.
"""

from __future__ import annotations

from typing import Any

import psycopg

from pgque._async_executor import fetch_value
from pgque._producer_common import NoConsumerWarning
from pgque._send_plan import Statement
from pgque.errors import PgqueError

__all__ = ["deliver", "look_for_consumers", "run"]


async def run(
    conn: psycopg.AsyncConnection[Any], statement: Statement, *, prepare: bool | None = None
) -> Any:
    """The value the statement returns (an event id, or the batch's ids); its errors as
    :meth:`Statement.error <pgque._send_plan.Statement.error>` says."""
    try:
        return await fetch_value(
            conn, statement.name, statement.params, prepare=prepare, binary=statement.binary
        )
    except PgqueError as exc:
        mapped = statement.error(exc, prepared=bool(prepare))
        if mapped is exc:
            raise
        raise mapped from exc.__cause__


async def look_for_consumers(
    conn: psycopg.AsyncConnection[Any],
    check: NoConsumerWarning,
    queue: str,
    *,
    prepare: bool | None = None,
) -> None:
    """After the first send to ``queue``: warn if nobody is subscribed to it
    (:class:`~pgque._producer_common.NoConsumerWarning`); nothing on later sends.
    ``prepare=False`` keeps the statements, run once per queue, unprepared."""
    if not check.needed(queue):
        return
    if check.readable is None:
        may = await fetch_value(conn, "may_count_consumers", None, prepare=prepare)
        check.may_read(bool(may))
        if not check.readable:
            return
    count = await fetch_value(conn, "queue_consumer_count", (queue,), prepare=prepare)
    check.counted(queue, int(count))


async def deliver(
    conn: psycopg.AsyncConnection[Any],
    statement: Statement,
    check: NoConsumerWarning,
    *,
    prepare: bool | None = None,
) -> Any:
    """:func:`run` the send, then :func:`look_for_consumers` of its queue (unprepared
    where the send chose to prepare or not; as psycopg decides where it left that open,
    as the clients do: upstream pgque-py's tests give them connections whose
    ``execute`` takes no options)."""
    value = await run(conn, statement, prepare=prepare)
    look = None if prepare is None else False
    await look_for_consumers(conn, check, statement.queue, prepare=look)
    return value
