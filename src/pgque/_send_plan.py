"""The one send path, its part without I/O: every send of :class:`~pgque.PgqueClient`,
:class:`~pgque.Producer` and their async twins is checked, encoded and given its
statement here (one argument-check family, one encode step, one NUL scan, one
statement family of ``queries.sql``); :mod:`pgque._async_send` runs it.

The clients and the producers differ in what a payload means, one parameter of
:class:`SendPath`, its *storage*:

- ``"text"`` (the producers; the client with a ``text`` serializer such as
  ``RAW_TEXT``): the encoded text is stored verbatim through pgque's ``text``
  overloads, the server does not parse it again;
- ``"jsonb"`` (the client with a JSON serializer: upstream pgque-py's meaning):
  the server validates each payload as ``jsonb`` and stores it canonically,
  except a JSON text holding a ``\\u0000`` escape, which ``jsonb`` cannot hold:
  that one is validated as ``json`` and stored as encoded.

and in how a missing type is said: the client, as upstream's, takes ``None`` or
``""`` for ``default`` (``lenient_type``), a producer wants a name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any, Literal

import psycopg

from pgque._text import any_json_nul, first_nul, json_error, json_nul, nul_error
from pgque.errors import PgqueError, PgqueInvalidArgument, pooler_error, pooler_symptom
from pgque.message import Event
from pgque.serializers import JSON, Serializer, _encode_json_for_jsonb, _json_array

__all__ = [
    "NO_EXTRAS",
    "Columns",
    "Extras",
    "SendPath",
    "Statement",
    "Storage",
    "check_extras",
    "check_queue",
    "client_path",
    "client_side",
    "deliver_time",
    "extras_columns",
    "misbound",
]

#: How payloads are stored: ``jsonb`` (validated, canonical) or ``text`` (verbatim).
Storage = Literal["jsonb", "text"]
#: The four extra fields of a message, ``ev_extra1..4`` (None: not set).
Extras = tuple[str | None, str | None, str | None, str | None]
#: Per-message extras as four columns (None: all NULL).
Columns = list[list[str | None] | None]

NO_EXTRAS: Extras = (None, None, None, None)
_NO_COLUMNS: Columns = [None, None, None, None]

# The statements of queries.sql, by what the payload is sent as: "jsonb"
# (validated and canonical), "json" (validated, kept as encoded: it holds a
# \u0000 escape) or "text" (verbatim).
_ONE = {"jsonb": "send_extras", "json": "send_json_text_extras", "text": "send_text_extras"}
_ONE_PLAIN = {"jsonb": "send_typed", "text": "send_text"}  # no extras; "send" for jsonb default
_AT = {"jsonb": "send_at", "json": "send_at_json_text", "text": "send_at_text"}
_AFTER = {"jsonb": "send_after", "json": "send_after_json_text", "text": "send_after_text"}
# Batches: arrays bound in binary (a text-format array of JSON costs more to escape
# and parse than the insert), in text where the connection binds on the client.
_BATCH = {"jsonb": "send_batch_binary", "json": "send_batch_json_text_binary",
          "text": "send_batch_text_binary"}  # fmt: skip
_BATCH_CLIENT_SIDE = {"jsonb": "send_batch", "json": "send_batch_json_text",
                      "text": "send_batch_text"}  # fmt: skip
_BATCH_EXTRAS = ("send_batch_text_extras_binary", "send_batch_text_extras")
# Plain JSON values of one type as one JSON array (SendPath.json_array).
_BATCH_ARRAY = {"jsonb": "send_batch_json_array", "text": "send_batch_json_array_text"}


def check_queue(queue: object) -> str:
    """``queue`` if it is a non-empty string without NUL, else PgqueInvalidArgument."""
    if not isinstance(queue, str) or not queue:
        raise PgqueInvalidArgument(f"queue must be a non-empty string, got {queue!r}")
    if "\x00" in queue:
        raise nul_error("queue", queue)
    return queue


def check_extras(extras: object, what: str = "extras") -> Extras:
    """``extras`` as four str-or-None values (None: all unset); the error names ``what``."""
    if extras is None:
        return NO_EXTRAS
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


def extras_columns(extras: Sequence[Extras | None] | None, n: int) -> Columns:
    """Per-message extras (a 4-tuple or None each) as four columns (None: all NULL)."""
    if extras is None:
        return list(_NO_COLUMNS)
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


def client_side(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """True when the connection's cursors bind parameters on the client (no binary, no prepare)."""
    return issubclass(conn.cursor_factory, (psycopg.ClientCursor, psycopg.AsyncClientCursor))


def misbound(exc: BaseException) -> bool:
    """Whether a prepared send failed as it does when a transaction-mode pooler lent a
    server session where that name is another client's statement: the parameters bound
    to the wrong statement read as a NUL byte or a malformed array (the path's own
    parameters never are: psycopg refuses a NUL before sending). A pooler's plainer
    symptoms (:func:`pgque.errors.pooler_symptom`) count too."""
    if pooler_symptom(exc):
        return True
    if not isinstance(exc, psycopg.Error):
        return False
    text = exc.diag.message_primary or ""
    return (exc.sqlstate == "22021" and "0x00" in text) or (
        exc.sqlstate == "22P02" and "malformed array literal" in text
    )


