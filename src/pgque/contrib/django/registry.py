"""Consumers declared in Django apps: :func:`consumer` and the registry ``pgque_worker`` runs.

An app's ``consumers.py`` declares them::

    from pgque.contrib.django import consumer

    mailer = consumer("orders", "mailer")

    @mailer.on("order.created")
    def confirm(msg):
        Order.objects.filter(pk=msg.json()["order_id"]).update(confirmed=True)

Every handler runs on Django's connection (the ``using`` alias), inside the
batch's transaction and a savepoint of its own (``transaction.atomic()``):
its ORM writes commit with the batch's ack, or roll back with its failure
(the message is then retried). ``on_commit`` callbacks run after the ack.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from django.db import close_old_connections, connections, transaction

from pgque.consumer import Consumer
from pgque.contrib.django.connection import conninfo, psycopg_connection
from pgque.errors import PgqueInvalidArgument
from pgque.message import Message

__all__ = ["DjangoConsumer", "consumer", "registered"]

H = TypeVar("H", bound=Callable[..., Any])

_REGISTRY: dict[tuple[str, str, str], DjangoConsumer] = {}


class DjangoConsumer(Consumer):
    """A :class:`pgque.Consumer` whose batches run on Django's connection ``using``.

    Made by :func:`consumer`. Its handlers take the message only; the ORM
    is the batch's connection. Before each batch Django's
    ``close_old_connections()`` runs, as between requests (so
    ``CONN_MAX_AGE`` and ``CONN_HEALTH_CHECKS`` apply), and the batch runs
    in ``transaction.atomic(using=...)``. The worker keeps one connection of
    its own for NOTIFY wakeups and the in-process ticker.

    Args:
        queue: The queue.
        name: The consumer (subscription) name.
        using: The database alias. Defaults to ``"default"``.
        options: Other :class:`pgque.Consumer` options (``poll_interval``,
            ``retry_after``, ``subscribe`` ...); not ``concurrency`` above 1,
            since handlers share the batch's connection.
    """

    def __init__(self, queue: str, name: str, *, using: str = "default", **options: Any) -> None:
        super().__init__(conninfo(using), queue=queue, name=name, **options)
        #: The Django database alias the batches run on.
        self.using = using

    def on(
        self,
        type: str,
        *,
        transactional: bool = True,
        timeout: float | None = None,
        ordered_by: str | None = None,
        model: Any = None,
    ) -> Callable[[H], H]:
        """Register the decorated ``handler(msg)`` for messages of ``type`` (``"*"``: any other).

        The handler runs in a savepoint of the batch's transaction on Django's
        connection; it is returned unchanged.

        Raises:
            PgqueInvalidArgument: ``transactional=False`` or a ``timeout``
                (a timed handler would run in another thread, on another
                connection than the batch's).
        """
        if not transactional or timeout is not None:
            raise PgqueInvalidArgument(
                f"consumer {self.name}: Django consumers' handlers always run in the batch's"
                " transaction on Django's connection; transactional=False and timeout="
                " are not available (use max_batch_time= on the consumer to bound a batch)"
            )
        register = super().on(type, transactional=True, ordered_by=ordered_by, model=model)
        return self._in_savepoint(register)

    def on_batch(
        self,
        type: str,
        *,
        transactional: bool = True,
        timeout: float | None = None,
        model: Any = None,
    ) -> Callable[[H], H]:
        """Register the decorated ``handler(msgs)`` for the messages of ``type`` (``"*"``:
        any other), called once per batch with the list of them (see
        :meth:`pgque.Consumer.on_batch`).

        The handler runs in a savepoint of the batch's transaction on Django's
        connection: its ORM writes commit with the ack; it is returned unchanged.

        Raises:
            PgqueInvalidArgument: ``transactional=False`` or a ``timeout`` (as for :meth:`on`).
        """
        if not transactional or timeout is not None:
            raise PgqueInvalidArgument(
                f"consumer {self.name}: Django consumers' batch handlers always run in the"
                " batch's transaction on Django's connection; transactional=False and"
                " timeout= are not available (use max_batch_time= on the consumer to bound"
                " a batch)"
            )
        return self._in_savepoint(super().on_batch(type, transactional=True, model=model))

    def _in_savepoint(self, register: Callable[[Any], Any]) -> Callable[[H], H]:
        """A decorator that hands ``register`` the handler wrapped in a savepoint
        (``transaction.atomic``) on Django's connection, and returns it unchanged."""
        using = self.using

        def decorate(handler: H) -> H:
            def in_savepoint(arg: Message | list[Message], conn: psycopg.Connection[Any]) -> Any:
                with transaction.atomic(using=using):
                    return handler(arg)

            register(in_savepoint)
            return handler

        return decorate

    def poll(
        self, conn: psycopg.Connection[Any] | None = None, *, tick: float | None = None
    ) -> int | None:
        """Receive one batch on Django's connection, run its handlers, settle and ack it,
        all in one Django transaction; returns how many messages were handled (None: no
        batch). ``conn`` (the worker's own connection) only takes the tick, when the
        worker leads the ticking (``tick``: its ``max_wait``). Tests call it to consume
        what is there."""
        if tick is not None and conn is not None:
            self._tick(conn, tick)  # a transaction of its own, before Django's
        if not connections[self.using].in_atomic_block:  # never inside a caller's transaction
            close_old_connections()
        django_conn = psycopg_connection(self.using)
        with transaction.atomic(using=self.using):
            return super().poll(django_conn)


def consumer(queue: str, name: str, *, using: str = "default", **options: Any) -> DjangoConsumer:
    """The consumer ``name`` of ``queue`` on database ``using``, registered for
    ``manage.py pgque_worker`` (the same arguments give the same consumer).

    Args:
        queue: The queue.
        name: The consumer (subscription) name.
        using: The database alias. Defaults to ``"default"``.
        options: :class:`pgque.Consumer` options (``poll_interval``, ``subscribe`` ...).

    Raises:
        ImproperlyConfigured: ``using`` is not a PostgreSQL database on psycopg 3.
    """
    key = (queue, name, using)
    found = _REGISTRY.get(key)
    if found is None:
        found = _REGISTRY[key] = DjangoConsumer(queue, name, using=using, **options)
    return found


def registered() -> list[DjangoConsumer]:
    """Every consumer declared so far, in declaration order."""
    return list(_REGISTRY.values())
