"""``schedule add|list|rm``: periodic schedules (pgque.schedule, schedules, unschedule)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from pgque.cli._command import PgqueGroup, json_option
from pgque.cli._errors import CliError, ExitCode
from pgque.cli._output import as_dicts, emit_json, listing, out
from pgque.cli._session import require_queue, session
from pgque.records import Schedule

__all__ = ["COMMANDS"]


@click.group("schedule", cls=PgqueGroup)
def schedule_group() -> None:
    """Periodic schedules: a message sent to a queue at each occurrence of a cron expression.

    \b
    pgque schedule add reports nightly '0 2 * * *' --type report.run --time-zone Europe/Paris
    pgque schedule list
    pgque schedule rm reports nightly
    """


def _when(value: dt.datetime | None) -> str:
    """A time as UTC ISO 8601 to the second, or ``-``."""
    if value is None:
        return "-"
    return value.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@schedule_group.command("add")
@click.argument("queue")
@click.argument("name")
@click.argument("cron")
@click.option("--payload", default="null", show_default=True, help="The messages' payload (JSON).")
@click.option("-t", "--type", "type_", default=None, help="The messages' type [default: default].")
@click.option("--time-zone", default="UTC", show_default=True,
              help="The time zone CRON is read in (e.g. Europe/Paris).")  # fmt: skip
@json_option
def add_cmd(
    queue: str, name: str, cron: str, payload: str, type_: str | None, time_zone: str,
    as_json: bool,
) -> None:  # fmt: skip
    """Create or replace QUEUE's schedule NAME: a message at each occurrence of CRON.

    CRON has five fields (minute hour day-of-month month day-of-week; lists,
    ranges and steps such as 8-18/2, names such as mon-fri) or is @hourly,
    @daily, @weekly, @monthly or @yearly. Whatever ticks the queue (pg_cron,
    pgque ticker, a consumer's ticker) sends each occurrence once. Replacing
    a schedule with the same CRON and time zone keeps its next run.
    """
    try:
        json.loads(payload)
    except ValueError:
        raise CliError(
            f"--payload is not JSON ({payload[:40]!r}): quote JSON strings ('\"hi\"')",
            ExitCode.USAGE,
        ) from None
    with session() as client:
        require_queue(client, queue)
        next_run = client.schedule(queue, name, cron, payload, type=type_, time_zone=time_zone)
    if as_json:
        emit_json({"queue": queue, "schedule": name, "cron": cron, "time_zone": time_zone,
                   "type": type_, "next_run": next_run})  # fmt: skip
        return
    out().print(f"scheduled {name!r} on queue {queue!r} ({cron}, {time_zone}):"
                f" next run {_when(next_run)}")  # fmt: skip


def _row(schedule: Schedule) -> dict[str, Any]:
    row = as_dicts([schedule])[0]
    row["payload"] = json.loads(schedule.payload)
    return row


@schedule_group.command("list")
@click.argument("queue", required=False)
@json_option
def list_cmd(queue: str | None, as_json: bool) -> None:
    """List the periodic schedules (of QUEUE, if given): cron, next and last run."""
    with session() as client:
        if queue is not None:
            require_queue(client, queue)
        schedules = client.schedules(queue)
    where = f"queue {queue!r} has" if queue is not None else "there are"
    empty = f"{where} no schedules: `pgque schedule add QUEUE NAME CRON` adds one"
    console = listing(schedules, as_json, empty, lambda rows: [_row(s) for s in rows])
    if console is None:
        return
    table = Table(box=None, pad_edge=False, padding=(0, 2, 0, 0), header_style="bold")
    for header in ("queue", "name", "cron", "time zone", "type", "next run (UTC)",
                   "last run (UTC)", "last event"):  # fmt: skip
        table.add_column(header, no_wrap=True)
    for s in schedules:  # names and crons as plain text, never markup
        table.add_row(
            Text(s.queue_name), Text(s.schedule_name), Text(s.cron), Text(s.time_zone),
            Text(s.type_name or "default"), _when(s.next_run), _when(s.last_run),
            "-" if s.last_event_id is None else str(s.last_event_id),
        )  # fmt: skip
    console.print(table)


@schedule_group.command("rm")
@click.argument("queue")
@click.argument("name")
@json_option
def rm_cmd(queue: str, name: str, as_json: bool) -> None:
    """Remove QUEUE's schedule NAME (pgque.unschedule)."""
    with session() as client:
        require_queue(client, queue)
        removed = client.unschedule(queue, name)
    if as_json:
        emit_json({"queue": queue, "schedule": name, "removed": removed})
        return
    if not removed:
        raise CliError(
            f"queue {queue!r} has no schedule named {name!r}: `pgque schedule list {queue}`"
            " lists them",
            ExitCode.NOT_FOUND,
        )
    out().print(f"removed schedule {name!r} of queue {queue!r}")


COMMANDS = [schedule_group]
