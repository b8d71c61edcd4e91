"""Every example in ``examples/`` runs to completion against a fresh database.

The examples take their DSN from ``PGQUE_DSN`` and stop by themselves; each
checks its own result with ``assert``. Here each must exit 0 and print the
line that shows it worked. (``examples/spark_*`` belong to the Spark
connector and are tested with it.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# example -> a line its output must contain
EXPECTED = {
    "quickstart.py": "handled orders [1, 2, 3]",
    "fan_out.py": "analytics got users [0, 1, 2, 3, 4]",
    "retry_and_dlq.py": "attempts: {'ok': 1, 'flaky': 2, 'poison': 3}",
    "delayed_delivery.py": "your trial ends tomorrow",
    "periodic_report.py": "one report per minute, and a restart kept the next run",
    "exactly_once.py": "invoices: [(1, 10), (2, 25)]",
    "batch_insert.py": "loaded 100 readings in 1 call(s); dead letter: payload does not",
    "ordering_keys.py": "created -> paid -> packed -> shipped",
    "cooperative.py": "60 images, each handled {1} time(s)",
    "fastapi_app.py": "events: ['book', 'lamp']",
    "opentelemetry_traces.py": "consumer trace",
    "sqlalchemy_outbox.py": "shipped ['book', 'lamp']",
    "worker_service.py": "the worker handled 3 emails and stopped on SIGTERM with exit 0",
}


def test_every_example_is_tested() -> None:
    found = {p.name for p in EXAMPLES.glob("*.py") if not p.name.startswith("spark_")}
    assert found == set(EXPECTED)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_runs(name: str, db: str) -> None:
    env = {**os.environ, "PGQUE_DSN": db, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        cwd=EXAMPLES.parent,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert EXPECTED[name] in proc.stdout, proc.stdout


def test_examples_take_the_dsn_from_argv(db: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PGQUE_DSN"}
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "quickstart.py"), db],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    assert "handled orders [1, 2, 3]" in proc.stdout
