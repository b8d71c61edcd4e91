"""Django's database connections as pgque needs them: PostgreSQL on psycopg 3.

Django 4.2+ runs its PostgreSQL backend on psycopg 3 when it is installed,
so the connection under ``connections[alias]`` is a :class:`psycopg.Connection`
that pgque can send on, inside whatever transaction Django has open.
"""

from __future__ import annotations

from typing import Any

import psycopg
from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from psycopg.conninfo import make_conninfo

__all__ = ["conninfo", "database_problem", "psycopg_connection", "require_postgresql"]

# Connection parameters of Django's that are psycopg objects, not libpq keywords.
_NOT_LIBPQ = {"context", "cursor_factory", "prepare_threshold", "row_factory", "autocommit"}


def _uses_psycopg3() -> bool:
    try:
        from django.db.backends.postgresql.psycopg_any import is_psycopg3
    except ImportError:  # Django before 4.2 knows only psycopg 2
        return False
    return bool(is_psycopg3)


def database_problem(alias: str) -> str | None:
    """Why ``DATABASES[alias]`` cannot carry pgque (naming the setting), or None."""
    if alias not in connections:
        known = ", ".join(repr(a) for a in connections) or "none"
        return (
            f"the database alias {alias!r} is not in settings.DATABASES (aliases: {known});"
            " pass using= one of them, or fix settings.PGQUE['DATABASES']"
        )
    wrapper = connections[alias]
    engine = wrapper.settings_dict.get("ENGINE", "")
    if wrapper.vendor != "postgresql":
        return (
            f"settings.DATABASES[{alias!r}] uses ENGINE {engine!r} ({wrapper.vendor}): pgque"
            " needs PostgreSQL; set ENGINE to 'django.db.backends.postgresql'"
        )
    if not _uses_psycopg3():
        return (
            f"settings.DATABASES[{alias!r}] runs on psycopg 2: pgque needs psycopg 3"
            " (Django 4.2+ uses it when installed): pip install 'psycopg[binary]'"
            " and uninstall psycopg2"
        )
    return None


def require_postgresql(alias: str) -> None:
    """Raise :class:`~django.core.exceptions.ImproperlyConfigured` when
    :func:`database_problem` finds one."""
    problem = database_problem(alias)
    if problem is not None:
        raise ImproperlyConfigured(problem)


def psycopg_connection(alias: str) -> psycopg.Connection[Any]:
    """The psycopg connection under Django's connection ``alias`` (connected if needed)."""
    require_postgresql(alias)
    wrapper = connections[alias]
    wrapper.ensure_connection()
    raw = wrapper.connection
    if not isinstance(raw, psycopg.Connection):
        raise ImproperlyConfigured(
            f"settings.DATABASES[{alias!r}] gives a {type(raw).__module__}."
            f"{type(raw).__name__} connection: pgque needs a psycopg 3 connection"
            " (ENGINE 'django.db.backends.postgresql' with psycopg 3 installed)"
        )
    return raw


def conninfo(alias: str) -> str:
    """A libpq connection string for ``DATABASES[alias]`` (for the worker's own connections
    and the ``pgque`` CLI)."""
    require_postgresql(alias)
    params = connections[alias].get_connection_params()
    libpq = {
        key: value
        for key, value in params.items()
        if key not in _NOT_LIBPQ and isinstance(value, (str, int)) and value != ""
    }
    return make_conninfo("", **libpq)
