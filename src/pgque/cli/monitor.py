"""``status``, ``queues``, ``consumers``, ``depth``, ``drain``: reading pgque's health.

All figures come from pgque's observability functions (``status()``,
``queue_stats()``, ``consumer_stats()``, ``queue_health()``); nothing here writes.
A queue where nothing waits is healthy however old its last tick (the
``ticker_running`` rule of ``queue_health()``).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Sequence
from typing import Any

import click
import psycopg
from rich.console import Group
from rich.live import Live
from rich.padding import Padding
from rich.progress import Progress, ProgressColumn, Task, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from pgque._executor import fetch_one
from pgque.cli._command import command, json_option
from pgque.cli._errors import CliError, ExitCode
from pgque.cli._output import (
    as_dicts,
    emit_json,
    err,
    format_rate,
    format_seconds,
    out,
    plural,
    seconds,
    styled,
)
from pgque.cli._session import require_installed, require_queue, session
from pgque.cli._types import Duration
from pgque.client import PgqueClient
from pgque.errors import PgqueError
from pgque.monitoring import HealthCheck, TickerLease, read_snapshot, read_ticker_lease

__all__ = ["COMMANDS", "collect_status", "render_status", "sparkline"]

_SPARKS = "▁▂▃▄▅▆▇█"


# -- gathering ------------------------------------------------------------------------


def _health_rows(checks: Sequence[HealthCheck]) -> list[dict[str, Any]]:
    """``queue_health()``'s checks as ``pgque status --json`` prints them."""
    return [{"queue_name": c.queue, "check_name": c.name, "status": c.status, "detail": c.detail}
            for c in checks]  # fmt: skip


def collect_status(client: PgqueClient) -> dict[str, Any]:
    """Everything ``pgque status`` shows, as one JSON-ready dict."""
    conn = client.conn
    version = require_installed(conn)
    server = conn.info.parameter_status("server_version")
    cron = fetch_one(conn, "pg_cron_version")
    try:
        components = as_dicts(client.status())
    except PgqueError as error:
        if error.sqlstate != "42501":
            raise
        components = []  # status() is for admins; the rest is readable by pgque_reader
    snapshot = read_snapshot(client)
    scheduler = next((c for c in components if c["component"] == "scheduler"), None)
    tick_period = fetch_one(conn, "tick_period_ms")
    lease = _ticker_lease(conn)
    return {
        "pgque_version": version,
        "postgresql_version": server.split()[0] if server else None,
        "pg_cron_version": cron[0] if cron else None,
        "database": conn.info.dbname,
        "scheduler": scheduler["status"] if scheduler else None,
        "tick_period_ms": tick_period[0] if tick_period else None,
        "ticker_leader": None if lease is None or lease.leader is None
        else lease.leader.as_json(),
        "server_time": None if lease is None else lease.now,
        "components": components,
        "queues": [q.as_json() for q in snapshot.queue_health()],
        "consumers": [c.as_json() for c in snapshot.consumer_health()],
        "health": _health_rows(snapshot.checks),
        "worst": snapshot.status.text,
    }  # fmt: skip


def _ticker_lease(conn: psycopg.Connection[Any]) -> TickerLease | None:
    """Who leads ticking and the server's clock; None when it cannot be read."""
    try:
        return read_ticker_lease(conn)
    except PgqueError:  # an older pgque, or a role that may not read it
        return None


def ticking_text(leader: dict[str, Any] | None, now: dt.datetime | None) -> str:
    """Who leads ticking, in words: the lease holder, or that nobody leads."""
    if leader is None:
        return (
            "nobody leads: no Ticker, `pgque ticker` or scheduled ticker loop holds"
            " the ticker lease"
        )
    who = f"{leader['application_name'] or 'a session without application_name'}"
    where = f", from {leader['client_addr']}" if leader["client_addr"] else ""
    who += f" (pid {leader['pid']}{where})"
    since = leader["since"].isoformat(sep=" ", timespec="seconds") if leader["since"] else "?"
    renewed = leader["renewed"]
    ago = f"{format_seconds(now - renewed)} ago" if now and renewed else "?"
    if leader["active"]:
        return f"led by {who} since {since}, lease renewed {ago}"
    return (
        f"nobody leads: {who} led from {since}, lease last renewed {ago} (expired or"
        " resigned); run `pgque ticker`, a Consumer's in-process ticker, or `pgque start`"
    )


