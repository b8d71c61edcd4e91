"""The values the client sends and receives: :class:`Message` and :class:`Event`."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic

from pgque._delays import check_delay

if sys.version_info >= (3, 13):
    from typing import TypeVar
else:  # psycopg requires typing_extensions below 3.13
    from typing_extensions import TypeVar

__all__ = ["Event", "Message"]

#: The type of :attr:`Message.data`: a handler's ``model=``, else the decoded JSON.
M = TypeVar("M", default=Any)

_UNSET: Any = object()


@dataclass
class Message(Generic[M]):
    """One received message: a row of ``pgque.receive()``.

    ``payload`` is the stored text exactly as the database returns it (for a
    JSON payload, PostgreSQL's canonical rendering); decode it with
    :meth:`json` when it is JSON. ``retry_count`` is ``None`` on the first
    delivery, then 1, 2, ... ``created_at`` is the start time of the sending
    transaction. :attr:`data` is the payload as the handler's ``model=``
    made it (``Message[Order]`` for type checkers), else the decoded JSON.
    """

    msg_id: int
    batch_id: int
    type: str | None
    payload: Any
    retry_count: int | None = None
    created_at: datetime | None = None
    extra1: str | None = None
    extra2: str | None = None
    extra3: str | None = None
    extra4: str | None = None
    _decision: tuple[str, float | None, str | None] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    _data: Any = field(default=_UNSET, init=False, repr=False, compare=False)

    @property
    def data(self) -> M:
        """The payload validated into the handler's ``model=`` (see
        :meth:`pgque.Consumer.on`); without a model, :meth:`json` (decoded once)."""
        if self._data is _UNSET:
            self._data = self.json()
        value: M = self._data
        return value

    @data.setter
    def data(self, value: M) -> None:
        self._data = value

    def nack(self, retry_after: float | None = None, reason: str | None = None) -> None:
        """Inside a Consumer handler: retry this message (after ``retry_after`` seconds,
        from 0 to 3,110,400,000 (100 years); default the consumer's), or dead-letter it
        past the queue's max retries."""
        if retry_after is not None:
            check_delay("retry_after", retry_after)
        self._decision = ("nack", retry_after, reason)

    def dead_letter(self, reason: str) -> None:
        """Inside a Consumer handler: move this message to the dead letter queue now."""
        self._decision = ("dead", None, reason)

    def json(self) -> Any:
        """The payload decoded as JSON (``None`` for a NULL payload)."""
        import json

        if self.payload is None or not isinstance(self.payload, (str, bytes, bytearray)):
            return self.payload
        return json.loads(self.payload)


@dataclass
class Event:
    """A payload with its type, for :meth:`PgqueClient.send`."""

    payload: Any
    type: str = "default"


Message.__module__ = "pgque"
Event.__module__ = "pgque"
