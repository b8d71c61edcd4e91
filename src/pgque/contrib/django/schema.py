"""What ``manage.py migrate`` does to pgque: install, upgrade, uninstall, declare queues.

The migrations of ``pgque.contrib.django`` call :func:`upgrade_to` (one
migration per pgque version) and, backwards from the first, :func:`uninstall`.
``post_migrate`` calls :func:`declare_queues`.
"""

from __future__ import annotations

from typing import Any

import psycopg
from django.core.exceptions import ImproperlyConfigured
from django.db import router, transaction
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

from pgque._executor import fetch_one
from pgque._version import __version__
from pgque.client import PgqueClient
from pgque.contrib.django import conf
from pgque.contrib.django.connection import psycopg_connection
from pgque.errors import PgqueError, PgqueOperationRefused
from pgque.installer import install, installed_version
from pgque.installer import uninstall as uninstall_schema

__all__ = [
    "declare_queues",
    "keep_schema",
    "manages",
    "pending_events",
    "uninstall",
    "upgrade_to",
    "version_key",
]

APP_LABEL = "pgque"


def manages(alias: str) -> bool:
    """Whether migrate installs pgque in ``alias``: listed in ``PGQUE["DATABASES"]``
    and allowed by the database routers."""
    return alias in conf.database_aliases() and bool(router.allow_migrate(alias, APP_LABEL))


def version_key(version: str) -> tuple[int, ...]:
    """A version string as numbers, for ordering (``"0.10.0"`` after ``"0.9.1"``)."""
    parts = []
    for part in version.split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def upgrade_to(version: str) -> Any:
    """A ``RunPython`` forward function for the migration of pgque ``version``: install
    pgque, or upgrade the install in place (keeping every row).

    The packaged install file is always the package's version, at least
    ``version``; an install newer than the package is left alone.
    """

    def forward(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
        alias = schema_editor.connection.alias
        if not manages(alias):
            return
        conn = psycopg_connection(alias)
        current = installed_version(conn)
        if current is None or version_key(current) <= version_key(__version__):
            install(conn)

    forward.__name__ = f"install_pgque_{version.replace('.', '_')}"
    return forward


def keep_schema(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    """The backward step of an upgrade: keep the newer schema (a downgrade would lose
    routines the data may rely on; pgque reads its own older data)."""


def pending_events(conn: psycopg.Connection[Any]) -> list[str]:
    """What uninstalling would lose, one description each: the subscriptions with
    unconsumed events (not yet ticked ones too), delayed messages and retries waiting.

    The queues are ticked and a batch opened per subscription in a transaction that is
    rolled back, so nothing changes. Empty without pgque.
    """
    if installed_version(conn) is None:
        return []
    found: list[str] = []
    client = PgqueClient(conn)
    with conn.transaction(force_rollback=True):
        for stats in client.queue_stats():
            if stats.consumers:
                client.force_tick(stats.queue_name)
                client.ticker(stats.queue_name)
        for sub in client.consumer_stats():
            try:
                with conn.transaction():
                    unconsumed = bool(client.receive(sub.queue_name, sub.consumer_name, 1))
            except PgqueError:  # a cooperative consumer: cannot tell, so keep its events
                unconsumed = True
            if unconsumed:
                found.append(f"queue {sub.queue_name!r} has events for {sub.consumer_name!r}")
        row = fetch_one(conn, "django_waiting_events")
    waiting = int(row[0]) if row else 0
    if waiting:
        found.append(f"{waiting} delayed or retried message(s) wait")
    return found


def uninstall(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    """The backward step of the first migration: drop schema ``pgque``, unless events are
    pending and ``PGQUE["ALLOW_UNINSTALL_WITH_EVENTS"]`` (or the environment variable
    ``PGQUE_ALLOW_UNINSTALL_WITH_EVENTS=1``) does not allow losing them."""
    alias = schema_editor.connection.alias
    if not manages(alias):
        return
    conn = psycopg_connection(alias)
    pending = pending_events(conn)
    if pending and not conf.force_uninstall():
        raise PgqueOperationRefused(
            f"refusing to uninstall pgque from database {alias!r}: events are pending"
            f" ({'; '.join(pending)}); consume them first, or allow losing them with"
            f" settings.PGQUE['ALLOW_UNINSTALL_WITH_EVENTS'] = True or {conf.FORCE_ENV}=1"
        )
    uninstall_schema(conn)


def declare_queues(using: str, **kwargs: Any) -> None:
    """Create the queues of ``PGQUE["QUEUES"]`` with their options and subscribe their
    consumers, in ``using`` (idempotent; nothing when pgque is not installed there)."""
    if not manages(using):
        return
    declared = conf.queues()
    conn = psycopg_connection(using)
    if not declared or installed_version(conn) is None:
        return
    with transaction.atomic(using=using):  # all the declarations, or none
        client = PgqueClient(psycopg_connection(using))
        for queue in declared:
            try:
                client.create_queue(queue.name, queue.options)
                for consumer in queue.consumers:
                    client.subscribe(queue.name, consumer)
            except PgqueError as exc:
                raise ImproperlyConfigured(
                    f"settings.PGQUE['QUEUES'][{queue.name!r}] cannot be applied"
                    f" in database {using!r}: {exc}"
                ) from exc
