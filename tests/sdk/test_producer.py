"""Producer against a real database: entry points, sends, batches, outbox, bad input."""

from __future__ import annotations

import json
import math
import threading
from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest
from opentelemetry.trace import NoOpTracerProvider
from psycopg_pool import ConnectionPool, NullConnectionPool

import pgque
from _engine import one, rows, tick
from pgque.serializers import RAW_TEXT

ALL = 2**31 - 1


def received(conn: psycopg.Connection[Any], queue: str = "q") -> list[pgque.Message]:
    """Tick and read (and ack) everything consumer ``c`` has in ``queue``."""
    tick(conn, queue)
    client = pgque.PgqueClient(conn)
    msgs = client.receive(queue, "c", ALL)
    if msgs:
        client.ack(msgs[0].batch_id)
    return msgs


@pytest.fixture
def producer(db: str) -> Any:
    """A producer that stores no trace context (whatever the global tracer provider)."""
    with pgque.Producer(db, tracer_provider=NoOpTracerProvider()) as producer:
        yield producer


def test_send_round_trip(
    producer: pgque.Producer, conn: psycopg.Connection[Any], queue: str
) -> None:
    first = producer.send("q", {"a": 1})
    second = producer.send("q", '{"b": [1, 2]}', type="order.created")
    third = producer.send("q", None, type="empty", extras=("k1", "x2", None, "x4"))
    assert first < second < third
    msgs = received(conn)
    assert [(m.msg_id, m.type, m.json()) for m in msgs] == [
        (first, "default", {"a": 1}),
        (second, "order.created", {"b": [1, 2]}),
        (third, "empty", None),
    ]
    assert (msgs[2].extra1, msgs[2].extra2, msgs[2].extra3, msgs[2].extra4) == (
        "k1", "x2", None, "x4",
    )  # fmt: skip


def test_send_batch_types_and_extras(
    producer: pgque.Producer, conn: psycopg.Connection[Any], queue: str
) -> None:
    ids = producer.send_batch(
        "q",
        [{"i": 0}, {"i": 1}, {"i": 2}, {"i": 3}],
        type="t",
        types=[None, "u", None, "v"],
        extras=[None, ("a", None, None, None), (None, "b", "c", "d"), None],
    )
    assert ids == sorted(ids) and len(set(ids)) == 4
    got = rows(
        conn,
        "select ev_id, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4"
        " from pgque.event_template order by ev_id",
    )
    assert got == [
        (ids[0], "t", '{"i":0}', None, None, None, None),
        (ids[1], "u", '{"i":1}', "a", None, None, None),
        (ids[2], "t", '{"i":2}', None, "b", "c", "d"),
        (ids[3], "v", '{"i":3}', None, None, None, None),
    ]
    assert producer.send_batch("q", []) == []
    assert producer.send_batch("q", iter([1, 2]), type="gen") == [ids[-1] + 1, ids[-1] + 2]
    assert [m.type for m in received(conn)][-2:] == ["gen", "gen"]


def test_send_batch_of_one_thousand(
    producer: pgque.Producer, conn: psycopg.Connection[Any], queue: str
) -> None:
    payloads = [json.dumps({"i": i, "pad": "x" * 80}) for i in range(1000)]
    ids = producer.send_batch("q", payloads)
    assert len(ids) == 1000 and ids == sorted(ids)
    msgs = received(conn)
    assert [m.json()["i"] for m in msgs] == list(range(1000))


def test_statements_are_prepared_unless_disabled(db: str, queue: str) -> None:
    count = "select count(*) from pg_catalog.pg_prepared_statements"
    with psycopg.connect(db, autocommit=True) as conn:
        producer = pgque.Producer(conn)
        producer.send_batch("q", [1, 2])
        producer.send("q", 3)
        assert one(conn, count) == 2
    with psycopg.connect(db, autocommit=True, prepare_threshold=None) as conn:
        producer = pgque.Producer(conn)
        for _ in range(6):
            producer.send_batch("q", [1, 2])
            producer.send("q", 3)
        assert one(conn, count) == 0


def test_threads_share_one_producer(db: str, conn: psycopg.Connection[Any], queue: str) -> None:
    ids: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    with pgque.Producer(db, pool_kwargs={"max_size": 3}) as producer:

        def work(n: int) -> None:
            try:
                mine = [producer.send("q", {"thread": n, "i": i}) for i in range(20)]
                mine += producer.send_batch("q", [{"thread": n, "batch": i} for i in range(30)])
                with producer.batch("q") as batch:
                    for i in range(5):
                        batch.send({"thread": n, "block": i})
                mine += batch.ids
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)
                return
            with lock:
                ids.extend(mine)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert errors == []
    assert len(ids) == len(set(ids)) == 6 * 55
    assert len(received(conn)) == 6 * 55


