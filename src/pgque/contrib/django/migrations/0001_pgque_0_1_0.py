"""pgque 0.1.0: install (or upgrade an older install); backwards, uninstall.

Uninstalling refuses while events are pending, unless
``PGQUE["ALLOW_UNINSTALL_WITH_EVENTS"]`` or ``PGQUE_ALLOW_UNINSTALL_WITH_EVENTS=1``.
"""

from __future__ import annotations

from typing import ClassVar

from django.db import migrations

from pgque.contrib.django.schema import uninstall, upgrade_to


class Migration(migrations.Migration):  # type: ignore[misc]
    """Install pgque 0.1.0."""

    # The install file runs its own transaction, on an idle connection.
    atomic = False
    initial = True
    dependencies: ClassVar[list[tuple[str, str]]] = []
    operations: ClassVar[list[migrations.RunPython]] = [
        migrations.RunPython(upgrade_to("0.1.0"), uninstall, elidable=False),
    ]
