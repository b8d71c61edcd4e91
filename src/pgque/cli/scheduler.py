"""``start``, ``stop`` (the pg_cron / pg_timetable jobs) and ``ticker`` (the service)."""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import click

from pgque.cli._command import command, json_option, settings
from pgque.cli._errors import CliError, ExitCode
from pgque.cli._output import as_dicts, emit_json, out
from pgque.cli._session import session
from pgque.cli._types import Duration
from pgque.client import PgqueClient
from pgque.ticker import Ticker

__all__ = ["COMMANDS"]

log = logging.getLogger("pgque.cli.ticker")

F = TypeVar("F", bound=Callable[..., Any])


def _scheduler_rows(client: PgqueClient) -> list[dict[str, Any]]:
    return [r for r in as_dicts(client.status())
            if r["component"] in ("scheduler", "ticker", "maintenance")]  # fmt: skip


@command("start")
@click.option(
    "--timetable",
    "ticks_per_second",
    type=click.IntRange(1, 1000),
    default=None,
    help="Schedule with pg_timetable at this many ticks per second instead of pg_cron.",
)
@json_option
def start_cmd(ticks_per_second: int | None, as_json: bool) -> None:
    """Schedule the ticker and maintenance jobs in pg_cron (pgque.start()).

    Without pg_cron in this database, run `pgque ticker` instead.
    """
    with session() as client:
        if ticks_per_second is None:
            client.start_scheduler()
        else:
            client.start_timetable(ticks_per_second)
        rows = _scheduler_rows(client)
    if as_json:
        emit_json({"action": "start", "status": rows})
        return
    for row in rows:
        out().print(f"{row['component']}: {row['status']} ({row['detail']})")


@command("stop")
@json_option
def stop_cmd(as_json: bool) -> None:
    """Remove pgque's scheduler jobs (pgque.stop()); harmless when none exist."""
    with session() as client:
        client.stop_scheduler()
        rows = _scheduler_rows(client)
    if as_json:
        emit_json({"action": "stop", "status": rows})
        return
    out().print("pgque scheduler jobs removed: nothing ticks until `pgque start` or a ticker runs")


def _seconds(flag: str, default: float, help: str) -> Callable[[F], F]:
    """A duration option of the ticker (seconds, or ``500ms``, ``2m``...), its default shown."""
    return click.option(flag, type=Duration(), default=default, show_default=True, help=help)


@command("ticker")
@_seconds("--poll-interval", 0.001, "Seconds between polls of the queues' event sequences.")
@_seconds("--max-wait", 0.005, "How long a tick may wait for a busy consumer's batch to grow.")
@_seconds("--maint-interval", 30.0, "Seconds between maint() + VACUUM rounds.")
@click.option(
    "--pooler",
    is_flag=True,
    help="The DSN goes through a transaction-mode pooler (PgBouncer, Supavisor, RDS Proxy):"
    " no prepared statements, no session settings, no LISTEN (docs/operations.md, Poolers).",
)
def ticker_cmd(poll_interval: float, max_wait: float, maint_interval: float, pooler: bool) -> None:
    """Run the ticker service in the foreground (for servers without pg_cron).

    Ticks, moves retries and delayed messages, runs maint() and VACUUMs
    pgque's tables (the SDK's pgque.Ticker). Any number may run: they share
    the per-database ticker lease (pgque.ticker_lead) with ticker_loop() and
    the consumers' tickers, so one leads and the others stand by; a leader
    that vanishes is replaced within lease + standby interval (4 s).
    Leadership changes are logged on stderr; SIGTERM or Ctrl-C stops it
    cleanly.
    """
    logging.basicConfig(
        level=logging.DEBUG if settings().debug else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    with session() as client:
        database = client.conn.info.dbname
    ticker = Ticker(
        settings().dsn or "",
        poll_interval=poll_interval,
        max_wait=max_wait,
        maint_interval=maint_interval,
        pooler=pooler,
    )
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        log.info("signal %s: stopping", signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    log.info("pgque ticker for database %r starting", database)
    thread = threading.Thread(target=ticker.run, name="pgque-ticker", daemon=True)
    thread.start()
    started = time.monotonic()
    leading: bool | None = None
    try:
        while not stop.wait(0.25):
            if not thread.is_alive():
                if ticker.failure is not None:
                    raise CliError(f"the ticker stopped: {ticker.failure}", ExitCode.FAILURE)
                raise CliError(
                    "the ticker stopped: this role may not tick (grant it pgque_admin)",
                    ExitCode.FAILURE,
                )
            now_leading = ticker.leading
            if now_leading == leading:
                continue
            if now_leading:
                log.info("leader: this process ticks database %r", database)
            elif leading or time.monotonic() - started > 1.5:
                log.info("standing by: another ticker holds the lease")
            else:
                continue  # still connecting: not known yet
            leading = now_leading
    finally:
        ticker.stop()
        thread.join(timeout=10)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    log.info("pgque ticker stopped")


COMMANDS = [start_cmd, stop_cmd, ticker_cmd]
