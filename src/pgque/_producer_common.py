"""What :class:`pgque.Producer` and :class:`pgque.AsyncProducer` add to the one send
path (:mod:`pgque._send_plan`), without I/O: the pool's defaults and errors, the trace
carriers of a batch, the messages of a ``batch()`` block, the warning about a queue
without consumers (the clients' too).
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Sequence
from typing import Any

from psycopg_pool import PoolTimeout

from pgque._send_plan import Columns, Extras, SendPath, check_extras, extras_columns
from pgque.errors import PgqueConnectionError, PgqueOperationRefused

__all__ = [
    "POOL_DEFAULTS",
    "NoConsumerWarning",
    "Pending",
    "map_pool_error",
    "place_carriers",
]

POOL_DEFAULTS: dict[str, Any] = {"min_size": 1, "max_size": 8, "name": "pgque-producer"}
_log = logging.getLogger("pgque.producer")


def place_carriers(columns: Columns, carriers: Sequence[str | None], n: int) -> Columns:
    """Put each message's trace carrier where the field map says (extra1, else extra4)."""
    if columns[0] is None:
        return [list(carriers), columns[1], columns[2], columns[3]]
    first: list[str | None] = list(columns[0])
    fourth: list[str | None] = list(columns[3]) if columns[3] is not None else [None] * n
    for i, carrier in enumerate(carriers):
        if carrier is None:
            continue
        if first[i] is None:
            first[i] = carrier
        elif fourth[i] is None:
            fourth[i] = carrier
    return [first, columns[1], columns[2], fourth]


class Pending:
    """The messages of a batch block: encoded as they are added, sent at its end."""

    def __init__(self, path: SendPath, queue: str, type: str) -> None:
        self.path = path
        self.queue = queue
        self.type = type
        self.texts: list[str] = []
        self.types: list[str] = []
        self.extras: list[Extras | None] = []
        self.mixed_types = False
        self.has_extras = False
        self.sent = False

    def add(self, payload: Any, type: str | None, extras: Extras | None) -> None:
        """Check and encode one message now (a bad one raises here)."""
        if self.sent:
            raise PgqueOperationRefused("this batch was sent already; start a new producer.batch()")
        where = f"payload of batch message {len(self.texts)}"
        msg_type = self.type if type is None else self.path.check_type(type)
        checked = None if extras is None else check_extras(extras)
        self.texts.append(self.path.encode_one(self.queue, payload, where))
        self.types.append(msg_type)
        self.extras.append(checked)
        self.mixed_types = self.mixed_types or msg_type != self.type
        self.has_extras = self.has_extras or checked is not None

    def arrays(self) -> tuple[list[str], list[str] | None, Columns]:
        """The texts, the per-message types (None: all the batch's) and the extras columns."""
        n = len(self.texts)
        types = self.types if self.mixed_types else None
        columns: Columns = [None, None, None, None]
        if self.has_extras:
            columns = extras_columns(self.extras, n)
        return self.texts, types, columns


class NoConsumerWarning:
    """Warns once per queue (per producer or client) when a send goes to a queue without
    consumers: PgQ's rule is that such an event is received by nobody, not kept.

    One look per queue, after its first successful send (two short statements
    on the send's connection, which can not fail inside the caller's
    transaction: the role's right to read the consumers is asked first).
    """

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._may_read: bool | None = None

    def needed(self, queue: str) -> bool:
        """Whether the queue's consumers are still to be looked at."""
        return queue not in self._seen and self._may_read is not False

    def may_read(self, allowed: bool) -> None:
        """Record whether this role may count consumers (never asked again)."""
        self._may_read = bool(allowed)

    @property
    def readable(self) -> bool | None:
        """Whether this role may count consumers (None: not asked yet)."""
        return self._may_read

    def counted(self, queue: str, consumers: int) -> None:
        """Record the queue's consumer count; warn if it has none."""
        self._seen.add(queue)
        if consumers == 0:
            q = shlex.quote(queue)
            _log.warning(
                "queue %r has no consumers: the events sent to it are received by nobody"
                " (PgQ's rule). Subscribe a consumer before sending: `pgque subscribe %s"
                " CONSUMER`, `pgque create-queue %s --consumer CONSUMER`, or"
                " Consumer(..., subscribe=True) started first. Said once per queue.",
                queue, q, q,
            )  # fmt: skip


def map_pool_error(exc: Exception) -> PgqueConnectionError:
    """A pool's timeout or closed error as PgqueConnectionError."""
    if isinstance(exc, PoolTimeout):
        return PgqueConnectionError(f"no connection from the producer's pool in time: {exc}")
    return PgqueConnectionError(f"the producer's pool is closed: {exc}")
