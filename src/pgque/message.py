"""The values the client sends and receives: :class:`Message` and :class:`Event`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

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
