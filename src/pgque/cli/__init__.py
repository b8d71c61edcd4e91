"""The ``pgque`` command line: administration, monitoring, a ticker service and a demo.

Every command is a thin call into pgque's SQL API or the Python SDK. The
connection comes from ``--dsn``/``-d``, else ``PGQUE_DSN``, else the libpq
variables (``PGHOST``, ``PGDATABASE`` ...). Read commands take ``--json``.
Exit codes are listed in :class:`pgque.cli.ExitCode` and in the CLI
reference (``docs/cli.md``).
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from pgque._version import __version__
from pgque.cli import (
    admin,
    browse,
    embedded,
    messages,
    monitor,
    scheduler,
    schedules,
    schema,
    web,
    worker,
)
from pgque.cli._command import PgqueGroup, Settings
from pgque.cli._errors import ExitCode

__all__ = ["ExitCode", "cli", "main"]


@click.group(
    cls=PgqueGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "-d",
    "--dsn",
    envvar="PGQUE_DSN",
    metavar="DSN",
    help="libpq connection string or URI [env: PGQUE_DSN; default: the PG* variables].",
)
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logs.")
@click.version_option(__version__, "-V", "--version", prog_name="pgque")
@click.pass_context
def cli(ctx: click.Context, dsn: str | None, debug: bool) -> None:
    """pgque: a PostgreSQL queue on PgQ's design. Administer, watch and demo it.

    \b
    Start here:   pgque demo      (a throwaway PostgreSQL, messages flowing)
    Your server:  pgque -d postgresql://localhost/mydb install
                  pgque ticker    (where there is no pg_cron)
                  pgque status
    """
    ctx.obj = Settings(dsn=dsn or None, debug=debug)


for _module in (
    schema,
    scheduler,
    schedules,
    monitor,
    browse,
    admin,
    messages,
    embedded,
    web,
    worker,
):
    for _command in _module.COMMANDS:
        cli.add_command(_command)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``pgque`` console script; exits with an :class:`ExitCode`."""
    cli.main(args=list(argv) if argv is not None else None, prog_name="pgque")
