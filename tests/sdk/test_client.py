"""PgqueClient against a real database: upstream pgque-py's behaviours and ours."""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any

import psycopg
import pytest
from psycopg import sql

import pgque
from _engine import one, rows
from pgque._executor import execute_text


class Recording:
    """A real connection that remembers the SQL texts sent through ``execute``."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self.sent: list[str] = []

    def execute(self, query: Any, params: Any = None) -> Any:
        self.sent.append(query)
        return self.conn.execute(query, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)


@pytest.fixture
def client(db: str) -> Any:
    with pgque.connect(db) as client:
        yield client


def tick(client: pgque.PgqueClient, queue: str = "q") -> None:
    client.conn.commit()
    client.force_next_tick(queue)
    client.ticker(queue)
    client.conn.commit()


def test_connect_errors_and_close(db: str) -> None:
    with pytest.raises(pgque.PgqueConnectionError):
        pgque.connect("host=127.0.0.1 port=1 connect_timeout=2")
    client = pgque.connect(db, autocommit=True)
    assert client.conn.autocommit is True
    client.close()
    client.close()
    assert client.conn.closed
    with pgque.connect(db) as owned:
        assert not owned.conn.closed
    assert owned.conn.closed
    raw = psycopg.connect(db)
    pgque.PgqueClient(raw).close()
    assert not raw.closed
    raw.close()


@pytest.mark.parametrize(
    ("type_", "expected"),
    [(None, "send(%s, %s::jsonb)"), ("", "send(%s, %s::jsonb)"),
     ("default", "send(%s, %s::jsonb)"), ("custom", "send(%s, %s, %s::jsonb)")],
)  # fmt: skip
def test_send_sql_shapes(
    client: pgque.PgqueClient, queue: str, type_: str | None, expected: str
) -> None:
    recording = Recording(client.conn)
    client.conn = recording  # type: ignore[assignment]
    assert isinstance(client.send("q", {"a": 1}, type=type_), int)
    sent = [text for text in recording.sent if "pgque.send" in text][-1]  # not the first
    assert expected in sent  # send's look at the queue's consumers (said once per queue)
    if expected == "send(%s, %s::jsonb)":
        assert "send(%s, %s, %s::jsonb)" not in sent


def test_round_trip_needs_commit_and_tick(client: pgque.PgqueClient, queue: str) -> None:
    client.send("q", {"hello": "world"}, type="greet")
    client.force_next_tick("q")
    client.ticker("q")
    assert client.receive("q", "c") == []  # nothing committed yet
    client.conn.rollback()
    client.send("q", {"hello": "world"}, type="greet")
    tick(client)
    (msg,) = client.receive("q", "c")
    assert (msg.type, msg.payload, msg.retry_count) == ("greet", '{"hello": "world"}', None)
    assert isinstance(msg.created_at, datetime) and msg.created_at.tzinfo is not None
    assert msg.json() == {"hello": "world"}
    assert client.ack(msg.batch_id) == 1
    client.conn.commit()
    assert client.receive("q", "c") == []
    assert client.ack(msg.batch_id) == 0


def test_payload_encodings(client: pgque.PgqueClient, queue: str) -> None:
    payloads: list[Any] = [{"a": 1}, None, "42", '"just a string"', [1, 2], '"ü✓"']
    ids = client.send_batch("q", "t", payloads)
    assert ids == sorted(ids)
    big = "x" * 100_000
    client.send("q", {"big": big})
    tick(client)
    got = client.receive("q", "c", 2**31 - 1)
    assert [m.json() for m in got] == [{"a": 1}, None, 42, "just a string", [1, 2], "ü✓",
                                       {"big": big}]  # fmt: skip
    with pytest.raises(TypeError, match="bytes payloads need a serializer"):
        client.send("q", b"\x00\x01")
    with pytest.raises(pgque.PgqueError):
        client.send("q", "not json")
    client.conn.rollback()


def test_raw_text_serializer(db: str, queue: str) -> None:
    from pgque.serializers import RAW_TEXT

    with psycopg.connect(db) as conn:
        client = pgque.PgqueClient(conn, serializer=RAW_TEXT)
        client.send("q", "a,b,c", type="csv")
        client.send_batch("q", "csv", ["1,2", "3,4"])
        tick(client)
        assert [m.payload for m in client.receive("q", "c")] == ["a,b,c", "1,2", "3,4"]


def test_event_and_types(client: pgque.PgqueClient, queue: str) -> None:
    client.send("q", pgque.Event({"n": 1}, type="order.created"), type="ignored")
    client.send("q", pgque.Event({"n": 2}))
    tick(client)
    assert [m.type for m in client.receive("q", "c")] == ["order.created", "default"]
    with pytest.raises(TypeError):
        pgque.Event({"n": 3}, type="t", priority=1)  # type: ignore[call-arg]


def test_max_messages(client: pgque.PgqueClient, queue: str) -> None:
    client.send_batch("q", "t", [{"i": i} for i in range(5)])
    tick(client)
    first = client.receive("q", "c", 3)
    assert len(first) == 3
    rest = client.receive_rest(first[0].batch_id, first[-1].msg_id)
    assert [m.json()["i"] for m in first + rest] == [0, 1, 2, 3, 4]


def test_ticker_calls(client: pgque.PgqueClient, queue: str) -> None:
    client.send("q", {})
    client.conn.commit()
    assert isinstance(client.force_next_tick("q"), int)
    assert isinstance(client.ticker("q"), int)
    client.force_tick("q")
    assert client.ticker_all() >= 1


def test_errors_are_mapped(client: pgque.PgqueClient, queue: str) -> None:
    with pytest.raises(pgque.PgqueQueueNotFound) as info:
        client.send("nope", {})
    assert isinstance(info.value.__cause__, psycopg.Error)
    assert (info.value.code, info.value.sqlstate) == ("queue_not_found", "P0001")
    client.conn.rollback()
    with pytest.raises(pgque.PgqueConsumerNotFound):
        client.receive("q", "nobody")
    client.conn.rollback()
    with pytest.raises(pgque.PgqueBatchNotFound):
        client.nack(424242, pgque.Message(msg_id=1, batch_id=424242, type="t", payload="{}"))
    client.conn.rollback()
    with pytest.raises(pgque.PgqueInvalidArgument):
        client.receive("q", "c", 0)
    client.conn.rollback()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("queue not found: x", pgque.PgqueQueueNotFound),
        ("Not subscriber to queue: q/c", pgque.PgqueConsumerNotFound),
        ("consumer not registered", pgque.PgqueConsumerNotFound),
        ("batch not found: 7", pgque.PgqueBatchNotFound),
        ("cannot find data for batch 7", pgque.PgqueBatchNotFound),
        ("something else", pgque.PgqueError),
    ],
)
def test_upstream_bare_texts_are_mapped(
    client: pgque.PgqueClient, text: str, expected: type[pgque.PgqueError]
) -> None:
    """Against upstream's SQL (no DETAIL codes), its message texts decide the class."""
    client.conn.execute(
        "create function pg_temp.upstream_error(t text) returns int language plpgsql"
        " as $$ begin raise exception '%', t; end $$"
    )
    with pytest.raises(pgque.PgqueError) as info:
        statement = sql.SQL("select pg_temp.upstream_error({})").format(sql.Literal(text))
        execute_text(client.conn, statement)  # mapped as every statement of the package
    assert type(info.value) is expected
    client.conn.rollback()


