"""Typed payloads: turning a decoded JSON payload into a handler's ``model=``.

:func:`validator` builds, once per registration, the function the consumer
applies to ``msg.json()`` before the handler runs (the result is
``msg.data``); it raises when the payload does not fit, and the consumer
dead-letters that message with :func:`explain`'s wording. What a model may be:

* a pydantic v2 model (``model_validate``: pydantic's own validation);
* a msgspec ``Struct`` (``msgspec.convert``);
* a dataclass: the payload must be an object whose keys are the fields
  (those without a default required, no others); a field whose type is a
  dataclass, an optional one or a list of them is built the same way;
  other values are taken as they are, unchecked;
* a ``TypedDict``: the payload must be an object with every required key
  (values unchecked); the value is the dict itself;
* any other callable: called with the decoded JSON.

pydantic and msgspec are never imported here: a pydantic model is known by
its ``model_validate``, a Struct by msgspec being imported already (a class
of it cannot exist otherwise).
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import types
import typing
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["explain", "model_name", "validator"]

M = TypeVar("M")

_REASON_LIMIT = 500


def model_name(model: Any) -> str:
    """The model's name, for messages."""
    return str(getattr(model, "__qualname__", None) or getattr(model, "__name__", None) or model)


def validator(model: Callable[..., M] | type[M]) -> Callable[[Any], M]:
    """The function that turns a decoded payload into ``model`` (raising when it does not fit).

    Raises:
        TypeError: ``model`` is none of the kinds above.
    """
    if isinstance(model, type):
        if callable(getattr(model, "model_validate", None)) and hasattr(model, "model_fields"):
            return typing.cast("Callable[[Any], M]", getattr(model, "model_validate"))  # noqa: B009 (pydantic v2)
        msgspec = sys.modules.get("msgspec")
        if msgspec is not None and issubclass(model, msgspec.Struct):
            return functools.partial(msgspec.convert, type=model)
        if dataclasses.is_dataclass(model):
            return typing.cast("Callable[[Any], M]", functools.partial(_dataclass, model))
        if typing.is_typeddict(model):
            return functools.partial(_typeddict, model)
    if not callable(model):
        raise TypeError(
            f"model must be a pydantic model, a dataclass, a msgspec Struct, a TypedDict or"
            f" a callable taking the decoded JSON, got {model!r}"
        )
    return model


def explain(exc: BaseException) -> str:
    """A validation error in one line (pydantic's: each error's place and message)."""
    errors = getattr(exc, "errors", None)
    text = ""
    if callable(errors):
        try:
            items = errors()
            text = "; ".join(
                f"{'.'.join(str(p) for p in e.get('loc', ())) or '(payload)'}: {e.get('msg')}"
                for e in items
            )
        except Exception:
            text = ""
    if not text:
        text = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
        text = text or type(exc).__name__
    if len(text) > _REASON_LIMIT:
        text = text[: _REASON_LIMIT - 1] + "\u2026"
    return text.replace("\x00", "")


def _object(value: Any, name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"expected a JSON object for {name}, got {type(value).__name__}")
    return value


def _dataclass(model: Any, value: Any) -> Any:
    """Build dataclass ``model`` from a JSON object (nested dataclasses too)."""
    data = _object(value, model.__name__)
    fields = {f.name: f for f in dataclasses.fields(model) if f.init}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise TypeError(f"unexpected keys {unknown} for {model.__name__}")
    missing = sorted(
        name
        for name, f in fields.items()
        if name not in data
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    )
    if missing:
        raise TypeError(f"missing keys {missing} for {model.__name__}")
    hints = _hints(model)
    return model(**{key: _nested(hints.get(key), item) for key, item in data.items()})


@functools.lru_cache(maxsize=256)
def _hints(model: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(model)
    except Exception:  # a hint that cannot be resolved: values taken as they are
        return {}


def _nested(hint: Any, value: Any) -> Any:
    """``value`` built as ``hint`` says when that is a dataclass (optional, or a list of)."""
    if hint is None or value is None:
        return value
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _dataclass(hint, value)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _nested(inner[0], value) if len(inner) == 1 else value
    if origin is list and len(args) == 1 and isinstance(value, list):
        return [_nested(args[0], item) for item in value]
    return value


def _typeddict(model: Any, value: Any) -> Any:
    """The JSON object itself, once it has every required key of TypedDict ``model``."""
    data = _object(value, model.__name__)
    missing = sorted(set(model.__required_keys__) - set(data))
    if missing:
        raise TypeError(f"missing keys {missing} for {model.__name__}")
    return data
