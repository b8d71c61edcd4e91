"""Text that PostgreSQL cannot store, and JSON it refuses: the NUL checks of every
module that sends text, and the errors of a payload that is not JSON.

PostgreSQL ``text`` cannot hold the NUL character (U+0000): psycopg refuses it before
the server sees it, with a message that does not say which argument held it. The SDK
checks its string arguments first and names the argument instead.

JSON can carry a NUL inside a string, escaped as ``\\u0000``, but ``jsonb`` cannot (its
strings are ``text``). Rather than lose such a payload, the client stores it as the
JSON text it encoded (validated as ``json``, which keeps the escape), as the producers
always do; other payloads keep going through ``jsonb`` and are stored canonically
(:mod:`pgque._send_plan` chooses).
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

__all__ = ["any_json_nul", "check_text", "first_nul", "json_error", "json_nul", "nul_error"]

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


def first_nul(texts: list[str]) -> int | None:
    """The index of the first text holding a NUL character, or None (the one scan of a
    batch: in C while none has one)."""
    if any(map(operator.contains, texts, itertools.repeat("\x00"))):
        return next(i for i, t in enumerate(texts) if "\x00" in t)
    return None


def json_nul(text: str) -> bool:
    """Does the JSON text hold a ``\\u0000`` escape (which ``jsonb`` refuses)?"""
    return "\\u0000" in text and _JSON_NUL.search(text) is not None


def any_json_nul(texts: list[str]) -> bool:
    """Does one of the JSON texts hold a ``\\u0000`` escape? (In C while none has the
    six characters.)"""
    return any(map(operator.contains, texts, itertools.repeat("\\u0000"))) and any(
        map(json_nul, texts)
    )


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
