"""Text that PostgreSQL cannot store, and the client's send statements, shared by
:class:`~pgque.PgqueClient` and :class:`~pgque.AsyncPgqueClient` (the NUL checks also by
the producers).

PostgreSQL ``text`` cannot hold the NUL character (U+0000): psycopg refuses it before
the server sees it, with a message that does not say which argument held it. The SDK
checks its string arguments first and names the argument instead.

JSON can carry a NUL inside a string, escaped as ``\\u0000``, but ``jsonb`` cannot (its
strings are ``text``). Rather than lose such a payload, the client stores it as the
JSON text it encoded (validated as ``json``, which keeps the escape), as the producers
always do; other payloads keep going through ``jsonb`` and are stored canonically.
"""

from __future__ import annotations

import itertools
import json
import operator
import re
from collections.abc import Sequence
from typing import Any

import psycopg

from pgque.errors import PgqueError, PgqueInvalidArgument
from pgque.serializers import Serializer

__all__ = [
    "check_text",
    "json_error",
    "json_nul",
    "nul_error",
    "send_batch_statement",
    "send_statement",
]

_DEFAULT_TYPES = (None, "", "default")
# A JSON \u0000 escape: a backslash that is not itself escaped (an even number of
# backslashes before it), then u0000.
_JSON_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def nul_error(what: str, value: str, *, payload: bool = False) -> PgqueInvalidArgument:
    """The error for ``value``, the argument ``what``, holding a NUL character."""
    advice = (
        "; inside JSON a NUL is written \\u0000 (the JSON serializer does so for the"
        " strings of objects it encodes), or encode the payload (for example base64)"
        if payload
        else ""
    )
    return PgqueInvalidArgument(
        f"{what} contains a NUL character (\\x00) at index {value.index(chr(0))}, which"
        f" PostgreSQL text cannot store: {value!r:.80}{advice}"
    )


def check_text(**arguments: Any) -> None:
    """Raise :func:`nul_error` for the first ``name=value`` whose str value holds a NUL."""
    for what, value in arguments.items():
        if isinstance(value, str) and "\x00" in value:
            raise nul_error(what, value)


def _check_extras(extras: Sequence[str | None] | None) -> None:
    for i, extra in enumerate(extras or ()):
        if isinstance(extra, str) and "\x00" in extra:
            raise nul_error(f"extras[{i}]", extra)


def json_nul(text: str) -> bool:
    """Does the JSON text hold a ``\\u0000`` escape (which ``jsonb`` refuses)?"""
    return "\\u0000" in text and _JSON_NUL.search(text) is not None


def send_statement(
    serializer: Serializer,
    queue: str,
    text: str,
    type: str | None,
    fields: tuple[str | None, str | None, str | None, str | None],
    user_extras: Sequence[str | None] | None,
) -> tuple[str, tuple[Any, ...]]:
    """The statement and parameters of one client send of the encoded ``text``."""
    check_text(queue=queue, type=type)
    _check_extras(user_extras)
    if "\x00" in text:
        raise nul_error("payload", text, payload=True)
    type_name = type or "default"
    if serializer.sql_type == "text":
        if any(f is not None for f in fields):
            return "send_text_extras", (queue, type_name, text, *fields)
        return "send_text", (queue, type_name, text)
    if json_nul(text):
        return "send_json_text_extras", (queue, type_name, text, *fields)
    if any(f is not None for f in fields):
        return "send_extras", (queue, type_name, text, *fields)
    if type in _DEFAULT_TYPES:
        return "send", (queue, text)
    return "send_typed", (queue, type, text)


def send_batch_statement(
    serializer: Serializer, queue: str, type: str, texts: list[str], *, binary: bool = True
) -> tuple[str, tuple[Any, ...]]:
    """The statement and parameters of a client send_batch of the encoded ``texts``:
    the array bound in binary (a text-format array of JSON costs more to escape and
    parse than the insert) unless the connection binds on the client (``binary``
    False)."""
    check_text(queue=queue, type=type)
    if any(map(operator.contains, texts, itertools.repeat("\x00"))):
        i = next(i for i, t in enumerate(texts) if "\x00" in t)
        raise nul_error(f"payloads[{i}]", texts[i], payload=True)
    if serializer.sql_type == "text":
        name = "send_batch_text_binary" if binary else "send_batch_text"
    elif any(json_nul(t) for t in texts):
        name = "send_batch_json_text_binary" if binary else "send_batch_json_text"
    else:
        name = "send_batch_binary" if binary else "send_batch"
    return name, (queue, type, texts)


def _not_json(text: str) -> bool:
    def refuse(name: str) -> Any:
        raise ValueError(name)

    try:
        json.loads(text, parse_constant=refuse)
    except ValueError:
        return True
    return False


def json_error(error: PgqueError, texts: Sequence[str], what: str) -> PgqueError:
    """For a data error of a JSON send, an error that says which payload is not JSON.

    ``what`` is ``payload`` (one text) or ``payloads`` (a batch); other errors are
    returned unchanged.
    """
    if not isinstance(error, PgqueInvalidArgument) or not (error.sqlstate or "").startswith("22"):
        return error
    cause = error.__cause__
    detail = cause.diag.message_detail if isinstance(cause, psycopg.Error) else None
    where = what
    if what == "payloads":
        bad = next((i for i, t in enumerate(texts) if _not_json(t)), None)
        where = what if bad is None else f"payloads[{bad}]"
    mapped = PgqueInvalidArgument(
        f"{where} is not valid JSON: {error}"
        + (f" ({detail})" if detail else "")
        + "; a str payload is sent as JSON text (use pgque.serializers.RAW_TEXT for other text)"
    )
    mapped.sqlstate, mapped.code, mapped.hint = error.sqlstate, error.code, error.hint
    return mapped
