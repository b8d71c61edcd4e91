"""``consumer.every(...)``: a handler for a periodic schedule, declared with the consumer.

The decorator registers the handler for the schedule's message type (as
``consumer.on(type)`` does) and keeps the schedule; the consumer upserts it
(``pgque.schedule``) on every connection, before its first batch. The
upsert keeps the schedule's next run when its cron and time zone are
unchanged, so a restart neither skips nor repeats an occurrence. No I/O
here: both consumer twins share it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from pgque._text import check_text
from pgque.errors import PgqueError
from pgque.serializers import JSON

__all__ = ["EverySchedule", "Periodic"]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class EverySchedule:
    """A schedule declared with :meth:`Periodic.every`, its payload encoded as JSON text."""

    name: str
    cron: str
    type: str
    payload: str
    time_zone: str

    def params(self, queue: str) -> tuple[str, ...]:
        """The parameters of the ``schedule`` statement (queries.sql) for ``queue``."""
        return (queue, self.name, self.cron, self.payload, self.type, self.time_zone)

    def matches(self, row: Sequence[Any]) -> bool:
        """Is a row of the ``schedules`` statement this schedule as declared?"""
        _, name, cron, time_zone, type_name, payload = row[:6]
        declared = (self.name, self.cron, self.time_zone, self.type, json.loads(self.payload))
        return (name, cron, time_zone, type_name, json.loads(payload)) == declared

    def refused(self, queue: str, consumer: str, error: PgqueError) -> PgqueError:
        """The error of a role that may neither upsert the schedule nor find it as declared."""
        return _reworded(error, (
            f"consumer {consumer!r} may not schedule {self.name!r} on queue {queue!r}"
            f" ({error}): @every upserts its schedule when the consumer starts, which needs"
            " a role granted pgque_admin; or create the same schedule beforehand"
            " (`pgque schedule add`), which a pgque_reader consumer then finds"
        ))  # fmt: skip

    def failed(self, queue: str, consumer: str, error: PgqueError) -> PgqueError:
        """The error of an upsert the database refused (a bad cron or time zone, no queue)."""
        return _reworded(error, f"consumer {consumer!r}, @every schedule {self.name!r}: {error}")


def _reworded(error: PgqueError, message: str) -> PgqueError:
    """``error`` (its class, SQLSTATE, code and hint) with another message."""
    new = type(error)(message)
    new.sqlstate, new.code, new.hint = error.sqlstate, error.code, error.hint
    return new


class _Registers(Protocol):
    _schedules: dict[str, EverySchedule]

    def on(self, type: str) -> Callable[[Any], Any]: ...


class Periodic:
    """The :meth:`every` decorator of :class:`pgque.Consumer` and :class:`pgque.AsyncConsumer`."""

    def every(
        self: _Registers,
        cron: str,
        *,
        type: str,
        payload: Any = None,
        name: str | None = None,
        time_zone: str = "UTC",
    ) -> Callable[[F], F]:
        """Register the decorated function for ``type`` and schedule a message of that type
        at each occurrence of ``cron``.

        The consumer upserts the schedule (``pgque.schedule``, see
        :meth:`pgque.PgqueClient.schedule`) when it starts, and on every
        reconnection: an unchanged cron and time zone keep the next run, so
        restarts neither skip nor repeat an occurrence, and however many
        consumers declare it, each occurrence is sent once. The function is
        called like a handler of :meth:`on` (a coroutine function for
        :class:`~pgque.AsyncConsumer`), with the message: ``msg.json()`` is
        ``payload``, ``msg.extra2`` the schedule's name and ``msg.extra3``
        the occurrence (UTC, ISO 8601). Upserting needs a role granted
        pgque_admin; a pgque_reader consumer starts when the same schedule
        exists already (``pgque schedule add``).

        Args:
            cron: Five fields (minute hour day-of-month month day-of-week) or
                ``@hourly``, ``@daily``, ``@weekly``, ``@monthly``, ``@yearly``.
            type: The messages' type, for which the function is registered.
            payload: The messages' payload, any JSON value (a ``str`` is JSON
                text, as in :meth:`pgque.PgqueClient.send`). Defaults to null.
            name: The schedule's name in its queue. Defaults to ``type``.
            time_zone: The time zone the cron is read in. Defaults to UTC.

        Raises:
            ValueError: ``type`` is empty or ``"*"``, or another ``every`` of
                this consumer has the same name.
            TypeError: ``payload`` cannot be encoded as JSON.
        """
        if not isinstance(type, str) or type in ("", "*"):
            raise ValueError(f"every() needs the messages' type (not '*'), got {type!r}")
        name = type if name is None else name
        check_text(cron=cron, type=type, name=name, time_zone=time_zone)
        if name in self._schedules:
            raise ValueError(f"the consumer has a schedule named {name!r} already")
        text = JSON.encode(payload)
        check_text(payload=text)
        schedule = EverySchedule(name, cron, type, text, time_zone)
        register = self.on(type)

        def decorate(handler: F) -> F:
            register(handler)
            self._schedules[schedule.name] = schedule
            return handler

        return decorate
