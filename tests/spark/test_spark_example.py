"""examples/spark_orders.py end to end, against the test database (in this process)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
from spark_helpers import queue_events, require_spark

require_spark()

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spark_orders.py"


@pytest.mark.slow
def test_spark_orders_example(
    spark: Any,
    db: str,
    conn: psycopg.Connection[Any],
    tmp_path: Path,
    capsys: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = importlib.util.spec_from_file_location("spark_orders_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    # The database comes from PGQUE_DSN, as for every example.
    monkeypatch.setenv("PGQUE_DSN", db)
    assert example.main(["--state-dir", str(tmp_path), "--demo-orders"]) == 0
    monkeypatch.delenv("PGQUE_DSN")
    out = capsys.readouterr().out
    # Six minutes of orders, a one-minute watermark: four minutes closed, three regions each.
    assert "12 window totals" in out
    assert "12 order.window_total events" in out
    events = queue_events(conn, "order_summaries")
    assert {e[0] for e in events} == {"order.window_total"}
    assert sum(json.loads(e[1])["orders"] for e in events) == 400
    # A second run without new orders sends nothing twice.
    assert example.main(["--dsn", db, "--state-dir", str(tmp_path)]) == 0
    assert len(queue_events(conn, "order_summaries")) == 12
