"""What :class:`pgque.Producer` and :class:`pgque.AsyncProducer` share (no I/O).

Argument checks (queue, type, extras, per-message types), the payload
encoding (the serializer's text, NUL characters refused with the argument
named), the batch columns with the trace carriers, and the statement each
call sends (a named block of ``queries.sql``).
"""

from __future__ import annotations

import itertools
import logging
import operator
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg_pool import PoolTimeout

from pgque._text import nul_error
from pgque.errors import (
    PgqueConnectionError,
    PgqueInvalidArgument,
    PgqueOperationRefused,
    pooler_symptom,
)
from pgque.serializers import JSON, Serializer, dumps

__all__ = [
    "POOL_DEFAULTS",
    "Columns",
    "Extras",
    "NoConsumerWarning",
    "Pending",
    "batch_statement",
    "check_extras",
    "check_queue",
    "check_type",
    "check_types",
    "client_side",
    "deliver_at_statement",
    "encode_many",
    "encode_one",
    "encoder",
    "extras_columns",
    "map_pool_error",
    "misbound",
    "place_carriers",
    "single_statement",
]

#: The four extra fields of a message, ``ev_extra1..4`` (None: not set).
Extras = tuple[str | None, str | None, str | None, str | None]

_NO_EXTRAS: Extras = (None, None, None, None)
POOL_DEFAULTS: dict[str, Any] = {"min_size": 1, "max_size": 8, "name": "pgque-producer"}
_log = logging.getLogger("pgque.producer")


def check_queue(queue: object) -> str:
    """``queue`` if it is a non-empty string without NUL, else PgqueInvalidArgument."""
    if not isinstance(queue, str) or not queue:
        raise PgqueInvalidArgument(f"queue must be a non-empty string, got {queue!r}")
    if "\x00" in queue:
        raise nul_error("queue", queue)
    return queue


def check_type(value: object, what: str = "type") -> str:
    """``value`` if it is a non-empty string without NUL; the error names ``what``."""
    if not isinstance(value, str) or not value:
        raise PgqueInvalidArgument(f"{what} must be a non-empty string, got {value!r}")
    if "\x00" in value:
        raise nul_error(what, value)
    return value


def check_extras(extras: object, what: str = "extras") -> Extras:
    """``extras`` as four str-or-None values (None: all unset); the error names ``what``."""
    if extras is None:
        return _NO_EXTRAS
    if (
        not isinstance(extras, (tuple, list))
        or len(extras) != 4
        or not all(e is None or isinstance(e, str) for e in extras)
    ):
        raise PgqueInvalidArgument(
            f"{what} must be 4 values (ev_extra1..4), each a str or None, got {extras!r}"
        )
    for i, extra in enumerate(extras):
        if extra is not None and "\x00" in extra:
            raise nul_error(f"{what}[{i}]", extra)
    return (extras[0], extras[1], extras[2], extras[3])


def _encode_json(payload: Any) -> str:
    """The producer's JSON encoding: the JSON serializer's, minus NaN and infinities."""
    if isinstance(payload, str):
        return payload
    if isinstance(payload, (bytes, bytearray, memoryview)):
        JSON.encode(payload)  # raises its TypeError
    return dumps(payload)


def encoder(serializer: Serializer) -> Callable[[Any], str]:
    """The function that turns a payload into text for this serializer."""
    if not isinstance(serializer, Serializer):
        raise PgqueInvalidArgument(
            f"serializer must be a pgque.serializers.Serializer, got {serializer!r}"
        )
    return _encode_json if serializer is JSON else serializer.encode


def encode_one(encode: Callable[[Any], str], payload: Any, where: str = "payload") -> str:
    """One payload as text; errors name ``where``."""
    try:
        text = encode(payload)
    except TypeError as exc:
        raise TypeError(f"{where} cannot be serialised: {exc}") from exc
    except ValueError as exc:
        raise PgqueInvalidArgument(f"{where} cannot be serialised: {exc}") from exc
    if not isinstance(text, str):
        raise TypeError(f"the serializer returned {type(text).__name__}, not str, for {where}")
    if "\x00" in text:
        raise nul_error(where, text, payload=True)
    return text


def encode_many(encode: Callable[[Any], str], payloads: Iterable[Any]) -> list[str]:
    """Every payload as text (fast path first); an error names the payload's index."""
    if isinstance(payloads, (str, bytes, bytearray, memoryview, Mapping)):
        raise TypeError(
            f"payloads must be a sequence of payloads, got {type(payloads).__name__}"
            " (for one message use send())"
        )
    items = payloads if isinstance(payloads, list) else list(payloads)
    try:
        if encode is _encode_json:
            texts = [p if p.__class__ is str else _encode_json(p) for p in items]
        else:
            texts = [encode(p) for p in items]
    except (TypeError, ValueError):
        for i, p in enumerate(items):  # again, to say which one
            encode_one(encode, p, f"payloads[{i}]")
        raise  # pragma: no cover - the loop raises
    if encode is not _encode_json and not all(t.__class__ is str for t in texts):
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"the serializer returned {type(t).__name__}, not str,"
                                f" for payloads[{i}]")  # fmt: skip
    if any(map(operator.contains, texts, itertools.repeat("\x00"))):
        i = next(i for i, t in enumerate(texts) if "\x00" in t)
        raise nul_error(f"payloads[{i}]", texts[i], payload=True)
    return texts


