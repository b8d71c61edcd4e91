"""``status``, ``queues``, ``consumers``, ``depth``, ``drain``: text and ``--json``."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest
from cli_helpers import Pgque

from _engine import make_queue, one, tick
from _wait import wait_for
from pgque.cli import ExitCode
from pgque.cli.monitor import sparkline

QUEUE_KEYS = {
    "queue_name", "queue_id", "depth", "oldest_msg_age", "consumers", "events_per_sec",
    "cur_table", "rotation_age", "rotation_period", "ticker_paused", "last_tick_time",
    "last_tick_id", "dlq_count", "health",
}  # fmt: skip
CONSUMER_KEYS = {
    "queue_name", "consumer_name", "lag", "pending_events", "last_batch_start",
    "batch_active", "batch_id", "status",
}  # fmt: skip
HEALTH_KEYS = {"queue_name", "check_name", "status", "detail"}


@pytest.fixture
def busy(conn: psycopg.Connection[Any]) -> str:
    """Queue ``orders`` (ticks on every ticker call), consumer ``worker``, 3 ticked events."""
    make_queue(conn, "orders")
    one(conn, "select pgque.subscribe('orders', 'worker')")
    # One event consumed first: the depth estimate misses a new queue's very first event.
    one(conn, "select pgque.send('orders', '{}'::jsonb)")
    tick(conn, "orders")
    batch = one(conn, "select batch_id from pgque.receive('orders', 'worker') limit 1")
    one(conn, "select pgque.ack(%s)", batch)
    for n in range(3):
        one(conn, "select pgque.send('orders', %s::jsonb)", f'{{"n": {n}}}')
    tick(conn, "orders")
    return "orders"


def test_status_json_shape(pgque: Pgque, busy: str) -> None:
    run = pgque("status", "--json")
    assert run.code == ExitCode.OK, run.stderr
    data = run.json()
    assert set(data) == {
        "pgque_version", "postgresql_version", "pg_cron_version", "database", "scheduler",
        "tick_period_ms", "ticker_leader", "server_time", "components", "queues", "consumers",
        "health", "worst", "healthy",
    }  # fmt: skip
    assert data["scheduler"] == "manual"
    assert data["tick_period_ms"] == 100
    assert data["healthy"] is True and data["worst"] in ("ok", "warning")
    assert [c["component"] for c in data["components"]][:3] == ["postgresql", "pgque", "scheduler"]
    [queue] = data["queues"]
    assert set(queue) == QUEUE_KEYS
    assert queue["queue_name"] == "orders" and queue["depth"] == 3 and queue["consumers"] == 1
    assert isinstance(queue["rotation_period"], float)  # intervals are seconds
    [consumer] = data["consumers"]
    assert set(consumer) == CONSUMER_KEYS
    assert consumer["pending_events"] == 3 and consumer["status"] == "ok"
    assert all(set(h) == HEALTH_KEYS for h in data["health"])
    assert {h["check_name"] for h in data["health"]} >= {
        "ticker_running", "consumer_lag:worker", "rotation_health", "dlq_health",
        "pg_cron_ticker", "pg_cron_maint",
    }  # fmt: skip


def test_status_text(pgque: Pgque, busy: str) -> None:
    run = pgque("status")
    assert run.code == ExitCode.OK, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("pgque ") and "PostgreSQL" in lines[0]
    for heading in ("System:", "Queues: 1", "Consumers: 1", "Health:"):
        assert any(line.startswith(heading) for line in lines), heading
    assert any("Scheduler:" in line and "manual" in line for line in lines)
    assert any(line.split()[:2] == ["orders", "3"] for line in lines)  # name, depth
    assert any(line.split()[:4] == ["orders", "worker", "0s", "3"] or
               line.split()[:2] == ["orders", "worker"] for line in lines)  # fmt: skip
    assert "\x1b[" not in run.stdout  # no colour codes outside a terminal


def test_status_unhealthy_exit_code(pgque: Pgque, conn: psycopg.Connection[Any], busy: str) -> None:
    # A consumer lagging beyond the rotation period is critical.
    one(conn, "select pgque.set_queue_config('orders', 'rotation_period', '1 second')")
    lag = "select status from pgque.queue_health() where check_name = 'consumer_lag:worker'"
    wait_for(lambda: one(conn, lag) == "critical", what="the consumer's lag critical")
    run = pgque("status", "--json")
    assert run.code == ExitCode.UNHEALTHY
    data = run.json()
    assert data["healthy"] is False and data["worst"] == "critical"
    assert data["consumers"][0]["status"] == "critical"
    text = pgque("status")
    assert text.code == ExitCode.UNHEALTHY
    assert "consumer_lag:worker" in text.stdout


def test_status_fail_on_warning(pgque: Pgque, conn: psycopg.Connection[Any], busy: str) -> None:
    # A dead letter is a warning.
    one(conn, "select pgque.set_queue_config('orders', 'max_retries', '0')")
    [(batch_id, msg_id)] = conn.execute(
        "select batch_id, msg_id from pgque.receive('orders', 'worker') limit 1"
    ).fetchall()
    conn.execute("select pgque.nack(%s, %s::bigint, '0 seconds', 'boom')", (batch_id, msg_id))
    one(conn, "select pgque.ack(%s)", batch_id)
    assert pgque("status").code == ExitCode.OK
    run = pgque("status", "--fail-on", "warning", "--json")
    assert run.code == ExitCode.UNHEALTHY
    assert run.json()["worst"] == "warning"


def test_queues(pgque: Pgque, conn: psycopg.Connection[Any], busy: str) -> None:
    one(conn, "select pgque.create_queue('audit')")
    run = pgque("queues", "--json")
    assert run.code == ExitCode.OK, run.stderr
    rows = run.json()
    assert [r["queue_name"] for r in rows] == ["audit", "orders"]
    assert all(set(r) == QUEUE_KEYS for r in rows)
    text = pgque("queues").stdout.splitlines()
    assert text[0].split() == [
        "NAME", "DEPTH", "OLDEST", "RATE", "ROTATION", "CONSUMERS", "DLQ", "TICKS", "HEALTH",
    ]  # fmt: skip
    assert [line.split()[0] for line in text[1:]] == ["audit", "orders"]


def test_queues_empty(pgque: Pgque) -> None:
    assert pgque("queues", "--json").json() == []
    assert "pgque create-queue" in pgque("queues").stdout


def test_consumers(pgque: Pgque, conn: psycopg.Connection[Any], busy: str) -> None:
    make_queue(conn, "audit")
    one(conn, "select pgque.subscribe('audit', 'archiver')")
    everyone = pgque("consumers", "--json").json()
    assert [(r["queue_name"], r["consumer_name"]) for r in everyone] == [
        ("audit", "archiver"), ("orders", "worker"),
    ]  # fmt: skip
    assert all(set(r) == CONSUMER_KEYS for r in everyone)
    only = pgque("consumers", "orders", "--json").json()
    assert [r["consumer_name"] for r in only] == ["worker"]
    text = pgque("consumers", "orders").stdout.splitlines()
    assert text[0].split()[:4] == ["QUEUE", "CONSUMER", "LAG", "PENDING"]
    assert text[1].split()[:2] == ["orders", "worker"]
    make_queue(conn, "idle")
    assert pgque("consumers", "idle", "--json").json() == []
    assert pgque("consumers", "idle").stdout.strip() == "no consumers on queue 'idle'"


def test_depth_once(pgque: Pgque, busy: str) -> None:
    sample = pgque("depth", "orders", "--json").json()
    assert set(sample) == {
        "queue", "time", "depth", "events_per_sec", "oldest_msg_age", "consumers",
    }  # fmt: skip
    assert sample["queue"] == "orders" and sample["depth"] == 3
    assert pgque("depth", "orders").stdout.strip() == "orders: depth 3"


def test_depth_watch(pgque: Pgque, busy: str) -> None:
    run = pgque("depth", "orders", "--watch", "100ms", "--count", "3", "--json")
    assert run.code == ExitCode.OK, run.stderr
    samples = run.json_lines()
    assert len(samples) == 3 and all(s["depth"] == 3 for s in samples)
    text = pgque("depth", "orders", "--watch", "0.1", "--count", "2")
    lines = text.stdout.splitlines()
    assert len(lines) == 2
    assert "depth" in lines[-1] and "█" in lines[-1]  # a sparkline at its maximum


def test_sparkline() -> None:
    assert sparkline([0, 1, 2, 4, 8], 10) == "▁▂▃▅█"  # scaled 0..max onto 8 levels
    assert sparkline([0, 0], 10) == "▁▁"
    assert sparkline([1, 8, 0] * 10, 4) == "▁▂█▁"  # the last 4: 0 1 8 0
    assert sparkline([], 5) == ""


def test_drain_waits_for_consumers(pgque: Pgque, connect: Any, busy: str) -> None:
    def consume_later() -> None:
        time.sleep(1.0)
        worker = connect()
        for _ in range(50):
            rows = worker.execute("select distinct batch_id from pgque.receive('orders', 'worker')")
            for (batch_id,) in rows.fetchall():
                worker.execute("select pgque.ack(%s)", (batch_id,))
            worker.execute("select pgque.ticker('orders')")
            time.sleep(0.1)

    thread = threading.Thread(target=consume_later)
    thread.start()
    try:
        run = pgque("drain", "orders", "--timeout", "30s", "--interval", "100ms", "--json")
    finally:
        thread.join()
    assert run.code == ExitCode.OK, run.stderr
    result = run.json()
    assert result["drained"] is True and result["depth"] == 0
    assert 0.5 < result["waited_seconds"] < 30
    text = pgque("drain", "orders")
    assert text.code == ExitCode.OK and "is drained" in text.stdout


def test_drain_times_out(pgque: Pgque, busy: str) -> None:
    run = pgque("drain", "orders", "--timeout", "0.5s", "--interval", "0.1s", "--json")
    assert run.code == ExitCode.TIMEOUT
    assert run.json() == {
        "queue": "orders", "drained": False, "depth": 3,
        "waited_seconds": run.json()["waited_seconds"],
    }  # fmt: skip
    line = [x for x in run.stderr.splitlines() if x.strip()][-1]
    assert line.startswith("pgque: error:") and "pgque consumers orders" in line


def test_status_idle_queue_is_healthy(pgque: Pgque, conn: psycopg.Connection[Any]) -> None:
    """No event waiting is healthy, however old the last tick; late is events waiting unticked."""
    one(conn, "select pgque.create_queue('idle')")
    one(conn, "select pgque.subscribe('idle', 'worker')")
    conn.execute("update pgque.tick set tick_time = tick_time - interval '1 day'")  # no ticker
    for args in (("status", "--json"), ("status", "--fail-on", "warning", "--json")):
        run = pgque(*args)
        assert run.code == ExitCode.OK, run.stdout
        data = run.json()
        checks = {(h["queue_name"], h["check_name"]): h for h in data["health"]}
        assert checks["idle", "ticker_running"]["status"] == "ok"
        assert "no event waiting for a tick" in checks["idle", "ticker_running"]["detail"]
        assert checks["system", "pg_cron_ticker"]["status"] == "ok"
        assert data["queues"][0]["health"] == "ok" and data["worst"] == "ok"
    assert pgque("queues", "--json").json()[0]["health"] == "ok"
    # An event waits an hour for a tick that never comes: late.
    one(conn, "select pgque.send('idle', '{}'::jsonb)")
    table = one(conn, "select queue_data_pfx || '_' || queue_cur_table from pgque.queue")
    conn.execute(f"update {table} set ev_time = ev_time - interval '1 hour'")
    run = pgque("status", "--json")
    assert run.code == ExitCode.UNHEALTHY
    checks = {(h["queue_name"], h["check_name"]): h for h in run.json()["health"]}
    assert checks["idle", "ticker_running"]["status"] == "critical"
    assert checks["system", "pg_cron_ticker"]["status"] == "warning"


def test_status_unknown_is_never_ok(pgque: Pgque, conn: psycopg.Connection[Any], busy: str) -> None:
    """A check pgque could not judge ranks above ok and below warning (docs/cli.md)."""
    # A check the database reports as unknown (as a newer pgque may): queue_health()
    # gives one more row.
    conn.execute("alter function pgque.queue_health() rename to queue_health_known")
    conn.execute(
        "create function pgque.queue_health()"
        " returns table (queue_name text, check_name text, status text, detail text)"
        " language sql as $$ select * from pgque.queue_health_known()"
        " union all select 'orders', 'replica_lag', 'unknown', 'no replica answered' $$"
    )
    run = pgque("status", "--json")
    assert run.code == ExitCode.OK, run.stdout
    data = run.json()
    assert data["worst"] == "unknown" and data["healthy"] is True
    assert {q["queue_name"]: q["health"] for q in data["queues"]} == {"orders": "unknown"}
    text = pgque("status")
    assert "Health: unknown" in text.stdout, text.stdout
    assert "orders/replica_lag: no replica answered" in text.stdout
    assert pgque("status", "--fail-on", "warning").code == ExitCode.OK
    assert pgque("queues", "--json").json()[0]["health"] == "unknown"
