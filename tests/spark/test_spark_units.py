"""The connector's Python pieces, called directly (no JVM): options, schemas, readers, writers."""

from __future__ import annotations

import json
import math
import pickle
from typing import Any

import psycopg
import pytest
from spark_helpers import queue_events, require_spark, send, staged

from _engine import make_queue, one

require_spark()

import pyarrow as pa  # noqa: E402
from pyspark.sql.datasource import InputPartition  # noqa: E402
from pyspark.sql.pandas.types import to_arrow_schema  # noqa: E402
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows  # noqa: E402
from pyspark.sql.types import (  # noqa: E402
    BinaryType,
    DoubleType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

import pgque  # noqa: E402
import pgque.spark  # noqa: E402
from pgque.spark import _write  # noqa: E402
from pgque.spark._options import parse_sink_options, parse_source_options  # noqa: E402
from pgque.spark._read import (  # noqa: E402
    ARROW_SCHEMA,
    SCHEMA,
    PgqueBatchReader,
    PgqueStreamReader,
    TickRange,
)
from pgque.spark._source import PgqueDataSource  # noqa: E402

Conn = psycopg.Connection[Any]


def src_opts(db: str, **extra: str) -> dict[str, str]:
    return {"dsn": db, "queue": "q", "consumer": "sp", **extra}


# -- options ------------------------------------------------------------------


def test_source_options_defaults_and_names() -> None:
    opts = parse_source_options(
        {"DSN": "x", "queue": "q", "consumer": "c", "MAXTICKSPERTRIGGER": "3"}, streaming=True
    )
    assert (opts.num_partitions, opts.max_ticks, opts.max_events) == (2, 3, None)
    assert opts.starting_position == "consumer"
    batch = parse_source_options({"dsn": "x", "queue": "q", "startTick": "4"}, streaming=False)
    assert (batch.start_tick, batch.end_tick, batch.consumer) == (4, None, None)


@pytest.mark.parametrize(
    ("streaming", "options", "message"),
    [
        (True, {"queue": "q", "consumer": "c"}, "option 'dsn' is required"),
        (True, {"dsn": "x", "consumer": "c"}, "option 'queue' is required"),
        (True, {"dsn": "x", "queue": "q"}, "option 'consumer' is required"),
        (True, {"dsn": "x", "queue": "q", "consumer": ""}, "'consumer' must not be empty"),
        (True, {"dsn": "x", "queue": "q", "consumer": "c", "qeue": "q"}, "unknown option 'qeue'"),
        (True, {"dsn": "x", "queue": "q", "consumer": "c", "startTick": "1"},
         "startTick does not apply to a streaming source"),
        (True, {"dsn": "x", "queue": "q", "consumer": "c", "numPartitions": "0"},
         "'numPartitions' must be a positive integer, not '0'"),
        (True, {"dsn": "x", "queue": "q", "consumer": "c", "maxEventsPerTrigger": "lots"},
         "'maxEventsPerTrigger' must be a positive integer"),
        (True, {"dsn": "x", "queue": "q", "consumer": "c", "startingPosition": "earliest"},
         "'startingPosition' must be consumer, latest or a tick id"),
        (True, {"dsn": "x", "queue": "q", "consumer": "c", "path": "/x"}, "a path is not taken"),
        (False, {"dsn": "x", "queue": "q"}, "give option 'startTick'"),
        (False, {"dsn": "x", "queue": "q", "startTick": "5", "endTick": "4"}, "is after"),
        (False, {"dsn": "x", "queue": "q", "startTick": "-1"}, "'startTick' must be a tick id"),
        (False, {"dsn": "x", "queue": "q", "consumer": "c", "maxTicksPerTrigger": "1"},
         "maxTicksPerTrigger does not apply to a batch source"),
    ],
)  # fmt: skip
def test_source_option_errors_name_the_option(
    streaming: bool, options: dict[str, str], message: str
) -> None:
    with pytest.raises(pgque.PgqueInvalidArgument, match=message):
        parse_source_options(options, streaming=streaming)


def test_sink_options() -> None:
    assert parse_sink_options({"dsn": "x", "queue": "q"}, streaming=False).type == "default"
    # Spark adds the checkpoint location to a streaming sink's options.
    opts = parse_sink_options(
        {"dsn": "x", "queue": "q", "type": "t", "checkpointLocation": "/c"}, streaming=True
    )
    assert opts.type == "t"
    with pytest.raises(pgque.PgqueInvalidArgument, match="unknown option 'consumer'"):
        parse_sink_options({"dsn": "x", "queue": "q", "consumer": "c"}, streaming=True)
    with pytest.raises(pgque.PgqueInvalidArgument, match="option 'queue' is required"):
        parse_sink_options({"dsn": "x"}, streaming=False)


# -- schemas ------------------------------------------------------------------


def test_arrow_schema_is_what_spark_expects() -> None:
    assert to_arrow_schema(SCHEMA, timezone="UTC").equals(ARROW_SCHEMA)
    assert pgque.spark.SCHEMA is SCHEMA


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ([("type", StringType())], "has no 'payload' column"),
        ([("payload", StringType()), ("key", StringType())], "column 'key' is not one of"),
        ([("payload", StringType()), ("type", LongType())], "column 'type' must be a string"),
        ([("payload", BinaryType())], "'payload' has type binary"),
        ([("payload", StructType([StructField("raw", BinaryType())]))], "'payload.raw'"),
        ([("payload", MapType(DoubleType(), StringType()))], "map with double keys"),
    ],
)
def test_sink_schema_errors_name_the_column(fields: list[tuple[str, Any]], message: str) -> None:
    schema = StructType([StructField(name, dtype) for name, dtype in fields])
    with pytest.raises(pgque.PgqueInvalidArgument, match=message):
        _write.check_schema(schema)


