"""The results of Django tasks (:class:`pgque.contrib.django.models.TaskRecord`).

An ordinary table of the app (``pgque_taskrecord``), next to pgque's schema;
backwards, it is dropped before 0001 uninstalls pgque.
"""

from __future__ import annotations

from typing import ClassVar

from django.db import migrations, models

_STATUSES = [
    ("READY", "Ready"),
    ("RUNNING", "Running"),
    ("FAILED", "Failed"),
    ("SUCCESSFUL", "Successful"),
]


class Migration(migrations.Migration):  # type: ignore[misc]
    """Create the task results table."""

    dependencies: ClassVar[list[tuple[str, str]]] = [("pgque", "0001_pgque_0_1_0")]
    operations: ClassVar[list[migrations.CreateModel]] = [
        migrations.CreateModel(
            name="TaskRecord",
            fields=[
                ("id", models.CharField(max_length=64, primary_key=True, serialize=False)),
                ("backend", models.CharField(max_length=200)),
                ("task_path", models.CharField(max_length=500)),
                ("queue_name", models.CharField(max_length=200)),
                ("priority", models.IntegerField(default=0)),
                ("run_after", models.DateTimeField(blank=True, null=True)),
                ("args", models.JSONField(default=list)),
                ("kwargs", models.JSONField(default=dict)),
                (
                    "status",
                    models.CharField(choices=_STATUSES, default="READY", max_length=10),
                ),
                ("enqueued_at", models.DateTimeField()),
                ("started_at", models.DateTimeField(blank=True, null=True)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                ("last_attempted_at", models.DateTimeField(blank=True, null=True)),
                ("return_value", models.JSONField(blank=True, null=True)),
                ("errors", models.JSONField(default=list)),
                ("worker_ids", models.JSONField(default=list)),
            ],
            options={
                "verbose_name": "task result",
                "indexes": [models.Index(fields=["status"], name="pgque_task_status")],
            },
        ),
    ]
