"""The worker side of :class:`~pgque.contrib.django.tasks.PgqueBackend`: run the tasks.

One :class:`TaskConsumer` per Django queue of a backend reads its pgque queue
on Django's connection, like every Django consumer. A batch runs in one
transaction:

1. the batch's task messages are received and acked (not yet committed);
2. their tasks run by priority, higher first (equal priorities in enqueue
   order), each in a savepoint of its own (``transaction.atomic()``): a task
   that raises has its writes rolled back;
3. each task's row becomes SUCCESSFUL (with the return value) or FAILED (with
   the exception), in the batch's transaction;
4. the transaction commits: the ack, the tasks' writes and their results
   together. A worker that dies before rolls everything back, and the tasks
   come again.

Just before a task starts, its row is marked RUNNING on a connection of its own
(a helper thread's Django connection, in autocommit), so that ``get_result``
shows it while the task runs. Django tasks are not retried: a failed task is
acked with its FAILED result.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from traceback import format_exception
from typing import Any

import psycopg
from django.db import close_old_connections, connections, transaction
from django.tasks import Task, TaskContext, TaskResultStatus
from django.tasks.signals import task_finished, task_started
from django.utils import timezone
from django.utils.json import normalize_json

from pgque.consumer import Consumer
from pgque.contrib.django._tasks_conf import TaskBackendConfig
from pgque.contrib.django.connection import psycopg_connection
from pgque.contrib.django.models import TaskRecord
from pgque.contrib.django.registry import DjangoConsumer
from pgque.contrib.django.tasks import PgqueBackend, load_task, task_result
from pgque.message import Message

__all__ = ["TaskConsumer", "task_consumers"]

log = logging.getLogger("pgque.contrib.django.tasks")


def _worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class TaskConsumer(DjangoConsumer):
    """Runs the tasks of one Django queue of a pgque task backend.

    Args:
        config: The backend's settings.
        queue_name: The Django queue name.
        options: :class:`pgque.Consumer` options (``CONSUMER_OPTIONS``).
    """

    def __init__(self, config: TaskBackendConfig, queue_name: str, **options: Any) -> None:
        super().__init__(
            config.pgque_queue(queue_name), config.consumer, using=config.database, **options
        )
        #: The backend's settings.
        self.config = config
        #: The Django queue name.
        self.queue_name = queue_name
        #: The id this worker adds to a task's ``worker_ids``.
        self.task_worker_id = _worker_id()
        self._due: list[Message] = []
        self.on("*")(self._due.append)

    def poll(
        self, conn: psycopg.Connection[Any] | None = None, *, tick: float | None = None
    ) -> int | None:
        """Receive one batch and run its tasks by priority, all in one transaction on
        Django's connection; returns how many messages there were (None: no batch)."""
        if tick is not None and conn is not None:
            self._tick(conn, tick)
        if not connections[self.using].in_atomic_block:
            close_old_connections()
        django_conn = psycopg_connection(self.using)
        self._due.clear()
        side = _SideConnection(self.using)
        started: list[str] = []  # the tasks marked RUNNING by this poll
        try:
            # The inner block's savepoint begins Django's transaction at once: the batch
            # then takes a savepoint of it instead of committing on its own (psycopg would,
            # on a connection idle outside autocommit), and the ack commits only with the
            # tasks' writes and results.
            with transaction.atomic(using=self.using), transaction.atomic(using=self.using):
                count = Consumer.poll(self, django_conn)
                if count is None:  # no batch, or one stopped and rolled back
                    return None
                due = sorted(self._due, key=lambda m: (-_priority(m), m.msg_id))
                records = _records(self.using, due)
                stop_seen: float | None = None
                for msg in due:
                    if self.stopping:  # draining: shutdown_timeout from the first look
                        stop_seen = stop_seen or time.monotonic()
                        if time.monotonic() - stop_seen >= self.shutdown_timeout:
                            raise _Abandoned
                    record = records.get(_task_id(msg) or "")
                    if record is None:
                        log.warning(
                            "queue %s: message %s names no task result of this database"
                            " (payload %r); skipped",
                            self.queue, msg.msg_id, msg.payload,
                        )  # fmt: skip
                        continue
                    started.append(record.id)
                    self._run(record, side)
        except BaseException as exc:  # rolled back: the started tasks are READY again
            self._unstart(started)
            if not isinstance(exc, _Abandoned):
                raise
            log.warning(
                "queue %s: stopped past shutdown_timeout (%g s) in a batch of tasks; the batch"
                " was rolled back (its tasks READY again), to run on the next worker",
                self.queue, self.shutdown_timeout,
            )  # fmt: skip
            return None
        finally:
            self._due.clear()
            side.close()
        return count

    def _unstart(self, started: list[str]) -> None:
        """After a rollback: the tasks marked RUNNING by it are READY again (best effort:
        the connection may be the reason of the rollback)."""
        if not started:
            return
        try:
            TaskRecord.objects.using(self.using).filter(
                pk__in=started, status=TaskRecord.Status.RUNNING
            ).update(status=TaskRecord.Status.READY)
        except Exception:
            log.warning("tasks %s stay RUNNING until they run again", started, exc_info=True)

    def _run(self, record: TaskRecord, side: _SideConnection) -> None:
        """Run one task and write its outcome in the batch's transaction."""
        if record.status in (TaskRecord.Status.SUCCESSFUL, TaskRecord.Status.FAILED):
            return  # finished already: a message delivered again after its batch failed to ack
        now = timezone.now()
        record.status = TaskRecord.Status.RUNNING
        record.started_at = record.started_at or now
        record.last_attempted_at = now
        record.worker_ids = [*record.worker_ids, self.task_worker_id]
        side.mark_running(record)
        outcome = _call(record, self.using)
        record.finished_at = timezone.now()
        if isinstance(outcome, BaseException):
            record.status = TaskRecord.Status.FAILED
            kind = type(outcome)
            record.errors = [
                *record.errors,
                {
                    "exception_class_path": f"{kind.__module__}.{kind.__qualname__}",
                    "traceback": "".join(format_exception(outcome)),
                },
            ]
        else:
            record.status = TaskRecord.Status.SUCCESSFUL
            record.return_value = outcome.value
        record.save(using=self.using, update_fields=[
            "status", "started_at", "last_attempted_at", "finished_at", "worker_ids",
            "errors", "return_value"])  # fmt: skip
        try:
            task_finished.send(PgqueBackend, task_result=task_result(record))
        except Exception:  # a receiver's failure is not the task's
            log.exception("task %s: a task_finished receiver failed", record.id)


