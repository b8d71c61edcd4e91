"""The Django app: ``INSTALLED_APPS += ["pgque.contrib.django"]`` (label ``pgque``)."""

from __future__ import annotations

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class PgqueConfig(AppConfig):  # type: ignore[misc]
    """pgque's app: migrations install it, ``post_migrate`` creates the declared queues,
    system checks look at the databases."""

    name = "pgque.contrib.django"
    label = "pgque"
    verbose_name = "pgque"
    default_auto_field = "django.db.models.AutoField"

    def ready(self) -> None:
        """Connect the queue declarations to ``post_migrate`` and register the checks."""
        from pgque.contrib.django import checks  # noqa: F401  (registers them)

        post_migrate.connect(_declare, sender=self, dispatch_uid="pgque.declare_queues")


def _declare(sender: AppConfig, using: str = "default", **kwargs: object) -> None:
    """``post_migrate`` of this app: create the queues of ``PGQUE["QUEUES"]`` and those of
    the task backends in ``settings.TASKS``."""
    from pgque.contrib.django._tasks_conf import declare_task_queues
    from pgque.contrib.django.schema import declare_queues, manages

    declare_queues(using)
    if manages(using):
        declare_task_queues(using)
