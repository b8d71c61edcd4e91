"""Settings of the worker subprocess: the database from ``PGQUE_TEST_APP_DSN``."""

from __future__ import annotations

import os

from psycopg.conninfo import conninfo_to_dict

_PARTS = conninfo_to_dict(os.environ.get("PGQUE_TEST_APP_DSN", "dbname=unset"))

SECRET_KEY = "pgque-tests"
USE_TZ = True
INSTALLED_APPS = ["pgque.contrib.django", "tasks_app"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _PARTS.pop("dbname"),
        "USER": _PARTS.pop("user", ""),
        "PASSWORD": _PARTS.pop("password", ""),
        "HOST": _PARTS.pop("host", ""),
        "PORT": _PARTS.pop("port", ""),
        "OPTIONS": _PARTS,
    }
}
TASKS = {
    "default": {
        "BACKEND": "pgque.contrib.django.tasks.PgqueBackend",
        "QUEUES": ["default", "urgent"],
        "OPTIONS": {"CONSUMER_OPTIONS": {"poll_interval": 0.2}},
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
LOGGING_CONFIG = None
