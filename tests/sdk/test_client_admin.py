"""The clients' admin calls against a real database: queues, dead letters, scheduler, status.

Every test runs on both clients: ``client`` is a :class:`pgque.PgqueClient`, or an
:class:`pgque.AsyncPgqueClient` whose coroutines are run to completion one call at a
time (:class:`Awaited`), so one test body checks both sides.
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import inspect
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest

import pgque
from _engine import make_queue, one, rows
from lifecycle.lifecycle_helpers import install_timetable


class Awaited:
    """An async client driven from sync code: each coroutine call runs on ``loop``."""

    def __init__(self, client: pgque.AsyncPgqueClient, loop: asyncio.AbstractEventLoop) -> None:
        self.client = client
        self.loop = loop

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.client, name)
        if not inspect.iscoroutinefunction(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            return self.loop.run_until_complete(attr(*args, **kwargs))

        return call


@contextmanager
def open_client(kind: str, dsn: str) -> Iterator[Any]:
    """A ``kind`` ("sync" or "async") client on an autocommit connection to ``dsn``."""
    if kind == "sync":
        with pgque.connect(dsn, autocommit=True) as sync_client:
            yield sync_client
        return
    loop = asyncio.new_event_loop()
    try:
        async_client = loop.run_until_complete(pgque.connect_async(dsn, autocommit=True))
        try:
            yield Awaited(async_client, loop)
        finally:
            loop.run_until_complete(async_client.close())
    finally:
        loop.close()


@pytest.fixture(params=["sync", "async"])
def client(request: pytest.FixtureRequest, db: str) -> Iterator[Any]:
    """A client on an autocommit connection to ``db``: sync, or async driven by a loop."""
    with open_client(request.param, db) as opened:
        yield opened


def queue_row(conn: psycopg.Connection[Any], queue: str) -> tuple[Any, ...]:
    """max_retries, ticker_max_lag, ticker_paused, ticker_max_count, event_ttl of a queue."""
    [row] = rows(
        conn,
        "select queue_max_retries, queue_ticker_max_lag, queue_ticker_paused,"
        " queue_ticker_max_count, queue_event_ttl from pgque.queue where queue_name = %s",
        queue,
    )
    return row


def dead_letters(client: Any, conn: psycopg.Connection[Any], n: int) -> list[int]:
    """Send ``n`` messages to queue q (consumer c, max_retries 0) and dead-letter them all
    with reasons r0, r1, ...; returns their event ids."""
    client.set_queue_config("q", "max_retries", 0)
    ids = [client.send("q", {"n": i}, type=f"t{i}") for i in range(n)]
    client.force_next_tick("q")
    client.ticker("q")
    msgs = client.receive("q", "c")
    assert [m.msg_id for m in msgs] == ids
    for i, msg in enumerate(msgs):
        client.nack(msg.batch_id, msg, retry_after=0, reason=f"r{i}")
    client.ack(msgs[0].batch_id)
    assert one(conn, "select count(*) from pgque.dead_letter") == n
    return ids


# -- queues ---------------------------------------------------------------------------


def test_create_queue_with_options(client: Any, conn: psycopg.Connection[Any]) -> None:
    assert client.create_queue("orders") == 1
    assert client.create_queue("orders") == 0
    assert queue_row(conn, "orders") == (None, timedelta(seconds=3), False, 500, None)
    options = {
        "max_retries": 3,
        "ticker_max_lag": timedelta(milliseconds=1500),
        "ticker_paused": True,
        "ticker_max_count": "50",
        "event_ttl": "1 day",
    }
    assert client.create_queue("billing", options) == 1
    expected = (3, timedelta(seconds=1.5), True, 50, timedelta(days=1))
    assert queue_row(conn, "billing") == expected
    # An existing queue gets the options applied.
    assert client.create_queue("orders", {"max_retries": 7, "ticker_paused": False}) == 0
    assert queue_row(conn, "orders")[0] == 7


@pytest.mark.parametrize(
    ("options", "message", "by_server"),
    [
        ({"max_retries": -1}, "max_retries must be >= 0", True),
        ({"no_such_setting": 1}, 'cannot change parameter "no_such_settings"', True),
        ({"ticker_max_lag": "soon"}, "invalid input syntax for type interval", True),
        ({"max_retries": [1]}, "a queue setting must be str, int, float, bool, timedelta", False),
    ],
)
def test_create_queue_bad_option_creates_nothing(
    client: Any,
    conn: psycopg.Connection[Any],
    options: dict[str, Any],
    message: str,
    by_server: bool,
) -> None:
    with pytest.raises(pgque.PgqueInvalidArgument, match=message) as caught:
        client.create_queue("orders", options)
    assert isinstance(caught.value.__cause__, psycopg.Error) is by_server
    assert one(conn, "select count(*) from pgque.queue") == 0


def test_create_queue_refuses_bad_names(client: Any, conn: psycopg.Connection[Any]) -> None:
    with pytest.raises(pgque.PgqueInvalidArgument, match="queue contains a NUL character"):
        client.create_queue("a\x00b")
    with pytest.raises(pgque.PgqueInvalidArgument):
        client.create_queue("")
    assert one(conn, "select count(*) from pgque.queue") == 0


def test_drop_queue(client: Any, conn: psycopg.Connection[Any]) -> None:
    make_queue(conn, "q")
    client.subscribe("q", "c")
    client.send("q", {"a": 1})
    with pytest.raises(pgque.PgqueOperationRefused) as caught:
        client.drop_queue("q")
    assert caught.value.code == "consumers_attached"
    assert one(conn, "select count(*) from pgque.queue") == 1
    assert client.drop_queue("q", force=True) == 1
    assert one(conn, "select count(*) from pgque.queue") == 0
    with pytest.raises(pgque.PgqueQueueNotFound):
        client.drop_queue("q")
    make_queue(conn, "empty")
    assert client.drop_queue("empty") == 1


@pytest.mark.parametrize(
    ("name", "value", "column", "stored"),
    [
        ("max_retries", 4, 0, 4),
        ("max_retries", "2", 0, 2),
        ("max_retries", None, 0, None),
        ("ticker_max_lag", timedelta(minutes=2), 1, timedelta(minutes=2)),
        ("ticker_max_lag", 0.5, 1, timedelta(seconds=0.5)),
        ("ticker_max_lag", timedelta(microseconds=1), 1, timedelta(microseconds=1)),
        ("ticker_max_lag", 1e-06, 1, timedelta(microseconds=1)),
        ("ticker_max_lag", "10 seconds", 1, timedelta(seconds=10)),
        ("ticker_max_lag", None, 1, timedelta(seconds=3)),
        ("ticker_paused", True, 2, True),
        ("ticker_paused", "on", 2, True),
        ("ticker_max_count", 10, 3, 10),
        ("event_ttl", timedelta(hours=1), 4, timedelta(hours=1)),
    ],
)
def test_set_queue_config(
    client: Any,
    conn: psycopg.Connection[Any],
    name: str,
    value: Any,
    column: int,
    stored: Any,
) -> None:
    make_queue(conn, "q", eager=False)
    client.set_queue_config("q", "max_retries", 9)
    assert client.set_queue_config("q", name, value) == 1
    assert queue_row(conn, "q")[column] == stored


def test_set_queue_config_errors(client: Any, conn: psycopg.Connection[Any]) -> None:
    make_queue(conn, "q")
    with pytest.raises(pgque.PgqueQueueNotFound):
        client.set_queue_config("missing", "max_retries", 1)
    with pytest.raises(pgque.PgqueInvalidArgument, match="ticker_max_count must be > 0"):
        client.set_queue_config("q", "ticker_max_count", 0)
    with pytest.raises(pgque.PgqueInvalidArgument, match="cannot change parameter"):
        client.set_queue_config("q", "colour", "blue")
    with pytest.raises(pgque.PgqueInvalidArgument, match="a queue setting must be"):
        client.set_queue_config("q", "max_retries", object())
    with pytest.raises(pgque.PgqueInvalidArgument, match="value contains a NUL"):
        client.set_queue_config("q", "event_ttl", "1\x00 day")


def test_pause_and_resume(client: Any, conn: psycopg.Connection[Any]) -> None:
    make_queue(conn, "q")
    client.subscribe("q", "c")
    assert client.pause_queue("q") is None
    assert queue_row(conn, "q")[2] is True
    assert client.queue_stats("q")[0].ticker_paused is True
    client.send("q", {"a": 1})
    with pytest.raises(pgque.PgqueOperationRefused) as caught:
        client.force_next_tick("q")
    assert caught.value.code == "ticker_paused"
    with pytest.raises(pgque.PgqueOperationRefused, match="Ticker has been paused"):
        client.ticker("q")
    assert client.resume_queue("q") is None
    assert queue_row(conn, "q")[2] is False
    client.force_next_tick("q")
    assert client.ticker("q") is not None
    assert [m.json() for m in client.receive("q", "c")] == [{"a": 1}]
    for call in (client.pause_queue, client.resume_queue):
        with pytest.raises(pgque.PgqueQueueNotFound):
            call("missing")


# -- dead letters ---------------------------------------------------------------------


def test_dlq_inspect(client: Any, conn: psycopg.Connection[Any], queue: str) -> None:
    assert client.dlq_inspect("q") == []
    ids = dead_letters(client, conn, 3)
    found = client.dlq_inspect("q")
    assert all(isinstance(d, pgque.DeadLetter) for d in found)
    assert [d.ev_id for d in found] == ids[::-1]  # newest first
    newest = found[0]
    queue_id, consumer_id = rows(
        conn,
        "select q.queue_id, c.co_id from pgque.queue q, pgque.consumer c"
        " where q.queue_name = 'q' and c.co_name = 'c'",
    )[0]
    assert (newest.dl_queue_id, newest.dl_consumer_id) == (queue_id, consumer_id)
    assert (newest.ev_type, newest.ev_data, newest.dl_reason) == ("t2", '{"n": 2}', "r2")
    assert newest.ev_extra1 is None and newest.ev_retry is None
    assert isinstance(newest.dl_time, datetime) and isinstance(newest.ev_time, datetime)
    assert [d.ev_id for d in client.dlq_inspect("q", 2)] == ids[:0:-1]
    assert [d.ev_id for d in client.dlq_inspect("q", limit=None)] == ids[::-1]
    assert client.dlq_inspect("q", 0) == []
    assert client.dlq_inspect("missing") == []
    with pytest.raises(pgque.PgqueInvalidArgument, match="limit_count must be >= 0"):
        client.dlq_inspect("q", -1)


def test_dlq_replay(client: Any, conn: psycopg.Connection[Any], queue: str) -> None:
    dead_letters(client, conn, 2)
    oldest = client.dlq_inspect("q")[-1]
    new_id = client.dlq_replay(oldest.dl_id)
    assert isinstance(new_id, int) and new_id > oldest.ev_id
    remaining = [d.dl_id for d in client.dlq_inspect("q")]
    assert len(remaining) == 1 and oldest.dl_id not in remaining
    client.force_next_tick("q")
    client.ticker("q")
    [msg] = client.receive("q", "c")
    assert (msg.msg_id, msg.type, msg.json()) == (new_id, "t0", {"n": 0})
    with pytest.raises(pgque.PgqueMessageNotFound) as caught:
        client.dlq_replay(oldest.dl_id)
    assert caught.value.code == "dead_letter_not_found"
    assert isinstance(caught.value.__cause__, psycopg.Error)


def test_dlq_replay_all(client: Any, conn: psycopg.Connection[Any], queue: str) -> None:
    assert client.dlq_replay_all("q") == pgque.DlqReplayResult(0, 0, None)
    dead_letters(client, conn, 3)
    assert client.dlq_replay_all("q") == pgque.DlqReplayResult(3, 0, None)
    assert client.dlq_inspect("q") == []
    client.force_next_tick("q")
    client.ticker("q")
    assert [m.type for m in client.receive("q", "c")] == ["t0", "t1", "t2"]  # oldest first


def test_dlq_replay_all_counts_failures(
    client: Any, conn: psycopg.Connection[Any], queue: str
) -> None:
    dead_letters(client, conn, 2)
    client.set_queue_config("q", "disable_insert", True)  # replays fail: no inserts
    result = client.dlq_replay_all("q")
    assert (result.replayed, result.failed) == (0, 2)
    assert result.first_error is not None and result.first_error.startswith("dl_id=")
    assert len(client.dlq_inspect("q")) == 2


def test_dlq_purge(client: Any, conn: psycopg.Connection[Any], queue: str) -> None:
    dead_letters(client, conn, 3)
    conn.execute(
        "update pgque.dead_letter set dl_time = now() - interval '40 days'"
        " where dl_id = (select min(dl_id) from pgque.dead_letter)"
    )
    assert client.dlq_purge("q") == 1  # older than 30 days
    assert client.dlq_purge("q", timedelta(hours=1)) == 0
    assert len(client.dlq_inspect("q")) == 2
    assert client.dlq_purge("q", 0) == 2
    assert client.dlq_purge("missing", 0) == 0
    with pytest.raises(pgque.PgqueInvalidArgument, match="older_than must be a non-negative"):
        client.dlq_purge("q", -5)
    with pytest.raises(pgque.PgqueInvalidArgument, match="older_than is out of range"):
        client.dlq_purge("q", float("inf"))
    with pytest.raises(pgque.PgqueInvalidArgument, match="older_than must be a timedelta"):
        client.dlq_purge("q", "30 days")


# -- scheduler ------------------------------------------------------------------------


def test_scheduler_without_pg_cron_or_pg_timetable(
    client: Any, conn: psycopg.Connection[Any]
) -> None:
    for call in (client.start_scheduler, client.start_timetable):
        with pytest.raises(pgque.PgqueOperationRefused) as caught:
            call()
        assert caught.value.code == "scheduler_missing"
    assert client.stop_scheduler() is None  # harmless with nothing scheduled
    assert one(conn, "select scheduler from pgque.config") is None


def test_start_timetable_and_stop(client: Any, conn: psycopg.Connection[Any]) -> None:
    install_timetable(conn)
    with pytest.raises(pgque.PgqueInvalidArgument, match="ticks_per_second"):
        client.start_timetable(7)
    assert client.start_timetable(20) is None
    assert rows(conn, "select scheduler, tick_period_ms from pgque.config") == [
        ("pg_timetable", 50)
    ]
    assert one(conn, "select count(*) from timetable.chain") == 5
    status = {s.component: s for s in client.status()}
    assert status["scheduler"].status == "pg_timetable"
    assert status["ticker"].status == "scheduled"
    assert client.stop_scheduler() is None
    assert one(conn, "select count(*) from timetable.chain") == 0
    assert {s.component: s.status for s in client.status()}["ticker"] == "stopped"


# -- status ---------------------------------------------------------------------------


def test_status(client: Any, conn: psycopg.Connection[Any]) -> None:
    make_queue(conn, "q")
    rows_ = client.status()
    assert all(isinstance(r, pgque.ComponentStatus) for r in rows_)
    by_name = {r.component: r for r in rows_}
    assert by_name["pgque"].detail == pgque.__version__
    assert by_name["scheduler"].status == "manual"
    assert (by_name["ticker"].status, by_name["maintenance"].status) == ("stopped", "stopped")
    assert by_name["queues"].detail == "1 queues configured"
    assert [dataclasses.asdict(r) for r in rows_] == [
        dict(zip(("component", "status", "detail"), r, strict=True))
        for r in rows(conn, "select * from pgque.status()")
    ]


def test_queue_stats(client: Any, conn: psycopg.Connection[Any], queue: str) -> None:
    make_queue(conn, "other")
    stats = client.queue_stats()
    assert [s.queue_name for s in stats] == ["other", "q"]
    # Every column of the function, by name (the CLI's JSON is made of them).
    columns = [d.name for d in conn.execute("select * from pgque.queue_stats()").description or ()]
    assert list(dataclasses.asdict(stats[0])) == columns
    client.send_batch("q", "t", [{"i": i} for i in range(4)])
    client.force_next_tick("q")
    client.ticker("q")
    [one_queue] = client.queue_stats("q")
    assert isinstance(one_queue, pgque.QueueStats)
    depth = one(conn, "select depth from pgque.queue_stats() where queue_name = 'q'")
    assert depth >= 4  # an estimate from the event sequence
    assert (one_queue.queue_name, one_queue.depth, one_queue.consumers) == ("q", depth, 1)
    assert one_queue.ticker_paused is False and one_queue.dlq_count == 0
    assert isinstance(one_queue.oldest_msg_age, timedelta)
    assert one_queue.events_per_sec is None or isinstance(one_queue.events_per_sec, Decimal)
    assert client.queue_stats("missing") == []


def test_consumer_stats(client: Any, conn: psycopg.Connection[Any], queue: str) -> None:
    make_queue(conn, "other")
    client.subscribe("other", "z")
    client.subscribe("q", "b")
    assert [(s.queue_name, s.consumer_name) for s in client.consumer_stats()] == [
        ("other", "z"), ("q", "b"), ("q", "c"),
    ]  # fmt: skip
    client.send("q", {"a": 1})
    client.force_next_tick("q")
    client.ticker("q")
    [msg] = client.receive("q", "c")
    by_name = {s.consumer_name: s for s in client.consumer_stats("q")}
    assert set(by_name) == {"b", "c"}
    c = by_name["c"]
    assert isinstance(c, pgque.ConsumerStats)
    pending = one(
        conn, "select pending_events from pgque.consumer_stats() where consumer_name = 'c'"
    )
    assert (c.batch_active, c.batch_id, c.pending_events) == (True, msg.batch_id, pending)
    assert isinstance(c.lag, timedelta) and isinstance(c.last_batch_start, datetime)
    assert (by_name["b"].batch_active, by_name["b"].batch_id) == (False, None)
    assert client.consumer_stats("missing") == []
    columns = [
        d.name for d in conn.execute("select * from pgque.consumer_stats()").description or ()
    ]
    assert list(dataclasses.asdict(c)) == columns


def test_queue_health(client: Any, conn: psycopg.Connection[Any], queue: str) -> None:
    checks = client.queue_health()
    assert all(isinstance(c, pgque.HealthCheck) for c in checks)
    names = {(c.queue, c.name) for c in checks}
    assert {("q", "ticker_running"), ("q", "consumer_lag:c"), ("q", "dlq_health")} <= names
    assert [(c.queue, c.name, c.status) for c in checks] == rows(
        conn, "select queue_name, check_name, status from pgque.queue_health()"
    )


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_status_calls_raise_where_pgque_is_missing(kind: str, empty_db: str) -> None:
    """Unlike health(), the status calls raise (mapped and chained) when they cannot read."""
    with open_client(kind, empty_db) as client:
        for name in ("status", "queue_stats", "consumer_stats", "queue_health", "dlq_inspect"):
            args = ("q",) if name == "dlq_inspect" else ()
            with pytest.raises(pgque.PgqueError) as caught:
                getattr(client, name)(*args)
            assert isinstance(caught.value.__cause__, psycopg.errors.InvalidSchemaName)
        assert client.health().notes[0].startswith("pgque_health_unavailable")


# -- one home for the SQL -------------------------------------------------------------

SRC = Path(pgque.__file__).parent
# A string constant that starts like a statement (lower case, as all of pgque's SQL).
SQL_TEXT = re.compile(
    r"^\s*(select|insert|update|delete|copy|set|show|vacuum|listen|create|drop|alter|with"
    r"|begin|commit|rollback|call|do)\s+\S"
)
# Modules still holding SQL text of their own, and why.
SQL_ALLOWED = {
    "installer.py": "reads the installed version before pgque's functions may exist",
}


def sql_literals(source: str) -> list[tuple[int, str]]:
    """The string constants of a module's source (docstrings aside) that look like SQL."""
    tree = ast.parse(source)
    docstrings = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and SQL_TEXT.match(node.value)
    ]


def test_sql_text_lives_in_queries_sql() -> None:
    found = {
        f"{path.relative_to(SRC)}:{line}": text[:60]
        for path in sorted(SRC.rglob("*.py"))
        if path.name not in SQL_ALLOWED
        for line, text in sql_literals(path.read_text(encoding="utf-8"))
    }
    assert found == {}, "SQL text outside pgque/sql/queries.sql"
    sample = 'def f(conn):\n    """Select the rows."""\n    conn.execute("select 1")\n'
    assert sql_literals(sample) == [(3, "select 1")]  # the check sees SQL where there is some


def test_every_named_statement_is_used() -> None:
    """No dead statement in queries.sql: each name appears as a string in the package."""
    names = re.findall(r"^-- name: (\w+)\s*$", (SRC / "sql" / "queries.sql").read_text(), re.M)
    assert len(names) == len(set(names)) and "create_queue" in names
    code = "\n".join(p.read_text(encoding="utf-8") for p in SRC.rglob("*.py"))
    assert [n for n in names if f'"{n}"' not in code] == []
