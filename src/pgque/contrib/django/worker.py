"""``manage.py pgque_worker``'s loop: find the apps' consumers and run them.

Every installed app's ``consumers`` module is imported (Django's
``autodiscover_modules``); the consumers it declared with
:func:`~pgque.contrib.django.consumer` run together, in declaration order
as priority, through :class:`pgque.MultiQueueConsumer`: SIGTERM or SIGINT
lets the current batch finish, then the worker returns.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import autodiscover_modules

from pgque.contrib.django.registry import DjangoConsumer, registered
from pgque.multi_consumer import MultiQueueConsumer

__all__ = ["discover", "run", "select"]


def discover() -> list[DjangoConsumer]:
    """Import every installed app's ``consumers`` module; the consumers declared."""
    autodiscover_modules("consumers")
    return registered()


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
            " installed app"
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
