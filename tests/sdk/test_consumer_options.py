"""Consumer handler options: settle from the handler, transactional, concurrency,
ordering, rate limit, batch time limit, timeouts, shutdown, retry backoff, sources.

Every test runs against both consumer twins (the ``kind`` fixture).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import threading
import time
from typing import Any

import psycopg
import pytest
from twins import batch_done, consumer_class, force_tick, handle, make, multi_class, pause

import pgque
from _engine import one, rows
from _wait import wait_for
from pgque._consumer.dispatch import RateLimiter
from pgque._consumer.options import ConsumerOptions


def options(**kwargs: Any) -> dict[str, Any]:
    """The options of these tests' consumers: a short poll interval, and ``kwargs``."""
    return {"poll_interval": 0.2, **kwargs}


def send(conn: psycopg.Connection[Any], n: int, key: str | None = None) -> None:
    for i in range(n):
        one(conn, "select pgque.send('q', 't', %s::jsonb, %s)", str(i), key)


def test_the_defaults_are_the_options_defaults(kind: str) -> None:
    """One set of defaults: the constructor's are ConsumerOptions'."""
    signature = inspect.signature(consumer_class(kind).__init__).parameters
    for field in dataclasses.fields(ConsumerOptions):
        assert field.name in signature
        if field.default is not dataclasses.MISSING:
            assert signature[field.name].default == field.default, field.name
        assert getattr(consumer_class(kind), field.name).name == field.name  # an attribute


def test_bad_option_combinations(kind: str) -> None:
    with pytest.raises(ValueError, match="concurrency=1"):
        make(kind, "x", concurrency=2).on("t", transactional=True)
    with pytest.raises(ValueError, match="timeout must be > 0"):
        make(kind, "x").on("t", timeout=-1)
    with pytest.raises(ValueError, match="ordered_by must be a Message field"):
        make(kind, "x").on("t", ordered_by="nope")
    with pytest.raises(ValueError, match="concurrency must be >= 1"):
        make(kind, "x", concurrency=0)
    with pytest.raises(ValueError, match="max_batch_time must be >= 0"):
        make(kind, "x", max_batch_time=-1)
    with pytest.raises(ValueError, match="rate_limit must be > 0"):
        make(kind, "x", rate_limit=0)


def test_concurrency_set_later_must_suit_the_handlers(kind: str) -> None:
    """The order of the calls does not matter: concurrency > 1 set after a transactional
    handler is refused as the handler is when the option comes first."""
    consumer = make(kind, "x")
    handle(consumer, lambda msg, conn: None, "t", transactional=True)
    with pytest.raises(ValueError, match=r"consumer c: concurrency=2 refused: .*'t'"):
        consumer.concurrency = 2
    assert consumer.concurrency == 1
    consumer.max_batch_time = 5.0  # other options still change
    assert consumer.max_batch_time == 5.0


def test_options_are_frozen_while_the_consumer_runs(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, start: Any
) -> None:
    """An option set while the consumer runs is refused (the loop read it once); it
    changes again once the consumer stopped."""
    consumer = make(kind, db, **options())
    handle(consumer, lambda msg: None, "t")
    running = start(consumer)
    wait_for(lambda: consumer.running, what="the consumer runs")
    with pytest.raises(AttributeError, match=r"consumer 'c': retry_after cannot change while"):
        consumer.retry_after = 5
    assert consumer.retry_after == 60
    running.stop()
    running.thread.join(10)
    assert not consumer.running
    consumer.retry_after = 5
    assert consumer.retry_after == 5


def test_handler_nacks_and_dead_letters_its_messages(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, start: Any
) -> None:
    consumer = make(kind, db, **options())

    def decide(msg: pgque.Message) -> None:
        if msg.json() == 0:
            msg.nack(retry_after=600, reason="later")
        else:
            msg.dead_letter("poison")

    handle(consumer, decide, "t")
    send(conn, 2)
    force_tick(conn)
    start(consumer)
    wait_for(lambda: batch_done(conn), what="the batch is acked")
    assert one(conn, "select ev_retry_after > now() + interval '9 minutes' from pgque.retry_queue")
    assert rows(conn, "select ev_data, dl_reason from pgque.dead_letter") == [("1", "poison")]