def test_read_schema_is_fixed() -> None:
    ds = PgqueDataSource({"dsn": "x", "queue": "q", "startTick": "1"})
    assert isinstance(ds.reader(SCHEMA), PgqueBatchReader)
    wrong = StructType([StructField("msg_id", StringType())])
    with pytest.raises(pgque.PgqueInvalidArgument, match="'msg_id' must be bigint, not string"):
        ds.reader(wrong)
    with pytest.raises(pgque.PgqueInvalidArgument, match="'key' of the given schema"):
        ds.streamReader(StructType([StructField("key", StringType())]))


# -- the streaming reader, driven by hand -------------------------------------


@pytest.fixture
def q(conn: Conn) -> str:
    make_queue(conn, "q")
    return "q"


def test_stream_reader_offsets_limits_and_commit(conn: Conn, db: str, q: str) -> None:
    reader = PgqueStreamReader(parse_source_options(src_opts(db), streaming=True))
    pickle.loads(pickle.dumps(reader))  # Spark pickles it to the executors
    start = reader.initialOffset()
    assert start == {"tick": 1, "queue": "q"}
    ticks = [send(conn, q, [f"e{i}-{j}" for j in range(10)]) for i in range(4)]
    assert reader.initialOffset() == start  # the same on a second call
    assert reader.getDefaultReadLimit() == ReadAllAvailable()
    assert reader.latestOffset(start, ReadAllAvailable()) == {"tick": ticks[-1], "queue": "q"}

    limited = PgqueStreamReader(
        parse_source_options(src_opts(db, maxTicksPerTrigger="3"), streaming=True)
    )
    limit = limited.getDefaultReadLimit()
    assert isinstance(limit, ReadMaxRows)  # so that Spark hands a limit back
    assert limited.latestOffset(start, limit) == {"tick": ticks[2], "queue": "q"}
    assert limited.latestOffset(start, ReadAllAvailable()) == {"tick": ticks[-1], "queue": "q"}
    assert limited.latestOffset(start, ReadMaxRows(15)) == {"tick": ticks[0], "queue": "q"}
    by_events = PgqueStreamReader(
        parse_source_options(src_opts(db, maxEventsPerTrigger="25"), streaming=True)
    )
    assert by_events.getDefaultReadLimit() == ReadMaxRows(25)
    assert by_events.latestOffset(start, ReadMaxRows(25)) == {"tick": ticks[1], "queue": "q"}

    # availableNow: pinned at the latest tick when prepared.
    reader.prepareForTriggerAvailableNow()
    later = send(conn, q, ["after the pin"])
    assert reader.latestOffset(start, ReadAllAvailable()) == {"tick": ticks[-1], "queue": "q"}
    assert reader.reportLatestOffset() == {"tick": later, "queue": "q"}

    assert reader.partitions({"tick": 5}, {"tick": 5}) == []
    parts = reader.partitions(start, {"tick": ticks[1]})
    assert [(p.part, p.parts) for p in parts] == [(0, 2), (1, 2)]
    assert all(isinstance(p, InputPartition) for p in parts)
    batches = [b for p in pickle.loads(pickle.dumps(parts)) for b in reader.read(p)]
    assert all(b.schema.equals(ARROW_SCHEMA) for b in batches)
    table = pa.Table.from_batches(batches)
    assert sorted(table.column("payload").to_pylist()) == sorted(
        f"e{i}-{j}" for i in range(2) for j in range(10)
    )
    assert set(table.column("start_tick").to_pylist()) == {1}
    assert set(table.column("end_tick").to_pylist()) == {ticks[1]}
    assert set(table.column("type").to_pylist()) == {"order"}

    reader.commit({"tick": ticks[1]})  # an offset of an earlier version: no queue
    assert one(conn, "select last_tick from pgque.get_consumer_info('q', 'sp')") == ticks[1]
    # A checkpoint of another queue's query is refused, naming both queues.
    with pytest.raises(pgque.PgqueInvalidArgument, match="offset is of queue 'other'"):
        reader.latestOffset({"tick": 1, "queue": "other"}, ReadAllAvailable())
    with pytest.raises(pgque.PgqueInvalidArgument, match="option 'queue' is 'q'"):
        reader.partitions({"tick": 1, "queue": "other"}, {"tick": 2, "queue": "other"})
    reader.stop()
    assert one(conn, "select count(*) from pgque.get_consumer_info('q', 'sp')") == 1


