"""Django configured once for the integration tests, pointed at each test's database.

Django's settings can be configured once per process: here, with a
PostgreSQL alias ``default`` (moved to the test's fresh database by the
``django_db`` / ``django_empty_db`` fixtures), a SQLite alias ``lite`` for
the bad-backend cases, pgque's app and the test app ``pgque_testapp``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import django
import psycopg
import pytest
from django.conf import settings
from django.db import connections

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))  # the test app, importable as pgque_testapp

if not settings.configured:
    settings.configure(
        SECRET_KEY="pgque-tests",
        USE_TZ=True,
        INSTALLED_APPS=["pgque.contrib.django", "pgque_testapp"],
        DATABASES={
            "default": {"ENGINE": "django.db.backends.postgresql", "NAME": "unset"},
            "lite": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"},
        },
        EMAIL_BACKEND="django.core.mail.backends.locmem.EmailBackend",
        DEFAULT_AUTO_FIELD="django.db.models.AutoField",
        LOGGING_CONFIG=None,
    )
    django.setup()

from _django_db import create_app_tables, point_default_at  # noqa: E402  (Django first)


@pytest.fixture
def django_db(db: str, conn: psycopg.Connection[Any]) -> Iterator[str]:
    """Django's ``default`` on the test's database (pgque installed), the app's tables
    created and queue ``orders`` with consumer ``watch``; yields the DSN."""
    point_default_at(db)
    create_app_tables()
    conn.execute("select pgque.create_queue('orders')")
    conn.execute("select pgque.subscribe('orders', 'watch')")
    try:
        yield db
    finally:
        connections.close_all()


@pytest.fixture
def django_empty_db(empty_db: str) -> Iterator[str]:
    """Django's ``default`` on a fresh database without pgque; yields the DSN."""
    point_default_at(empty_db)
    try:
        yield empty_db
    finally:
        connections.close_all()