# -- rendering ------------------------------------------------------------------------


def _table(*headers: str, right: tuple[str, ...] = ()) -> Table:
    table = Table(box=None, pad_edge=False, padding=(0, 2, 0, 0), header_style="bold")
    for header in headers:
        table.add_column(header, justify="right" if header in right else "left", no_wrap=True)
    return table


def queues_table(rows: list[dict[str, Any]]) -> Table:
    """The queues as a table: depth, rate, rotation, consumers, dead letters, health."""
    table = _table(
        "NAME", "DEPTH", "OLDEST", "RATE", "ROTATION", "CONSUMERS", "DLQ", "TICKS", "HEALTH",
        right=("DEPTH", "OLDEST", "RATE", "CONSUMERS", "DLQ"),
    )  # fmt: skip
    for row in rows:
        rotation = format_seconds(row["rotation_age"])
        table.add_row(
            row["queue_name"],
            str(row["depth"]),
            format_seconds(row["oldest_msg_age"]),
            format_rate(row["events_per_sec"]),
            f"{rotation} ago" if rotation != "-" else "-",
            str(row["consumers"]),
            str(row["dlq_count"]),
            "paused" if row["ticker_paused"] else "running",
            styled(row["health"]),
        )
    return table


def consumers_table(rows: list[dict[str, Any]]) -> Table:
    """The consumers as a table: lag, pending events, open batch, status."""
    table = _table(
        "QUEUE", "CONSUMER", "LAG", "PENDING", "LAST ACTIVE", "BATCH", "STATUS",
        right=("LAG", "PENDING", "LAST ACTIVE"),
    )  # fmt: skip
    now = dt.datetime.now(dt.timezone.utc)
    for row in rows:
        active = row["last_batch_start"]
        table.add_row(
            row["queue_name"],
            row["consumer_name"],
            format_seconds(row["lag"]),
            str(row["pending_events"]),
            f"{format_seconds(now - active)} ago" if active is not None else "never",
            str(row["batch_id"]) if row["batch_active"] else "-",
            styled(row["status"]),
        )
    return table


def _check_line(row: dict[str, Any]) -> Text:
    return Text.assemble(
        styled(row["status"]), f"  {row['queue_name']}/{row['check_name']}: ", str(row["detail"])
    )


def render_status(data: dict[str, Any]) -> Group:
    """The text of ``pgque status``: versions, scheduler and jobs, queues, consumers, health."""
    cron = data["pg_cron_version"]
    header = Text.assemble(
        (f"pgque {data['pgque_version']}", "bold"),
        f" | PostgreSQL {data['postgresql_version']}"
        f" | {'pg_cron ' + cron if cron else 'no pg_cron'} | database {data['database']}",
    )
    system = Table(box=None, pad_edge=False, padding=(0, 2, 0, 0), show_header=False)
    system.add_column(no_wrap=True)
    system.add_column(no_wrap=True)
    system.add_column(overflow="fold")
    period = data["tick_period_ms"]
    system.add_row(
        "Scheduler:",
        data["scheduler"] or "-",
        f"tick period {period} ms" if period is not None else "",
    )
    checks = {(r["queue_name"], r["check_name"]): r for r in data["health"]}
    system.add_row("Ticking:", ticking_text(data["ticker_leader"], data["server_time"]), "")
    for label, name in (("Ticker:", "pg_cron_ticker"), ("Maintenance:", "pg_cron_maint")):
        row = checks.get(("system", name))
        if row is not None:
            system.add_row(label, styled(row["status"]), str(row["detail"]))
    parts: list[Any] = [header, Text("System:"), Padding(system, (0, 0, 0, 2), expand=False)]
    parts.append(Text(f"Queues: {len(data['queues'])}"))
    if data["queues"]:
        parts.append(Padding(queues_table(data["queues"]), (0, 0, 0, 2), expand=False))
    parts.append(Text(f"Consumers: {len(data['consumers'])}"))
    if data["consumers"]:
        parts.append(Padding(consumers_table(data["consumers"]), (0, 0, 0, 2), expand=False))
    problems = [r for r in data["health"] if r["status"] != "ok"]
    summary = styled(data["worst"])
    parts.append(
        Text.assemble(
            "Health: ", summary, f" ({len(data['health'])} checks, {len(problems)} not ok)"
        )
    )
    # The system rows are shown under System already.
    parts.extend(
        Padding(_check_line(r), (0, 0, 0, 2), expand=False)
        for r in problems
        if r["queue_name"] != "system"
    )
    return Group(*parts)


