"""Sending from Django code, on Django's own connection and in its transaction.

Inside ``transaction.atomic()`` the message commits or rolls back with the
ORM writes of the block (a nested ``atomic`` is a savepoint: rolling it back
drops only the messages sent inside it); in autocommit it is sent at once.
No second connection and no ``on_commit`` hook are involved.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import psycopg
from django.db import connections
from psycopg.pq import TransactionStatus

from pgque.contrib.django.connection import psycopg_connection
from pgque.errors import PgqueQueueNotFound
from pgque.producer import Extras, Producer

__all__ = ["send", "send_at", "send_batch"]


@contextmanager
def _on_django(using: str, queue: str) -> Iterator[Producer]:
    """A producer on Django's connection ``using``; a failed statement marks Django's
    atomic block for rollback, as a failed ORM query would."""
    conn = psycopg_connection(using)
    connections[using].validate_no_broken_transaction()
    try:
        yield Producer(conn)
    except PgqueQueueNotFound as exc:
        _mark_broken(using, conn)
        raise PgqueQueueNotFound(
            f"queue {queue!r} does not exist in database {using!r}: declare it in"
            f" settings.PGQUE['QUEUES'] and run `manage.py migrate`, or create it with"
            f" `manage.py pgque create-queue {queue}`"
        ) from exc
    except Exception:
        _mark_broken(using, conn)
        raise


def _mark_broken(using: str, conn: psycopg.Connection[Any]) -> None:
    """After a failed statement inside a transaction, tell Django's atomic block."""
    if conn.info.transaction_status == TransactionStatus.INERROR:
        wrapper = connections[using]
        if wrapper.in_atomic_block:
            wrapper.needs_rollback = True


def send(
    queue: str,
    payload: Any,
    *,
    type: str = "default",
    extras: Extras | None = None,
    using: str = "default",
) -> int:
    """Send one message on Django's connection ``using``; returns its event id.

    Args:
        queue: The queue (declare it in ``settings.PGQUE["QUEUES"]``).
        payload: The message, encoded as JSON.
        type: The message type. Defaults to ``"default"``.
        extras: ``(extra1, extra2, extra3, extra4)``, or None.
        using: The database alias. Defaults to ``"default"``.

    Raises:
        ImproperlyConfigured: ``using`` is not a PostgreSQL database on psycopg 3.
        PgqueQueueNotFound: The queue does not exist (the message says how to create it).
        PgqueInvalidArgument: A bad queue name, type or extras.
    """
    with _on_django(using, queue) as producer:
        return producer.send(queue, payload, type=type, extras=extras)


def send_batch(
    queue: str,
    payloads: Iterable[Any],
    *,
    type: str = "default",
    types: Sequence[str | None] | None = None,
    extras: Sequence[Extras | None] | None = None,
    using: str = "default",
) -> list[int]:
    """Send many messages in one statement on Django's connection ``using``; returns
    their event ids in input order (all or none are sent).

    Args:
        queue: The queue.
        payloads: The messages.
        type: The type of every message without one in ``types``.
        types: One type per payload (None: ``type``), or None.
        extras: One 4-tuple (or None) per payload, or None.
        using: The database alias. Defaults to ``"default"``.

    Raises:
        ImproperlyConfigured: ``using`` is not a PostgreSQL database on psycopg 3.
        PgqueQueueNotFound: The queue does not exist.
    """
    with _on_django(using, queue) as producer:
        return producer.send_batch(queue, payloads, type=type, types=types, extras=extras)


def send_at(
    queue: str,
    payload: Any,
    *,
    at: datetime | None = None,
    delay: timedelta | None = None,
    type: str = "default",
    using: str = "default",
) -> int:
    """Send one message for delivery at ``at`` or after ``delay``, on Django's connection.

    Args:
        queue: The queue.
        payload: The message.
        at: When to deliver (timezone-aware).
        delay: How long from now to wait.
        type: The message type. Defaults to ``"default"``.
        using: The database alias. Defaults to ``"default"``.

    Raises:
        ImproperlyConfigured: ``using`` is not a PostgreSQL database on psycopg 3.
        PgqueInvalidArgument: Not exactly one of ``at``/``delay``, or a naive ``at``.
    """
    with _on_django(using, queue) as producer:
        return producer.send_at(queue, payload, at=at, delay=delay, type=type)
