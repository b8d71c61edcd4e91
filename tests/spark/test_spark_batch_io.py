"""Batch reads and writes through Spark: ranges, partitions, sink atomicity, bad input."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from spark_helpers import (
    error_text,
    orders,
    queue_events,
    require_spark,
    send,
    send_ids,
    staged,
)

from _engine import make_queue, one

require_spark()

import pgque.spark  # noqa: E402

Conn = psycopg.Connection[Any]


@pytest.fixture
def q(conn: Conn) -> str:
    make_queue(conn, "q")
    return "q"


def read(spark: Any, db: str, **options: Any) -> Any:
    reader = spark.read.format("pgque").option("dsn", db).option("queue", "q")
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def test_batch_read_is_the_same_in_one_or_many_partitions(
    spark: Any, conn: Conn, db: str, q: str
) -> None:
    one(conn, "select pgque.register_consumer('q', 'etl')")  # format("pgque") was never registered
    for i in range(3):
        end = send(conn, q, orders(i * 50, 50))
    one_part = read(spark, db, startTick=1, numPartitions=1)
    assert one_part.columns == [f.name for f in pgque.spark.SCHEMA.fields]
    ids = sorted(r.msg_id for r in one_part.select("msg_id").collect())
    assert len(ids) == 150
    many = read(spark, db, startTick=1, numPartitions=5)
    assert many.rdd.getNumPartitions() == 5
    assert sorted(r.msg_id for r in many.select("msg_id").collect()) == ids
    # The consumer's pending events, moving nothing.
    pending = read(spark, db, consumer="etl").collect()
    assert sorted(r.msg_id for r in pending) == ids
    assert {(r.start_tick, r.end_tick, r.type) for r in pending} == {(1, end, "order")}
    assert one(conn, "select last_tick from pgque.get_consumer_info('q', 'etl')") == 1
    # An empty range reads nothing.
    assert read(spark, db, startTick=end, endTick=end).count() == 0
    pgque.spark.register(spark)  # explicit registration works too
    assert read(spark, db, startTick=1, endTick=end).count() == 150


def write(df: Any, db: str, queue: str = "q", **options: Any) -> None:
    writer = df.write.format("pgque").option("dsn", db).option("queue", queue).mode("append")
    for key, value in options.items():
        writer = writer.option(key, str(value))
    writer.save()


def test_batch_write_maps_columns(spark: Any, conn: Conn, db: str, q: str) -> None:
    df = spark.createDataFrame(
        [({"n": 1, "tags": ["a"]}, "created", "k1"), ({"n": 2, "tags": []}, None, None)],
        "payload struct<n: int, tags: array<string>>, type string, extra4 string",
    ).coalesce(1)
    write(df, db, type="fallback")
    got = [(e[0], json.loads(e[1]), e[5]) for e in queue_events(conn, q)]
    assert got == [
        ("created", {"n": 1, "tags": ["a"]}, "k1"),
        ("fallback", {"n": 2, "tags": []}, None),
    ]
    text = spark.createDataFrame([("verbatim {not json",)], "payload string")
    write(text, db)
    maps = spark.sql("select map('a', 1, 'b', 2) as payload")
    write(maps, db)
    assert [e[1] for e in queue_events(conn, q)][2:] == ["verbatim {not json", '{"a": 1, "b": 2}']


def test_a_failed_task_publishes_nothing(spark: Any, conn: Conn, db: str, q: str) -> None:
    from pyspark.sql.functions import col, udf

    def payload(i):  # type: ignore[no-untyped-def]
        if i == 24_000:
            raise RuntimeError("injected failure in the big task")
        return f"row {i}"

    big = spark.range(0, 25_000, numPartitions=1)  # stages a 20000-row chunk, then fails
    small = spark.range(0, 10, numPartitions=1)  # succeeds quickly
    df = big.union(small).select(udf(payload, "string")(col("id")).alias("payload"))
    with pytest.raises(Exception) as info:
        write(df, db)
    assert "injected failure in the big task" in error_text(info.value)
    assert queue_events(conn, q) == []
    assert staged(conn) == 0  # the failed task rolled back, abort dropped the other's rows


@pytest.mark.parametrize(
    ("sql", "options", "message"),
    [
        ("select 'x' as body", {}, "has no 'payload' column"),
        ("select 'x' as payload, 1 as key", {}, "column 'key' is not one of"),
        ("select 'x' as payload, 5 as type", {}, "column 'type' must be a string"),
        ("select cast('x' as binary) as payload", {}, "'payload' has type binary"),
        ("select 'x' as payload", {"queue": "nope"}, "queue not found: nope"),
        ("select 'x' as payload", {"qeue": "q"}, "unknown option 'qeue'"),
    ],
)
def test_bad_writes_fail_at_start(
    spark: Any, conn: Conn, db: str, q: str, sql: str, options: dict[str, str], message: str
) -> None:
    with pytest.raises(Exception) as info:
        write(spark.sql(sql), db, **options)
    assert message in error_text(info.value)
    assert queue_events(conn, q) == []


def test_nulls_and_nan_are_refused_and_nothing_is_sent(
    spark: Any, conn: Conn, db: str, q: str
) -> None:
    # One task: a task still running when Spark aborts may stage after the abort
    # (never published; spark_cleanup removes it).
    nulls = spark.sql("select * from values ('a'), (null), ('c') as t(payload)").coalesce(1)
    with pytest.raises(Exception) as info:
        write(nulls, db)
    assert "column 'payload' is NULL" in error_text(info.value)
    nan = spark.sql("select named_struct('x', double('NaN')) as payload")
    with pytest.raises(Exception) as info:
        write(nan, db)
    assert "column 'payload' cannot be sent as JSON" in error_text(info.value)
    with pytest.raises(Exception) as info:
        spark.sql("select 'x' as payload").write.format("pgque").option("dsn", db).option(
            "queue", q
        ).mode("overwrite").save()
    assert "mode 'overwrite' is not possible" in error_text(info.value)
    assert queue_events(conn, q) == []
    assert staged(conn) == 0


def test_bad_reads_fail_at_start(spark: Any, conn: Conn, db: str, q: str) -> None:
    for options, message in (
        ({"consumer": "nobody"}, "is not subscribed"),
        ({"startTick": 1, "endTick": 50}, "tick 50 does not exist"),
        ({"consumer": "c", "maxTicksPerTrigger": 1}, "does not apply to a batch source"),
        ({}, "give option 'startTick'"),
    ):
        with pytest.raises(Exception) as info:
            read(spark, db, **options).collect()
        assert message in error_text(info.value), options
    with pytest.raises(Exception) as info:
        spark.readStream.format("pgque").option("dsn", db).option("qeue", q).load()
    assert "unknown option 'qeue'" in error_text(info.value)  # already at load()
    stream = spark.readStream.format("pgque").option("dsn", db).option("queue", q).load()
    query = stream.writeStream.format("noop").start()
    with pytest.raises(Exception) as info:
        query.awaitTermination(60)
    assert "option 'consumer' is required" in error_text(info.value)
    with pytest.raises(Exception) as info:
        spark.read.format("pgque").schema("msg_id string").option("dsn", db).option(
            "queue", q
        ).option("startTick", "1").load().collect()
    assert "'msg_id' must be bigint, not string" in error_text(info.value)


def test_payload_schema_reads_a_struct_and_the_sink_writes_it_back_as_json(
    spark: Any, conn: Conn, db: str, q: str
) -> None:
    make_queue(conn, "copy")
    end = send(conn, q, orders(0, 30))
    df = read(spark, db, startTick=1, endTick=end, numPartitions=3,
              payloadSchema="order long, region string, amount int")  # fmt: skip
    assert df.schema["payload"].dataType.simpleString() == (
        "struct<order:bigint,region:string,amount:int>"
    )
    top = df.where("payload.region = 'eu' and payload.amount > 3").select("payload.order")
    assert sorted(r.order for r in top.collect()) == [i for i in range(30) if i % 2 and i % 7 > 3]
    # No to_json: the struct column goes back as JSON text.
    write(df.select("payload", "type"), db, queue="copy")
    sent = sorted((json.loads(e[1]) for e in queue_events(conn, "copy")), key=lambda p: p["order"])
    assert sent == [json.loads(p) for p in orders(0, 30)]


def test_a_payload_that_does_not_fit_payload_schema_names_its_event(
    spark: Any, conn: Conn, db: str, q: str
) -> None:
    ids = send_ids(conn, q, ['{"order": 1}', "{broken", '{"order": 3}'])
    with pytest.raises(Exception) as info:
        read(spark, db, startTick=1, payloadSchema="order long").collect()
    text = error_text(info.value)
    assert f"payload of event msg_id {ids[1]} does not fit option 'payloadSchema'" in text
    with pytest.raises(Exception) as info:
        read(spark, db, startTick=1, payloadSchema="order lng").collect()
    assert "option 'payloadSchema' is not a Spark schema" in error_text(info.value)
