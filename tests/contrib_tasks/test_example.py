"""examples/django_tasks runs: migrate, a rolled-back and a committed enqueue, a failing
task, and manage.py pgque_worker stopped by SIGTERM."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "django_tasks"


def test_django_tasks_example_runs(empty_db: str) -> None:
    env = {**os.environ, "PGQUE_DSN": empty_db, "PYTHONUNBUFFERED": "1"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    proc = subprocess.run(
        [sys.executable, "main.py"],
        capture_output=True, text=True, env=env, timeout=180, cwd=EXAMPLE, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert "rolled back: TaskResultDoesNotExist" in proc.stdout, proc.stdout
    assert "INV-1 for A-2; A-3 failed: ValueError: order A-3 has no address" in proc.stdout
    assert "worker exit 0: invoiced ['A-2']" in proc.stdout, proc.stdout