@dataclass(frozen=True)
class Statement:
    """A send ready to run: the ``queries.sql`` name, its parameters, and what is
    needed to explain its errors."""

    name: str
    params: tuple[Any, ...]
    storage: Storage
    #: The encoded payloads (to say which one is not JSON).
    texts: Sequence[str]
    #: A batch (errors name ``payloads[i]``) or one message (``payload``).
    batch: bool = False
    #: Parameters and result in binary.
    binary: bool = False

    @property
    def queue(self) -> str:
        """The queue sent to (every send statement's first parameter)."""
        return str(self.params[0])

    def error(self, error: PgqueError, *, prepared: bool) -> BaseException:
        """What to raise for ``error`` (the executor's): a pooler's symptom on a
        prepared statement, a payload that is not JSON named, else ``error`` itself."""
        cause = error.__cause__ or error
        if prepared and misbound(cause):
            return pooler_error(cause)
        if self.storage == "jsonb":
            return json_error(error, self.texts, "payloads" if self.batch else "payload")
        return error


class SendPath:
    """Checks, encoding and statements of one client's or producer's sends.

    Args:
        serializer: Turns a payload into text.
        storage: ``"jsonb"`` or ``"text"`` (see the module's docstring); None: the
            serializer's ``sql_type`` (the client's rule).
        lenient_type: None and ``""`` mean the type ``default`` (the client's rule).
    """

    def __init__(
        self, serializer: Serializer, storage: Storage | None = None, *, lenient_type: bool = False
    ) -> None:
        if not isinstance(serializer, Serializer):
            raise PgqueInvalidArgument(
                f"serializer must be a pgque.serializers.Serializer, got {serializer!r}"
            )
        self.serializer = serializer
        self.storage: Storage = serializer.sql_type if storage is None else storage
        self.lenient_type = lenient_type
        self._json = serializer is JSON
        # The server prints jsonb canonically: any spelling of the same JSON will do.
        jsonb = self._json and self.storage == "jsonb"
        self._encode = _encode_json_for_jsonb if jsonb else serializer.encode

    # -- arguments ---------------------------------------------------------------

    def check_type(self, value: object, what: str = "type") -> str:
        """``value`` if it is a non-empty string without NUL; the error names ``what``."""
        if self.lenient_type and value in (None, ""):
            return "default"
        if not isinstance(value, str) or not value:
            raise PgqueInvalidArgument(f"{what} must be a non-empty string, got {value!r}")
        if "\x00" in value:
            raise nul_error(what, value)
        return value

    def check_types(
        self, types: Sequence[str | None] | None, n: int, default: str
    ) -> list[str] | None:
        """Per-message types as a full list (None elements: ``default``); None if not given."""
        if types is None:
            return None
        if isinstance(types, (str, bytes)) or len(types) != n:
            raise PgqueInvalidArgument(
                f"types must be a sequence of {n} types (one per payload), got {types!r:.80}"
            )
        return [default if t is None else self.check_type(t, f"types[{i}]")
                for i, t in enumerate(types)]  # fmt: skip

    def message(self, queue: str, payload: Any, type: Any) -> tuple[str, str, str]:
        """The checked queue and type and the encoded payload of one message (an
        :class:`~pgque.Event` gives payload and type)."""
        if isinstance(payload, Event):
            payload, type = payload.payload, payload.type
        check_queue(queue)
        return queue, self.check_type(type), self.encode_one(queue, payload)

    # -- encoding ----------------------------------------------------------------

    def encode_one(self, queue: str, payload: Any, where: str = "payload") -> str:
        """One payload as text; errors name ``where`` and the queue."""
        try:
            text = self._encode(payload)
        except TypeError as exc:
            raise TypeError(f"{where} for queue {queue!r} cannot be serialised: {exc}") from exc
        except ValueError as exc:
            raise PgqueInvalidArgument(
                f"{where} for queue {queue!r} cannot be serialised: {exc}"
            ) from exc
        if not isinstance(text, str):
            raise TypeError(f"the serializer returned {type(text).__name__}, not str, for {where}")
        if "\x00" in text:
            raise nul_error(where, text, payload=True)
        return text

    def encode_many(self, queue: str, payloads: Iterable[Any]) -> list[str]:
        """Every payload as text (the fast path first); an error names the payload's index."""
        if isinstance(payloads, (str, bytes, bytearray, memoryview, Mapping)):
            raise TypeError(
                f"payloads must be a sequence of payloads, got {type(payloads).__name__}"
                " (for one message use send())"
            )
        items = payloads if isinstance(payloads, list) else list(payloads)
        encode = self._encode
        try:
            if self._json:
                texts = [p if p.__class__ is str else encode(p) for p in items]
            else:
                texts = [encode(p) for p in items]
        except (TypeError, ValueError):
            for i, p in enumerate(items):  # again, to say which one
                self.encode_one(queue, p, f"payloads[{i}]")
            raise  # pragma: no cover - the loop raises
        if not self._json and not all(t.__class__ is str for t in texts):
            for i, t in enumerate(texts):
                if not isinstance(t, str):
                    raise TypeError(f"the serializer returned {type(t).__name__}, not str,"
                                    f" for payloads[{i}]")  # fmt: skip
        bad = first_nul(texts)
        if bad is not None:
            raise nul_error(f"payloads[{bad}]", texts[bad], payload=True)
        return texts

    # -- statements --------------------------------------------------------------

    def _kind(self, text: str) -> str:
        if self.storage == "text":
            return "text"
        return "json" if json_nul(text) else "jsonb"

    def one(self, queue: str, type: str, text: str, fields: Extras) -> Statement:
        """The statement that sends one encoded message."""
        kind = self._kind(text)
        params: tuple[Any, ...]
        if fields != NO_EXTRAS or kind == "json":
            name, params = _ONE[kind], (queue, type, text, *fields)
        elif kind == "jsonb" and type == "default":
            name, params = "send", (queue, text)  # upstream pgque-py's statement
        else:
            name, params = _ONE_PLAIN[kind], (queue, type, text)
        return Statement(name, params, self.storage, (text,))

    def batch(
        self, queue: str, type: Any, payloads: Iterable[Any], *, on_client: bool = False
    ) -> Statement | None:
        """The statement that sends a batch of one type (None: ``payloads`` is empty).
        With a JSON serializer into ``jsonb``, plain values (no ``str``, ``None`` or
        model) go as one JSON array the server splits: one encoding, one parse."""
        check_queue(queue)
        type = self.check_type(type)
        array = self.json_array(payloads) if isinstance(payloads, list) else None
        if array is not None:
            return self.array_statement(queue, type, array, on_client)
        texts = self.encode_many(queue, payloads)
        return self.many(queue, type, texts, on_client=on_client) if texts else None

    def json_array(self, payloads: list[Any]) -> str | None:
        """Plain JSON values (no ``str``, ``None`` or model) as one JSON array text
        the server splits (one encoding and one parse for the batch), or None where
        the payloads need encoding one by one (:func:`~pgque.serializers._json_array`)."""
        if not self._json or not payloads:
            return None
        return _json_array(payloads, self.storage)

    def array_statement(
        self, queue: str, type: str, array: str, on_client: bool = False
    ) -> Statement:
        """The statement that sends :meth:`json_array`'s text as a batch of one type."""
        name = _BATCH_ARRAY[self.storage]
        return Statement(name, (queue, type, array), self.storage, (), True, not on_client)

    def many(
        self,
        queue: str,
        type: str,
        texts: list[str],
        types: list[str] | None = None,
        columns: Columns = _NO_COLUMNS,
        *,
        on_client: bool = False,
    ) -> Statement:
        """The statement that sends encoded messages in one batch: arrays bound in binary
        unless the connection binds on the client (``on_client``). Per-message types
        and extras are sent verbatim (the producers' only)."""
        binary = not on_client
        if types is None and all(c is None for c in columns):
            kind = "text" if self.storage == "text" else "json" if any_json_nul(texts) else "jsonb"
            names = _BATCH if binary else _BATCH_CLIENT_SIDE
            return Statement(names[kind], (queue, type, texts), self.storage, texts, True, binary)
        if self.storage != "text":
            raise PgqueInvalidArgument("per-message types and extras need text storage")
        if types is None and type != "default":
            types = [type] * len(texts)
        name = _BATCH_EXTRAS[0] if binary else _BATCH_EXTRAS[1]
        return Statement(name, (queue, types, texts, *columns), "text", texts, True, binary)

    def later(self, queue: str, type: str, text: str, when: datetime | timedelta) -> Statement:
        """The statement that sends one message at a time or after a delay
        (:func:`deliver_time`'s)."""
        names = _AT if isinstance(when, datetime) else _AFTER
        return Statement(names[self._kind(text)], (queue, type, text, when), self.storage, (text,))


def deliver_time(at: datetime | None, delay: timedelta | None) -> datetime | timedelta:
    """``at`` or ``delay`` (exactly one), checked: an aware datetime, a timedelta not negative."""
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
        return at
    if not isinstance(delay, timedelta):
        raise PgqueInvalidArgument(f"delay must be a timedelta, got {type(delay).__name__}")
    if delay < timedelta(0):
        raise PgqueInvalidArgument(f"delay must not be negative, got {delay}")
    return delay


@lru_cache(maxsize=32)
def client_path(serializer: Serializer) -> SendPath:
    """The clients' send path for ``serializer`` (its ``sql_type`` the storage, a type
    of None or ``""`` meaning ``default``), made once per serializer: a client's
    ``serializer`` attribute may be set at any time."""
    return SendPath(serializer, lenient_type=True)
