"""Consumer: dispatch, nack policy, waking up, stopping, surviving database errors.

Ticks are driven explicitly (``ticker=False``, ``force_next_tick`` + ``ticker``);
deadlines bound every wait.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

import pgque
from _engine import one, rows


def tick(conn: psycopg.Connection[Any]) -> None:
    one(conn, "select pgque.force_next_tick('q')")
    one(conn, "select pgque.ticker('q')")


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail("condition not met before the deadline")
        time.sleep(0.02)


@pytest.fixture
def run() -> Iterator[Callable[[pgque.Consumer], threading.Thread]]:
    """Start consumers in threads; stop and join them all at teardown."""
    started: list[tuple[pgque.Consumer, threading.Thread]] = []

    def run(consumer: pgque.Consumer) -> threading.Thread:
        thread = threading.Thread(target=consumer.start, daemon=True)
        thread.start()
        started.append((consumer, thread))
        return thread

    yield run
    for consumer, thread in started:
        consumer.stop()
        thread.join(5)
        assert not thread.is_alive(), "a consumer did not stop within 5 s"


def make(db: str, **kwargs: Any) -> pgque.Consumer:
    kwargs.setdefault("ticker", False)
    return pgque.Consumer(db, queue="q", name="c", **kwargs)


def test_constructor_checks_and_stores() -> None:
    c = pgque.Consumer("dbname=x", queue="q", name="c")
    assert (c.poll_interval, c.max_messages, c.retry_after) == (30, 2_147_483_647, 60)
    assert pgque.Consumer("dbname=x", queue="q", name="c", max_messages=123).max_messages == 123
    with pytest.raises(ValueError, match="unknown_handler_policy"):
        pgque.Consumer("dbname=x", queue="q", name="c", unknown_handler_policy="drop")
    with pytest.raises(ValueError, match="dead_interval needs subconsumer"):
        pgque.Consumer("dbname=x", queue="q", name="c", dead_interval="1 minute")


def test_handlers_by_type_and_catch_all(
    db: str, conn: psycopg.Connection[Any], queue: str, run: Any
) -> None:
    consumer = make(db, poll_interval=30)
    got: list[tuple[str, Any]] = []

    @consumer.on("order.created")
    def created(msg: pgque.Message) -> None:
        got.append(("created", msg.json()))

    @consumer.on("*")
    def anything(msg: pgque.Message) -> None:
        got.append(("any", msg.type))

    assert created.__name__ == "created"
    one(conn, "select pgque.send('q', 'order.created', '{\"id\": 1}'::jsonb)")
    one(conn, "select pgque.send('q', 'other', '{}'::jsonb)")
    tick(conn)
    run(consumer)
    wait_for(lambda: len(got) == 2)
    assert got == [("created", {"id": 1}), ("any", "other")]
    wait_for(lambda: one(conn, "select sub_batch is null from pgque.subscription"))


def test_failing_handler_nacks_with_retry_after(
    db: str, conn: psycopg.Connection[Any], queue: str, run: Any
) -> None:
    consumer = make(db, retry_after=0)
    calls: list[int | None] = []

    @consumer.on("*")
    def flaky(msg: pgque.Message) -> None:
        calls.append(msg.retry_count)
        if msg.retry_count is None:
            raise RuntimeError("first try fails")

    one(conn, "select pgque.send('q', '{}'::jsonb)")
    tick(conn)
    run(consumer)
    wait_for(lambda: one(conn, "select count(*) from pgque.retry_queue") == 1)
    one(conn, "select pgque.maint()")
    tick(conn)
    wait_for(lambda: calls == [None, 1])


@pytest.mark.parametrize("policy", ["nack", "ack"])
def test_unknown_type_policy(
    db: str, conn: psycopg.Connection[Any], queue: str, run: Any, policy: str,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    caplog.set_level(logging.WARNING, logger="pgque")
    consumer = make(db, unknown_handler_policy=policy)
    one(conn, "select pgque.send('q', 'mystery', '{}'::jsonb)")
    tick(conn)
    run(consumer)
    wait_for(
        lambda: one(conn, "select sub_batch is null and sub_last_tick > 1 from pgque.subscription")
    )
    retried = rows(conn, "select ev_type from pgque.retry_queue")
    assert retried == ([("mystery",)] if policy == "nack" else [])
    assert any("no handler for event type=mystery" in r.getMessage() for r in caplog.records)


def test_stale_ack_is_logged(
    db: str, conn: psycopg.Connection[Any], queue: str, run: Any,
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    caplog.set_level(logging.WARNING, logger="pgque")
    real_init = pgque.PgqueClient.__init__

    def init(self: Any, conn_: Any) -> None:
        real_init(self, conn_)
        self.ack = lambda batch_id: 0

    monkeypatch.setattr(pgque.PgqueClient, "__init__", init)
    consumer = make(db)
    consumer.on("*")(lambda msg: None)
    one(conn, "select pgque.send('q', '{}'::jsonb)")
    tick(conn)
    run(consumer)
    wait_for(lambda: any("stale" in r.getMessage() for r in caplog.records))


def test_notify_wakes_a_waiting_consumer(
    db: str, conn: psycopg.Connection[Any], queue: str, run: Any
) -> None:
    consumer = make(f"{db} application_name=waker", poll_interval=30)
    got: list[int] = []
    consumer.on("*")(lambda msg: got.append(msg.msg_id))
    run(consumer)
    # Its first poll found nothing (committed an empty receive); it is listening.
    waiting = (
        "select count(*) from pg_stat_activity where application_name = 'waker'"
        " and state = 'idle' and query in ('COMMIT', 'listen \"pgque_q\"')"
    )
    wait_for(lambda: one(conn, waiting) == 2)
    one(conn, "select pgque.send('q', '{}'::jsonb)")
    started = time.monotonic()
    tick(conn)
    wait_for(lambda: got != [], timeout=5)
    assert time.monotonic() - started < 5


def test_polls_without_listen(db: str, conn: psycopg.Connection[Any], queue: str, run: Any) -> None:
    consumer = make(db, poll_interval=0.2, listen=False)
    got: list[int] = []
    consumer.on("*")(lambda msg: got.append(msg.msg_id))
    run(consumer)
    one(conn, "select pgque.send('q', '{}'::jsonb)")
    tick(conn)
    wait_for(lambda: got != [], timeout=5)


def test_stop_is_prompt(db: str, queue: str) -> None:
    consumer = make(db, poll_interval=30)
    thread = threading.Thread(target=consumer.start)
    thread.start()
    time.sleep(0.3)
    started = time.monotonic()
    consumer.stop()
    thread.join(5)
    assert not thread.is_alive() and time.monotonic() - started < 2


def test_survives_a_terminated_backend(
    db: str, conn: psycopg.Connection[Any], queue: str, run: Any
) -> None:
    dsn = f"{db} application_name=victim"
    consumer = pgque.Consumer(dsn, queue="q", name="c", poll_interval=30, ticker=False)
    got: list[int] = []
    consumer.on("*")(lambda msg: got.append(msg.msg_id))
    thread = run(consumer)
    wait_for(lambda: one(conn, "select count(*) from pg_stat_activity"
                               " where application_name = 'victim'") >= 1)  # fmt: skip
    conn.execute(
        "select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'victim'"
    )
    one(conn, "select pgque.send('q', '{}'::jsonb)")
    tick(conn)
    wait_for(lambda: got != [], timeout=10)
    assert thread.is_alive()


def test_receive_errors_never_end_the_loop(
    db: str, conn: psycopg.Connection[Any], queue: str, run: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    real_receive = pgque.PgqueClient.receive
    failures = [1]

    def receive(self: Any, *args: Any) -> Any:
        if failures:
            failures.pop()
            raise pgque.PgqueError("boom")
        return real_receive(self, *args)

    monkeypatch.setattr(pgque.PgqueClient, "receive", receive)
    consumer = make(db, poll_interval=1)
    got: list[int] = []
    consumer.on("*")(lambda msg: got.append(msg.msg_id))
    one(conn, "select pgque.send('q', '{}'::jsonb)")
    tick(conn)
    run(consumer)
    wait_for(lambda: got != [], timeout=10)


def test_poll_once_calls_receive_positionally(
    db: str, queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[Any, ...]] = []

    def receive(self: Any, *args: Any, **kwargs: Any) -> list[Any]:
        calls.append((args, kwargs))
        return []

    monkeypatch.setattr(pgque.PgqueClient, "receive", receive)
    with psycopg.connect(db, autocommit=True) as conn:
        assert make(db)._poll_once(conn) is None
        assert make(db, max_messages=123)._poll_once(conn) is None
    assert calls == [(("q", "c", 2_147_483_647), {}), (("q", "c", 123), {})]


def test_same_name_consumers_never_share_a_batch(
    db: str, conn: psycopg.Connection[Any], queue: str, run: Any
) -> None:
    seen: list[tuple[int, int]] = []
    lock = threading.Lock()

    def handler(msg: pgque.Message) -> None:
        with lock:
            seen.append((msg.batch_id, msg.msg_id))
        time.sleep(0.05)

    for _ in range(2):
        consumer = make(db, poll_interval=0.2)
        consumer.on("*")(handler)
        run(consumer)
    for i in range(10):
        one(conn, "select pgque.send('q', %s::jsonb)", str(i))
        tick(conn)
    wait_for(lambda: len(seen) >= 10, timeout=20)
    msg_ids = [m for _, m in seen]
    assert sorted(msg_ids) == sorted(set(msg_ids))  # nobody saw a message twice


def test_cooperative_members_split_the_stream(
    db: str, conn: psycopg.Connection[Any], run: Any
) -> None:
    one(conn, "select pgque.create_queue('q')")
    one(conn, "select pgque.set_queue_config('q', 'ticker_max_lag', '0')")
    for sub in ("a", "b"):
        one(conn, "select pgque.subscribe_subconsumer('q', 'g', %s)", sub)
    seen: dict[str, list[int]] = {"a": [], "b": []}
    for sub in ("a", "b"):
        consumer = pgque.Consumer(db, queue="q", name="g", subconsumer=sub, poll_interval=0.2,
                                  ticker=False)  # fmt: skip
        consumer.on("*")(lambda msg, sub=sub: seen[sub].append(msg.msg_id))
        run(consumer)
    sent = []
    for i in range(20):
        sent.append(one(conn, "select pgque.send('q', %s::jsonb)", str(i)))
        tick(conn)
    wait_for(lambda: len(seen["a"]) + len(seen["b"]) >= 20, timeout=20)
    assert sorted(seen["a"] + seen["b"]) == sorted(sent)
