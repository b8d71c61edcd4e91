"""Django 6 tasks on pgque: enqueue in a transaction, run them with manage.py pgque_worker.

Run from this directory with ``PGQUE_DSN`` set (Django 6, Python 3.12+)::

    PGQUE_DSN=postgresql://localhost/shop python main.py
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import django

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.tasks import TaskResult, TaskResultStatus  # noqa: E402
from invoices import refuse, send_invoice  # noqa: E402

call_command("migrate", verbosity=0)  # installs pgque, the results table, queue tasks_default
with connection.cursor() as cur:
    cur.execute("create table if not exists invoice (id serial primary key, order_ref text)")

try:
    with transaction.atomic():
        lost = send_invoice.enqueue("A-1")
        raise RuntimeError("payment declined")  # the task goes with the rollback
except RuntimeError:
    pass
with transaction.atomic():
    kept = send_invoice.enqueue("A-2")  # exists once this block commits
failing = refuse.enqueue("A-3")


def finished(result: TaskResult) -> bool:
    """Read the result again; whether the task has run."""
    result.refresh()
    return result.is_finished


worker = subprocess.Popen(
    [sys.executable, "-m", "django", "pgque_worker"], cwd=Path(__file__).resolve().parent
)
try:
    deadline = time.monotonic() + 60
    while not (finished(kept) and finished(failing)):
        if time.monotonic() > deadline:
            raise SystemExit("the worker did not run the tasks within 60 s")
        time.sleep(0.2)
finally:
    worker.send_signal(signal.SIGTERM)  # the batch in progress finishes first
    worker.wait(timeout=60)

assert kept.status == TaskResultStatus.SUCCESSFUL, kept.errors
assert failing.status == TaskResultStatus.FAILED
assert failing.errors[0].exception_class is ValueError
with connection.cursor() as cur:
    cur.execute("select order_ref from invoice order by id")
    invoiced = [row[0] for row in cur.fetchall()]
assert invoiced == ["A-2"], invoiced
try:
    send_invoice.get_result(lost.id)
except Exception as exc:  # TaskResultDoesNotExist
    print(f"rolled back: {type(exc).__name__}")
print(f"{kept.return_value} for A-2; A-3 failed: {failing.errors[0].traceback.splitlines()[-1]}")
print(f"worker exit {worker.returncode}: invoiced {invoiced}")