def test_transactional_handler_commits_with_the_ack(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, start: Any
) -> None:
    conn.execute("create table done (n int primary key)")
    consumer = make(kind, db, **options())
    insert = "insert into done values (%s)"
    failure = "its write must roll back, the others stay"

    if kind == "async":

        @consumer.on("t", transactional=True)
        async def arecord(msg: pgque.Message, tx: psycopg.AsyncConnection[Any]) -> None:
            await tx.execute(insert, (msg.json(),))
            if msg.json() == 1:
                raise RuntimeError(failure)
    else:

        @consumer.on("t", transactional=True)
        def record(msg: pgque.Message, tx: psycopg.Connection[Any]) -> None:
            tx.execute(insert, (msg.json(),))
            if msg.json() == 1:
                raise RuntimeError(failure)

    send(conn, 3)
    force_tick(conn)
    start(consumer)
    wait_for(lambda: batch_done(conn), what="the batch is acked")
    assert rows(conn, "select n from done order by n") == [(0,), (2,)]
    assert rows(conn, "select ev_data from pgque.retry_queue") == [("1",)]


def test_concurrency_runs_messages_in_parallel(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, start: Any
) -> None:
    consumer = make(kind, db, **options(concurrency=4))
    running: set[int] = set()
    peak = [0]
    lock = threading.Lock()

    def enter(msg: pgque.Message) -> None:
        with lock:
            running.add(msg.msg_id)
            peak[0] = max(peak[0], len(running))

    if kind == "async":

        @consumer.on("t")
        async def awork(msg: pgque.Message) -> None:
            enter(msg)
            while msg.json() < 2 and peak[0] < 2:  # both first ones run at the same time
                await asyncio.sleep(0.01)
            running.discard(msg.msg_id)
    else:
        both_running = threading.Barrier(2, timeout=5)

        @consumer.on("t")
        def work(msg: pgque.Message) -> None:
            enter(msg)
            if msg.json() < 2:
                both_running.wait()  # proves two handlers run at the same time
            with lock:
                running.discard(msg.msg_id)

    send(conn, 8)
    force_tick(conn)
    start(consumer)
    wait_for(lambda: batch_done(conn), what="the batch is acked")
    assert peak[0] >= 2
    assert one(conn, "select count(*) from pgque.retry_queue") == 0


def test_ordered_by_keeps_each_key_in_order(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, start: Any
) -> None:
    consumer = make(kind, db, **options(concurrency=4))
    seen: dict[str | None, list[int]] = {}

    def work(msg: pgque.Message) -> Any:
        seen.setdefault(msg.extra1, []).append(msg.json())
        return pause(kind, 0.001 * (5 - msg.json() % 5))  # later messages finish faster

    handle(consumer, work, "t", ordered_by="extra1")
    for i in range(20):
        one(conn, "select pgque.send('q', 't', %s::jsonb, %s)", str(i), f"k{i % 3}")
    force_tick(conn)
    start(consumer)
    wait_for(lambda: batch_done(conn), what="the batch is acked")
    assert set(seen) == {"k0", "k1", "k2"}
    for values in seen.values():
        assert values == sorted(values)


def test_max_batch_time_nacks_the_rest_and_acks(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, start: Any
) -> None:
    consumer = make(kind, db, **options(max_batch_time=0))
    handled: list[int] = []
    handle(consumer, lambda msg: handled.append(msg.msg_id), "t")
    send(conn, 3)
    force_tick(conn)
    start(consumer)
    wait_for(lambda: batch_done(conn), what="the batch is acked")
    assert handled == []
    assert rows(conn, "select count(*) from pgque.retry_queue") == [(3,)]


def hanging_handler(kind: str, release: threading.Event) -> Any:
    """A handler that outlives any timeout: a thread blocked on ``release``, or a task
    that ignores its cancellation until ``release``."""
    if kind == "async":

        async def ahang(msg: pgque.Message, *tx: Any) -> None:
            while not release.is_set():
                try:
                    await asyncio.sleep(0.05)
                except asyncio.CancelledError:
                    continue  # it will not stop

        return ahang

    def hang(msg: pgque.Message, *tx: Any) -> None:
        release.wait(30)

    return hang


