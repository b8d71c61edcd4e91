"""The ``TASKS`` entries that use pgque's backend, read without importing ``django.tasks``.

::

    TASKS = {
        "default": {
            "BACKEND": "pgque.contrib.django.tasks.PgqueBackend",
            "QUEUES": ["default", "emails"],  # Django queue names (default: ["default"])
            "OPTIONS": {
                "DATABASE": "default",  # the alias tasks are sent and run on
                "QUEUE_PREFIX": "tasks_",  # Django queue "emails" -> pgque queue "tasks_emails"
                "CONSUMER": "django_tasks",  # the subscription the worker reads with
                "CONSUMER_OPTIONS": {"poll_interval": 5},  # pgque.Consumer options
            },
        }
    }

``manage.py migrate`` (``post_migrate``) and ``manage.py pgque_worker`` read the
setting through this module on any Django version, so the rest of the app
never imports :mod:`pgque.contrib.django.tasks` (which needs Django 6).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction

from pgque.client import PgqueClient
from pgque.contrib.django.conf import refuse_unknown_keys
from pgque.contrib.django.connection import psycopg_connection
from pgque.errors import PgqueError
from pgque.installer import installed_version

__all__ = ["BACKEND_PATH", "TaskBackendConfig", "backend_config", "backends", "declare_task_queues"]

#: The ``BACKEND`` value of a ``TASKS`` entry that uses pgque.
BACKEND_PATH = "pgque.contrib.django.tasks.PgqueBackend"

_OPTIONS = {"DATABASE", "QUEUE_PREFIX", "CONSUMER", "CONSUMER_OPTIONS"}


@dataclass(frozen=True)
class TaskBackendConfig:
    """One ``TASKS`` entry of pgque's backend, checked.

    Attributes:
        alias: The key in ``settings.TASKS``.
        queues: The Django queue names, in the order the worker drains them.
        database: The Django database alias tasks are sent on and run on.
        prefix: Prepended to a Django queue name to make the pgque queue name.
        consumer: The pgque consumer (subscription) name of the worker.
        consumer_options: Other :class:`pgque.Consumer` options of the worker.
    """

    alias: str
    queues: tuple[str, ...]
    database: str = "default"
    prefix: str = "tasks_"
    consumer: str = "django_tasks"
    consumer_options: dict[str, Any] = field(default_factory=dict)

    def pgque_queue(self, queue_name: str) -> str:
        """The pgque queue of the Django queue ``queue_name``."""
        return f"{self.prefix}{queue_name}"


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip() or value != value.strip():
        raise ImproperlyConfigured(f"{where} must be a non-empty name, got {value!r}")
    return value


def backend_config(alias: str, params: dict[str, Any]) -> TaskBackendConfig:
    """The entry ``settings.TASKS[alias]`` (``params``) checked.

    Raises:
        ImproperlyConfigured: A malformed ``QUEUES`` or ``OPTIONS`` (naming the key).
    """
    where = f"settings.TASKS[{alias!r}]"
    queues = params.get("QUEUES", ["default"])
    if not isinstance(queues, (list, tuple)) or not queues:
        raise ImproperlyConfigured(
            f'{where}["QUEUES"] must be a non-empty list of queue names, got {queues!r}'
        )
    names = tuple(_text(q, f'{where}["QUEUES"] item') for q in queues)
    options = params.get("OPTIONS", {}) or {}
    if not isinstance(options, dict):
        raise ImproperlyConfigured(f'{where}["OPTIONS"] must be a dict, got {options!r}')
    refuse_unknown_keys(options, _OPTIONS, f'{where}["OPTIONS"]')
    prefix = options.get("QUEUE_PREFIX", "tasks_")
    if not isinstance(prefix, str) or prefix != prefix.lstrip():
        raise ImproperlyConfigured(
            f'{where}["OPTIONS"]["QUEUE_PREFIX"] must be a str without leading spaces,'
            f" got {prefix!r}"
        )
    consumer_options = options.get("CONSUMER_OPTIONS", {})
    if not isinstance(consumer_options, dict):
        raise ImproperlyConfigured(
            f'{where}["OPTIONS"]["CONSUMER_OPTIONS"] must be a dict of pgque.Consumer'
            f" options, got {consumer_options!r}"
        )
    return TaskBackendConfig(
        alias=alias,
        queues=names,
        database=_text(options.get("DATABASE", "default"), f'{where}["OPTIONS"]["DATABASE"]'),
        prefix=prefix,
        consumer=_text(options.get("CONSUMER", "django_tasks"), f'{where}["OPTIONS"]["CONSUMER"]'),
        consumer_options=dict(consumer_options),
    )


def backends() -> list[TaskBackendConfig]:
    """Every ``settings.TASKS`` entry whose ``BACKEND`` is pgque's, in the setting's order."""
    declared = getattr(settings, "TASKS", None) or {}
    if not isinstance(declared, dict):
        return []  # Django's own check reports a malformed TASKS
    return [
        backend_config(alias, params)
        for alias, params in declared.items()
        if isinstance(params, dict) and params.get("BACKEND") == BACKEND_PATH
    ]


def declare_task_queues(using: str) -> None:
    """Create the pgque queues of the task backends that run on ``using`` and subscribe
    their worker's consumer (idempotent; called by ``post_migrate``)."""
    mine = [b for b in backends() if b.database == using]
    if not mine or installed_version(psycopg_connection(using)) is None:
        return
    with transaction.atomic(using=using):
        client = PgqueClient(psycopg_connection(using))
        for backend in mine:
            for name in backend.queues:
                queue = backend.pgque_queue(name)
                try:
                    client.create_queue(queue)
                    client.subscribe(queue, backend.consumer)
                except PgqueError as exc:
                    raise ImproperlyConfigured(
                        f"settings.TASKS[{backend.alias!r}]: queue {name!r} (pgque queue"
                        f" {queue!r}) cannot be created in database {using!r}: {exc}"
                    ) from exc
