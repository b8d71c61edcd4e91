"""The ``PGQUE`` setting of a Django project, read and checked.

::

    PGQUE = {
        "DATABASES": ["default"],  # where migrate installs pgque (default: ["default"])
        "QUEUES": {  # created (and subscribed) by migrate, idempotently
            "orders": {"consumers": ["mailer"], "options": {"max_retries": 5}},
        },
        "ALLOW_UNINSTALL_WITH_EVENTS": False,  # or env PGQUE_ALLOW_UNINSTALL_WITH_EVENTS=1
    }

Every key is optional. A malformed value raises
:class:`~django.core.exceptions.ImproperlyConfigured` naming the key.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

__all__ = ["FORCE_ENV", "QueueDeclaration", "database_aliases", "force_uninstall", "queues"]

#: Environment variable that lets ``migrate pgque zero`` drop pending events.
FORCE_ENV = "PGQUE_ALLOW_UNINSTALL_WITH_EVENTS"

_KEYS = {"DATABASES", "QUEUES", "ALLOW_UNINSTALL_WITH_EVENTS"}


@dataclass(frozen=True)
class QueueDeclaration:
    """A queue of ``PGQUE["QUEUES"]``: its name, subscribed consumers and options."""

    name: str
    consumers: tuple[str, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)


def _setting() -> dict[str, Any]:
    value = getattr(settings, "PGQUE", None)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ImproperlyConfigured(f"settings.PGQUE must be a dict, got {type(value).__name__}")
    refuse_unknown_keys(value, _KEYS, "settings.PGQUE")
    return value


def refuse_unknown_keys(value: dict[str, Any], known: set[str], where: str) -> None:
    """Raise ImproperlyConfigured naming the keys of setting ``where`` (its ``value``)
    that are not ``known``, and those that are."""
    unknown = sorted(set(value) - known)
    if unknown:
        raise ImproperlyConfigured(f"{where} has unknown keys {unknown}: known are {sorted(known)}")


def database_aliases() -> list[str]:
    """``PGQUE["DATABASES"]``: the aliases pgque is installed in (default ``["default"]``)."""
    aliases = _setting().get("DATABASES", ["default"])
    if not isinstance(aliases, (list, tuple)) or not all(isinstance(a, str) and a for a in aliases):
        raise ImproperlyConfigured(
            f'settings.PGQUE["DATABASES"] must be a list of database aliases, got {aliases!r}'
        )
    return list(aliases)


def queues() -> list[QueueDeclaration]:
    """``PGQUE["QUEUES"]`` checked: one declaration per queue, in the setting's order."""
    declared = _setting().get("QUEUES", {})
    where = 'settings.PGQUE["QUEUES"]'
    if not isinstance(declared, dict):
        raise ImproperlyConfigured(
            f'{where} must be a dict of queue name -> {{"consumers": [...], "options": {{...}}}}'
        )
    result = []
    for name, spec in declared.items():
        here = f"{where}[{name!r}]"
        if not isinstance(name, str) or not name:
            raise ImproperlyConfigured(f"{where} has a queue name {name!r}: use a non-empty str")
        spec = {} if spec is None else spec
        if not isinstance(spec, dict) or set(spec) - {"consumers", "options"}:
            raise ImproperlyConfigured(
                f'{here} must be a dict with the keys "consumers" and "options", got {spec!r}'
            )
        consumers = spec.get("consumers", [])
        if not isinstance(consumers, (list, tuple)) or not all(
            isinstance(c, str) and c for c in consumers
        ):
            raise ImproperlyConfigured(
                f'{here}["consumers"] must be a list of consumer names, got {consumers!r}'
            )
        options = spec.get("options", {})
        if not isinstance(options, dict):
            raise ImproperlyConfigured(
                f'{here}["options"] must be a dict of queue settings, got {options!r}'
            )
        result.append(QueueDeclaration(name, tuple(consumers), dict(options)))
    return result


def force_uninstall() -> bool:
    """Whether uninstalling may drop pending events (the setting or the environment)."""
    if os.environ.get(FORCE_ENV, "").strip().lower() in {"1", "true", "yes", "on"}:
        return True
    value = _setting().get("ALLOW_UNINSTALL_WITH_EVENTS", False)
    if not isinstance(value, bool):
        raise ImproperlyConfigured(
            f'settings.PGQUE["ALLOW_UNINSTALL_WITH_EVENTS"] must be True or False, got {value!r}'
        )
    return value
