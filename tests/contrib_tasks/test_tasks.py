"""PgqueBackend: transactional enqueue, results, failures, run_after, priority, async
tasks and the task context, against a real PostgreSQL (the worker driven by polls)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
import pytest
from django.db import transaction
from django.tasks import TaskResultStatus, default_task_backend
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
from django.tasks.signals import task_started
from django.utils import timezone
from tasks_app.tasks import add, async_add, fail, introspect, labelled, unserializable, urgent

from pgque.contrib.django.worker import task_consumers

Conn = psycopg.Connection[Any]


class Rollback(Exception):
    """Raised to roll an atomic block back."""


def ran(conn: Conn) -> list[str]:
    return [r[0] for r in conn.execute("select label from ran order by id").fetchall()]


def run_tasks(conn: Conn) -> int:
    """Tick every task queue and let its consumer poll until no batch is left; how many
    task messages were handled."""
    total = 0
    for consumer in task_consumers():
        conn.execute("select pgque.force_tick(%s)", (consumer.queue,))
        conn.execute("select pgque.ticker(%s)", (consumer.queue,))
        while (count := consumer.poll()) is not None:
            total += count
    return total


def test_rolled_back_enqueue_leaves_no_task_committed_one_runs_once(
    tasks_db: str, conn: Conn
) -> None:
    with pytest.raises(Rollback), transaction.atomic():
        gone = add.enqueue(1, 2)
        raise Rollback
    with transaction.atomic():
        kept = add.enqueue(2, 3)
        assert add.get_result(kept.id).status == TaskResultStatus.READY  # in the transaction
    with pytest.raises(TaskResultDoesNotExist):
        add.get_result(gone.id)
    assert run_tasks(conn) == 1
    assert ran(conn) == ["add 2+3"]
    result = add.get_result(kept.id)
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 5
    assert result.args == [2, 3] and result.attempts == 1 and result.errors == []
    assert result.started_at is not None and result.finished_at >= result.started_at
    kept.refresh()
    assert kept.status == TaskResultStatus.SUCCESSFUL and kept.return_value == 5
    assert run_tasks(conn) == 0  # acked with the result: nothing runs again
    assert ran(conn) == ["add 2+3"]


def test_failing_task_is_failed_with_the_exception_and_its_writes_rolled_back(
    tasks_db: str, conn: Conn
) -> None:
    result = fail.enqueue("payment")
    after = labelled.enqueue("after")
    assert run_tasks(conn) == 2
    failed = default_task_backend.get_result(result.id)
    assert failed.status == TaskResultStatus.FAILED
    assert len(failed.errors) == 1
    assert failed.errors[0].exception_class is ValueError
    assert "ValueError: no payment" in failed.errors[0].traceback
    with pytest.raises(ValueError, match="Task failed"):
        failed.return_value  # noqa: B018  (Django's TaskResult raises for a failed task)
    assert ran(conn) == ["after"]  # the failed task's row rolled back, the batch went on
    assert labelled.get_result(after.id).return_value == "after"
    assert run_tasks(conn) == 0  # not retried

    bad = unserializable.enqueue()
    run_tasks(conn)
    failed = unserializable.get_result(bad.id)
    assert failed.status == TaskResultStatus.FAILED
    assert failed.errors[0].exception_class is TypeError


def test_run_after_waits_for_its_time(tasks_db: str, conn: Conn) -> None:
    later = add.using(run_after=timezone.now() + timedelta(hours=1)).enqueue(4, 4)
    assert conn.execute("select count(*) from pgque.delayed_events").fetchone() == (1,)
    assert run_tasks(conn) == 0
    assert add.get_result(later.id).status == TaskResultStatus.READY
    conn.execute("update pgque.delayed_events set de_deliver_at = now() - interval '1 second'")
    assert conn.execute("select pgque.maint_deliver_delayed()").fetchone() == (1,)
    assert run_tasks(conn) == 1
    assert add.get_result(later.id).return_value == 8
    assert add.get_result(later.id).task.run_after is not None


def test_priority_orders_the_tasks_of_a_batch(tasks_db: str, conn: Conn) -> None:
    with transaction.atomic():
        labelled.enqueue("low")
        labelled.using(priority=10).enqueue("high")
        labelled.using(priority=5).enqueue("mid")
        labelled.using(priority=10).enqueue("high 2")
        labelled.using(priority=-100).enqueue("lowest")
    labelled.enqueue("low 2")  # another transaction, the same batch
    assert run_tasks(conn) == 6
    assert ran(conn) == ["high", "high 2", "mid", "low", "low 2", "lowest"]


def test_queue_names_map_to_pgque_queues_and_unknown_ones_are_refused(
    tasks_db: str, conn: Conn
) -> None:
    result = urgent.enqueue("now")
    pending = conn.execute(
        "select queue_name from pgque.queue where queue_name like 'tasks_%' order by 1"
    ).fetchall()
    assert pending == [("tasks_default",), ("tasks_urgent",)]
    assert run_tasks(conn) == 1
    assert urgent.get_result(result.id).task.queue_name == "urgent"
    with pytest.raises(InvalidTask, match=r"queue_name 'nope' is not in settings\.TASKS"):
        add.using(queue_name="nope")


def test_async_task_runs_in_the_batch_transaction(tasks_db: str, conn: Conn) -> None:
    result = async_add.enqueue(20, 22)
    assert run_tasks(conn) == 1
    assert async_add.get_result(result.id).return_value == 42
    assert ran(conn) == ["async 20+22"]


def test_takes_context_and_running_status(tasks_db: str, conn: Conn) -> None:
    result = introspect.enqueue(tasks_db)
    run_tasks(conn)
    done = introspect.get_result(result.id)
    assert done.status == TaskResultStatus.SUCCESSFUL, done.errors
    assert done.return_value == {
        "id": result.id,
        "attempt": 1,
        "status_elsewhere": "RUNNING",  # marked outside the batch's transaction
    }
    assert len(done.worker_ids) == 1


def test_unknown_result_id(tasks_db: str) -> None:
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result("no-such-id")
    with pytest.raises(TaskResultDoesNotExist):
        add.get_result("8f0f6a1e-0000-4000-8000-000000000000")


def test_async_enqueue_and_get_result(tasks_db: str, conn: Conn) -> None:
    from asgiref.sync import async_to_sync

    async def enqueue_and_read() -> tuple[str, TaskResultStatus]:
        result = await add.aenqueue(1, 1)
        return result.id, (await add.aget_result(result.id)).status

    result_id, status = async_to_sync(enqueue_and_read)()
    assert status == TaskResultStatus.READY
    assert run_tasks(conn) == 1
    assert add.get_result(result_id).return_value == 2


def test_a_stop_past_shutdown_timeout_rolls_the_batch_back_and_it_runs_again(
    tasks_db: str, conn: Conn
) -> None:
    with transaction.atomic():
        results = [labelled.enqueue(label) for label in ("one", "two", "three")]
    (consumer, _) = task_consumers()
    consumer.shutdown_timeout = 0

    def stop_at_first_start(**kwargs: Any) -> None:
        consumer.stop()  # as SIGTERM would, while the first task starts

    task_started.connect(stop_at_first_start, dispatch_uid="test-stop")
    try:
        conn.execute("select pgque.force_tick('tasks_default')")
        conn.execute("select pgque.ticker('tasks_default')")
        assert consumer.poll() is None  # rolled back after the first task
    finally:
        task_started.disconnect(dispatch_uid="test-stop")
    assert ran(conn) == []
    first = labelled.get_result(results[0].id)
    assert first.status == TaskResultStatus.READY and first.attempts == 1
    consumer.reset()
    assert consumer.poll() == 3  # the same batch again
    assert ran(conn) == ["one", "two", "three"]
    assert [labelled.get_result(r.id).attempts for r in results] == [2, 1, 1]


def test_a_message_of_a_finished_or_unknown_task_runs_nothing(tasks_db: str, conn: Conn) -> None:
    done = add.enqueue(1, 1)
    assert run_tasks(conn) == 1
    for task_id in (done.id, "unknown"):  # delivered again after a failed ack; a stray one
        payload = f'{{"id": "{task_id}", "task": "tasks_app.tasks.add", "priority": 0}}'
        conn.execute("select pgque.send('tasks_default', 'django.task', %s::jsonb)", (payload,))
    assert run_tasks(conn) == 2
    assert ran(conn) == ["add 1+1"]
    assert add.get_result(done.id).attempts == 1


def test_missing_queue_and_bad_database_are_reported(tasks_db: str, conn: Conn) -> None:
    from django.conf import settings
    from django.tasks import task_backends
    from django.test.utils import override_settings

    from pgque.contrib.django.models import TaskRecord
    from pgque.errors import PgqueQueueNotFound

    other = {"BACKEND": "pgque.contrib.django.tasks.PgqueBackend"}
    tasks = {
        **settings.TASKS,
        "unmigrated": {**other, "OPTIONS": {"QUEUE_PREFIX": "never_"}},
        "nowhere": {**other, "OPTIONS": {"DATABASE": "nowhere"}},
    }
    with override_settings(TASKS=tasks):
        with pytest.raises(PgqueQueueNotFound, match="queue 'never_default' does not exist"):
            add.using(backend="unmigrated").enqueue(1, 2)
        assert TaskRecord.objects.count() == 0  # the row went with the failed send
        (error,) = task_backends["nowhere"].check()
        assert error.id == "pgque.E003"
        assert "settings.TASKS['nowhere']: the database alias 'nowhere'" in error.msg
