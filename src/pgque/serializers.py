"""How payloads become the text stored in ``ev_data``.

:data:`JSON` (the default) sends through the ``jsonb`` overloads, so the
server validates and canonicalises the JSON; :data:`RAW_TEXT` sends ``str``
payloads verbatim through the ``text`` overloads, the opt-in for payloads
that are not JSON (CSV, XML, base64). Make your own with :class:`Serializer`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["JSON", "RAW_TEXT", "Serializer"]


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
    return json.dumps(payload, allow_nan=False)


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
