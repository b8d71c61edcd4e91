"""manage.py pgque_worker (a subprocess) runs the tasks, and stops on SIGTERM with exit 0."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from django.tasks import Task, TaskResultStatus
from tasks_app.tasks import add, slow, urgent

from _wait import wait_for

HERE = Path(__file__).resolve().parent


def finished(proc: subprocess.Popen[str], task: Task, result_id: str) -> bool:
    """Whether the task result is SUCCESSFUL; fails the test when the worker died."""
    if proc.poll() is not None:
        out, err = proc.communicate()
        pytest.fail(f"the worker exited with {proc.returncode}: {out}{err}")
    return bool(task.get_result(result_id).status == TaskResultStatus.SUCCESSFUL)


def test_pgque_worker_runs_tasks_and_drains_on_sigterm(tasks_db: str, tmp_path: Path) -> None:
    first = add.enqueue(40, 2)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tasks_app.settings",
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        "PGQUE_TEST_APP_DSN": tasks_db,
        "PYTHONUNBUFFERED": "1",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "django", "pgque_worker"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_for(lambda: finished(proc, add, first.id), 60, "the worker ran the first task")
        second = urgent.enqueue("while running")
        wait_for(lambda: finished(proc, urgent, second.id), 60, "the worker ran the urgent task")
        third = slow.enqueue(str(tmp_path))
        wait_for((tmp_path / "started").exists, 60, "the slow task started")
        assert slow.get_result(third.id).status == TaskResultStatus.RUNNING
        proc.send_signal(signal.SIGTERM)  # the batch in progress finishes first
        assert slow.get_result(third.id).status == TaskResultStatus.RUNNING
        (tmp_path / "release").touch()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "tasks_default/django_tasks, tasks_urgent/django_tasks" in out, out
    assert "pgque worker: stopped" in out, out
    assert add.get_result(first.id).return_value == 42
    assert slow.get_result(third.id).return_value == "released"  # committed by the drain
