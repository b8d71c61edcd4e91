"""Tasks the tests enqueue; each one writes a row to ``ran`` in the worker's transaction."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import psycopg
from asgiref.sync import sync_to_async
from django.db import connection
from django.tasks import TaskContext, task


def record(label: str) -> None:
    """A row in ``ran``, on Django's connection (the worker's batch transaction)."""
    with connection.cursor() as cursor:
        cursor.execute("insert into ran (label) values (%s)", [label])


@task
def add(a: int, b: int) -> int:
    """Record ``add a+b`` and return the sum."""
    record(f"add {a}+{b}")
    return a + b


@task
def fail(label: str) -> None:
    """Record ``label``, then raise: the row rolls back, the result is FAILED."""
    record(label)
    raise ValueError(f"no {label}")


@task
def labelled(label: str) -> str:
    """Record ``label`` (the priority test reads the order)."""
    record(label)
    return label


@task(queue_name="urgent", priority=50)
def urgent(label: str) -> str:
    """Record ``label``, on queue ``urgent``."""
    record(label)
    return label


@task
async def async_add(a: int, b: int) -> int:
    """An async task: awaits, writes through ``sync_to_async``, returns the sum."""
    await asyncio.sleep(0)
    await sync_to_async(record)(f"async {a}+{b}")
    return a + b


@task(takes_context=True)
def introspect(context: TaskContext, dsn: str) -> dict[str, Any]:
    """What the context says, and the task's status seen from another connection."""
    with psycopg.connect(dsn) as other:
        row = other.execute(
            "select status from pgque_taskrecord where id = %s", (context.task_result.id,)
        ).fetchone()
    return {
        "id": context.task_result.id,
        "attempt": context.attempt,
        "status_elsewhere": row[0] if row else None,
    }


@task
def unserializable() -> object:
    """Returns what JSON cannot hold: the task fails."""
    return object()


@task
def slow(folder: str) -> str:
    """Write ``started`` in ``folder``, then wait (60 s at most) for ``release`` there."""
    path = Path(folder)
    (path / "started").touch()
    deadline = time.monotonic() + 60
    while not (path / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    record("slow")
    return "released"
