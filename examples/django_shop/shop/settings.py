"""Settings of the shop: one PostgreSQL database, named by ``PGQUE_DSN``."""

from __future__ import annotations

import os

from psycopg.conninfo import conninfo_to_dict

_DB = conninfo_to_dict(os.environ.get("PGQUE_DSN", "dbname=shop"))

SECRET_KEY = "django-shop-example-not-secret"
DEBUG = True
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
USE_TZ = True
ROOT_URLCONF = "shop.urls"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "pgque.contrib.django",  # migrate installs pgque; manage.py pgque_worker, pgque
    "orders",
]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",  # on psycopg 3
        "NAME": _DB.pop("dbname"),
        "USER": _DB.pop("user", ""),
        "PASSWORD": _DB.pop("password", ""),
        "HOST": _DB.pop("host", ""),
        "PORT": _DB.pop("port", ""),
        "OPTIONS": _DB,
        "CONN_MAX_AGE": 60,  # the worker keeps its connection between batches
    }
}

# Created (with its subscription) by `manage.py migrate`.
PGQUE = {"QUEUES": {"orders": {"consumers": ["mailer"]}}}

EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"  # tests use locmem
DEFAULT_FROM_EMAIL = "shop@example.com"
