"""The batch's connection lost while a handler runs (a failover, a restart, a terminated
backend): the batch stops at the first failed statement, no further handler runs on
that connection, one WARNING line is logged, and after the reconnect every message is
handled (transactional handlers' writes exactly once)."""

from __future__ import annotations

import contextlib
import inspect
import logging
from typing import Any

import psycopg
import pytest
from twins import force_tick, handle, make

from _engine import rows
from _wait import wait_for

N = 10


async def _quietly(write: Any) -> None:
    with contextlib.suppress(psycopg.OperationalError):
        await write


def _terminate(db: str, pid: int) -> None:
    """Terminate backend ``pid`` and wait until it is gone."""
    with psycopg.connect(db, autocommit=True) as other:
        other.execute("select pg_terminate_backend(%s)", (pid,))
        gone = "select not exists (select from pg_stat_activity where pid = %s)"
        wait_for(lambda: rows(other, gone, pid)[0][0], what=f"backend {pid} gone")


# "mixed": plain and transactional handlers in turn, the transactional one
# swallowing the lost connection's error (the next handler must not run either).
@pytest.mark.parametrize("types", ["transactional", "mixed"])
def test_a_lost_connection_stops_the_batch_with_one_warning(
    kind: str, types: str, db: str, conn: psycopg.Connection[Any], queue: str, start: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    caplog.set_level(logging.DEBUG, logger="pgque")
    conn.execute("create table done (msg_id bigint primary key)")  # a second write fails
    for i in range(N):
        msg_type = "p" if types == "mixed" and i % 2 else "t"
        conn.execute("select pgque.send('q', %s, '{}'::jsonb)", (msg_type,))
    force_tick(conn)
    consumer = make(kind, db, poll_interval=0.05, listen=False)
    calls: list[tuple[int, int | None]] = []  # (msg_id, backend pid; None: plain)

    swallow = types == "mixed"  # this handler hides the lost connection's error

    def transactional(msg: Any, batch_conn: Any) -> Any:
        pid = batch_conn.info.backend_pid
        calls.append((msg.msg_id, pid))
        if len(calls) == 1:
            _terminate(db, pid)  # the backend dies under the handler
        try:
            written = batch_conn.execute("insert into done values (%s)", (msg.msg_id,))
        except psycopg.OperationalError:
            if swallow:
                return None
            raise
        return _quietly(written) if swallow and inspect.isawaitable(written) else written

    handle(consumer, transactional, "t", transactional=True)
    handle(consumer, lambda msg: calls.append((msg.msg_id, None)), "p")
    start(consumer)
    writes = N // 2 if types == "mixed" else N
    wait_for(lambda: rows(conn, "select count(*) from done")[0][0] == writes
             and len({m for m, _ in calls}) == N and consumer.reconnects == 1,
             what="every message handled after one reconnect")  # fmt: skip
    wait_for(lambda: rows(conn, "select sub_batch is null from pgque.subscription")[0][0],
             what="the batch acked")  # fmt: skip
    dead = calls[0][1]
    assert [m for m, pid in calls[1:] if pid == dead] == [], "a handler ran on the dead connection"
    assert calls[1][0] == calls[0][0], f"handlers ran after the failure: {calls}"
    assert len(calls) == N + 1, calls  # the failed call, then the batch again, once
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.levelno for r in loud] == [logging.WARNING], [r.getMessage() for r in loud]
    assert loud[0].exc_info is None, "the warning carries a traceback"
    assert "\n" not in loud[0].getMessage()
    assert rows(conn, "select count(*) from pgque.dead_letter")[0][0] == 0
