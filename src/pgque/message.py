"""The values the client sends and receives: :class:`Message` and :class:`Event`."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pgque._delays import check_delay

__all__ = ["Event", "Message"]


@dataclass
class Message:
    """One received message: a row of ``pgque.receive()``.

    ``payload`` is the stored text exactly as the database returns it (for a
    JSON payload, PostgreSQL's canonical rendering); decode it with
    :meth:`json` when it is JSON. ``retry_count`` is ``None`` on the first
    delivery, then 1, 2, ... ``created_at`` is the start time of the sending
    transaction.
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
