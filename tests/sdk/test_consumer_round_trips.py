"""A plain consumer's batch takes two round trips: one opens it, one acks and commits it.

Counted from libpq's own trace of the connection (``PQtrace``): every round
trip ends with a ``Query`` (simple protocol) or a ``Sync`` (extended) sent
by the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
from psycopg import pq
from twins import batch_done, force_tick, handle, make

from _engine import one


@contextlib.contextmanager
def traced(pgconn: Any, path: Path) -> Iterator[None]:
    """libpq's trace of ``pgconn``'s messages into ``path`` while inside."""
    with path.open("w") as out:
        pgconn.trace(out.fileno())
        pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            yield
        finally:
            pgconn.untrace()


def round_trips(trace: Path) -> list[str]:
    """The client's messages that end a round trip (``Query``, ``Sync``): their last words."""
    ends = []
    for line in trace.read_text().splitlines():
        fields = line.split("\t")
        if len(fields) >= 3 and fields[0] == "F" and fields[2].split(" ")[0] in ("Query", "Sync"):
            ends.append(" ".join(fields[2:])[-60:])
    return ends


def test_a_batch_is_opened_and_acked_in_one_round_trip_each(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, tmp_path: Path
) -> None:
    consumer = make(kind, db)
    got: list[int] = []
    handle(consumer, lambda msg: got.append(msg.msg_id))
    sent = one(conn, "select pgque.send('q', '{}'::jsonb)")
    force_tick(conn)
    trace = tmp_path / "libpq.trace"

    async def apoll() -> Any:
        async with await psycopg.AsyncConnection.connect(db, autocommit=True) as c:
            await consumer.prepare(c)
            with traced(c.pgconn, trace):
                return await consumer.poll(c)

    if kind == "async":
        count = asyncio.run(apoll())
    else:
        with psycopg.connect(db, autocommit=True) as c:
            consumer.prepare(c)
            with traced(c.pgconn, trace):
                count = consumer.poll(c)
    assert (count, got) == (1, [sent])
    assert batch_done(conn)
    trips = round_trips(trace)
    assert len(trips) == 2, trips  # open (BEGIN; receive), then ack; COMMIT
    assert "pgque.ack(" in trips[1], trips
    # The ack's query carries the COMMIT (the trace breaks its text at the newline).
    assert re.search(r'pgque\.ack\(\d+\);\s*commit"', trace.read_text()), trace.read_text()