class _Abandoned(Exception):
    """Raised inside the batch's transaction to roll it back (a drain past its timeout)."""


class _Returned:
    """A task's JSON-normalised return value."""

    def __init__(self, value: Any) -> None:
        self.value = value


def _call(record: TaskRecord, using: str) -> _Returned | Exception:
    """Run the task of ``record`` in a savepoint; its return value, or the exception."""
    try:
        task: Task = load_task(record)
        started = task_result(record, task)
        object.__setattr__(started, "status", TaskResultStatus.RUNNING)
        task_started.send(PgqueBackend, task_result=started)
        with transaction.atomic(using=using):
            if task.takes_context:
                value = task.call(TaskContext(task_result=started), *record.args, **record.kwargs)
            else:
                value = task.call(*record.args, **record.kwargs)
            return _Returned(normalize_json(value))
    except Exception as exc:  # the task failed: its result says how
        return exc


def _priority(msg: Message) -> int:
    data = msg.json()
    value = data.get("priority", 0) if isinstance(data, dict) else 0
    return value if isinstance(value, int) else 0


def _task_id(msg: Message) -> str | None:
    data = msg.json()
    value = data.get("id") if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


def _records(using: str, msgs: list[Message]) -> dict[str, TaskRecord]:
    """The result rows of the batch's tasks, by id (one query)."""
    ids = [i for i in (_task_id(m) for m in msgs) if i is not None]
    if not ids:
        return {}
    return {r.id: r for r in TaskRecord.objects.using(using).filter(pk__in=ids)}


class _SideConnection:
    """Writes RUNNING marks outside the batch's transaction: on a helper thread, whose
    Django connection is its own (autocommit), closed with :meth:`close`."""

    def __init__(self, using: str) -> None:
        self.using = using
        self._thread: ThreadPoolExecutor | None = None

    def _submit(self, work: Callable[[], Any]) -> Any:
        if self._thread is None:
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="pgque-tasks")
        return self._thread.submit(work).result()

    def mark_running(self, record: TaskRecord) -> None:
        """Show ``record`` as RUNNING to other connections now."""
        started: datetime | None = record.started_at
        values = {
            "status": TaskRecord.Status.RUNNING,
            "started_at": started,
            "last_attempted_at": record.last_attempted_at,
            "worker_ids": record.worker_ids,
        }
        query = TaskRecord.objects.using(self.using).filter(pk=record.id)
        try:
            self._submit(lambda: query.update(**values))
        except Exception:  # only the RUNNING display suffers
            log.exception("task %s: could not mark it RUNNING", record.id)

    def close(self) -> None:
        """Close the helper thread's connection and end the thread."""
        if self._thread is not None:
            self._thread.submit(connections.close_all).result()
            self._thread.shutdown()
            self._thread = None


def task_consumers(config: TaskBackendConfig) -> list[TaskConsumer]:
    """One consumer per Django queue of the backend, in ``QUEUES`` order."""
    options = {"subscribe": True, **config.consumer_options}
    return [TaskConsumer(config, name, **options) for name in config.queues]
