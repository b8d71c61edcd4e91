"""How payloads become the text stored in ``ev_data``.

:data:`JSON` (the default) sends through the ``jsonb`` overloads, so the
server validates and canonicalises the JSON; :data:`RAW_TEXT` sends ``str``
payloads verbatim through the ``text`` overloads, the opt-in for payloads
that are not JSON (CSV, XML, base64). Make your own with :class:`Serializer`.

Objects become compact JSON (no spaces, non-ASCII characters as they are)
through :func:`dumps`: by orjson when it is installed (``pip install
'.[orjson]'``), else by the standard library, with the same text either way.
"""

from __future__ import annotations

import enum
import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - the test extra installs it
    _orjson = None  # type: ignore[assignment, unused-ignore]

__all__ = ["JSON", "RAW_TEXT", "Serializer", "dumps", "fast_json", "json_with"]


def _default(value: Any) -> Any:
    """What orjson encodes natively and the standard library does not: UUID and Enum."""
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    raise TypeError(
        f"Object of type {type(value).__name__} is not JSON serializable: make it a JSON"
        " value first (e.g. a datetime's .isoformat()), or give the producer a serializer"
        " that can, e.g. serializer=pgque.serializers.json_with(default=str) or a"
        " pgque.serializers.Serializer of your own"
    )


_STDLIB = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_default
)
"""The fallback: orjson's output, written by the standard library."""

# Where orjson's text may differ from the standard library's, which then encodes
# the payload again: ``null`` (orjson writes NaN and infinities as null, which the
# standard library refuses), floats below 1e-4 (``0.00005`` against ``5e-05``) and
# one-digit negative exponents (``1e-7`` against ``1e-07``).
_MAY_DIFFER = re.compile(rb"null|0\.0000|\de-\d(?!\d)")

# Subclasses of str, int, dict and list, dataclasses and datetimes go to the
# standard library (which refuses the last two), as every other type orjson refuses.
_ORJSON_OPTIONS = (
    0
    if _orjson is None
    else _orjson.OPT_PASSTHROUGH_SUBCLASS
    | _orjson.OPT_PASSTHROUGH_DATACLASS
    | _orjson.OPT_PASSTHROUGH_DATETIME
)


def fast_json() -> bool:
    """True when orjson is installed and encodes payloads."""
    return _orjson is not None


def dumps(payload: Any) -> str:
    """``payload`` as compact JSON text; raises ``TypeError`` for what JSON cannot
    hold and ``ValueError`` for NaN and infinities.

    orjson encodes when it is installed; the standard library encodes otherwise,
    and wherever orjson's text could differ from its own, so the text is the same
    with or without orjson.
    """
    if _orjson is not None:
        try:
            data = _orjson.dumps(payload, option=_ORJSON_OPTIONS)
        except TypeError:  # orjson.JSONEncodeError too: the standard library decides
            pass
        else:
            if _MAY_DIFFER.search(data) is None:
                return data.decode()
    return _STDLIB.encode(payload)


@dataclass(frozen=True)
class Serializer:
    """Turns a payload into text and names the SQL overload that stores it.

    Attributes:
        encode: Returns the payload's text; raises ``TypeError`` for payloads
            it cannot encode.
        sql_type: ``"jsonb"`` (the server validates JSON) or ``"text"`` (stored
            verbatim).
    """

    encode: Callable[[Any], str]
    sql_type: Literal["jsonb", "text"]


def _encode_json(payload: Any) -> str:
    if isinstance(payload, (bytes, bytearray, memoryview)):
        raise TypeError(
            "bytes payloads need a serializer that turns them into text"
            " (for example base64 with pgque.serializers.RAW_TEXT)"
        )
    if isinstance(payload, str):
        # A str is JSON text already, as in upstream pgque-py: '"x"', '42', '{}'.
        return payload
    # NaN and Infinity are not JSON: refuse them here, not at the server.
    return dumps(payload)


def _encode_raw(payload: Any) -> str:
    if not isinstance(payload, str):
        raise TypeError(
            f"RAW_TEXT sends str payloads verbatim; got {type(payload).__name__}"
            " (encode it to text first)"
        )
    return payload


#: dict, list, numbers, booleans and None as JSON; a str is taken as JSON text.
JSON = Serializer(_encode_json, "jsonb")
#: str payloads stored exactly as given, through the text overloads.
RAW_TEXT = Serializer(_encode_raw, "text")


def json_with(default: Callable[[Any], Any]) -> Serializer:
    """A JSON serializer that calls ``default(value)`` for each value JSON cannot hold
    (datetimes, decimals, sets, your classes) and encodes what it returns, as
    :func:`json.dumps`'s ``default=`` does; a ``str`` payload is JSON text, as with
    :data:`JSON`.

    Example:
        >>> encode = json_with(default=str).encode
        >>> encode({"at": datetime.date(2024, 1, 2)})  # doctest: +SKIP
        '{"at":"2024-01-02"}'
    """
    encoder = json.JSONEncoder(
        separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=default
    )

    def encode(payload: Any) -> str:
        if isinstance(payload, str):
            return payload
        if isinstance(payload, (bytes, bytearray, memoryview)):
            return _encode_json(payload)  # raises its TypeError
        return encoder.encode(payload)

    return Serializer(encode, "jsonb")