def check_types(types: Sequence[str | None] | None, n: int, default: str) -> list[str] | None:
    """Per-message types as a full list (None elements become ``default``); None if not given."""
    if types is None:
        return None
    if isinstance(types, (str, bytes)) or len(types) != n:
        raise PgqueInvalidArgument(
            f"types must be a sequence of {n} types (one per payload), got {types!r:.80}"
        )
    out: list[str] = []
    for i, t in enumerate(types):
        out.append(default if t is None else check_type(t, f"types[{i}]"))
    return out


Columns = list[list[str | None] | None]


def extras_columns(extras: Sequence[Extras | None] | None, n: int) -> Columns:
    """Per-message extras (a 4-tuple or None each) as four columns (None: all NULL)."""
    if extras is None:
        return [None, None, None, None]
    if not isinstance(extras, Sequence) or len(extras) != n:
        raise PgqueInvalidArgument(
            f"extras must be a list of {n} entries (one 4-tuple or None per payload),"
            f" got {extras!r:.80}"
        )
    rows = [check_extras(e, f"extras[{i}]") for i, e in enumerate(extras)]
    columns: Columns = []
    for k in range(4):
        column = [row[k] for row in rows]
        columns.append(column if any(v is not None for v in column) else None)
    return columns


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


def batch_statement(
    queue: str,
    type: str,
    texts: list[str],
    types: list[str] | None,
    columns: Columns,
    *,
    client_side: bool = False,
) -> tuple[str, tuple[Any, ...]]:
    """The send_batch statement: arrays bound in binary unless the cursor binds on the client."""
    if types is None and all(c is None for c in columns):
        plain = "producer_send_batch_client_side" if client_side else "producer_send_batch"
        return plain, (queue, type, texts)
    if types is None and type != "default":
        types = [type] * len(texts)
    extras = (
        "producer_send_batch_extras_client_side" if client_side else "producer_send_batch_extras"
    )
    return extras, (queue, types, texts, *columns)


def misbound(exc: BaseException) -> bool:
    """Whether a producer's prepared statement failed as it does when a transaction-mode
    pooler lent a server session where that name is another client's statement: the
    parameters bound to the wrong statement read as a NUL byte or a malformed array
    (the producer's own parameters never are: psycopg refuses a NUL before sending).
    A pooler's plainer symptoms (:func:`pgque.errors.pooler_symptom`) count too."""
    if pooler_symptom(exc):
        return True
    if not isinstance(exc, psycopg.Error):
        return False
    text = exc.diag.message_primary or ""
    return (exc.sqlstate == "22021" and "0x00" in text) or (
        exc.sqlstate == "22P02" and "malformed array literal" in text
    )


def client_side(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """True when the connection's cursors bind parameters on the client (no binary, no prepare)."""
    return issubclass(conn.cursor_factory, (psycopg.ClientCursor, psycopg.AsyncClientCursor))


def single_statement(
    queue: str, type: str, text: str, fields: Extras
) -> tuple[str, tuple[Any, ...]]:
    """The statement and parameters that send one message."""
    if fields == _NO_EXTRAS:
        return "send_text", (queue, type, text)
    return "send_text_extras", (queue, type, text, *fields)


def deliver_at_statement(
    at: datetime | None, delay: timedelta | None
) -> tuple[str, datetime | timedelta]:
    """The send_at statement for ``at`` or ``delay`` (exactly one), and its time parameter."""
    if (at is None) == (delay is None):
        raise PgqueInvalidArgument("send_at needs exactly one of at= (a datetime) or delay=")
    if at is not None:
        if not isinstance(at, datetime):
            raise PgqueInvalidArgument(f"at must be a datetime, got {type(at).__name__}")
        if at.tzinfo is None or at.utcoffset() is None:
            raise PgqueInvalidArgument(
                "at must be timezone-aware (e.g. datetime.now(timezone.utc) + ...);"
                " a naive datetime's zone would be the server's guess"
            )
        return "producer_send_at", at
    if not isinstance(delay, timedelta):
        raise PgqueInvalidArgument(f"delay must be a timedelta, got {type(delay).__name__}")
    if delay < timedelta(0):
        raise PgqueInvalidArgument(f"delay must not be negative, got {delay}")
    return "producer_send_after", delay


class Pending:
    """The messages of a batch block: encoded as they are added, sent at its end."""

    def __init__(self, encode: Callable[[Any], str], type: str) -> None:
        self.encode = encode
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
        msg_type = self.type if type is None else check_type(type)
        checked = None if extras is None else check_extras(extras)
        self.texts.append(encode_one(self.encode, payload, where))
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