def test_nack_retry_and_dead_letter(client: pgque.PgqueClient, queue: str) -> None:
    client.send("q", {"x": 1})
    tick(client)
    (msg,) = client.receive("q", "c")
    client.nack(msg.batch_id, msg, retry_after=0)
    client.ack(msg.batch_id)
    client.conn.commit()
    assert one(client.conn, "select count(*) from pgque.retry_queue") == 1
    assert one(client.conn, "select count(*) from pgque.dead_letter") == 0
    client.conn.execute("update pgque.queue set queue_max_retries = 0")
    client.send("q", {"x": 2})
    tick(client)
    (msg,) = client.receive("q", "c")
    client.nack(msg.batch_id, msg, retry_after=0, reason="bad")
    client.ack(msg.batch_id)
    client.conn.commit()
    assert rows(client.conn, "select dl_reason from pgque.dead_letter") == [("bad",)]


def test_threads_get_distinct_ids(db: str, queue: str) -> None:
    ids: list[int] = []
    lock = threading.Lock()

    def produce() -> None:
        with pgque.connect(db, autocommit=True) as c:
            mine = [c.send("q", {"i": i}) for i in range(25)]
        with lock:
            ids.extend(mine)

    threads = [threading.Thread(target=produce) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(ids) == len(set(ids)) == 100


def test_cooperative_methods(client: pgque.PgqueClient, queue: str) -> None:
    assert client.subscribe_subconsumer("q", "g", "s1") == 1
    assert client.subscribe_subconsumer("q", "g", "s1") == 0
    client.send_batch("q", "t", [{"a": 1}, {"a": 2}])
    tick(client)
    msgs = client.receive_coop("q", "g", "s1", max_messages=10)
    assert [m.json() for m in msgs] == [{"a": 1}, {"a": 2}]
    assert client.touch_subconsumer("q", "g", "s1") == 1
    with pytest.raises(pgque.PgqueError):
        client.unsubscribe_subconsumer("q", "g", "s1")
    client.conn.rollback()
    msgs = client.receive_coop("q", "g", "s1", max_messages=10)
    assert client.unsubscribe_subconsumer("q", "g", "s1", batch_handling=1) == 1
    client.conn.commit()


def test_send_carries_the_current_trace(client: pgque.PgqueClient, queue: str) -> None:
    from opentelemetry.sdk.trace import TracerProvider

    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("produce") as span:
        client.send("q", {"traced": True})
        client.send("q", {"keyed": True}, extras=("customer:7", None, None, None))
    trace_id = format(span.get_span_context().trace_id, "032x")
    got = rows(client.conn, "select ev_extra1, ev_extra4 from pgque.event_template order by ev_id")
    assert got[0][0].split("-")[1] == trace_id and got[0][1] is None
    assert got[1][0] == "customer:7" and got[1][1].split("-")[1] == trace_id
    from pgque import tracing

    ctx = tracing.extract("public.orders", got[0][0])
    assert ctx is not None
    assert tracing.extract("public.orders", None) is None


def test_the_serializer_may_be_set_after_construction(
    client: pgque.PgqueClient, queue: str
) -> None:
    first = client.send("q", '{"b": 1, "a": 2}')  # JSON: stored canonically
    client.serializer = pgque.serializers.RAW_TEXT
    second = client.send("q", "plain words")
    [third] = client.send_batch("q", "t", ["more words"])
    client.conn.commit()
    client.serializer = pgque.serializers.JSON
    with pytest.raises(pgque.PgqueInvalidArgument, match="payload is not valid JSON"):
        client.send("q", "plain words")
    client.conn.rollback()
    assert client.send("q", "[1]") > 0
    ids = (first, second, third)
    got = rows(client.conn, "select ev_data from pgque.event_template where ev_id = any(%s)"
                            " order by ev_id", list(ids))  # fmt: skip
    assert [r[0] for r in got] == ['{"a": 2, "b": 1}', "plain words", "more words"]
