"""``manage.py pgque_worker``: run the consumers declared in the apps' ``consumers.py``
and the queues of pgque's task backends in ``settings.TASKS`` (Django 6)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from pgque.contrib.django import worker


class Command(BaseCommand):  # type: ignore[misc]
    """Run every declared consumer and task queue (or those of --queue / --name) until
    SIGTERM."""

    help = (
        "Run the pgque consumers declared in the installed apps' consumers.py modules"
        " and the tasks of settings.TASKS backends of pgque's, until SIGTERM or Ctrl-C"
        " (the current batch finishes first)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        """``--queue``, ``--name`` (both repeatable) and ``--database``."""
        parser.add_argument(
            "--queue", action="append", default=[], help="Only this queue's consumers."
        )
        parser.add_argument("--name", action="append", default=[], help="Only this consumer.")
        parser.add_argument("--database", default=None, help="Only this database's consumers.")

    def handle(self, *args: Any, **options: Any) -> None:
        """Discover, select and run the consumers."""
        try:
            chosen = worker.select(
                worker.discover(),
                queues=options["queue"],
                names=options["name"],
                using=options["database"],
            )
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from exc
        listed = ", ".join(f"{c.queue}/{c.name}" for c in chosen)
        self.stdout.write(f"pgque worker: consuming {listed} on database {chosen[0].using!r}")
        self.stdout.flush()
        worker.run(chosen)
        self.stdout.write("pgque worker: stopped")