def test_a_timeout_nacks_and_gives_up_past_max_abandoned(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, start: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    release = threading.Event()
    consumer = make(kind, db, **options(max_abandoned=0))
    consumer.on("t", timeout=0.2)(hanging_handler(kind, release))
    send(conn, 1)
    force_tick(conn)
    running = start(consumer)
    wait_for(lambda: any("abandoned" in r.getMessage() for r in caplog.records), what="given up")
    release.set()  # else asyncio.run would wait for the abandoned task at its end
    error = running.outcome(timeout=10)
    assert isinstance(error, pgque.ConsumerGaveUp), error
    assert "1 handlers timed out and are still running" in str(error)


def test_a_timeout_nacks_the_message(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, start: Any
) -> None:
    release = threading.Event()
    consumer = make(kind, db, **options(max_abandoned=5))
    consumer.on("t", timeout=0.2)(hanging_handler(kind, release))
    send(conn, 1)
    force_tick(conn)
    running = start(consumer)
    wait_for(lambda: batch_done(conn), what="the batch is acked")
    release.set()
    assert one(conn, "select count(*) from pgque.retry_queue") == 1
    assert running.alive


def test_a_handler_that_stops_in_time_is_not_abandoned(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, start: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    """Past its timeout a task is cancelled: not abandoned when it ends; a thread cannot
    be stopped: it is abandoned (counted) and ends by itself."""
    consumer = make(kind, db, **options(max_abandoned=1))
    ended: list[str] = []

    async def aslow(msg: pgque.Message) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            ended.append("cancelled")
            raise

    def slow(msg: pgque.Message) -> None:
        time.sleep(0.5)
        ended.append("finished")

    consumer.on("t", timeout=0.1)(aslow if kind == "async" else slow)
    send(conn, 1)
    force_tick(conn)
    running = start(consumer)
    wait_for(lambda: one(conn, "select count(*) from pgque.retry_queue") == 1, what="nacked")
    wait_for(lambda: ended, what="the handler ended")
    abandoned = [r for r in caplog.records if "abandoned" in r.getMessage()]
    assert ended == (["cancelled"] if kind == "async" else ["finished"])
    assert len(abandoned) == (0 if kind == "async" else 1)
    assert running.alive


def test_a_transactional_handler_past_its_timeout_rolls_the_batch_back(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, start: Any
) -> None:
    release = threading.Event()
    calls: list[int] = []
    consumer = make(kind, db, **options())
    hang = hanging_handler(kind, release)

    def once(msg: pgque.Message, tx: Any) -> Any:
        calls.append(msg.msg_id)
        return hang(msg, tx) if len(calls) == 1 else None

    handle(consumer, once, "t", transactional=True, timeout=0.3)
    send(conn, 1)
    force_tick(conn)
    start(consumer)
    wait_for(lambda: len(calls) >= 2, what="redelivered after the reconnect")
    wait_for(lambda: batch_done(conn), what="the batch is acked")
    release.set()
    assert consumer.reconnects >= 1
    assert one(conn, "select count(*) from pgque.retry_queue") == 0


def test_stop_past_shutdown_timeout_rolls_back(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, start: Any
) -> None:
    consumer = make(kind, db, **options(shutdown_timeout=0))
    handled: list[int] = []

    def stop_now(msg: pgque.Message) -> None:
        handled.append(msg.msg_id)
        consumer.stop()  # a stop arrives while the batch is being handled

    handle(consumer, stop_now, "t")
    send(conn, 3)
    force_tick(conn)
    assert start(consumer).outcome(timeout=10) is None
    assert len(handled) == 1
    # Rolled back: the batch is open for nobody and comes again.
    assert rows(conn, "select sub_batch, sub_last_tick from pgque.subscription") == [(None, 1)]


def test_stop_within_shutdown_timeout_finishes_the_batch(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, start: Any
) -> None:
    consumer = make(kind, db, **options(shutdown_timeout=30))
    handled: list[int] = []

    def work(msg: pgque.Message) -> None:
        handled.append(msg.msg_id)
        consumer.stop()

    handle(consumer, work, "t")
    send(conn, 3)
    force_tick(conn)
    assert start(consumer).outcome(timeout=10) is None
    assert len(handled) == 3 and batch_done(conn)


def test_retry_backoff_grows_with_retries(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, start: Any
) -> None:
    consumer = make(kind, db, **options(retry_backoff=(100, 1000)))

    def fail(msg: pgque.Message) -> None:
        raise RuntimeError("always")

    handle(consumer, fail, "t")
    send(conn, 1)
    force_tick(conn)
    start(consumer)
    wait_for(lambda: one(conn, "select count(*) from pgque.retry_queue") == 1, what="nacked")
    delay = one(conn, "select extract(epoch from ev_retry_after - now()) from pgque.retry_queue")
    assert 90 < delay <= 101  # base * 2 ** 0


def test_rate_limiter_spaces_tokens_after_its_burst() -> None:
    limiter = RateLimiter(50, burst=1)
    started = time.monotonic()
    for _ in range(6):
        while (wait := limiter.wait_time()) > 0:
            time.sleep(wait)
    assert time.monotonic() - started >= 5 / 50 * 0.9  # never faster than the rate
    assert RateLimiter(20).capacity == 20  # the default burst: one second's worth


def test_rate_limit_holds_the_consumer_to_its_rate(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, start: Any
) -> None:
    consumer = make(kind, db, **options(rate_limit=5))  # a burst of 5, then 5/s
    stamps: list[float] = []
    handle(consumer, lambda msg: stamps.append(time.monotonic()), "t")
    send(conn, 8)
    force_tick(conn)
    start(consumer)
    wait_for(lambda: batch_done(conn), what="the batch is acked")
    assert len(stamps) == 8
    assert stamps[4] - stamps[0] < 0.15  # the burst
    assert stamps[7] - stamps[4] >= 3 / 5 * 0.9  # then one every 0.2 s


def test_multi_queue_consumer_drains_high_priority_first(
    kind: str, db: str, conn: psycopg.Connection[Any], start: Any
) -> None:
    order: list[str] = []
    consumers = []
    for name in ("high", "low"):
        one(conn, "select pgque.create_queue(%s)", name)
        one(conn, "select pgque.subscribe(%s, 'c')", name)
        for i in range(3):
            one(conn, "select pgque.send(%s, %s::jsonb)", name, str(i))
            force_tick(conn, name)
        consumer = make(kind, db, queue=name, poll_interval=0.2 if name == "high" else 5)
        handle(consumer, lambda msg, name=name: order.append(name))
        consumers.append(consumer)
    multi = multi_class(kind)(consumers)
    running = start(multi)
    wait_for(lambda: len(order) == 6, what="6 messages handled")
    assert order == ["high"] * 3 + ["low"] * 3
    assert [c.poll_interval for c in consumers] == [0.2, 5]  # none overwritten
    running.stop()
    assert running.outcome(timeout=5) is None


def test_consumer_takes_a_pool(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, start: Any
) -> None:
    """A pool lends the batch connection (in autocommit while lent, given back as it was)."""
    from psycopg_pool import AsyncConnectionPool, ConnectionPool

    got: list[int] = []
    one(conn, "select pgque.send('q', '{}'::jsonb)")
    force_tick(conn)

    def made(pool: Any) -> Any:
        consumer = make(kind, pool, poll_interval=0.2)
        assert consumer.listen is False  # a pooled connection never listens
        handle(consumer, lambda msg: got.append(msg.msg_id))
        return consumer

    if kind == "sync":
        with ConnectionPool(db, min_size=1, max_size=2, open=True) as pool:
            running = start(made(pool))
            wait_for(lambda: got != [] and batch_done(conn), what="the batch is acked")
            running.stop()
            assert running.outcome(timeout=5) is None
            with pool.connection() as borrowed:
                assert borrowed.autocommit is False  # given back as it was lent
        return

    async def main() -> None:  # an async pool belongs to its event loop: run it there
        async with AsyncConnectionPool(db, min_size=1, max_size=1, open=False) as pool:
            consumer = made(pool)
            task = asyncio.create_task(consumer.start())
            while not (got and batch_done(conn)):
                await asyncio.sleep(0.02)
            consumer.stop()
            await asyncio.wait_for(task, 5)
            async with pool.connection() as borrowed:
                assert borrowed.autocommit is False

    asyncio.run(main())
    assert len(got) == 1


def test_consumer_takes_your_connection(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str
) -> None:
    """A given autocommit connection carries the batches, is never closed by the consumer,
    and when its owner closes it start() raises instead of reconnecting."""
    got: list[int] = []
    one(conn, "select pgque.send('q', '{}'::jsonb)")
    force_tick(conn)
    cls = consumer_class(kind)

    def check(own: Any, not_autocommit: Any) -> Any:
        with pytest.raises(ValueError, match="autocommit"):
            cls(not_autocommit, queue="q", name="c")
        consumer = make(kind, own, poll_interval=0.2)
        assert consumer.listen is False  # the given connection carries batches, not LISTEN
        handle(consumer, lambda msg: got.append(msg.msg_id))
        return consumer

    if kind == "sync":
        own = psycopg.connect(db, autocommit=True)
        with psycopg.connect(db) as not_autocommit:
            consumer = check(own, not_autocommit)
        failure: list[BaseException] = []

        def consume() -> None:
            try:
                consumer.start()
            except BaseException as exc:
                failure.append(exc)

        thread = threading.Thread(target=consume, daemon=True)
        thread.start()
        wait_for(lambda: got != [] and batch_done(conn), what="the batch is acked")
        assert not own.closed  # used, never closed by the consumer
        own.close()  # the owner takes it away: start() raises instead of reconnecting
        thread.join(10)
        assert not thread.is_alive()
        assert len(failure) == 1 and isinstance(failure[0], pgque.PgqueConnectionError)
        return

    async def main() -> None:
        own = await psycopg.AsyncConnection.connect(db, autocommit=True)
        not_autocommit = await psycopg.AsyncConnection.connect(db)
        consumer = check(own, not_autocommit)
        await not_autocommit.close()
        task = asyncio.create_task(consumer.start())
        while not (got and batch_done(conn)):
            await asyncio.sleep(0.02)
        assert not own.closed
        await own.close()
        with pytest.raises(pgque.PgqueConnectionError):
            await asyncio.wait_for(task, 10)

    asyncio.run(main())


def _options_tool() -> Any:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "tools" / "consumer_options.py"
    spec = importlib.util.spec_from_file_location("consumer_options_tool", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_options_are_written_from_their_one_declaration() -> None:
    """The constructors' keyword arguments, their docstrings' Args and the attributes are
    what tools/consumer_options.py writes from ConsumerOptions (its check passes), and
    every field's description reaches both consumers' docstrings."""
    tool = _options_tool()
    assert tool.main(["--check"]) == 0, "run `python tools/consumer_options.py`"
    for cls in (pgque.Consumer, pgque.AsyncConsumer):
        doc = " ".join((cls.__doc__ or "").split())
        for field in dataclasses.fields(ConsumerOptions):
            described = " ".join(field.metadata["doc"].split())
            if cls is pgque.Consumer:
                described = described.replace("tasks", "threads")
            assert f"{field.name}: {described}" in doc, (cls.__name__, field.name)


def test_the_options_tool_notices_a_change(tmp_path: Any, monkeypatch: Any) -> None:
    """A description changed in the declaration makes the check fail."""
    tool = _options_tool()
    options = tmp_path / "options.py"
    text = tool.OPTIONS.read_text().replace("The queue to consume.", "The queue it reads.")
    options.write_text(text)
    consumer = tmp_path / "async_consumer.py"
    consumer.write_text(tool.CONSUMER.read_text())
    monkeypatch.setattr(tool, "OPTIONS", options)
    monkeypatch.setattr(tool, "CONSUMER", consumer)
    monkeypatch.setattr(tool, "ROOT", tmp_path)
    assert tool.main(["--check"]) == 1
    assert tool.main([]) == 0
    assert "queue: The queue it reads." in consumer.read_text()
    assert tool.main(["--check"]) == 0
