"""``events`` and ``dlq``: looking at a queue's recent events and its dead letters.

Both read through bounded calls (``pgque.recent_events``, ``pgque.dlq_inspect``,
``pgque.dlq_get``), so they cost the same on a queue of millions of events.
"""

from __future__ import annotations

import json
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from pgque.cli._command import command, json_option
from pgque.cli._errors import CliError, ExitCode
from pgque.cli._output import as_dicts, emit_json, listing, out, plural
from pgque.cli._session import require_queue, session
from pgque.records import DeadLetter, EventRecord

__all__ = ["COMMANDS"]


def _stamp(value: Any) -> str:
    return value.isoformat(sep=" ", timespec="milliseconds") if value is not None else "-"


def _extras(row: EventRecord | DeadLetter) -> str:
    values = (row.ev_extra1, row.ev_extra2, row.ev_extra3, row.ev_extra4)
    return " ".join(f"extra{i}={v}" for i, v in enumerate(values, 1) if v is not None)


def _table(*headers: str) -> Table:
    table = Table(box=None, pad_edge=False, padding=(0, 2, 0, 0), header_style="bold")
    for header in headers:
        table.add_column(header, justify="right" if header in ("ID", "RETRY") else "left")
    return table


def _cells(ident: int, time: Any, type_: str | None, retry: str, *texts: str) -> list[str | Text]:
    """A row of ``events`` or ``dlq``: id, time, type, retries, then ``texts`` (shown as
    plain text, never markup)."""
    return [str(ident), _stamp(time), Text(type_ or "-"), retry, *map(Text, texts)]


def _pretty(data: str | None) -> str:
    """A payload indented when it is JSON, else as stored."""
    if data is None:
        return "null"
    try:
        return json.dumps(json.loads(data), indent=2, ensure_ascii=False)
    except ValueError:
        return data


@command("events")
@click.argument("queue")
@click.option("-t", "--type", "type_", default=None, help="Only events of this type.")
@click.option("-n", "--limit", type=click.IntRange(1, 1000), default=50, show_default=True,
              help="At most this many events (1 to 1000).")  # fmt: skip
@json_option
def events_cmd(queue: str, type_: str | None, limit: int, as_json: bool) -> None:
    """Show QUEUE's most recent events, newest first, consumed or not.

    Reads only the newest rows of each event table, so it is quick on any
    queue. With --type, the events of that type among the newest 10000 of
    each event table.
    """
    with session() as client:
        events = client.recent_events(queue, limit=limit, type=type_)
    kind = f" of type {type_!r}" if type_ is not None else ""
    console = listing(events, as_json, f"queue {queue!r} holds no recent events{kind}")
    if console is None:
        return
    table = _table("ID", "TIME", "TYPE", "RETRY", "PAYLOAD", "EXTRAS")
    for e in events:
        retry, data = str(e.ev_retry or ""), e.ev_data or "null"
        table.add_row(*_cells(e.ev_id, e.ev_time, e.ev_type, retry, data, _extras(e)))
    console.print(table)
    console.print(f"{plural(len(events), 'event')}, newest first")


def _dead_letter_text(dead: DeadLetter) -> Text:
    fields = [
        ("dead letter", str(dead.dl_id)),
        ("queue id", str(dead.dl_queue_id)),
        ("consumer id", str(dead.dl_consumer_id)),
        ("dead since", _stamp(dead.dl_time)),
        ("reason", dead.dl_reason or "-"),
        ("event", str(dead.ev_id)),
        ("sent", _stamp(dead.ev_time)),
        ("retries", str(dead.ev_retry or 0)),
        ("type", dead.ev_type or "-"),
    ]
    extras = (dead.ev_extra1, dead.ev_extra2, dead.ev_extra3, dead.ev_extra4)
    fields += [(f"extra{i}", v) for i, v in enumerate(extras, 1) if v is not None]
    text = Text()
    for name, value in fields:
        text.append(f"{name + ':':<13}", style="bold").append(f"{value}\n")
    text.append("payload:\n", style="bold").append(_pretty(dead.ev_data))
    return text


@command("dlq")
@click.argument("queue_or_show", metavar="QUEUE | show")
@click.argument("dead_letter_id", metavar="[ID]", type=int, required=False)
@click.option("-n", "--limit", type=click.IntRange(1), default=50, show_default=True,
              help="At most this many dead letters.")  # fmt: skip
@json_option
def dlq_cmd(queue_or_show: str, dead_letter_id: int | None, limit: int, as_json: bool) -> None:
    """List QUEUE's dead letters, newest first; `pgque dlq show ID` shows one in full.

    \b
    pgque dlq orders          the dead letters of queue orders
    pgque dlq show 17         dead letter 17: reason, event, payload
    """
    if dead_letter_id is not None:
        if queue_or_show != "show":
            raise click.UsageError(
                f"unexpected argument {dead_letter_id}: write `pgque dlq QUEUE`"
                f" or `pgque dlq show ID`"
            )
        _show_dead_letter(dead_letter_id, as_json)
        return
    queue = queue_or_show
    with session() as client:
        require_queue(client, queue)
        dead = client.dlq_inspect(queue, limit)
    console = listing(dead, as_json, f"queue {queue!r} has no dead letters")
    if console is None:
        return
    table = _table("ID", "DEAD SINCE", "TYPE", "RETRY", "REASON", "PAYLOAD")
    for d in dead:
        retry, reason, data = str(d.ev_retry or 0), d.dl_reason or "-", d.ev_data or "null"
        table.add_row(*_cells(d.dl_id, d.dl_time, d.ev_type, retry, reason, data))
    console.print(table)
    console.print(
        f"{plural(len(dead), 'dead letter')}, newest first: `pgque dlq show ID` shows one,"
        f" `pgque replay-dlq {queue}` sends them again"
    )


def _show_dead_letter(dead_letter_id: int, as_json: bool) -> None:
    with session() as client:
        dead = client.dead_letter(dead_letter_id)
    if dead is None:
        raise CliError(
            f"no dead letter with id {dead_letter_id}:"
            " `pgque dlq QUEUE` lists the dead letters of a queue",
            ExitCode.NOT_FOUND,
        )
    if as_json:
        emit_json(as_dicts([dead])[0])
    else:
        out().print(_dead_letter_text(dead))


COMMANDS = [events_cmd, dlq_cmd]
