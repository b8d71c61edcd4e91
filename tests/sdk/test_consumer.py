"""The consumer twins: dispatch, nack policy, waking up, stopping, surviving database errors.

Every test runs against :class:`pgque.Consumer` and :class:`pgque.AsyncConsumer`
(the ``kind`` fixture). Ticks are driven explicitly (``ticker=False``,
``force_next_tick`` + ``ticker``); deadlines bound every wait.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from typing import Any

import psycopg
import pytest
from twins import batch_done, force_tick, handle, make, opener_class, pause

import pgque
from _engine import one, rows
from _wait import wait_for


def test_constructor_checks_and_stores(kind: str) -> None:
    c = make(kind, "dbname=x", ticker="auto")
    assert (c.poll_interval, c.max_messages, c.retry_after) == (30, 2_147_483_647, 60)
    assert make(kind, "dbname=x", max_messages=123).max_messages == 123
    with pytest.raises(ValueError, match="unknown_handler_policy"):
        make(kind, "dbname=x", unknown_handler_policy="drop")
    with pytest.raises(ValueError, match="dead_interval needs subconsumer"):
        make(kind, "dbname=x", dead_interval="1 minute")


def test_options_are_checked_attributes(kind: str) -> None:
    c = make(kind, "dbname=x")
    c.retry_after = 5
    assert c.retry_after == 5 and c.options.retry_after == 5
    with pytest.raises(ValueError, match="retry_after must be seconds"):
        c.retry_after = -1
    with pytest.raises(ValueError, match="poll_interval must be > 0"):
        c.poll_interval = 0
    assert c.retry_after == 5 and c.poll_interval == 30  # a refused value changes nothing


def test_on_takes_the_handlers_of_its_kind(kind: str) -> None:
    consumer = make(kind, "dbname=x")

    def plain(msg: pgque.Message) -> None:
        pass

    async def coroutine(msg: pgque.Message) -> None:
        pass

    if kind == "async":
        with pytest.raises(TypeError, match="must be async"):
            consumer.on("x")(plain)
        assert consumer.on("x")(coroutine) is coroutine
    else:
        assert consumer.on("x")(plain) is plain  # returned unchanged


def test_handlers_by_type_and_catch_all(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, start: Any
) -> None:
    consumer = make(kind, db, poll_interval=30)
    got: list[tuple[str, Any]] = []
    handle(consumer, lambda msg: got.append(("created", msg.json())), "order.created")
    handle(consumer, lambda msg: got.append(("any", msg.type)), "*")
    one(conn, "select pgque.send('q', 'order.created', '{\"id\": 1}'::jsonb)")
    one(conn, "select pgque.send('q', 'other', '{}'::jsonb)")
    force_tick(conn)
    start(consumer)
    wait_for(lambda: len(got) == 2, what="both messages handled")
    assert got == [("created", {"id": 1}), ("any", "other")]
    wait_for(lambda: batch_done(conn), what="the batch is acked")


def test_failing_handler_nacks_with_retry_after(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, start: Any
) -> None:
    consumer = make(kind, db, retry_after=0)
    calls: list[int | None] = []

    def flaky(msg: pgque.Message) -> None:
        calls.append(msg.retry_count)
        if msg.retry_count is None:
            raise RuntimeError("first try fails")

    handle(consumer, flaky)
    one(conn, "select pgque.send('q', '{}'::jsonb)")
    force_tick(conn)
    start(consumer)
    wait_for(lambda: one(conn, "select count(*) from pgque.retry_queue") == 1, what="a retry")
    one(conn, "select pgque.maint()")
    force_tick(conn)
    wait_for(lambda: calls == [None, 1], what="the retry handled")


@pytest.mark.parametrize("policy", ["nack", "ack"])
def test_unknown_type_policy(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, start: Any, policy: str,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    caplog.set_level(logging.WARNING, logger="pgque")
    consumer = make(kind, db, unknown_handler_policy=policy)
    one(conn, "select pgque.send('q', 'mystery', '{}'::jsonb)")
    force_tick(conn)
    start(consumer)
    wait_for(lambda: batch_done(conn), what="the batch is acked")
    retried = rows(conn, "select ev_type from pgque.retry_queue")
    assert retried == ([("mystery",)] if policy == "nack" else [])
    assert any("no handler for event type=mystery" in r.getMessage() for r in caplog.records)


def test_stale_ack_is_logged(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, start: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    caplog.set_level(logging.WARNING, logger="pgque")
    consumer = make(kind, db)
    # A transactional handler that finishes the batch itself: the consumer's
    # own ack then finds no open batch (0).
    handle(consumer, lambda msg, c: c.execute("select pgque.ack(%s)", (msg.batch_id,)),
           transactional=True)  # fmt: skip
    one(conn, "select pgque.send('q', '{}'::jsonb)")
    force_tick(conn)
    start(consumer)
    wait_for(lambda: any("stale" in r.getMessage() for r in caplog.records), what="the warning")
    wait_for(lambda: batch_done(conn), what="the batch finished")


def test_notify_wakes_a_waiting_consumer(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, start: Any
) -> None:
    consumer = make(kind, f"{db} application_name=waker", poll_interval=30)
    got: list[int] = []
    handle(consumer, lambda msg: got.append(msg.msg_id))
    start(consumer)
    # Its first poll found nothing (committed an empty receive); it is listening.
    waiting = (
        "select count(*) from pg_stat_activity where application_name = 'waker'"
        " and state = 'idle' and (query = 'COMMIT' or query like 'listen %%')"
    )
    wait_for(lambda: one(conn, waiting) == 2 and consumer.listening, what="idle and listening")
    one(conn, "select pgque.send('q', '{}'::jsonb)")
    started = time.monotonic()
    force_tick(conn)
    wait_for(lambda: got != [], timeout=5, what="the message handled")
    assert time.monotonic() - started < 5  # woken, not polled: poll_interval is 30 s


def test_polls_without_listen(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, start: Any
) -> None:
    consumer = make(kind, db, poll_interval=0.2, listen=False)
    got: list[int] = []
    handle(consumer, lambda msg: got.append(msg.msg_id))
    start(consumer)
    one(conn, "select pgque.send('q', '{}'::jsonb)")
    force_tick(conn)
    wait_for(lambda: got != [], timeout=5, what="the message handled")
    assert consumer.listening is False


def test_stop_is_prompt(kind: str, db: str, queue: str, start: Any) -> None:
    consumer = make(kind, db, poll_interval=30)
    running = start(consumer)
    wait_for(lambda: consumer.listening and consumer.last_poll_at, what="waiting for work")
    started = time.monotonic()
    running.stop()
    assert running.outcome(timeout=5) is None
    assert time.monotonic() - started < 2


def test_survives_a_terminated_backend(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, start: Any
) -> None:
    consumer = make(kind, f"{db} application_name=victim", poll_interval=30)
    got: list[int] = []
    handle(consumer, lambda msg: got.append(msg.msg_id))
    running = start(consumer)
    victims = "select count(*) from pg_stat_activity where application_name = 'victim'"
    wait_for(lambda: one(conn, victims) >= 1, what="the consumer connected")
    conn.execute(
        "select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'victim'"
    )
    one(conn, "select pgque.send('q', '{}'::jsonb)")
    force_tick(conn)
    wait_for(lambda: got != [], timeout=10, what="the message handled after reconnecting")
    assert running.alive and consumer.reconnects >= 1


def test_receive_errors_never_end_the_loop(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, start: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    opener = opener_class(kind)
    real_receive = opener.receive
    failures = [1]

    def receive(self: Any, *args: Any, **kwargs: Any) -> Any:
        if failures:
            failures.pop()
            raise pgque.PgqueError("boom")
        return real_receive(self, *args, **kwargs)

    async def areceive(self: Any, *args: Any, **kwargs: Any) -> Any:
        return await receive(self, *args, **kwargs)

    monkeypatch.setattr(opener, "receive", areceive if kind == "async" else receive)
    consumer = make(kind, db, poll_interval=1)
    got: list[int] = []
    handle(consumer, lambda msg: got.append(msg.msg_id))
    one(conn, "select pgque.send('q', '{}'::jsonb)")
    force_tick(conn)
    start(consumer)
    wait_for(lambda: got != [], timeout=10, what="the message handled after the error")
    assert consumer.reconnects == 1


def test_poll_receives_positionally_and_returns_the_count(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    opener = opener_class(kind)
    real_receive = opener.receive
    calls: list[tuple[Any, ...]] = []

    def receive(self: Any, conn: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append((args, kwargs))
        return real_receive(self, conn, *args, **kwargs)

    monkeypatch.setattr(opener, "receive", receive)
    handled: list[int] = []
    consumers = [make(kind, db), make(kind, db, max_messages=123)]
    for consumer in consumers:
        handle(consumer, lambda msg: handled.append(msg.msg_id))
    msg_id = one(conn, "select pgque.send('q', '{}'::jsonb)")

    def poll_all(c: psycopg.Connection[Any]) -> list[int | None]:
        counts = [consumers[0].poll(c)]  # nothing yet: no batch
        force_tick(conn)
        return [*counts, consumers[1].poll(c), consumers[0].poll(c)]

    async def apoll_all() -> list[int | None]:
        async with await psycopg.AsyncConnection.connect(db, autocommit=True) as c:
            counts = [await consumers[0].poll(c)]
            force_tick(conn)
            return [*counts, await consumers[1].poll(c), await consumers[0].poll(c)]

    if kind == "async":
        counts = asyncio.run(apoll_all())
    else:
        with psycopg.connect(db, autocommit=True) as c:
            counts = poll_all(c)
    assert counts == [None, 1, None]
    assert handled == [msg_id]
    untick = {"tick": None}  # a loop of your own that does not lead the ticking
    assert calls == [(("q", "c", 2_147_483_647), untick), (("q", "c", 123), untick),
                     (("q", "c", 2_147_483_647), untick)]  # fmt: skip


def test_same_name_consumers_never_share_a_batch(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, start: Any
) -> None:
    seen: list[tuple[int, int]] = []

    def handler(msg: pgque.Message) -> Any:
        seen.append((msg.batch_id, msg.msg_id))  # list.append is atomic
        return pause(kind, 0.05)

    for _ in range(2):
        consumer = make(kind, db, poll_interval=0.2)
        handle(consumer, handler)
        start(consumer)
    for i in range(10):
        one(conn, "select pgque.send('q', %s::jsonb)", str(i))
        force_tick(conn)
    wait_for(lambda: len(seen) >= 10, timeout=20, what="10 messages handled")
    msg_ids = [m for _, m in seen]
    assert sorted(msg_ids) == sorted(set(msg_ids))  # nobody saw a message twice


def test_cooperative_members_split_the_stream(
    kind: str, db: str, conn: psycopg.Connection[Any], start: Any
) -> None:
    one(conn, "select pgque.create_queue('q')")
    one(conn, "select pgque.set_queue_config('q', 'ticker_max_lag', '1 microsecond')")
    for sub in ("a", "b"):
        one(conn, "select pgque.subscribe_subconsumer('q', 'g', %s)", sub)
    seen: dict[str, list[int]] = {"a": [], "b": []}
    for sub in ("a", "b"):
        consumer = make(kind, db, name="g", subconsumer=sub, poll_interval=0.2)
        handle(consumer, lambda msg, sub=sub: seen[sub].append(msg.msg_id))
        start(consumer)
    sent = []
    for i in range(20):
        sent.append(one(conn, "select pgque.send('q', %s::jsonb)", str(i)))
        force_tick(conn)
    wait_for(lambda: len(seen["a"]) + len(seen["b"]) >= 20, timeout=20, what="20 handled")
    assert sorted(seen["a"] + seen["b"]) == sorted(sent)


def test_handlers_settle_and_ack_in_key_order(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, start: Any
) -> None:
    consumer = make(kind, db, poll_interval=0.2, retry_after=0, concurrency=2)
    seen: list[Any] = []

    def work(msg: pgque.Message) -> None:
        seen.append(msg.json())
        if msg.json() == 1:
            raise RuntimeError("retry me")
        if msg.json() == 2:
            msg.dead_letter("bad")

    handle(consumer, work, "t", ordered_by="extra1")
    for i in range(4):
        one(conn, "select pgque.send('q', 't', %s::jsonb, 'k')", str(i))
    force_tick(conn)
    start(consumer)
    wait_for(lambda: len(seen) >= 4 and batch_done(conn), what="the batch is acked")
    assert seen == [0, 1, 2, 3]  # one key: in order, even with concurrency
    assert rows(conn, "select ev_data from pgque.retry_queue") == [("1",)]
    assert rows(conn, "select ev_data, dl_reason from pgque.dead_letter") == [("2", "bad")]


def test_start_on_the_main_thread_takes_the_signals_while_it_runs(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str
) -> None:
    """SIGTERM and SIGINT stop the consumer while start() runs on the main thread, and
    are given back after; an AsyncConsumer leaves a handler of the application's alone."""

    def app_handler(signum: int, frame: object) -> None:
        pass

    during: list[tuple[object, object]] = []
    consumer = make(kind, db, poll_interval=0.2)

    def look(msg: pgque.Message) -> None:
        during.append((signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)))
        consumer.stop()

    handle(consumer, look)
    one(conn, "select pgque.send('q', '{}'::jsonb)")
    force_tick(conn)
    before = signal.signal(signal.SIGTERM, app_handler)
    try:
        if kind == "async":
            asyncio.run(consumer.start())
        else:
            consumer.start()
        assert signal.getsignal(signal.SIGTERM) is app_handler  # given back
    finally:
        signal.signal(signal.SIGTERM, before)
    [(term, interrupt)] = during
    assert interrupt is not signal.default_int_handler  # the consumer's (or its loop's)
    assert (term is app_handler) == (kind == "async")
