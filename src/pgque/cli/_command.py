"""The click plumbing: the group's settings, commands whose errors become exit codes.

Commands are thin: they open a session (:func:`pgque.cli._session.session`),
make one client call, and print the result. Every failure becomes a
:class:`~pgque.cli._errors.CliError`, which :class:`PgqueGroup` prints as one
line on stderr and turns into the exit code of its kind.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from pgque.cli._errors import ExitCode, cli_error

__all__ = ["PgqueCommand", "PgqueGroup", "Settings", "command", "json_option", "settings"]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class Settings:
    """The group's options, shared by every command through the click context."""

    dsn: str | None = None
    debug: bool = False


def settings() -> Settings:
    """The :class:`Settings` of the running command."""
    ctx = click.get_current_context()
    obj = ctx.find_object(Settings)
    return obj if obj is not None else Settings()


class PgqueCommand(click.Command):
    """A click command whose errors become :class:`CliError` (traceback with ``--debug``)."""

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command, translating pgque, psycopg and other errors."""
        obj = ctx.find_object(Settings)
        debug = obj is not None and obj.debug
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort):
            raise
        except click.ClickException as exc:
            if debug and exc.__cause__ is not None:
                traceback.print_exception(exc.__cause__)
            raise
        except Exception as exc:
            if debug:
                traceback.print_exc()
            raise cli_error(exc, ctx.params) from exc


class PgqueGroup(click.Group):
    """The ``pgque`` group: one line on stderr and a distinct exit code for every failure."""

    command_class = PgqueCommand

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the CLI; in standalone mode exit with an :class:`ExitCode`."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            result = super().main(args, prog_name or "pgque", complete_var, False, **extra)
        except click.exceptions.Abort:
            click.echo("pgque: interrupted", err=True)
            sys.exit(130)
        except click.UsageError as exc:
            where = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx is not None else ""
            click.echo(f"pgque: error: {exc.format_message()}{where}", err=True)
            sys.exit(ExitCode.USAGE)
        except click.ClickException as exc:
            click.echo(f"pgque: error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        sys.exit(result if isinstance(result, int) else ExitCode.OK)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """List the commands with their whole first sentence, wrapped, never cut with "..."."""
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is None or cmd.hidden:
                continue
            rows.append((name, cmd.get_short_help_str(limit=1_000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def command(name: str, **kwargs: Any) -> Callable[[Callable[..., Any]], click.Command]:
    """``click.command`` with the error translation of :class:`PgqueCommand`."""
    return click.command(name, cls=PgqueCommand, **kwargs)


def json_option(func: F) -> F:
    """The ``--json`` flag of a command: print machine-readable output instead of text."""
    return click.option(
        "--json", "as_json", is_flag=True, help="Print JSON (documented shape) instead of text."
    )(func)
