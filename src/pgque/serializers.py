"""How payloads become the text stored in ``ev_data``.

:data:`JSON` (the default) sends through the ``jsonb`` overloads, so the
server validates and canonicalises the JSON; :data:`RAW_TEXT` sends ``str``
payloads verbatim through the ``text`` overloads, the opt-in for payloads
that are not JSON (CSV, XML, base64). Make your own with :class:`Serializer`.

Objects become compact JSON (no spaces, non-ASCII characters as they are)
through :func:`dumps`: by orjson when it is installed (``pip install
'.[orjson]'``), else by the standard library, with the same text either way.

Model instances are sent as their data (:func:`model_data`): a pydantic v2
model as ``model_dump(mode="json")``, a dataclass as :func:`dataclasses.asdict`,
a msgspec ``Struct`` as ``msgspec.to_builtins``. pydantic and msgspec are
optional: they are looked up in :data:`sys.modules` (an instance of their
classes means they are imported already), never imported here.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import re
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - the test extra installs it
    _orjson = None  # type: ignore[assignment, unused-ignore]

__all__ = [
    "JSON",
    "RAW_TEXT",
    "Serializer",
    "dumps",
    "fast_json",
    "json_with",
    "model_data",
]

_NOT_A_MODEL: Any = object()


def _model_data(value: Any) -> Any:
    """``value``'s data if it is a model instance, else ``_NOT_A_MODEL``."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    pydantic = sys.modules.get("pydantic")
    if pydantic is not None and isinstance(value, pydantic.BaseModel):
        dump = getattr(value, "model_dump", None)
        if dump is None:  # pydantic 1 installed as pydantic
            raise TypeError(
                f"{type(value).__name__} is a pydantic 1 model: pgque sends pydantic 2 models"
                " (model_dump); pass its .dict() instead"
            )
        return dump(mode="json")
    msgspec = sys.modules.get("msgspec")
    if msgspec is not None and isinstance(value, msgspec.Struct):
        return msgspec.to_builtins(value)
    return _NOT_A_MODEL


def model_data(value: Any) -> Any:
    """The JSON data a model instance is sent as, or ``value`` itself if it is no model.

    A pydantic v2 model gives ``model_dump(mode="json")``, a dataclass instance
    :func:`dataclasses.asdict`, a msgspec ``Struct`` ``msgspec.to_builtins``; the
    result is encoded as any other payload (values JSON cannot hold still raise).
    """
    data = _model_data(value)
    return value if data is _NOT_A_MODEL else data


def _default(value: Any) -> Any:
    """What orjson encodes natively and the standard library does not (UUID and Enum),
    and models nested in a payload."""
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    data = _model_data(value)
    if data is not _NOT_A_MODEL:
        return data
    raise TypeError(
        f"Object of type {type(value).__name__} is not JSON serializable: make it a JSON"
        " value first (e.g. a datetime's .isoformat()), or give the producer (or client) a"
        " serializer that can, e.g. serializer=pgque.serializers.json_with(default=str) or"
        " a pgque.serializers.Serializer of your own (pydantic v2 models, dataclasses and"
        " msgspec Structs are sent as their fields)"
    )


_STDLIB = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_default
)
"""The fallback: orjson's output, written by the standard library."""

# Where orjson's text may differ from the standard library's, which then encodes
# the payload again: ``null`` (orjson writes NaN and infinities as null, which the
# standard library refuses), floats below 1e-4 (``0.00005`` against ``5e-05``) and
# one-digit negative exponents (``1e-7`` against ``1e-07``).
_SHORT_EXPONENT = re.compile(rb"\de-\d(?!\d)")


def _may_differ(data: bytes) -> bool:
    """Whether orjson's ``data`` may differ from the standard library's text (see
    above). Substring tests come first: a regular expression search cost more
    than orjson's encoding of a small payload."""
    return (
        b"null" in data
        or b"0.0000" in data
        or (b"e-" in data and _SHORT_EXPONENT.search(data) is not None)
    )


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
            if not _may_differ(data):
                return data.decode()
    return _STDLIB.encode(payload)


