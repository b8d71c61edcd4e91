"""Streaming reads and writes through Spark: exactly-once, availableNow, rotation, failures."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from spark_helpers import (
    copied_ids,
    error_text,
    orders,
    require_spark,
    send,
    send_ids,
    staged,
    start_stream,
)

from _engine import consume, make_queue, one, tick

require_spark()

Conn = psycopg.Connection[Any]
PROCESSING = {"processingTime": "200 milliseconds"}
AVAILABLE_NOW = {"availableNow": True}


@pytest.fixture
def queues(conn: Conn) -> tuple[str, str]:
    make_queue(conn, "src")
    make_queue(conn, "out")
    # Subscribed before anything is sent: a new consumer starts at the latest tick.
    one(conn, "select pgque.register_consumer('src', 'etl')")
    return "src", "out"


def run_available_now(spark: Any, db: str, checkpoint: Path, **options: Any) -> Any:
    query = start_stream(spark, db, checkpoint, trigger=AVAILABLE_NOW, **options)
    query.awaitTermination(120)
    assert not query.isActive
    return query


def test_exactly_once_across_a_stop_and_restart(
    spark: Any, conn: Conn, db: str, queues: Any, tmp_path: Path
) -> None:
    sent = []
    for i in range(3):
        sent += send_ids(conn, "src", orders(i * 20, 20))
    query = start_stream(spark, db, tmp_path, trigger=PROCESSING, maxTicksPerTrigger=1)
    query.processAllAvailable()
    query.stop()  # between micro-batches
    assert sorted(copied_ids(conn, "out")) == sent
    for i in range(3, 5):
        sent += send_ids(conn, "src", orders(i * 20, 20))
    run_available_now(spark, db, tmp_path, maxTicksPerTrigger=1)
    assert sorted(copied_ids(conn, "out")) == sent  # each once, nothing lost
    # The consumer trails the checkpoint (Spark commits lazily), never passes it.
    position = one(conn, "select last_tick from pgque.get_consumer_info('src', 'etl')")
    latest = one(conn, "select max(tick_id) from pgque.tick t join pgque.queue q"
                       " on q.queue_id = t.tick_queue where queue_name = 'src'")  # fmt: skip
    assert 1 < position <= latest
    assert staged(conn) == 0


def test_available_now_drains_the_backlog_in_limited_batches(
    spark: Any, conn: Conn, db: str, queues: Any, tmp_path: Path
) -> None:
    sent = []
    for i in range(10):
        sent += send_ids(conn, "src", orders(i * 5, 5))
    query = run_available_now(spark, db, tmp_path, maxTicksPerTrigger=3, numPartitions=3)
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sizes == [15, 15, 15, 5]  # stops only when the pinned backlog is read
    assert sorted(copied_ids(conn, "out")) == sent
    # Events of one micro-batch carry its end tick.
    assert len({e for e in (r[3] for r in _out(conn))}) == 4


def _out(conn: Conn) -> list[tuple[Any, ...]]:
    from spark_helpers import queue_events

    return queue_events(conn, "out")


def test_rotation_during_a_stream_loses_nothing(
    spark: Any, conn: Conn, db: str, queues: Any, tmp_path: Path
) -> None:
    one(conn, "select pgque.set_queue_config('src', 'rotation_period', '1 microsecond')")

    def cur_table() -> int:
        return int(one(conn, "select queue_cur_table from pgque.queue where queue_name = 'src'"))

    def caught_up() -> bool:
        # Spark commits a micro-batch when it plans the next: the consumer trails a bit.
        pos, latest = conn.execute(
            "select last_tick, (select max(tick_id) from pgque.tick t join pgque.queue q"
            " on q.queue_id = t.tick_queue where queue_name = 'src')"
            " from pgque.get_consumer_info('src', 'etl')"
        ).fetchone() or (0, 0)
        return bool(pos >= latest - 2)

    sent: list[int] = []
    rotations, last = 0, cur_table()
    query = start_stream(spark, db, tmp_path, trigger=PROCESSING, maxTicksPerTrigger=2)
    try:
        deadline = time.monotonic() + 90
        i = 0
        while rotations < 3:
            assert time.monotonic() < deadline, f"only {rotations} rotations"
            sent += send_ids(conn, "src", orders(i * 10, 10))
            i += 1
            one(conn, "select pgque.maint()")
            tick(conn, "src")
            one(conn, "select pgque.maint()")
            if cur_table() != last:
                rotations, last = rotations + 1, cur_table()
            while not caught_up():
                assert time.monotonic() < deadline, "the Spark consumer does not advance"
                time.sleep(0.1)
        query.processAllAvailable()
    finally:
        query.stop()
    assert rotations >= 3, "rotation never happened: is the Spark consumer advancing?"
    got = copied_ids(conn, "out")
    assert len(got) == len(set(got))
    assert sorted(got) == sent


def _checkpoint_end(checkpoint: Path) -> int:
    """The end tick of the last micro-batch in a checkpoint's offset log."""
    import json

    offsets = checkpoint / "offsets"
    last = max((p for p in offsets.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    return int(json.loads(last.read_text().splitlines()[-1])["tick"])


def test_a_checkpoint_older_than_the_retained_ticks_fails_loudly(
    spark: Any, conn: Conn, db: str, queues: Any, tmp_path: Path
) -> None:
    one(conn, "select pgque.set_queue_config('src', 'rotation_period', '1 microsecond')")
    send(conn, "src", orders(0, 5))
    run_available_now(spark, db, tmp_path)
    end = _checkpoint_end(tmp_path)
    # Someone moves the query's consumer on; rotation then drops the ticks it needs.
    one(conn, "select pgque.spark_start_tick('src', 'etl', 'latest')")
    for i in range(12):
        send(conn, "src", orders(100 + i, 1))
        while consume(conn, "src", "etl") is not None:
            pass
        one(conn, "select pgque.maint()")
    assert one(conn, "select min(tick_id) from pgque.tick t join pgque.queue q"
                     " on q.queue_id = t.tick_queue where queue_name = 'src'") > end  # fmt: skip
    query = start_stream(spark, db, tmp_path, trigger=AVAILABLE_NOW)
    with pytest.raises(Exception) as info:
        query.awaitTermination(120)
    text = error_text(info.value)
    assert f"queue src: tick {end} was rotated away" in text
    assert len(copied_ids(conn, "out")) == 5  # nothing more, nothing partial


def test_unsubscribing_the_consumer_stops_the_query(
    spark: Any, conn: Conn, db: str, queues: Any, tmp_path: Path
) -> None:
    send(conn, "src", orders(0, 3))
    query = start_stream(spark, db, tmp_path, trigger=PROCESSING)
    query.processAllAvailable()
    one(conn, "select pgque.unregister_consumer('src', 'etl')")
    send(conn, "src", orders(3, 3))
    with pytest.raises(Exception) as info:
        query.awaitTermination(60)
    assert "consumer etl is not subscribed to queue src" in error_text(info.value)
    assert one(conn, "select count(*) from pgque.get_consumer_info('src', 'etl')") == 0


def test_a_replayed_micro_batch_adds_no_duplicates(
    spark: Any, conn: Conn, db: str, queues: Any, tmp_path: Path
) -> None:
    sent = []
    for i in range(3):
        sent += send_ids(conn, "src", orders(i * 4, 4))
    run_available_now(spark, db, tmp_path, maxTicksPerTrigger=1)
    assert sorted(copied_ids(conn, "out")) == sent
    # As if the driver died after the sink committed and before Spark's commit log.
    commits = tmp_path / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)
    query = run_available_now(spark, db, tmp_path, maxTicksPerTrigger=1)
    assert [p["batchId"] for p in query.recentProgress][:1] == [last]  # replayed
    assert sorted(copied_ids(conn, "out")) == sent
    assert one(conn, "select count(*) from pgque.spark_commits") == last + 1


def test_a_failing_sink_task_sends_nothing_and_the_restart_sends_once(
    spark: Any, conn: Conn, db: str, queues: Any, tmp_path: Path
) -> None:
    flag = tmp_path / "fail"
    sent = send_ids(conn, "src", orders(0, 10))
    run_available_now(spark, db, tmp_path / "ck")
    sent += send_ids(conn, "src", orders(10, 10))
    bad = sent[-3]
    flag.touch()

    def hook(msg_id):  # type: ignore[no-untyped-def]  # hints would make Spark guess a pandas UDF
        if msg_id == bad and os.path.exists(flag):
            raise RuntimeError(f"injected failure at {msg_id}")
        return "ok"

    query = start_stream(spark, db, tmp_path / "ck", trigger=AVAILABLE_NOW, hook=hook)
    with pytest.raises(Exception) as info:
        query.awaitTermination(120)
    assert "injected failure" in error_text(info.value)
    assert sorted(copied_ids(conn, "out")) == sent[:10]
    flag.unlink()
    run_available_now(spark, db, tmp_path / "ck", hook=hook)
    assert sorted(copied_ids(conn, "out")) == sent
    assert staged(conn) == 0


_KILL_JOB = """
import os, sys, time
os.environ["PYSPARK_PYTHON"] = sys.executable
sys.path[:0] = {paths!r}
from spark_helpers import new_session, start_stream
spark = new_session("pgque-kill")
pause, paused = {pause!r}, {paused!r}
def hook(msg_id):
    if os.path.exists(pause):
        open(paused, "w").close()
        time.sleep(600)
    return "ok"
trigger = {{"processingTime": "200 milliseconds"}}
query = start_stream(spark, {db!r}, {checkpoint!r}, trigger=trigger, hook=hook,
                     maxTicksPerTrigger=1)
query.awaitTermination()
"""


@pytest.mark.slow
def test_killed_mid_batch_then_restarted_sends_each_event_once(
    spark: Any, conn: Conn, db: str, queues: Any, tmp_path: Path
) -> None:
    pause, paused = tmp_path / "pause", tmp_path / "paused"
    checkpoint = tmp_path / "ck"
    sent = send_ids(conn, "src", orders(0, 20))
    script = tmp_path / "job.py"
    here = str(Path(__file__).resolve().parent)
    script.write_text(
        textwrap.dedent(
            _KILL_JOB.format(
                paths=[here, str(Path(here).parent)],
                pause=str(pause),
                paused=str(paused),
                db=db,
                checkpoint=str(checkpoint),
            )
        )
    )
    job = subprocess.Popen(
        [sys.executable, str(script)],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while len(copied_ids(conn, "out")) < 20:  # the first micro-batch went through
            assert job.poll() is None, job.stderr.read().decode()[-3000:] if job.stderr else ""
            assert time.monotonic() < deadline, "the job published nothing"
            time.sleep(0.2)
        pause.touch()
        sent += send_ids(conn, "src", orders(20, 20))
        while not paused.exists():
            assert job.poll() is None
            assert time.monotonic() < deadline, "the second micro-batch never started"
            time.sleep(0.1)
    finally:
        os.killpg(job.pid, signal.SIGKILL)  # the job's own process group: driver and JVM
        job.wait(30)
        if job.stderr:
            job.stderr.close()
    assert sorted(copied_ids(conn, "out")) == sent[:20]
    pause.unlink()
    query = start_stream(spark, db, checkpoint, trigger=AVAILABLE_NOW, maxTicksPerTrigger=1,
                         hook=lambda msg_id: "ok")  # fmt: skip
    query.awaitTermination(120)
    assert sorted(copied_ids(conn, "out")) == sent
    assert staged(conn) == 0


def test_a_database_crash_between_micro_batches_loses_and_repeats_nothing(
    spark: Any, tmp_path: Path
) -> None:
    import pgque
    from pgque._cluster import TempCluster

    # Durable commits: the suite's servers run with synchronous_commit off, where a
    # crash loses the last commits (the sink's publish among them) by design.
    version = int(os.environ.get("PGQUE_TEST_PG", "18"))
    with TempCluster(version, settings={"synchronous_commit": "on"}) as server:
        db = server.dsn()
        with psycopg.connect(db, autocommit=True) as conn:
            pgque.install(conn)
            make_queue(conn, "src")
            make_queue(conn, "out")
            one(conn, "select pgque.register_consumer('src', 'etl')")
            sent = send_ids(conn, "src", orders(0, 50))
        query = start_stream(spark, db, tmp_path, trigger=PROCESSING)
        query.processAllAvailable()
        # A crash (immediate stop: recovery on start, the unlogged staging table emptied)
        # while the query runs: its next call fails to connect, or finds the server back.
        server._run("pg_ctl", "restart", "-w", "-m", "immediate", "-l", str(server.log_file))
        with psycopg.connect(db, autocommit=True) as conn:
            sent += send_ids(conn, "src", orders(50, 50))
        try:
            query.processAllAvailable()
        except Exception as exc:
            assert "connect" in error_text(exc) or "terminat" in error_text(exc), exc
        query.stop()
        # The restarted query (same checkpoint) sends each event once.
        run_available_now(spark, db, tmp_path)
        with psycopg.connect(db, autocommit=True) as conn:
            assert sorted(copied_ids(conn, "out")) == sent
            assert staged(conn) == 0