def test_stream_reader_starting_positions(conn: Conn, db: str, q: str) -> None:
    t2 = send(conn, q, ["old"])
    latest = PgqueStreamReader(
        parse_source_options(src_opts(db, startingPosition="latest"), streaming=True)
    )
    assert latest.initialOffset() == {"tick": t2, "queue": "q"}
    send(conn, q, ["new"])
    assert latest.initialOffset() == {"tick": t2, "queue": "q"}  # idempotent although a tick came
    by_tick = PgqueStreamReader(
        parse_source_options(src_opts(db, consumer="other", startingPosition="1"), streaming=True)
    )
    assert by_tick.initialOffset() == {"tick": 1, "queue": "q"}
    assert one(conn, "select last_tick from pgque.get_consumer_info('q', 'other')") == 1


def test_stream_reader_errors(conn: Conn, db: str, q: str) -> None:
    reader = PgqueStreamReader(parse_source_options(src_opts(db), streaming=True))
    start = reader.initialOffset()
    make_queue(conn, "dropped")
    on_dropped = PgqueStreamReader(
        parse_source_options(src_opts(db, queue="dropped"), streaming=True)
    )
    dropped_start = on_dropped.initialOffset()
    one(conn, "select pgque.unregister_consumer('dropped', 'sp')")
    one(conn, "select pgque.drop_queue('dropped')")  # mid-query
    with pytest.raises(pgque.PgqueQueueNotFound, match="queue not found: dropped"):
        on_dropped.latestOffset(dropped_start, ReadAllAvailable())
    one(conn, "select pgque.unregister_consumer('q', 'sp')")
    with pytest.raises(
        pgque.PgqueConsumerNotFound, match="consumer sp is not subscribed to queue q"
    ):
        reader.latestOffset(start, ReadAllAvailable())
    with pytest.raises(pgque.PgqueConsumerNotFound):
        reader.commit(start)
    with pytest.raises(pgque.PgqueError, match="not a pgque offset"):
        reader.latestOffset({"offset": 3}, ReadAllAvailable())
    unknown = PgqueStreamReader(parse_source_options(src_opts(db, queue="nope"), streaming=True))
    with pytest.raises(pgque.PgqueQueueNotFound, match="queue not found: nope"):
        unknown.initialOffset()
    bad_dsn = PgqueStreamReader(
        parse_source_options(src_opts("host=/nonexistent dbname=x"), streaming=True)
    )
    with pytest.raises(pgque.PgqueConnectionError, match="cannot connect with option 'dsn'"):
        bad_dsn.initialOffset()


TRICKY = [
    ("t", 'quote " comma , newline \n cr \r\n tab \t', "", None, "x", None),
    (None, "", None, "", 'a "b"', "\\N"),
    ("ünï", "日本語 🎉", "NULL", "null", ",", '"'),
    ("big", "x" * 3_000_000, None, None, None, None),
]


