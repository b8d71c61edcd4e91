"""Waiting for notifications on the socket (``_compat`` and ``_acompat``), as the
Ticker and the consumers' listening connections do."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import psycopg

from pgque import _acompat, _compat


def _notify_later(dsn: str, channel: str, delay: float) -> threading.Thread:
    def notify() -> None:
        time.sleep(delay)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"notify {channel}, 'hello'")

    thread = threading.Thread(target=notify)
    thread.start()
    return thread


def test_sync_wait_returns_a_notification_sent_while_waiting(db: str, connect: Any) -> None:
    listener = connect()
    listener.execute("listen pgque_wait_test")
    sender = _notify_later(db, "pgque_wait_test", 0.2)
    notes = _compat.notifications(listener, 30.0)
    sender.join()
    assert [(n.channel, n.payload) for n in notes] == [("pgque_wait_test", "hello")]


def test_sync_wait_returns_one_received_before_at_once(db: str, connect: Any) -> None:
    listener = connect()
    listener.execute("listen pgque_wait_test")
    connect().execute("notify pgque_wait_test, 'early'")
    listener.execute("select 1")  # the notification arrives with this result
    notes = _compat.notifications(listener, 30.0)
    assert [n.payload for n in notes] == ["early"]


def test_sync_wait_ends_empty_after_the_timeout(connect: Any) -> None:
    listener = connect()
    listener.execute("listen pgque_wait_test")
    assert _compat.notifications(listener, 0.05) == []
    assert _compat.notifications(listener, 0) == []


def test_sync_wait_raises_when_the_connection_breaks(connect: Any) -> None:
    listener = connect()
    listener.execute("listen pgque_wait_test")
    connect().execute("select pg_terminate_backend(%s)", (listener.info.backend_pid,))
    try:
        for _ in range(50):  # the first wait may see the socket's end only
            _compat.notifications(listener, 1.0)
    except psycopg.OperationalError:
        return
    raise AssertionError("a broken connection went unnoticed")


def test_async_wait_returns_notifications_and_times_out(db: str) -> None:
    async def run() -> tuple[list[str], list[str], list[str]]:
        async with await psycopg.AsyncConnection.connect(db, autocommit=True) as listener:
            await listener.execute("listen pgque_wait_test")
            sender = _notify_later(db, "pgque_wait_test", 0.2)
            waited = await _acompat.notifications(listener, 30.0)
            await asyncio.to_thread(sender.join)
            async with await psycopg.AsyncConnection.connect(db, autocommit=True) as other:
                await other.execute("notify pgque_wait_test, 'early'")
            await listener.execute("select 1")
            early = await _acompat.notifications(listener, 30.0)
            empty = await _acompat.notifications(listener, 0.05)
            return (
                [n.payload for n in waited],
                [n.payload for n in early],
                [n.payload for n in empty],
            )

    assert asyncio.run(run()) == (["hello"], ["early"], [])
