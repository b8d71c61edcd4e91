"""Consumer handler options: settle from the handler, transactional, concurrency,
ordering, rate limit, batch time limit, timeouts, shutdown, retry backoff."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

import pgque
from _engine import one, rows
from pgque._dispatch import RateLimiter


def tick(conn: psycopg.Connection[Any]) -> None:
    one(conn, "select pgque.force_next_tick('q')")
    one(conn, "select pgque.ticker('q')")


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail("condition not met before the deadline")
        time.sleep(0.02)


def batch_done(conn: psycopg.Connection[Any]) -> bool:
    return bool(one(conn, "select sub_batch is null and sub_last_tick > 1 from pgque.subscription"))


@pytest.fixture
def run() -> Iterator[Callable[[pgque.Consumer], threading.Thread]]:
    started: list[tuple[pgque.Consumer, threading.Thread]] = []

    def run(consumer: pgque.Consumer) -> threading.Thread:
        thread = threading.Thread(target=consumer.start, daemon=True)
        thread.start()
        started.append((consumer, thread))
        return thread

    yield run
    for consumer, thread in started:
        consumer.stop(now=True)
        thread.join(10)


def make(db: str, **kwargs: Any) -> pgque.Consumer:
    kwargs.setdefault("ticker", False)
    kwargs.setdefault("poll_interval", 0.2)
    return pgque.Consumer(db, queue="q", name="c", **kwargs)


def send(conn: psycopg.Connection[Any], n: int, key: str | None = None) -> None:
    for i in range(n):
        one(conn, "select pgque.send('q', 't', %s::jsonb, %s)", str(i), key)


def test_bad_option_combinations() -> None:
    with pytest.raises(ValueError, match="concurrency=1"):
        make("x", concurrency=2).on("t", transactional=True)
    with pytest.raises(ValueError, match="timeout must be > 0"):
        make("x").on("t", timeout=-1)
    with pytest.raises(ValueError, match="ordered_by must be a Message field"):
        make("x").on("t", ordered_by="nope")
    with pytest.raises(ValueError, match="concurrency must be >= 1"):
        make("x", concurrency=0)
    with pytest.raises(ValueError, match="max_batch_time must be >= 0"):
        make("x", max_batch_time=-1)
    with pytest.raises(ValueError, match="rate_limit must be > 0"):
        make("x", rate_limit=0)


def test_handler_nacks_and_dead_letters_its_messages(
    db: str, conn: psycopg.Connection[Any], queue: str, run: Any
) -> None:
    consumer = make(db)

    @consumer.on("t")
    def decide(msg: pgque.Message) -> None:
        if msg.json() == 0:
            msg.nack(retry_after=600, reason="later")
        else:
            msg.dead_letter("poison")

    send(conn, 2)
    tick(conn)
    run(consumer)
    wait_for(lambda: batch_done(conn))
    assert one(conn, "select ev_retry_after > now() + interval '9 minutes' from pgque.retry_queue")
    assert rows(conn, "select ev_data, dl_reason from pgque.dead_letter") == [("1", "poison")]


def test_transactional_handler_commits_with_the_ack(
    db: str, conn: psycopg.Connection[Any], queue: str, run: Any
) -> None:
    conn.execute("create table done (n int primary key)")
    consumer = make(db)

    @consumer.on("t", transactional=True)
    def record(msg: pgque.Message, tx: psycopg.Connection[Any]) -> None:
        tx.execute("insert into done values (%s)", (msg.json(),))
        if msg.json() == 1:
            raise RuntimeError("its write must roll back, the others stay")

    send(conn, 3)
    tick(conn)
    run(consumer)
    wait_for(lambda: batch_done(conn))
    assert rows(conn, "select n from done order by n") == [(0,), (2,)]
    assert rows(conn, "select ev_data from pgque.retry_queue") == [("1",)]


def test_concurrency_runs_messages_in_parallel(
    db: str, conn: psycopg.Connection[Any], queue: str, run: Any
) -> None:
    consumer = make(db, concurrency=4)
    active = [0]
    peak = [0]
    lock = threading.Lock()
    both_running = threading.Barrier(2, timeout=5)

    @consumer.on("t")
    def work(msg: pgque.Message) -> None:
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        if msg.json() < 2:
            both_running.wait()  # proves two handlers run at the same time
        with lock:
            active[0] -= 1

    send(conn, 8)
    tick(conn)
    run(consumer)
    wait_for(lambda: batch_done(conn))
    assert peak[0] >= 2
    assert one(conn, "select count(*) from pgque.retry_queue") == 0


def test_ordered_by_keeps_each_key_in_order(
    db: str, conn: psycopg.Connection[Any], queue: str, run: Any
) -> None:
    consumer = make(db, concurrency=4)
    seen: dict[str | None, list[int]] = {}
    lock = threading.Lock()

    @consumer.on("t", ordered_by="extra1")
    def work(msg: pgque.Message) -> None:
        time.sleep(0.001 * (5 - msg.json() % 5))  # later messages finish faster
        with lock:
            seen.setdefault(msg.extra1, []).append(msg.json())

    for i in range(20):
        one(conn, "select pgque.send('q', 't', %s::jsonb, %s)", str(i), f"k{i % 3}")
    tick(conn)
    run(consumer)
    wait_for(lambda: batch_done(conn))
    assert set(seen) == {"k0", "k1", "k2"}
    for values in seen.values():
        assert values == sorted(values)


def test_max_batch_time_nacks_the_rest_and_acks(
    db: str, conn: psycopg.Connection[Any], queue: str, run: Any
) -> None:
    consumer = make(db, max_batch_time=0)
    handled: list[int] = []
    consumer.on("t")(lambda msg: handled.append(msg.msg_id))
    send(conn, 3)
    tick(conn)
    run(consumer)
    wait_for(lambda: batch_done(conn))
    assert handled == []
    assert rows(conn, "select count(*) from pgque.retry_queue") == [(3,)]


def test_sync_timeout_nacks_and_gives_up_past_max_abandoned(
    db: str, conn: psycopg.Connection[Any], queue: str
) -> None:
    release = threading.Event()
    consumer = make(db, max_abandoned=0)
    consumer.on("t", timeout=0.2)(lambda msg: release.wait(30))
    send(conn, 1)
    tick(conn)
    with pytest.raises(pgque.ConsumerGaveUp):
        consumer.start()
    release.set()


def test_sync_timeout_nacks_the_message(
    db: str, conn: psycopg.Connection[Any], queue: str, run: Any
) -> None:
    release = threading.Event()
    consumer = make(db, max_abandoned=5)
    consumer.on("t", timeout=0.2)(lambda msg: release.wait(30))
    send(conn, 1)
    tick(conn)
    run(consumer)
    wait_for(lambda: batch_done(conn))
    assert one(conn, "select count(*) from pgque.retry_queue") == 1
    release.set()


def test_transactional_timeout_rolls_the_batch_back(
    db: str, conn: psycopg.Connection[Any], queue: str, run: Any
) -> None:
    release = threading.Event()
    calls: list[int] = []
    consumer = make(db)

    @consumer.on("t", transactional=True, timeout=0.3)
    def slow_once(msg: pgque.Message, tx: psycopg.Connection[Any]) -> None:
        calls.append(msg.msg_id)
        if len(calls) == 1:
            release.wait(30)

    send(conn, 1)
    tick(conn)
    run(consumer)
    wait_for(lambda: len(calls) >= 2)  # redelivered after the reconnect
    wait_for(lambda: batch_done(conn))
    release.set()
    assert consumer.reconnects >= 1


def test_stop_past_shutdown_timeout_rolls_back(
    db: str, conn: psycopg.Connection[Any], queue: str
) -> None:
    consumer = make(db, shutdown_timeout=0)
    started = threading.Event()

    @consumer.on("t")
    def slow(msg: pgque.Message) -> None:
        started.set()
        consumer.stop()  # a stop arrives while the batch is being handled

    send(conn, 3)
    tick(conn)
    thread = threading.Thread(target=consumer.start)
    thread.start()
    thread.join(10)
    assert not thread.is_alive() and started.is_set()
    # Rolled back: the batch is open for nobody and comes again.
    assert rows(conn, "select sub_batch, sub_last_tick from pgque.subscription") == [(None, 1)]


def test_stop_within_shutdown_timeout_finishes_the_batch(
    db: str, conn: psycopg.Connection[Any], queue: str
) -> None:
    consumer = make(db, shutdown_timeout=30)
    handled: list[int] = []

    @consumer.on("t")
    def work(msg: pgque.Message) -> None:
        handled.append(msg.msg_id)
        consumer.stop()

    send(conn, 3)
    tick(conn)
    thread = threading.Thread(target=consumer.start)
    thread.start()
    thread.join(10)
    assert len(handled) == 3 and batch_done(conn)


def test_retry_backoff_grows_with_retries(
    db: str, conn: psycopg.Connection[Any], queue: str, run: Any
) -> None:
    consumer = make(db, retry_backoff=(100, 1000))

    @consumer.on("t")
    def fail(msg: pgque.Message) -> None:
        raise RuntimeError("always")

    send(conn, 1)
    tick(conn)
    run(consumer)
    wait_for(lambda: one(conn, "select count(*) from pgque.retry_queue") == 1)
    delay = one(conn, "select extract(epoch from ev_retry_after - now()) from pgque.retry_queue")
    assert 90 < delay <= 101  # base * 2 ** 0


def test_rate_limiter_spaces_messages() -> None:
    limiter = RateLimiter(50, burst=1)
    started = time.monotonic()
    for _ in range(6):
        while (pause := limiter.wait_time()) > 0:
            time.sleep(pause)
    assert time.monotonic() - started >= 5 / 50 * 0.9  # it never goes faster than the rate


def test_multi_queue_consumer_drains_high_priority_first(
    db: str, conn: psycopg.Connection[Any]
) -> None:
    order: list[str] = []
    consumers = []
    for name in ("high", "low"):
        one(conn, "select pgque.create_queue(%s)", name)
        one(conn, "select pgque.subscribe(%s, 'c')", name)
        for i in range(3):
            one(conn, "select pgque.send(%s, %s::jsonb)", name, str(i))
            one(conn, "select pgque.force_next_tick(%s)", name)
            one(conn, "select pgque.ticker(%s)", name)
        consumer = pgque.Consumer(db, queue=name, name="c", poll_interval=0.2, ticker=False)
        consumer.on("*")(lambda msg, name=name: order.append(name))
        consumers.append(consumer)
    multi = pgque.MultiQueueConsumer(consumers)
    thread = threading.Thread(target=multi.start, daemon=True)
    thread.start()
    wait_for(lambda: len(order) == 6)
    multi.stop()
    thread.join(5)
    assert order == ["high"] * 3 + ["low"] * 3


def test_consumer_takes_a_pool(db: str, conn: psycopg.Connection[Any], queue: str) -> None:
    from psycopg_pool import ConnectionPool

    with ConnectionPool(db, min_size=1, max_size=2, open=True) as pool:
        consumer = pgque.Consumer(pool, queue="q", name="c", poll_interval=0.2, ticker=False)
        assert consumer.listen is False  # a pooled connection never listens
        got: list[int] = []
        consumer.on("*")(lambda msg: got.append(msg.msg_id))
        one(conn, "select pgque.send('q', '{}'::jsonb)")
        tick(conn)
        thread = threading.Thread(target=consumer.start, daemon=True)
        thread.start()
        wait_for(lambda: got != [] and batch_done(conn))
        consumer.stop()
        thread.join(5)
        with pool.connection() as borrowed:
            assert borrowed.autocommit is False  # given back as it was lent


def test_consumer_takes_your_connection(
    db: str, conn: psycopg.Connection[Any], queue: str, connect: Any
) -> None:
    with psycopg.connect(db) as not_autocommit, pytest.raises(ValueError, match="autocommit"):
        pgque.Consumer(not_autocommit, queue="q", name="c")
    own = connect(autocommit=True)
    consumer = pgque.Consumer(own, queue="q", name="c", poll_interval=0.2, ticker=False)
    assert consumer.listen is False  # the given connection carries batches, not LISTEN
    got: list[int] = []
    consumer.on("*")(lambda msg: got.append(msg.msg_id))
    one(conn, "select pgque.send('q', '{}'::jsonb)")
    tick(conn)
    failure: list[BaseException] = []

    def consume() -> None:
        try:
            consumer.start()
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    wait_for(lambda: got != [] and batch_done(conn))
    assert not own.closed  # used, never closed by the consumer
    own.close()  # the owner takes it away: start() raises instead of reconnecting
    thread.join(10)
    assert not thread.is_alive()
    assert len(failure) == 1 and isinstance(failure[0], pgque.PgqueConnectionError)