def test_conn_sends_inside_the_callers_transaction(
    producer: pgque.Producer, connect: Any, conn: psycopg.Connection[Any], queue: str
) -> None:
    app = connect(autocommit=False)
    app.execute("create table orders (id int)")
    app.commit()

    app.execute("insert into orders values (1)")
    producer.send("q", {"order": 1}, conn=app)
    producer.send_batch("q", [{"order": 2}], conn=app)
    with producer.batch("q", conn=app) as batch:
        batch.send({"order": 3})
    producer.send_at("q", {"order": 4}, delay=timedelta(hours=1), conn=app)
    assert app.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS  # not committed
    app.rollback()
    assert one(conn, "select count(*) from orders") == 0
    assert one(conn, "select count(*) from pgque.event_template") == 0
    assert one(conn, "select count(*) from pgque.delayed_events") == 0
    assert received(conn) == []

    app.execute("insert into orders values (5)")
    event_id = producer.send("q", {"order": 5}, conn=app)
    app.commit()
    assert [m.msg_id for m in received(conn)] == [event_id]

    # An error inside the caller's transaction is the caller's to roll back.
    with pytest.raises(pgque.PgqueQueueNotFound):
        producer.send("nope", {}, conn=app)
    assert app.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
    app.rollback()


def test_batch_block(producer: pgque.Producer, conn: psycopg.Connection[Any], queue: str) -> None:
    with producer.batch("q", type="t") as batch:
        batch.send({"n": 1})
        batch.send({"n": 2}, type="u", extras=("key", None, None, None))
        assert len(batch) == 2
        assert batch.ids == []
        assert one(conn, "select count(*) from pgque.event_template") == 0  # not yet
    assert len(batch.ids) == 2
    with pytest.raises(pgque.PgqueOperationRefused):
        batch.send({"n": 3})

    with pytest.raises(RuntimeError), producer.batch("q") as failed:
        failed.send({"n": 4})
        raise RuntimeError("boom")
    assert failed.ids == []

    with producer.batch("q") as nothing:
        pass
    assert nothing.ids == []

    with producer.batch("q") as bad:
        with pytest.raises(TypeError, match="batch message 0"):
            bad.send(object())
        bad.send({"n": 5})
    msgs = received(conn)
    assert [(m.type, m.json(), m.extra1) for m in msgs] == [
        ("t", {"n": 1}, None),
        ("u", {"n": 2}, "key"),
        ("default", {"n": 5}, None),
    ]
    assert [m.msg_id for m in msgs] == [*batch.ids, *bad.ids]


def test_send_at(producer: pgque.Producer, conn: psycopg.Connection[Any], queue: str) -> None:
    now = datetime.now(timezone.utc)
    later = producer.send_at("q", {"at": 1}, at=now + timedelta(hours=2), type="late")
    delayed = producer.send_at("q", {"delay": 1}, delay=timedelta(minutes=30))
    got = rows(
        conn,
        "select de_id, de_type, de_data, de_deliver_at - now() from pgque.delayed_events"
        " order by de_id",
    )
    assert [g[:3] for g in got] == [(later, "late", '{"at":1}'), (delayed, "default",
                                    '{"delay":1}')]  # fmt: skip
    assert timedelta(hours=1, minutes=59) < got[0][3] <= timedelta(hours=2)
    assert timedelta(minutes=29) < got[1][3] <= timedelta(minutes=30)

    due = producer.send_at("q", {"due": 1}, at=now - timedelta(seconds=5))
    zero = producer.send_at("q", {"zero": 1}, delay=timedelta(0))
    assert [m.msg_id for m in received(conn)] == [due, zero]

    for kwargs, match in [
        ({}, "exactly one"),
        ({"at": now, "delay": timedelta(1)}, "exactly one"),
        ({"delay": timedelta(seconds=-1)}, "negative"),
        ({"at": datetime.now()}, "timezone-aware"),  # naive on purpose
        ({"at": "tomorrow"}, "datetime"),
        ({"delay": 5}, "timedelta"),
    ]:
        with pytest.raises(pgque.PgqueInvalidArgument, match=match):
            producer.send_at("q", {}, **kwargs)
    with pytest.raises(pgque.PgqueQueueNotFound):
        producer.send_at("nope", {}, delay=timedelta(seconds=1))


