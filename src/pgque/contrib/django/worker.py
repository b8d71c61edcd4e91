"""``manage.py pgque_worker``'s loop: find the apps' consumers and run them.

Every installed app's ``consumers`` module is imported (Django's
``autodiscover_modules``); the consumers it declared with
:func:`~pgque.contrib.django.consumer` run together, in declaration order
as priority, through :class:`pgque.MultiQueueConsumer`, followed by one
consumer per queue of each ``settings.TASKS`` backend of pgque's (Django 6;
:mod:`pgque.contrib.django.tasks`), in ``QUEUES`` order: SIGTERM or SIGINT
lets the current batch finish, then the worker returns.
"""

from __future__ import annotations

from collections.abc import Sequence

import django
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import autodiscover_modules

from pgque.contrib.django._tasks_conf import BACKEND_PATH, backends
from pgque.contrib.django.registry import DjangoConsumer, registered
from pgque.multi_consumer import MultiQueueConsumer

__all__ = ["discover", "run", "select", "task_consumers"]


def discover() -> list[DjangoConsumer]:
    """Import every installed app's ``consumers`` module; the consumers declared, then
    the task consumers (:func:`task_consumers`)."""
    autodiscover_modules("consumers")
    return [*registered(), *task_consumers()]


def task_consumers() -> list[DjangoConsumer]:
    """One consumer per queue of each pgque task backend in ``settings.TASKS``.

    Raises:
        ImproperlyConfigured: Such a backend is configured on Django before 6.
    """
    configs = backends()
    if not configs:
        return []
    if django.VERSION < (6,):
        raise ImproperlyConfigured(
            f"settings.TASKS[{configs[0].alias!r}] uses {BACKEND_PATH}, which needs Django 6"
            f" or newer (this is Django {django.get_version()}): upgrade Django or remove it"
        )
    from pgque.contrib.django._tasks_worker import task_consumers as build

    return [consumer for config in configs for consumer in build(config)]


def select(
    consumers: Sequence[DjangoConsumer],
    *,
    queues: Sequence[str] = (),
    names: Sequence[str] = (),
    using: str | None = None,
) -> list[DjangoConsumer]:
    """The consumers of ``queues`` / ``names`` / database ``using`` (empty filters: all).

    Raises:
        ImproperlyConfigured: None is left (the message lists what there is), or the
            ones left run on several databases.
    """
    chosen = [
        c
        for c in consumers
        if (not queues or c.queue in queues)
        and (not names or c.name in names)
        and (using is None or c.using == using)
    ]
    if not chosen:
        known = ", ".join(f"{c.queue}/{c.name} ({c.using})" for c in consumers) or "none"
        raise ImproperlyConfigured(
            "no pgque consumer matches"
            f" (queue {list(queues) or 'any'}, name {list(names) or 'any'},"
            f" database {using or 'any'}); declared: {known}. Declare consumers with"
            " pgque.contrib.django.consumer(queue, name) in a consumers.py module of an"
            " installed app, or a task backend in settings.TASKS"
        )
    databases = sorted({c.using for c in chosen})
    if len(databases) > 1:
        raise ImproperlyConfigured(
            f"the consumers run on several databases {databases}: run one worker per"
            " database (--database)"
        )
    return chosen


def run(consumers: Sequence[DjangoConsumer]) -> None:
    """Consume until SIGTERM/SIGINT (the current batch finishes first)."""
    MultiQueueConsumer(list(consumers)).start()
