"""Django 6's task framework on pgque: Django configured once, pointed at each test's database.

These tests need Django 6 (Python 3.12 or newer). On an older Django the
directory is not collected (the main suite runs on Python 3.11, where Django 6
does not install); ``.ci/run``'s step "tests/contrib_tasks on Django 6" runs
it in a venv of its own with ``PGQUE_REQUIRE_DJANGO6=1``, which turns an older
Django into an error instead.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import django
import psycopg
import pytest

HERE = Path(__file__).resolve().parent

collect_ignore_glob: list[str] = []
if django.VERSION < (6,):
    if os.environ.get("PGQUE_REQUIRE_DJANGO6") == "1":
        raise RuntimeError(
            f"tests/contrib_tasks needs Django 6 or newer, this is Django {django.get_version()}:"
            " run them in a venv of Python 3.12+ with `pip install 'django>=6,<7'`"
            " (.ci/run's step 'tests/contrib_tasks on Django 6' does)"
        )
    collect_ignore_glob = ["test_*.py", "tasks_app/*"]
else:
    from django.conf import settings

    for folder in (HERE, HERE.parent / "contrib"):  # tasks_app; _django_db's helpers
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    if not settings.configured:
        settings.configure(
            SECRET_KEY="pgque-tests",
            USE_TZ=True,
            INSTALLED_APPS=["pgque.contrib.django", "tasks_app"],
            DATABASES={"default": {"ENGINE": "django.db.backends.postgresql", "NAME": "unset"}},
            TASKS={
                "default": {
                    "BACKEND": "pgque.contrib.django.tasks.PgqueBackend",
                    "QUEUES": ["default", "urgent"],
                    "OPTIONS": {"CONSUMER_OPTIONS": {"poll_interval": 0.2}},
                }
            },
            DEFAULT_AUTO_FIELD="django.db.models.AutoField",
            LOGGING_CONFIG=None,
        )
        django.setup()
    if "tasks_app" not in settings.INSTALLED_APPS:
        raise RuntimeError(
            "tests/contrib_tasks found Django configured by another conftest: run this"
            " directory on its own (pytest tests/contrib_tasks)"
        )


def pytest_report_header(config: pytest.Config) -> str:
    """Say whether the task tests run here."""
    if django.VERSION < (6,):
        return f"tests/contrib_tasks: not collected on Django {django.get_version()} (needs 6)"
    return f"tests/contrib_tasks: Django {django.get_version()}"


@pytest.fixture
def tasks_db(db: str, conn: psycopg.Connection[Any]) -> Iterator[str]:
    """Django's ``default`` on the test's database, ``manage.py migrate pgque`` run
    (the results table; the task queues ``tasks_default`` and ``tasks_urgent`` with
    the worker's subscription) and a table ``ran`` the tasks write to; yields the DSN."""
    from _django_db import point_default_at
    from django.core.management import call_command
    from django.db import connections

    point_default_at(db)
    call_command("migrate", "pgque", verbosity=0)
    conn.execute("create table ran (id serial primary key, label text not null)")
    try:
        yield db
    finally:
        connections.close_all()