def sparkline(values: list[float], width: int) -> str:
    """The last ``width`` values as a line of block characters, scaled from 0 to the maximum."""
    shown = values[-width:]
    top = max(shown, default=0)
    if top <= 0:
        return _SPARKS[0] * len(shown)
    return "".join(_SPARKS[min(int(v / top * (len(_SPARKS) - 1) + 0.5), 7)] for v in shown)


# -- commands -------------------------------------------------------------------------


@command("status")
@click.option(
    "--fail-on",
    type=click.Choice(["critical", "warning"]),
    default="critical",
    show_default=True,
    help="Exit 7 (unhealthy) when a health check is this bad or worse.",
)
@json_option
def status_cmd(fail_on: str, as_json: bool) -> None:
    """Show versions, scheduler and jobs, queues, consumers and health.

    Exits 7 when a check is critical (or a warning, with --fail-on warning),
    so it serves as a probe.
    """
    with session(need_install=False) as client:
        data = collect_status(client)
    data["healthy"] = not (
        data["worst"] == "critical" or (fail_on == "warning" and data["worst"] == "warning")
    )
    if as_json:
        emit_json(data)
    else:
        out().print(render_status(data))
    if not data["healthy"]:
        raise click.exceptions.Exit(ExitCode.UNHEALTHY)


@command("queues")
@json_option
def queues_cmd(as_json: bool) -> None:
    """List every queue with depth, rate, rotation, consumers, dead letters and health."""
    with session() as client:
        rows = [q.as_json() for q in read_snapshot(client).queue_health()]
    if as_json:
        emit_json(rows)
    elif not rows:
        out().print("no queues: create one with `pgque create-queue NAME`")
    else:
        out().print(queues_table(rows))


@command("consumers")
@click.argument("queue", required=False)
@json_option
def consumers_cmd(queue: str | None, as_json: bool) -> None:
    """List the consumers (of QUEUE, or of all queues) with lag, pending events and status."""
    with session() as client:
        if queue is not None:
            require_queue(client, queue)
        rows = [c.as_json() for c in read_snapshot(client, queue).consumer_health()]
    if as_json:
        emit_json(rows)
    elif not rows:
        out().print("no consumers" + (f" on queue {queue!r}" if queue else ""))
    else:
        out().print(consumers_table(rows))


def _sample(client: PgqueClient, queue: str) -> dict[str, Any]:
    row = fetch_one(client.conn, "queue_sample", (queue,))
    if row is None:
        raise CliError(
            f"no queue named {queue!r}: `pgque queues` lists the queues", ExitCode.NOT_FOUND
        )
    depth, rate, oldest, consumers, now = row
    return {
        "queue": queue,
        "time": now,
        "depth": depth,
        "events_per_sec": rate,
        "oldest_msg_age": seconds(oldest),
        "consumers": consumers,
    }


@command("depth")
@click.argument("queue")
@click.option("--watch", type=Duration(minimum=0.1), default=None,
              help="Sample every DURATION (e.g. 5s; at least 100ms).")  # fmt: skip
@click.option("--count", type=click.IntRange(1), default=None, help="Stop after N samples.")
@click.option("--width", type=click.IntRange(5, 200), default=60, show_default=True,
              help="Samples shown in the sparkline.")  # fmt: skip