def test_read_keeps_every_value_exactly(
    conn: Conn, db: str, q: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pgque.spark._read, "BATCH_BYTES", 64 << 10)
    for ev_type, data, e1, e2, e3, e4 in TRICKY:
        one(conn, "select pgque.insert_event('q', %s, %s, %s, %s, %s, %s)",
            ev_type, data, e1, e2, e3, e4)  # fmt: skip
    end = send(conn, q, [f"n{i}" for i in range(25_000)])  # several Arrow batches
    got = [b for b in PgqueStreamReader.read(None, TickRange(db, q, 1, end, 0, 1))]  # type: ignore[arg-type]
    assert len(got) > 2
    table = pa.Table.from_batches(got).sort_by("msg_id")
    rows = [
        (r["type"], r["payload"], r["extra1"], r["extra2"], r["extra3"], r["extra4"])
        for r in table.to_pylist()
    ]
    assert rows[: len(TRICKY)] == TRICKY
    assert rows[len(TRICKY) :] == [
        ("order", f"n{i}", None, None, None, None) for i in range(25_000)
    ]
    created = one(conn, "select ev_time from pgque.event_1 where ev_data = 'n0'")
    assert table.column("created_at")[len(TRICKY)].as_py() == created


def test_read_fails_for_a_rotated_tick_not_partially(conn: Conn, db: str, q: str) -> None:
    part = TickRange(db, q, 0, 1, 0, 1)
    with pytest.raises(pgque.PgqueInvalidArgument, match="queue q: tick 0 was rotated away"):
        list(PgqueStreamReader.read(None, part))  # type: ignore[arg-type]


# -- the batch reader ---------------------------------------------------------


def test_batch_reader_ranges(conn: Conn, db: str, q: str) -> None:
    one(conn, "select pgque.register_consumer('q', 'etl')")
    t2 = send(conn, q, ["a", "b"])
    t3 = send(conn, q, ["c"])
    pending = PgqueBatchReader(
        parse_source_options({"dsn": db, "queue": q, "consumer": "etl"}, streaming=False)
    )
    assert pending.tick_range() == (1, t3)
    fixed = PgqueBatchReader(
        parse_source_options(
            {"dsn": db, "queue": q, "startTick": str(t2), "endTick": str(t3)}, streaming=False
        )
    )
    parts = fixed.partitions()
    got = [b.column("payload").to_pylist() for p in parts for b in fixed.read(p)]
    assert sorted(v for g in got for v in g) == ["c"]
    assert list(fixed.read(InputPartition(None))) == []  # Spark's placeholder for no partitions
    # Reading moved nothing; advance_consumer does, when asked.
    assert one(conn, "select last_tick from pgque.get_consumer_info('q', 'etl')") == 1
    pgque.spark.advance_consumer(db, q, "etl", t3)
    assert one(conn, "select last_tick from pgque.get_consumer_info('q', 'etl')") == t3
    for options, error, message in (
        (
            {"consumer": "nobody"},
            pgque.PgqueConsumerNotFound,
            "consumer 'nobody' is not subscribed",
        ),
        ({"startTick": "1", "endTick": "99"}, pgque.PgqueInvalidArgument, "tick 99 does not exist"),
        ({"queue": "nope", "consumer": "c"}, pgque.PgqueQueueNotFound, "queue not found: nope"),
    ):
        reader = PgqueBatchReader(
            parse_source_options({"dsn": db, "queue": q, **options}, streaming=False)
        )
        with pytest.raises(error, match=message):
            reader.partitions()


# -- the writers, driven by hand ----------------------------------------------


def record_batch(schema: StructType, columns: dict[str, list[Any]]) -> Any:
    arrow = to_arrow_schema(schema, timezone="UTC")
    return pa.RecordBatch.from_pydict(columns, schema=arrow)


PAYLOAD_STRUCT = StructType(
    [
        StructField(
            "payload", StructType([StructField("n", LongType()), StructField("x", DoubleType())])
        ),
        StructField("type", StringType()),
        StructField("extra2", StringType()),
    ]
)  # fmt: skip


