"""A backend for Django 6's task framework (``django.tasks``) on pgque.

::

    TASKS = {
        "default": {
            "BACKEND": "pgque.contrib.django.tasks.PgqueBackend",
            "QUEUES": ["default", "emails"],
            "OPTIONS": {"DATABASE": "default"},
        }
    }

``my_task.enqueue(...)`` writes the task's result row and sends its message on
Django's connection (``OPTIONS["DATABASE"]``), in the transaction that is
open there: inside ``transaction.atomic()`` the task exists if and only if
that transaction commits. ``manage.py pgque_worker`` runs the tasks
(:mod:`pgque.contrib.django._tasks_worker`). The settings are described in
:mod:`pgque.contrib.django._tasks_conf`; this module needs Django 6.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import django
from django.core import checks
from django.db import transaction

try:
    from django.tasks import Task, TaskResult, TaskResultStatus
except ImportError as exc:  # Django before 6
    raise ImportError(
        "pgque.contrib.django.tasks needs Django 6 or newer (its task framework), this is"
        f" Django {django.get_version()}: pip install 'django>=6' (Python 3.12+)"
    ) from exc
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.base import TaskError
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
from django.tasks.signals import task_enqueued
from django.utils import timezone
from django.utils.module_loading import import_string

from pgque.contrib.django._tasks_conf import TaskBackendConfig, backend_config
from pgque.contrib.django.connection import database_problem
from pgque.contrib.django.models import TaskRecord
from pgque.contrib.django.sending import send, send_at

__all__ = ["TASK_TYPE", "PgqueBackend", "load_task", "task_result"]

#: The pgque message type of a task's message.
TASK_TYPE = "django.task"


class PgqueBackend(BaseTaskBackend):  # type: ignore[misc]
    """Django tasks on pgque queues: transactional enqueue, delayed and prioritised runs,
    results in the app's ``TaskRecord`` table.

    Each Django queue name of ``QUEUES`` is a pgque queue (``OPTIONS["QUEUE_PREFIX"]``
    + name, ``"tasks_"`` by default), created with the worker's subscription by
    ``manage.py migrate``.
    """

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        #: The checked settings of this backend.
        self.config: TaskBackendConfig = backend_config(alias, params)
        self.queues = set(self.config.queues)

    @property
    def database(self) -> str:
        """The Django database alias tasks are sent and run on."""
        return self.config.database

    def validate_task(self, task: Task) -> None:
        """Django's checks, and a queue name this backend knows (saying which it knows).

        Raises:
            InvalidTask: The task cannot run on this backend.
        """
        if task.queue_name not in self.queues:
            raise InvalidTask(
                f"task {task.module_path}: queue_name {task.queue_name!r} is not in"
                f" settings.TASKS[{self.alias!r}]['QUEUES'] {list(self.config.queues)}:"
                " add it there (and run `manage.py migrate` to create its pgque queue),"
                " or use one of those"
            )
        super().validate_task(task)

    def enqueue(self, task: Task, args: Sequence[Any], kwargs: dict[str, Any]) -> TaskResult:
        """Write the task's READY row and send its message, in the transaction open on
        ``OPTIONS["DATABASE"]`` (a savepoint of it; in autocommit, a transaction of their
        own); returns the task's result.

        Raises:
            InvalidTask: The task cannot run here.
            TypeError: ``args`` or ``kwargs`` are not JSON.
            PgqueQueueNotFound: The queue's pgque queue does not exist (run migrate).
        """
        self.validate_task(task)
        now = timezone.now()
        result = TaskResult(
            task=task,
            id=str(uuid.uuid4()),
            status=TaskResultStatus.READY,
            enqueued_at=now,
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=list(args),
            kwargs=dict(kwargs),
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        queue = self.config.pgque_queue(task.queue_name)
        payload = {"id": result.id, "task": task.module_path, "priority": task.priority}
        with transaction.atomic(using=self.database):
            TaskRecord.objects.using(self.database).create(
                id=result.id,
                backend=self.alias,
                task_path=task.module_path,
                queue_name=task.queue_name,
                priority=task.priority,
                run_after=task.run_after,
                args=result.args,
                kwargs=result.kwargs,
                status=TaskRecord.Status.READY,
                enqueued_at=now,
            )
            if task.run_after is None:
                send(queue, payload, type=TASK_TYPE, using=self.database)
            else:
                send_at(queue, payload, at=_aware(task.run_after), type=TASK_TYPE,
                        using=self.database)  # fmt: skip
        task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult:
        """The task result ``result_id`` as the database has it now.

        Raises:
            TaskResultDoesNotExist: No task of this backend has that id (or it was
                enqueued in a transaction that did not commit).
        """
        record = (
            TaskRecord.objects.using(self.database)
            .filter(pk=str(result_id), backend=self.alias)
            .first()
        )
        if record is None:
            raise TaskResultDoesNotExist(
                f"no task result {result_id!r} in backend {self.alias!r}"
                f" (database {self.database!r})"
            )
        return task_result(record)

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        """An error when ``OPTIONS["DATABASE"]`` cannot carry pgque."""
        problem = database_problem(self.database)
        if problem is None:
            return []
        return [checks.Error(f"settings.TASKS[{self.alias!r}]: {problem}", id="pgque.E003")]


def _aware(moment: datetime) -> datetime:
    """``run_after`` as an aware datetime (a naive one is in the current time zone)."""
    return moment if timezone.is_aware(moment) else timezone.make_aware(moment)


def load_task(record: TaskRecord) -> Task:
    """The task of ``record``, with the priority, queue and ``run_after`` it was sent with.

    Raises:
        ValueError: Its import path no longer names a task.
    """
    try:
        found = import_string(record.task_path)
    except ImportError as exc:
        raise ValueError(
            f"task result {record.id}: its task {record.task_path!r} cannot be imported ({exc})"
        ) from exc
    if not isinstance(found, Task):
        raise ValueError(
            f"task result {record.id}: {record.task_path!r} is a {type(found).__name__},"
            " not a task (decorate the function with @django.tasks.task)"
        )
    return found.using(
        priority=record.priority,
        queue_name=record.queue_name,
        run_after=record.run_after,
        backend=record.backend,
    )


def task_result(record: TaskRecord, task: Task | None = None) -> TaskResult:
    """Django's ``TaskResult`` of a row (``task``: the loaded task, else loaded here)."""
    result = TaskResult(
        task=load_task(record) if task is None else task,
        id=record.id,
        status=TaskResultStatus(record.status),
        enqueued_at=record.enqueued_at,
        started_at=record.started_at,
        finished_at=record.finished_at,
        last_attempted_at=record.last_attempted_at,
        args=list(record.args),
        kwargs=dict(record.kwargs),
        backend=record.backend,
        errors=[
            TaskError(exception_class_path=e["exception_class_path"], traceback=e["traceback"])
            for e in record.errors
        ],
        worker_ids=list(record.worker_ids),
    )
    object.__setattr__(result, "_return_value", record.return_value)
    return result
