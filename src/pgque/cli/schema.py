"""``install``, ``upgrade``, ``uninstall``: the pgque schema in a database."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click
import psycopg

import pgque
from pgque.cli._command import command, json_option
from pgque.cli._errors import CliError, ExitCode
from pgque.cli._output import emit_json, out
from pgque.cli._session import connect, require_installed
from pgque.installer import installed_version

__all__ = ["COMMANDS"]


def _run_script(
    action: str, previous: Callable[[psycopg.Connection[Any]], str | None], as_json: bool
) -> tuple[str | None, str, str] | None:
    """Run the packaged pgque.sql (install and upgrade run the same script) after
    ``previous`` read the version there; the version before, the one now and the
    database, or None when the JSON answer is printed."""
    conn = connect()
    try:
        before = previous(conn)
        version = pgque.install(conn)
        database = conn.info.dbname
    finally:
        conn.close()
    if as_json:
        emit_json({"action": action, "database": database, "version": version, "previous": before})
        return None
    return before, version, database


@command("install")
@json_option
def install_cmd(as_json: bool) -> None:
    """Install pgque into the database (again: upgrade in place, data kept).

    Runs the packaged pgque.sql in one transaction: it completes or changes
    nothing. Creates schema pgque and the roles pgque_reader, pgque_writer
    and pgque_admin.
    """
    done = _run_script("install", installed_version, as_json)
    if done is None:
        return
    before, version, database = done
    if before is None:
        out().print(f"pgque {version} installed in database {database!r}")
    else:
        out().print(f"pgque {version} installed in database {database!r} (was {before}; data kept)")


@command("upgrade")
@json_option
def upgrade_cmd(as_json: bool) -> None:
    """Upgrade an installed pgque to this package's version (data kept).

    The same script as install; it refuses a database without pgque.
    """
    done = _run_script("upgrade", require_installed, as_json)
    if done is None:
        return
    before, version, database = done
    if before == version:
        out().print(f"pgque {version} in database {database!r} is current; reapplied in place")
    else:
        out().print(f"pgque upgraded from {before} to {version} in database {database!r}")


@command("uninstall")
@click.option("--force", is_flag=True, help="Really drop schema pgque with every queue and event.")
@json_option
def uninstall_cmd(force: bool, as_json: bool) -> None:
    """Drop schema pgque with all queues, events and dead letters (needs --force).

    Scheduler jobs are removed first; the roles stay (other databases may use them).
    """
    conn = connect()
    try:
        version = require_installed(conn)
        database = conn.info.dbname
        if not force:
            raise CliError(
                f"uninstall drops every queue, event and dead letter in database {database!r}:"
                " run `pgque uninstall --force` to do it",
                ExitCode.USAGE,
            )
        pgque.uninstall(conn)
    finally:
        conn.close()
    if as_json:
        emit_json({"action": "uninstall", "database": database, "previous": version})
        return
    out().print(f"pgque {version} uninstalled from database {database!r} (roles kept)")


COMMANDS = [install_cmd, upgrade_cmd, uninstall_cmd]