def test_batch_writer_two_tasks_then_commit(conn: Conn, db: str, q: str) -> None:
    writer = PgqueDataSource({"dsn": db, "queue": q, "type": "fallback"}).writer(
        PAYLOAD_STRUCT, False
    )
    writer = pickle.loads(pickle.dumps(writer))
    task1 = writer.write(
        iter([record_batch(PAYLOAD_STRUCT, {"payload": [{"n": 1, "x": 0.5}], "type": ["t1"],
                                            "extra2": ["e"]})])
    )  # fmt: skip
    task2 = writer.write(
        iter([record_batch(PAYLOAD_STRUCT, {"payload": [{"n": 2, "x": None}], "type": [None],
                                            "extra2": [None]})])
    )  # fmt: skip
    assert (task1.rows, task2.rows) == (1, 1)
    assert queue_events(conn, q) == []  # nothing before the commit
    writer.commit(pickle.loads(pickle.dumps([task2, task1])))
    assert [(e[0], json.loads(e[1]), e[3]) for e in queue_events(conn, q)] == [
        ("fallback", {"n": 2, "x": None}, None),
        ("t1", {"n": 1, "x": 0.5}, "e"),
    ]
    assert staged(conn) == 0


def test_batch_writer_abort_drops_failed_tasks_rows(
    conn: Conn, db: str, q: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_write, "CHUNK_ROWS", 1)  # a chunk per batch: one was staged
    schema = StructType([StructField("payload", StringType())])
    writer = PgqueDataSource({"dsn": db, "queue": q}).writer(schema, False)
    writer.write(iter([record_batch(schema, {"payload": ["a", "b"]})]))
    with pytest.raises(pgque.PgqueInvalidArgument, match="column 'payload' is NULL in 1 row"):
        writer.write(iter([record_batch(schema, {"payload": ["c"]}),
                           record_batch(schema, {"payload": ["d", None]})]))  # fmt: skip
    assert staged(conn) == 2  # the failed task's chunks rolled back with it
    writer.abort([None, None])  # Spark may not even list the good task
    assert staged(conn) == 0
    assert queue_events(conn, q) == []


def test_writer_refuses_unserialisable_values_and_bad_setups(conn: Conn, db: str, q: str) -> None:
    writer = PgqueDataSource({"dsn": db, "queue": q}).writer(PAYLOAD_STRUCT, False)
    bad = record_batch(PAYLOAD_STRUCT, {"payload": [{"n": 1, "x": math.nan}], "type": ["t"],
                                        "extra2": [None]})  # fmt: skip
    with pytest.raises(pgque.PgqueInvalidArgument, match="column 'payload' cannot be sent as JSON"):
        writer.write(iter([bad]))
    with pytest.raises(pgque.PgqueQueueNotFound, match="queue not found: nope"):
        PgqueDataSource({"dsn": db, "queue": "nope"}).writer(PAYLOAD_STRUCT, False)
    with pytest.raises(pgque.PgqueInvalidArgument, match="mode 'overwrite' is not possible"):
        PgqueDataSource({"dsn": db, "queue": q}).writer(PAYLOAD_STRUCT, True)


