"""``manage.py pgque ...``: the ``pgque`` command line on a Django database."""

from __future__ import annotations

import argparse
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from pgque.cli import main
from pgque.contrib.django.connection import conninfo


class Command(BaseCommand):  # type: ignore[misc]
    """Run ``pgque ARGS...`` with the DSN of ``--database`` (default ``default``)."""

    help = (
        "Run the pgque command line on a database of settings.DATABASES,"
        " e.g. `manage.py pgque status` or `manage.py pgque --database other queues`."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        """``--database`` and the pgque command line's arguments."""
        parser.add_argument("--database", default="default", help="The database alias.")
        parser.add_argument("args", nargs=argparse.REMAINDER, help="pgque's arguments.")

    def handle(self, *args: str, **options: Any) -> None:
        """Run the CLI; its exit status becomes the command's (``SystemExit``)."""
        try:
            dsn = conninfo(options["database"])
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from exc
        main(["--dsn", dsn, *args])
