"""Settings of the example: Django 6's tasks on pgque, the database from ``PGQUE_DSN``."""

from __future__ import annotations

import os

from psycopg.conninfo import conninfo_to_dict

_DB = conninfo_to_dict(os.environ["PGQUE_DSN"])

SECRET_KEY = "example"
USE_TZ = True
INSTALLED_APPS = ["pgque.contrib.django"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _DB.pop("dbname"),
        "USER": _DB.pop("user", ""),
        "PASSWORD": _DB.pop("password", ""),
        "HOST": _DB.pop("host", ""),
        "PORT": _DB.pop("port", ""),
        "OPTIONS": _DB,
    }
}
TASKS = {
    "default": {
        "BACKEND": "pgque.contrib.django.tasks.PgqueBackend",
        "QUEUES": ["default"],
        "OPTIONS": {"CONSUMER_OPTIONS": {"poll_interval": 0.5}},
    }
}