def test_stream_writer_replayed_batch_is_a_no_op(
    conn: Conn, db: str, q: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = StructType([StructField("payload", StringType())])
    monkeypatch.setattr(_write, "_task_batch", lambda: ("query-x", 4))
    source = PgqueDataSource({"dsn": db, "queue": q, "checkpointLocation": "/tmp/ck"})
    message = source.streamWriter(schema, False).write(
        iter([record_batch(schema, {"payload": ["a", "b"]})])
    )
    assert message.write_id == "query-x:4"
    source.streamWriter(schema, False).commit([message], 4)  # a fresh writer commits
    replay = source.streamWriter(schema, False).write(
        iter([record_batch(schema, {"payload": ["a", "b"]})])
    )
    source.streamWriter(schema, False).commit([replay], 4)
    assert [e[1] for e in queue_events(conn, q)] == ["a", "b"]
    assert staged(conn) == 0
    # An abort with no message left cannot name the write; the next batch cleans up.
    source.streamWriter(schema, False).write(iter([record_batch(schema, {"payload": ["x"]})]))
    source.streamWriter(schema, False).abort([None], 4)
    assert staged(conn) == 1
    monkeypatch.setattr(_write, "_task_batch", lambda: ("query-x", 5))
    nxt = source.streamWriter(schema, False).write(iter([record_batch(schema, {"payload": ["c"]})]))
    source.streamWriter(schema, False).commit([nxt], 5)
    assert staged(conn) == 0
    assert [e[1] for e in queue_events(conn, q)] == ["a", "b", "c"]


def test_without_a_task_context_the_stream_writer_refuses(db: str, q: str) -> None:
    schema = StructType([StructField("payload", StringType())])
    writer = PgqueDataSource({"dsn": db, "queue": q}).streamWriter(schema, False)
    with pytest.raises(pgque.PgqueError, match="does not know its streaming query id"):
        writer.write(iter([]))


def test_discovery_module_names_the_source() -> None:
    import pyspark_pgque

    assert pyspark_pgque.DefaultSource is PgqueDataSource
    assert PgqueDataSource.name() == "pgque"


# -- payloadSchema ------------------------------------------------------------


def test_payload_parser_reads_json_objects_by_the_schema() -> None:
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from pgque.spark._payload import PayloadParser

    struct = StructType([StructField("order_id", LongType()), StructField("region", StringType())])
    parser = pickle.loads(pickle.dumps(PayloadParser(struct)))  # as tasks get it
    payloads = pa.array(
        [
            '{"order_id": 1, "region": "eu"}',
            '{\n  "region": "us",\n  "order_id": 2,\n  "unknown": [1, 2]\n}',  # pretty, extra key
            None,
            '{"order_id": 4}',  # a missing key is NULL
            '{"region": "line\\nbreak"}',
        ]
    )
    parsed = parser.parse(payloads, pa.array([10, 11, 12, 13, 14], pa.int64()))
    assert parsed.type == parser.arrow_type()
    assert parsed.to_pylist() == [
        {"order_id": 1, "region": "eu"},
        {"order_id": 2, "region": "us"},
        None,
        {"order_id": 4, "region": None},
        {"order_id": None, "region": "line\nbreak"},
    ]


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        ("not json", "JSON parse error"),
        ('{"order_id": "seven"}', "order_id"),
        ("", "an empty text"),
        ("[1, 2]", "JSON"),
    ],
)
def test_payload_parser_names_the_event_that_does_not_fit(bad: str, problem: str) -> None:
    from pyspark.sql.types import LongType, StructField, StructType

    from pgque.spark._payload import PayloadParser

    parser = PayloadParser(StructType([StructField("order_id", LongType())]))
    payloads = pa.array(['{"order_id": 1}', bad, '{"order_id": 3}'])
    with pytest.raises(pgque.PgqueInvalidArgument) as info:
        parser.parse(payloads, pa.array([100, 101, 102], pa.int64()))
    message = str(info.value)
    assert "payload of event msg_id 101 does not fit option 'payloadSchema'" in message
    assert problem in message


def test_payload_schema_option_errors_name_the_option() -> None:
    from pgque.spark._payload import parse_payload_schema

    assert parse_payload_schema("a long, b string", "source").simpleString() == (
        "struct<a:bigint,b:string>"
    )
    nested = (
        "`odd name` decimal(10, 2), t: timestamp, tags array<varchar(5)>,"
        " m map<string, struct<x: double, y: array<int>>>, flag BOOLEAN"
    )
    expected = (
        "struct<odd name:decimal(10,2),t:timestamp,tags:array<string>,"
        "m:map<string,struct<x:double,y:array<int>>>,flag:boolean>"
    )
    assert parse_payload_schema(nested, "source").simpleString() == expected
    assert parse_payload_schema(f"struct<{nested}>", "source").simpleString() == expected
    as_json = parse_payload_schema(nested, "source").json()
    assert parse_payload_schema(as_json, "source").simpleString() == expected
    for bad, message in (
        ("a lng", "option 'payloadSchema' is not a Spark schema"),
        ('{"type": "nonsense"}', "option 'payloadSchema' is not a Spark schema"),
        ("a long,", "option 'payloadSchema' is not a Spark schema"),
        ("a array<int", "option 'payloadSchema' is not a Spark schema"),
    ):
        with pytest.raises(pgque.PgqueInvalidArgument, match=message):
            parse_payload_schema(bad, "source")
    with pytest.raises(pgque.PgqueInvalidArgument, match="option 'payloadSchema' must not be"):
        parse_source_options(src_opts("x", payloadSchema=" "), streaming=True)