def _dumps_for_jsonb(payload: Any) -> str:
    """:func:`dumps` for text the server parses as ``jsonb`` and prints canonically:
    orjson's spelling of numbers is as good there, so its text is taken unless it
    may hide a NaN or infinity (orjson writes them as ``null``) or holds a
    ``\\u0000`` escape (such a text is stored as written, so it must be the
    standard library's)."""
    if _orjson is not None:
        try:
            data = _orjson.dumps(payload, option=_ORJSON_OPTIONS)
        except TypeError:
            pass
        else:
            if b"null" not in data and b"\\u0000" not in data:
                return data.decode()
    return _STDLIB.encode(payload)


_ARRAY_ITEMS = {dict, list, int, float, bool}
_ARRAY_MAX = 64 * 1024 * 1024  # far below jsonb's limit of 256 MiB for one value


def _json_array(payloads: list[Any], storage: Literal["jsonb", "text"]) -> str | None:
    """The payloads as one JSON array text for the server to split (one encoding and
    one parse for the batch), or None where each needs encoding on its own: orjson
    missing, a ``str`` (JSON text already), ``None`` or a model among them, a value
    orjson refuses, or a very large text. For ``jsonb`` storage also a text with
    ``null`` (maybe a NaN) or ``\\u0000``; for ``text`` storage, where each element's
    text is stored as written, one that may differ from the standard library's."""
    if _orjson is None or not _ARRAY_ITEMS.issuperset(map(type, payloads)):
        return None
    try:
        data = _orjson.dumps(payloads, option=_ORJSON_OPTIONS)
    except TypeError:
        return None
    jsonb_refuses = b"null" in data or b"\\u0000" in data
    if (jsonb_refuses if storage == "jsonb" else _may_differ(data)) or len(data) > _ARRAY_MAX:
        return None
    return data.decode()


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


_PLAIN = (dict, list, int, float, bool, type(None))


def _json_encoder(write: Callable[[Any], str]) -> Callable[[Any], str]:
    """The JSON serializer's encode, writing objects with ``write``."""

    def encode(payload: Any) -> str:
        cls = payload.__class__
        if cls is str:
            # A str is JSON text already, as in upstream pgque-py: '"x"', '42', '{}'.
            return payload  # type: ignore[no-any-return]
        if cls not in _PLAIN:
            if isinstance(payload, (bytes, bytearray, memoryview)):
                raise TypeError(
                    "bytes payloads need a serializer that turns them into text"
                    " (for example base64 with pgque.serializers.RAW_TEXT)"
                )
            if isinstance(payload, str):
                return payload
            payload = model_data(payload)
        # NaN and Infinity are not JSON: refuse them here, not at the server.
        return write(payload)

    return encode


_encode_json = _json_encoder(dumps)
#: The JSON serializer's encode where the server parses the text as jsonb (the
#: clients' send path): the same JSON, numbers perhaps spelled otherwise.
_encode_json_for_jsonb = _json_encoder(_dumps_for_jsonb)


def _encode_raw(payload: Any) -> str:
    if not isinstance(payload, str):
        raise TypeError(
            f"RAW_TEXT sends str payloads verbatim; got {type(payload).__name__}"
            " (encode it to text first)"
        )
    return payload


#: dict, list, numbers, booleans and None as JSON (models as their data, see
#: :func:`model_data`); a str is taken as JSON text.
JSON = Serializer(_encode_json, "jsonb")
#: str payloads stored exactly as given, through the text overloads.
RAW_TEXT = Serializer(_encode_raw, "text")


def json_with(default: Callable[[Any], Any]) -> Serializer:
    """A JSON serializer that calls ``default(value)`` for each value JSON cannot hold
    (datetimes, decimals, sets, your classes) and encodes what it returns, as
    :func:`json.dumps`'s ``default=`` does; a ``str`` payload is JSON text and a model
    instance is sent as its data, as with :data:`JSON`.

    Example:
        >>> encode = json_with(default=str).encode
        >>> encode({"at": datetime.date(2024, 1, 2)})  # doctest: +SKIP
        '{"at":"2024-01-02"}'
    """

    def models_first(value: Any) -> Any:
        data = _model_data(value)
        return default(value) if data is _NOT_A_MODEL else data

    encoder = json.JSONEncoder(
        separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=models_first
    )

    def encode(payload: Any) -> str:
        if isinstance(payload, str):
            return payload
        if isinstance(payload, (bytes, bytearray, memoryview)):
            return _encode_json(payload)  # raises its TypeError
        return encoder.encode(model_data(payload))

    return Serializer(encode, "jsonb")
