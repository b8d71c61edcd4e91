"""The task backend's parts every Django version has: migration 0002's results table,
``TASKS`` read without ``django.tasks`` (migrate creates the task queues), and a clear
error from the worker on a Django older than 6. The backend itself: tests/contrib_tasks."""

from __future__ import annotations

import sys
from typing import Any

import django
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.db import connection
from django.test.utils import override_settings
from django.utils import timezone

from pgque import PgqueClient
from pgque.contrib.django._tasks_conf import BACKEND_PATH, backends
from pgque.contrib.django.models import TaskRecord
from pgque.contrib.django.worker import task_consumers

TASKS = {
    "default": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"},
    "pgque": {"BACKEND": BACKEND_PATH, "QUEUES": ["default", "mail"]},
}


def tables() -> set[str]:
    return set(connection.introspection.table_names())


def test_migrate_creates_the_results_table_and_zero_drops_it(
    django_empty_db: str, connect_to: Any
) -> None:
    call_command("migrate", "pgque", verbosity=0)
    assert "pgque_taskrecord" in tables()
    TaskRecord.objects.create(
        id="t1", backend="pgque", task_path="app.tasks.send", queue_name="default",
        args=[1], kwargs={"to": "a@example.com"}, enqueued_at=timezone.now(),
    )  # fmt: skip
    row = TaskRecord.objects.get(pk="t1")
    assert (row.status, row.args, row.kwargs, row.errors) == (
        "READY", [1], {"to": "a@example.com"}, [],
    )  # fmt: skip
    TaskRecord.objects.all().delete()
    call_command("migrate", "pgque", "zero", verbosity=0)
    assert "pgque_taskrecord" not in tables()
    conn = connect_to(django_empty_db)
    assert (
        conn.execute("select count(*) from pg_namespace where nspname = 'pgque'").fetchone()[0] == 0
    )


def test_migrate_creates_the_task_queues_with_the_worker_subscription(
    django_empty_db: str, connect_to: Any
) -> None:
    with override_settings(TASKS=TASKS):
        call_command("migrate", "pgque", verbosity=0)
        call_command("migrate", "pgque", verbosity=0)  # idempotent
    client = PgqueClient(connect_to(django_empty_db))
    assert sorted(s.queue_name for s in client.queue_stats()) == ["tasks_default", "tasks_mail"]
    assert [s.consumer_name for s in client.consumer_stats("tasks_mail")] == ["django_tasks"]


def test_task_settings_are_checked_naming_the_key() -> None:
    bad = {"x": {"BACKEND": BACKEND_PATH, "OPTIONS": {"DATABSE": "default"}}}
    with override_settings(TASKS=bad), pytest.raises(ImproperlyConfigured) as err:
        backends()
    assert "settings.TASKS['x'][\"OPTIONS\"] has unknown keys ['DATABSE']" in str(err.value)
    empty = {"x": {"BACKEND": BACKEND_PATH, "QUEUES": []}}
    with override_settings(TASKS=empty), pytest.raises(ImproperlyConfigured, match="non-empty"):
        backends()
    with override_settings(TASKS=TASKS):
        (config,) = backends()
    assert (config.alias, config.database, config.consumer) == ("pgque", "default", "django_tasks")
    assert config.pgque_queue("mail") == "tasks_mail"


def test_worker_before_django_6_says_the_backend_needs_it(django_empty_db: str) -> None:
    assert "pgque.contrib.django.tasks" not in sys.modules  # the app never imports it
    with override_settings(TASKS=TASKS):
        if django.VERSION >= (6,):  # tests/contrib runs on 4.2 and the main venv's Django
            assert [c.queue for c in task_consumers()] == ["tasks_default", "tasks_mail"]
            return
        with pytest.raises(ImproperlyConfigured) as err:
            task_consumers()
        with pytest.raises(ImportError, match="needs Django 6 or newer"):
            import pgque.contrib.django.tasks  # noqa: F401
    assert "needs Django 6 or newer" in str(err.value)
