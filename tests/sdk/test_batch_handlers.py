"""Batch handlers (``consumer.on_batch``): one call per batch with its type's messages.

Every test runs against both twins (the ``kind`` fixture). Ticks are forced;
most tests drive one batch with ``poll()`` on a connection of their own
(:func:`poll_once`), the rest run ``start()`` in a thread and wait on state.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from twins import batch_done, force_tick, handle, make, multi_class, pause

import pgque
from _engine import make_queue, one, rows
from _wait import wait_for

Conn = psycopg.Connection[Any]


def handle_batch(consumer: Any, func: Callable[..., Any], type: str = "*", **on: Any) -> None:
    """Register ``func`` with ``on_batch`` (wrapped in a coroutine function for the async
    consumer, which awaits what it returns when awaitable)."""
    if isinstance(consumer, pgque.AsyncConsumer):

        async def handler(*args: Any) -> Any:
            result = func(*args)
            return await result if inspect.isawaitable(result) else result

        consumer.on_batch(type, **on)(handler)
    else:
        consumer.on_batch(type, **on)(func)


def poll_once(kind: str, consumer: Any, db: str) -> int | None:
    """One ``poll()`` of the consumer on an autocommit connection of its own."""

    async def apoll() -> int | None:
        async with await psycopg.AsyncConnection.connect(db, autocommit=True) as c:
            result: int | None = await consumer.poll(c)
            return result

    if kind == "async":
        return asyncio.run(apoll())
    with psycopg.connect(db, autocommit=True) as c:
        result: int | None = consumer.poll(c)
        return result


def send(conn: Conn, type: str, payload: str, key: str | None = None) -> int:
    return int(one(conn, "select pgque.send('q', %s, %s::jsonb, %s)", type, payload, key))


def test_one_call_with_the_types_messages_in_event_order(
    kind: str, db: str, conn: Conn, queue: str
) -> None:
    consumer = make(kind, db)
    calls: list[list[Any]] = []
    order: list[Any] = []

    def batch(msgs: list[pgque.Message]) -> None:
        calls.append([m.json() for m in msgs])
        order.append("batch")

    handle_batch(consumer, batch, "a")
    handle(consumer, lambda msg: order.append(msg.json()), "b")
    for type, payload in [("b", "0"), ("a", "1"), ("b", "2"), ("a", "3"), ("a", "4")]:
        send(conn, type, payload)
    force_tick(conn)
    assert poll_once(kind, consumer, db) == 5
    assert calls == [[1, 3, 4]]
    assert order == [0, "batch", 2]  # called where its first message is
    assert batch_done(conn)
    assert rows(conn, "select ev_id from pgque.retry_queue") == []


def test_catch_all_batch_takes_every_other_type(kind: str, db: str, conn: Conn, queue: str) -> None:
    consumer = make(kind, db)
    calls: list[list[tuple[str, Any]]] = []
    handle_batch(consumer, lambda msgs: calls.append([(m.type, m.json()) for m in msgs]))
    handle(consumer, lambda msg: None, "known")
    send(conn, "x", "1")
    send(conn, "known", "2")
    send(conn, "y", "3")
    force_tick(conn)
    assert poll_once(kind, consumer, db) == 3
    assert calls == [[("x", 1), ("y", 3)]]


def test_raising_nacks_every_message_but_those_it_settled(
    kind: str, db: str, conn: Conn, queue: str
) -> None:
    consumer = make(kind, db, retry_after=0)

    def batch(msgs: list[pgque.Message]) -> None:
        msgs[0].dead_letter("poison")
        raise RuntimeError("the bulk insert failed")

    handle_batch(consumer, batch, "a")
    ids = [send(conn, "a", str(i)) for i in range(3)]
    force_tick(conn)
    assert poll_once(kind, consumer, db) == 3
    assert rows(conn, "select ev_id, dl_reason from pgque.dead_letter") == [(ids[0], "poison")]
    retried = rows(conn, "select ev_id from pgque.retry_queue order by ev_id")
    assert retried == [(ids[1],), (ids[2],)]
    assert batch_done(conn)


def test_single_settles_inside_and_the_rest_acked(
    kind: str, db: str, conn: Conn, queue: str
) -> None:
    consumer = make(kind, db, retry_after=0)

    def batch(msgs: list[pgque.Message]) -> None:
        msgs[1].nack(reason="later")
        msgs[2].dead_letter("bad row")

    handle_batch(consumer, batch, "a")
    ids = [send(conn, "a", str(i)) for i in range(4)]
    force_tick(conn)
    assert poll_once(kind, consumer, db) == 4
    assert rows(conn, "select ev_id from pgque.retry_queue") == [(ids[1],)]
    assert rows(conn, "select ev_id, dl_reason from pgque.dead_letter") == [(ids[2], "bad row")]
    assert batch_done(conn)


@pytest.mark.parametrize("fail", [False, True])
def test_transactional_writes_commit_with_the_ack(
    kind: str, db: str, conn: Conn, queue: str, fail: bool
) -> None:
    conn.execute("create table sink (n int primary key)")
    consumer = make(kind, db, retry_after=0)

    def write(msgs: list[pgque.Message], c: Any) -> Any:
        values = [m.json() for m in msgs]

        async def awrite() -> None:
            async with c.cursor() as cur:
                await cur.executemany("insert into sink values (%s)", [(v,) for v in values])
            if fail:
                raise RuntimeError("after the writes")

        if kind == "async":
            return awrite()
        with c.cursor() as cur:
            cur.executemany("insert into sink values (%s)", [(v,) for v in values])
        if fail:
            raise RuntimeError("after the writes")
        return None

    handle_batch(consumer, write, "a", transactional=True)
    for i in range(3):
        send(conn, "a", str(i))
    force_tick(conn)
    assert poll_once(kind, consumer, db) == 3
    assert batch_done(conn)
    written = rows(conn, "select n from sink order by n")
    retried = one(conn, "select count(*) from pgque.retry_queue")
    if fail:  # the savepoint rolled the writes back; the messages come again
        assert (written, retried) == ([], 3)
    else:
        assert (written, retried) == ([(0,), (1,), (2,)], 0)


def test_on_and_on_batch_for_one_type_is_refused(kind: str) -> None:
    consumer = make(kind, "dbname=x", name="mailer")
    handle(consumer, lambda msg: None, "a")
    with pytest.raises(ValueError, match=r"consumer 'mailer' .* on handler for type 'a'"):
        consumer.on_batch("a")
    handle_batch(consumer, lambda msgs: None, "b")
    with pytest.raises(ValueError, match=r"consumer 'mailer' .* on_batch handler for type 'b'"):
        consumer.on("b")
    handle(consumer, lambda msg: None, "a")  # the same kind again replaces it


def test_async_batch_handlers_must_be_coroutine_functions() -> None:
    consumer = make("async", "dbname=x")
    with pytest.raises(TypeError, match="must be async"):
        consumer.on_batch("a")(lambda msgs: None)


def test_transactional_needs_concurrency_one(kind: str) -> None:
    consumer = make(kind, "dbname=x", concurrency=2)
    with pytest.raises(ValueError, match="concurrency=1"):
        consumer.on_batch("a", transactional=True)


def test_a_batch_read_in_two_reads_is_one_call_per_read(
    kind: str, db: str, conn: Conn, queue: str
) -> None:
    consumer = make(kind, db, max_messages=2)
    calls: list[list[Any]] = []
    handle_batch(consumer, lambda msgs: calls.append([m.json() for m in msgs]), "a")
    for i in range(5):
        send(conn, "a", str(i))
    force_tick(conn)
    assert poll_once(kind, consumer, db) == 5
    assert calls == [[0, 1], [2, 3, 4]]  # max_messages first, then the rest of the batch
    assert batch_done(conn)


def test_with_concurrency_a_batch_handler_is_one_lane(
    kind: str, db: str, conn: Conn, queue: str
) -> None:
    consumer = make(kind, db, concurrency=3)
    lock = threading.Lock()
    calls: list[list[Any]] = []
    singles: list[Any] = []

    def batch(msgs: list[pgque.Message]) -> Any:
        with lock:
            calls.append([m.json() for m in msgs])
        return pause(kind, 0.01)

    def single(msg: pgque.Message) -> None:
        with lock:
            singles.append(msg.json())

    handle_batch(consumer, batch, "a")
    handle(consumer, single, "b")
    for i in range(6):
        send(conn, "a" if i % 2 else "b", str(i))
    force_tick(conn)
    assert poll_once(kind, consumer, db) == 6
    assert calls == [[1, 3, 5]]
    assert sorted(singles) == [0, 2, 4]
    assert batch_done(conn)


def test_timeout_nacks_the_call_s_messages(kind: str, db: str, conn: Conn, queue: str) -> None:
    consumer = make(kind, db, retry_after=0)
    release = threading.Event()

    def slow(msgs: list[pgque.Message]) -> Any:
        if kind == "async":
            return asyncio.sleep(30)
        release.wait(30)  # a thread cannot be killed: released at the end
        return None

    handle_batch(consumer, slow, "a", timeout=0.2)
    for i in range(2):
        send(conn, "a", str(i))
    force_tick(conn)
    try:
        assert poll_once(kind, consumer, db) == 2
    finally:
        release.set()
    assert one(conn, "select count(*) from pgque.retry_queue") == 2
    assert batch_done(conn)


def test_invalid_decorator_options(kind: str) -> None:
    consumer = make(kind, "dbname=x")
    with pytest.raises(ValueError, match="timeout must be > 0"):
        consumer.on_batch("a", timeout=0)


def test_stop_in_a_batch_handler_finishes_the_batch(
    kind: str, db: str, conn: Conn, queue: str, start: Any
) -> None:
    consumer = make(kind, db, poll_interval=0.2)
    calls: list[int] = []

    def batch(msgs: list[pgque.Message]) -> None:
        calls.append(len(msgs))
        consumer.stop()  # from the consumer's own thread or loop

    handle_batch(consumer, batch, "a")
    for i in range(3):
        send(conn, "a", str(i))
    force_tick(conn)
    running = start(consumer)
    assert running.outcome(timeout=10) is None
    assert calls == [3]
    assert batch_done(conn)


def test_multi_queue_consumer_runs_batch_handlers(
    kind: str, db: str, conn: Conn, start: Any
) -> None:
    seen: dict[str, list[Any]] = {"q1": [], "q2": []}
    consumers = []
    for q in ("q1", "q2"):
        make_queue(conn, q)
        one(conn, "select pgque.subscribe(%s, 'c')", q)
        consumer = make(kind, db, queue=q, poll_interval=0.2)
        handle_batch(consumer, lambda msgs, q=q: seen[q].extend(m.json() for m in msgs))
        consumers.append(consumer)
    for q in ("q1", "q2"):
        for i in range(3):
            one(conn, "select pgque.send(%s, %s::jsonb)", q, str(i))
        force_tick(conn, q)
    start(multi_class(kind)(consumers))
    wait_for(lambda: seen == {"q1": [0, 1, 2], "q2": [0, 1, 2]}, what="both queues' batches")


def test_cooperative_members_run_batch_handlers(kind: str, db: str, conn: Conn, start: Any) -> None:
    make_queue(conn, "q")
    for sub in ("a", "b"):
        one(conn, "select pgque.subscribe_subconsumer('q', 'g', %s)", sub)
    lock = threading.Lock()
    seen: list[int] = []
    sizes: list[int] = []

    def batch(msgs: list[pgque.Message]) -> None:
        with lock:
            seen.extend(m.msg_id for m in msgs)
            sizes.append(len(msgs))

    for sub in ("a", "b"):
        consumer = make(kind, db, name="g", subconsumer=sub, poll_interval=0.2)
        handle_batch(consumer, batch)
        start(consumer)
    sent = []
    for _ in range(4):
        sent += [one(conn, "select pgque.send('q', '{}'::jsonb)") for _ in range(3)]
        force_tick(conn)
    wait_for(lambda: len(seen) >= 12, timeout=20, what="12 messages handled")
    assert sorted(seen) == sorted(sent)
    assert max(sizes) > 1  # whole batches, not one message per call


def test_partition_slots_run_batch_handlers(kind: str, db: str, conn: Conn, start: Any) -> None:
    make_queue(conn, "q")
    for slot in range(2):
        one(conn, "select pgque.subscribe_slot('q', 'w', %s, 2)", slot)
    lock = threading.Lock()
    by_key: dict[str | None, list[int]] = {}
    for i in range(12):
        one(conn, "select pgque.send('q', 't', %s, %s)", str(i), f"key-{i % 3}")
    force_tick(conn)

    def batch(msgs: list[pgque.Message]) -> None:
        with lock:
            for m in msgs:
                by_key.setdefault(m.extra1, []).append(m.json())

    consumer = make(kind, db, name="w", partitions=2, worker_id="A", poll_interval=0.1)
    handle_batch(consumer, batch, "t")
    start(consumer)
    wait_for(lambda: sum(map(len, by_key.values())) == 12, what="all 12 handled")
    assert by_key == {f"key-{k}": list(range(k, 12, 3)) for k in range(3)}
    wait_for(
        lambda: one(conn, "select count(*) from pgque.subscription where sub_batch is null") == 2,
        what="every slot's batch acked",
    )


def test_one_process_span_per_call(
    kind: str, db: str, conn: Conn, queue: str, spans: InMemorySpanExporter
) -> None:
    consumer = make(kind, db)
    handle_batch(consumer, lambda msgs: None, "a")
    for i in range(3):
        send(conn, "a", str(i))
    force_tick(conn)
    assert poll_once(kind, consumer, db) == 3
    (process,) = [s for s in spans.get_finished_spans() if s.name == "process q"]
    assert process.attributes is not None
    assert process.attributes["messaging.batch.message_count"] == 3
    assert process.attributes["messaging.consumer.group.name"] == "c"
