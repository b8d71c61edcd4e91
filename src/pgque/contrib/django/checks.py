"""System checks (``manage.py check``) for the databases pgque is installed in.

``pgque.E001``: an alias of ``PGQUE["DATABASES"]`` that is missing, not
PostgreSQL, or on psycopg 2. ``pgque.E002``: a malformed ``PGQUE`` setting.
``pgque.W001``: pgque not installed; ``pgque.W002``: installed, but older
than the package; ``pgque.W003``: the database could not be asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from pgque._version import __version__
from pgque.contrib.django import conf
from pgque.contrib.django.connection import database_problem, psycopg_connection
from pgque.contrib.django.schema import version_key
from pgque.installer import installed_version

__all__ = ["check_pgque"]


@checks.register("pgque")  # type: ignore[untyped-decorator]
def check_pgque(
    app_configs: Sequence[Any] | None = None,
    databases: Sequence[str] | None = None,
    **kwargs: Any,
) -> list[checks.CheckMessage]:
    """Errors for unusable databases and settings; warnings for a missing or old pgque."""
    try:
        aliases = conf.database_aliases()
        conf.queues()
        conf.force_uninstall()
    except ImproperlyConfigured as exc:
        return [checks.Error(str(exc), id="pgque.E002")]
    found: list[checks.CheckMessage] = []
    for alias in aliases:
        problem = database_problem(alias)
        if problem is not None:
            found.append(checks.Error(problem, id="pgque.E001"))
            continue
        if databases is not None and alias not in databases:
            continue
        found.extend(_version_messages(alias))
    return found


def _version_messages(alias: str) -> list[checks.CheckMessage]:
    try:
        version = installed_version(psycopg_connection(alias))
    except Exception as exc:  # a check reports, it never crashes the command
        return [
            checks.Warning(
                f"cannot tell whether pgque is installed in database {alias!r}: {exc}",
                id="pgque.W003",
            )
        ]
    if version is None:
        return [
            checks.Warning(
                f"pgque is not installed in database {alias!r}",
                hint=f"run `manage.py migrate pgque --database {alias}`",
                id="pgque.W001",
            )
        ]
    if version_key(version) < version_key(__version__):
        return [
            checks.Warning(
                f"pgque {version} is installed in database {alias!r}, older than the"
                f" package's {__version__}",
                hint=f"run `manage.py migrate pgque --database {alias}` to upgrade it",
                id="pgque.W002",
            )
        ]
    return []
