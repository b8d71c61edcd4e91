"""The app's one model: the results of Django tasks run by pgque's task backend.

pgque's own tables live in schema ``pgque``, made by the first migration's
installer; :class:`TaskRecord` (table ``pgque_taskrecord``, migration 0002)
holds one row per task enqueued through
:class:`pgque.contrib.django.tasks.PgqueBackend`. The row is written in the
enqueuing transaction (``READY``), marked ``RUNNING`` when a worker starts the
task, and finished (``SUCCESSFUL`` or ``FAILED``) in the worker's batch
transaction, so it commits with the ack. The model does not import
``django.tasks``: it exists on every Django version the app supports.
"""

from __future__ import annotations

from django.db import models

__all__ = ["TaskRecord"]


class TaskRecord(models.Model):  # type: ignore[misc]
    """One enqueued task and what became of it (``get_result`` reads it)."""

    class Status(models.TextChoices):  # type: ignore[misc]
        """The statuses of Django's ``TaskResultStatus``, by value."""

        READY = "READY"
        RUNNING = "RUNNING"
        FAILED = "FAILED"
        SUCCESSFUL = "SUCCESSFUL"

    #: The task result id (a UUID, as text).
    id = models.CharField(primary_key=True, max_length=64)
    #: The alias of the ``settings.TASKS`` backend.
    backend = models.CharField(max_length=200)
    #: The task's import path (``module.function``).
    task_path = models.CharField(max_length=500)
    queue_name = models.CharField(max_length=200)
    priority = models.IntegerField(default=0)
    run_after = models.DateTimeField(null=True, blank=True)
    args = models.JSONField(default=list)
    kwargs = models.JSONField(default=dict)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.READY)
    enqueued_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    last_attempted_at = models.DateTimeField(null=True, blank=True)
    #: The task's return value (JSON), once SUCCESSFUL.
    return_value = models.JSONField(null=True, blank=True)
    #: ``[{"exception_class_path": ..., "traceback": ...}, ...]``, one per failed attempt.
    errors = models.JSONField(default=list)
    #: The workers that ran the task, one per attempt.
    worker_ids = models.JSONField(default=list)

    class Meta:
        verbose_name = "task result"
        indexes = [models.Index(fields=["status"], name="pgque_task_status")]  # noqa: RUF012

    def __str__(self) -> str:
        return f"{self.task_path} {self.id} ({self.status})"
