"""The connector on a real Spark standalone cluster: a master and two workers on loopback.

The master and the workers are started from the pyspark package's own
``spark-class`` (``org.apache.spark.deploy.master.Master`` and ``...worker.Worker``)
with temporary work and log directories, and stopped after the module. Tasks
run in executor JVMs the workers start, each with Python workers of its own:
nothing the driver holds (connections, Python objects, files other than the
checkpoint) reaches them except through pickling.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from spark_helpers import copied_ids, orders, queue_events, require_spark, send_ids, start_stream

from _engine import make_queue, one
from _wait import wait_for

require_spark()

import pyspark  # noqa: E402

Conn = psycopg.Connection[Any]
pytestmark = [pytest.mark.slow, pytest.mark.concurrency]

SPARK_HOME = Path(pyspark.__file__).parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as reply:
            return int(json.load(reply).get("aliveworkers", 0))
    except OSError:
        return 0


class StandaloneCluster:
    """A master and two one-core workers, bound to 127.0.0.1, under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = _free_port()
        self.ui_port = _free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.env = {
            **os.environ,
            "SPARK_HOME": str(SPARK_HOME),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": str(root / "logs"),
            "SPARK_WORKER_DIR": str(root / "work"),
            "PYSPARK_PYTHON": sys.executable,
        }

    def _start(self, name: str, *args: str) -> None:
        log = (self.root / f"{name}.log").open("wb")
        self.procs.append(
            subprocess.Popen(
                [str(SPARK_HOME / "bin" / "spark-class"), *args],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stopped as a whole
            )
        )

    def start(self) -> StandaloneCluster:
        """Start the master, then the workers; return once both workers registered."""
        for sub in ("logs", "work"):
            (self.root / sub).mkdir()
        self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.port), "--webui-port", str(self.ui_port))  # fmt: skip
        for i in (1, 2):
            self._start(f"worker{i}", "org.apache.spark.deploy.worker.Worker",
                        "--host", "127.0.0.1", "--webui-port", str(_free_port()),
                        "--cores", "1", "--memory", "1g",
                        "--work-dir", str(self.root / "work" / str(i)), self.url)  # fmt: skip
        wait_for(lambda: self._check() and _alive_workers(self.ui_port) == 2, 180,
                 "a Spark master with two alive workers")  # fmt: skip
        return self

    def _check(self) -> bool:
        for proc in self.procs:
            if proc.poll() is not None:
                logs = "\n".join(p.read_text()[-2000:] for p in self.root.glob("*.log"))
                pytest.fail(f"a Spark daemon exited ({proc.args}):\n{logs}")
        return True

    def stop(self) -> None:
        """Stop the workers (they stop their executors), then the master."""
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(self.procs):
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    standalone = StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"))
    try:
        yield standalone.start()
    finally:
        standalone.stop()


@pytest.fixture(scope="module")
def cluster_spark(cluster: StandaloneCluster) -> Iterator[Any]:
    """A SparkSession whose tasks run on the cluster's two executors (none in the driver)."""
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master(cluster.url)
        .appName("pgque-cluster-test")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.executor.memory", "512m")
        .config("spark.executor.cores", "1")
        .config("spark.cores.max", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.streaming.pollingDelay", "20ms")
        .config("spark.pyspark.python", sys.executable)
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    tracker = session.sparkContext._jsc.sc()
    wait_for(lambda: tracker.getExecutorMemoryStatus().size() >= 3, 180,
             "two executors (and the driver's block manager)")  # fmt: skip
    try:
        yield session
    finally:
        session.stop()


def _run(query: Any) -> None:
    assert query.awaitTermination(240), "the streaming query did not finish"
    assert query.exception() is None, query.exception()


def test_streaming_read_checkpoint_restart_and_sink_on_a_cluster(
    cluster_spark: Any, conn: Conn, db: str, tmp_path: Path
) -> None:
    spark = cluster_spark
    make_queue(conn, "src")
    make_queue(conn, "out")
    one(conn, "select pgque.register_consumer('src', 'etl')")
    first = send_ids(conn, "src", orders(0, 300))
    checkpoint = tmp_path / "checkpoint"
    _run(start_stream(spark, db, checkpoint, trigger={"availableNow": True}, numPartitions=4))
    assert sorted(copied_ids(conn, "out")) == first
    # The restart continues from the checkpoint: new events once, nothing again.
    second = send_ids(conn, "src", orders(300, 200))
    _run(start_stream(spark, db, checkpoint, trigger={"availableNow": True}, numPartitions=4))
    assert sorted(copied_ids(conn, "out")) == sorted(first + second)
    _run(start_stream(spark, db, checkpoint, trigger={"availableNow": True}))
    assert len(queue_events(conn, "out")) == 500
    # The query's consumer followed Spark's commits (the driver's calls), trailing by the
    # last run's micro-batch at most (Spark commits that one when a later batch starts).
    pending = one(conn, "select pending_events from pgque.get_consumer_info('src', 'etl')")
    assert pending in (0, 200)
    assert one(conn, "select count(*) from pgque.spark_staging") == 0


def test_batch_read_with_payload_schema_and_batch_sink_on_a_cluster(
    cluster_spark: Any, conn: Conn, db: str
) -> None:
    spark = cluster_spark
    make_queue(conn, "src")
    make_queue(conn, "totals")
    send_ids(conn, "src", orders(0, 1000))
    events = (
        spark.read.format("pgque")
        .option("dsn", db)
        .option("queue", "src")
        .option("startTick", "1")
        .option("numPartitions", "4")
        .option("payloadSchema", "order long, amount int, region string")
        .load()
    )
    totals = events.groupBy("payload.region").sum("payload.amount").collect()
    expected = {"eu": sum(i % 7 for i in range(1, 1000, 2)),
                "us": sum(i % 7 for i in range(0, 1000, 2))}  # fmt: skip
    assert {r[0]: r[1] for r in totals} == expected
    # A sink write of four tasks on the two executors: published once, as JSON.
    (events.repartition(4).selectExpr("named_struct('order', payload.`order`) as payload")
     .write.format("pgque").option("dsn", db).option("queue", "totals")
     .mode("append").save())  # fmt: skip
    sent = sorted(json.loads(e[1])["order"] for e in queue_events(conn, "totals"))
    assert sent == list(range(1000))
    assert one(conn, "select count(*) from pgque.spark_staging") == 0