def test_entry_points(db: str, conn: psycopg.Connection[Any], queue: str) -> None:
    # A pool of non-autocommit connections: each send is committed on return.
    with ConnectionPool(db, min_size=1, max_size=2, open=True) as pool:
        producer = pgque.Producer(pool)
        a = producer.send("q", {"via": "pool"})
        producer.close()
        assert not pool.closed  # the producer never closes a pool it did not make
        with pytest.raises(pgque.PgqueConnectionError, match="closed"):
            producer.send("q", {})
    # PgBouncer's transaction mode: no pool of its own, no prepared statements.
    with NullConnectionPool(
        db, max_size=2, kwargs={"autocommit": True, "prepare_threshold": None}, open=True
    ) as pool:
        b = pgque.Producer(pool).send_batch("q", [{"via": "null pool"}])[0]
    # One connection, autocommit.
    with psycopg.connect(db, autocommit=True) as own:
        c = pgque.Producer(own).send("q", {"via": "connection"})
        assert not own.closed
    # One connection in a transaction: the caller commits.
    with psycopg.connect(db) as own:
        d = pgque.Producer(own).send("q", {"via": "transaction"})
        own.commit()
    assert [m.msg_id for m in received(conn)] == [a, b, c, d]

    with pytest.raises(TypeError, match="source must be"):
        pgque.Producer(42)  # type: ignore[arg-type]
    with pytest.raises(pgque.PgqueInvalidArgument, match="pool_kwargs"):
        pgque.Producer(conn, pool_kwargs={"max_size": 2})
    with pytest.raises(pgque.PgqueConnectionError):
        pgque.Producer("host=127.0.0.1 port=1 connect_timeout=2")
    producer = pgque.Producer(db, pool_kwargs={"max_size": 1, "kwargs": {"application_name": "p"}})
    producer.send("q", {})
    assert one(conn, "select count(*) from pg_stat_activity where application_name = 'p'") >= 1
    producer.close()
    producer.close()
    assert producer.closed
    with pytest.raises(pgque.PgqueConnectionError, match="closed"):
        producer.send_batch("q", [1])


def test_bad_input(producer: pgque.Producer, queue: str) -> None:
    invalid: list[tuple[Any, str]] = [
        (lambda: producer.send("", {}), "queue"),
        (lambda: producer.send(None, {}), "queue"),
        (lambda: producer.send("q", {}, type=""), "type"),
        (lambda: producer.send("q", {}, extras=("a", "b")), "extras"),
        (lambda: producer.send("q", {}, extras=(1, None, None, None)), "extras"),
        (lambda: producer.send("q", math.nan), "NaN|JSON"),
        (lambda: producer.send_batch("q", [1, 2], types=["a"]), "types"),
        (lambda: producer.send_batch("q", [1, 2], types="ab"), "types"),
        (lambda: producer.send_batch("q", [1, 2], types=["a", ""]), r"types\[1\]"),
        (lambda: producer.send_batch("q", [1, 2], extras=[None]), "extras"),
        (lambda: producer.send_batch("q", [1], extras=[("a",)]), r"extras\[0\]"),
        (lambda: producer.send_batch("q", [1, {"x": math.inf}]), r"payloads\[1\]"),
        (lambda: producer.batch(""), "queue"),
    ]
    for call, match in invalid:
        with pytest.raises(pgque.PgqueInvalidArgument, match=match):
            call()
    with pytest.raises(TypeError, match="cannot be serialised"):
        producer.send("q", {1, 2})
    with pytest.raises(TypeError, match="bytes payloads"):
        producer.send("q", b"raw")
    with pytest.raises(TypeError, match=r"payloads\[2\]"):
        producer.send_batch("q", [1, 2, object()])
    with pytest.raises(TypeError, match="sequence of payloads"):
        producer.send_batch("q", {"a": 1})
    with pytest.raises(TypeError, match="sequence of payloads"):
        producer.send_batch("q", "abc")
    with pytest.raises(pgque.PgqueQueueNotFound) as info:
        producer.send_batch("nope", [1])
    assert isinstance(info.value.__cause__, psycopg.Error)
    with pytest.raises(pgque.PgqueInvalidArgument, match="serializer"):
        pgque.Producer(producer._pool, serializer="json")  # type: ignore[arg-type]


def test_raw_text_serializer(db: str, conn: psycopg.Connection[Any], queue: str) -> None:
    with pgque.Producer(db, serializer=RAW_TEXT) as producer:
        producer.send("q", "a,b,c", type="csv")
        producer.send_batch("q", ["1,2", "not json"])
        with pytest.raises(TypeError, match="RAW_TEXT"):
            producer.send("q", {"a": 1})
        with pytest.raises(TypeError, match=r"payloads\[0\]"):
            producer.send_batch("q", [1])
    assert [m.payload for m in received(conn)] == ["a,b,c", "1,2", "not json"]


def test_client_side_binding_connections(
    db: str, conn: psycopg.Connection[Any], queue: str
) -> None:
    """A connection with ClientCursor (common behind poolers) gets text parameters, no prepare."""
    with psycopg.connect(db, autocommit=True, cursor_factory=psycopg.ClientCursor) as own:
        producer = pgque.Producer(own, tracer_provider=NoOpTracerProvider())
        ids = [producer.send("q", {"n": 0})]
        ids += producer.send_batch("q", [{"n": 1}, {"n": 2}])
        ids += producer.send_batch("q", [{"n": 3}], types=["t"], extras=[("k", None, None, "'")])
        assert one(own, "select count(*) from pg_catalog.pg_prepared_statements") == 0
    msgs = received(conn)
    assert [m.msg_id for m in msgs] == ids
    assert (msgs[-1].type, msgs[-1].extra1, msgs[-1].extra4) == ("t", "k", "'")