@json_option
def depth_cmd(
    queue: str, watch: float | None, count: int | None, width: int, as_json: bool
) -> None:
    """Show QUEUE's depth; with --watch, a sparkline of it over time until Ctrl-C.

    Depth counts the events its slowest consumer has not finished. With
    --json each sample is one line of JSON.
    """
    with session() as client:
        require_queue(client, queue)
        if watch is None:
            sample = _sample(client, queue)
            if as_json:
                emit_json(sample)
            else:
                out().print(f"{queue}: depth {sample['depth']}")
            return
        history: list[float] = []
        console = out()
        live = None if as_json else Live(console=console, auto_refresh=False, transient=False)
        taken = 0
        try:
            if live is not None:
                live.start()
            while True:
                sample = _sample(client, queue)
                taken += 1
                history.append(float(sample["depth"]))
                if as_json:
                    emit_json(sample, lines=True)
                else:
                    line = _depth_line(queue, history, sample, width)
                    if console.is_terminal and live is not None:
                        live.update(line, refresh=True)
                    else:
                        console.print(line)
                if count is not None and taken >= count:
                    break
                time.sleep(watch)
        except KeyboardInterrupt:
            pass
        finally:
            if live is not None:
                live.stop()


def _depth_line(queue: str, history: list[float], sample: dict[str, Any], width: int) -> Text:
    shown = history[-width:]
    return Text.assemble(
        (f"{queue} ", "bold"),
        ("depth ", ""),
        (f"{sample['depth']:>7} ", "bold"),
        (sparkline(history, width), "cyan"),
        f"  min {min(shown):.0f} max {max(shown):.0f}",
        f"  rate {format_rate(sample['events_per_sec'])}",
        f"  oldest {format_seconds(sample['oldest_msg_age'])}",
    )


class DrainBar(ProgressColumn):
    """The drained share as a bar that is full only once nothing is left (no colour needed)."""

    def __init__(self, width: int = 30) -> None:
        super().__init__()
        self.width = width

    def render(self, task: Task) -> Text:
        """``████░░░░``: done cells, then the rest; never all done while depth > 0."""
        total = task.total or 0
        left = int(task.fields.get("depth", 0))
        share = task.completed / total if total > 0 else 1.0
        done = int(self.width * min(max(share, 0.0), 1.0))
        if left > 0:
            done = min(done, self.width - 1)
        return Text.assemble(("█" * done, "green"), ("░" * (self.width - done), "dim"))


@command("drain")
@click.argument("queue")
@click.option("--timeout", type=Duration(), default=60.0, show_default=True,
              help="Give up after this long (exit 8).")  # fmt: skip
@click.option("--interval", type=Duration(minimum=0.1), default=0.5, show_default=True,
              help="How often to look (at least 100ms).")  # fmt: skip
@json_option
def drain_cmd(queue: str, timeout: float, interval: float, as_json: bool) -> None:
    """Wait until QUEUE is empty (every consumer caught up), showing progress.

    Exits 0 once the depth is 0, or 8 when the timeout passes first.
    """
    started = time.monotonic()
    with session() as client:
        require_queue(client, queue)
        sample = _sample(client, queue)
        initial = max(int(sample["depth"]), 1)
        progress = Progress(
            TextColumn("draining " + queue.replace("{", "{{").replace("}", "}}"), markup=False),
            DrainBar(),
            TextColumn("{task.fields[depth]} left", markup=False),
            TimeElapsedColumn(),
            console=err(),
            transient=True,
            disable=as_json,
        )
        with progress:
            task = progress.add_task("drain", total=initial, depth=sample["depth"])
            while sample["depth"] > 0 and time.monotonic() - started < timeout:
                time.sleep(min(interval, max(timeout - (time.monotonic() - started), 0.01)))
                sample = _sample(client, queue)
                initial = max(initial, int(sample["depth"]))
                progress.update(
                    task, total=initial, completed=initial - sample["depth"], depth=sample["depth"]
                )
    waited = round(time.monotonic() - started, 3)
    drained = sample["depth"] == 0
    if as_json:
        emit_json({"queue": queue, "drained": drained, "depth": sample["depth"],
                   "waited_seconds": waited})  # fmt: skip
    if not drained:
        raise CliError(
            f"queue {queue!r} still holds {plural(sample['depth'], 'event')} after {timeout:g} s:"
            f" check `pgque consumers {queue}` and that a ticker runs (`pgque status`)",
            ExitCode.TIMEOUT,
        )
    if not as_json:
        out().print(f"queue {queue!r} is drained ({waited:.1f} s)")


COMMANDS = [status_cmd, queues_cmd, consumers_cmd, depth_cmd, drain_cmd]
