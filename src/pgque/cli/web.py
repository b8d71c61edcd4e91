"""``web``: serve the web console (the ``web`` extra) on this database."""

from __future__ import annotations

from typing import Any

import click

from pgque.cli._command import command, settings
from pgque.cli._errors import CliError, ExitCode
from pgque.cli._output import err, out
from pgque.cli._session import connect, require_installed

__all__ = ["COMMANDS", "WEB_EXTRA_HINT", "start_demo_console", "web_available"]

WEB_EXTRA_HINT = "the web console needs the web extra: from the pgque clone, pip install '.[web]'"


def web_available() -> bool:
    """Whether the ``web`` extra's packages are importable."""
    try:
        import jinja2  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        return False
    return True


@command("web")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on (anything but loopback needs --user/--password).",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="TCP port (0: any free one).",
)
@click.option(
    "--allow-writes",
    is_flag=True,
    help="Offer pause/resume and dead-letter replay/purge (the role must allow them).",
)
@click.option(
    "--user",
    envvar="PGQUE_WEB_USER",
    default=None,
    help="Basic-auth user: every request needs it [env: PGQUE_WEB_USER].",
)
@click.option("--password", envvar="PGQUE_WEB_PASSWORD", default=None,
              help="Basic-auth password [env: PGQUE_WEB_PASSWORD].")  # fmt: skip
@click.option("--lag-warning", default="5m", show_default=True,
              help="A consumer with pending events this far behind gets a warning badge"
                   " (a duration: 90s, 5m, 1h).")  # fmt: skip
def web_cmd(
    host: str, port: int, allow_writes: bool, user: str | None, password: str | None,
    lag_warning: str,
) -> None:  # fmt: skip
    """Serve the web console: queues, consumers, events, dead letters, /healthz, /metrics.

    Read-only unless --allow-writes; the database role bounds what it can do
    (a pgque_reader sees no write buttons). Ctrl-C stops it.
    """
    if not web_available():
        raise CliError(WEB_EXTRA_HINT, ExitCode.USAGE)
    if bool(user) != bool(password):
        raise CliError(
            "give both --user and --password (or PGQUE_WEB_USER and PGQUE_WEB_PASSWORD)",
            ExitCode.USAGE,
        )
    from pgque.errors import PgqueInvalidArgument
    from pgque.web import ConsoleSettings, loopback_hosts, serve
    from pgque.web.formatting import duration_seconds
    from pgque.web.server import bind, url_of

    try:
        lag_seconds = duration_seconds(lag_warning, "--lag-warning")
    except PgqueInvalidArgument as exc:
        raise CliError(str(exc), ExitCode.USAGE) from None
    if lag_seconds <= 0:
        raise CliError(f"--lag-warning must be more than 0, got {lag_warning!r}", ExitCode.USAGE)

    conn = connect()
    try:
        version = require_installed(conn)
        dbname = conn.info.dbname
    finally:
        conn.close()
    try:
        sock = bind(host, port)
    except OSError as exc:
        raise CliError(
            f"cannot listen on {host}:{port} ({exc.strerror or exc}): pick another --port",
            ExitCode.FAILURE,
        ) from exc
    console = ConsoleSettings(
        dsn=settings().dsn or "", allow_writes=allow_writes, user=user, password=password,
        allowed_hosts=loopback_hosts(host), lag_warning=lag_seconds,
    )  # fmt: skip
    if console.allowed_hosts is None and not console.auth_required:
        err().print(f"warning: listening on {host} without --user/--password: anyone who"
                    " reaches this address sees the console")  # fmt: skip
    mode = "writes allowed" if allow_writes else "read-only"
    out().print(
        f"pgque {version} console for database {dbname!r} ({mode}): {url_of(sock)}", soft_wrap=True
    )
    out().file.flush()
    serve(console, sock)


def start_demo_console(dsn: str, *, allow_writes: bool) -> Any:
    """``pgque demo``'s console: served from a thread on 127.0.0.1 (port 8765, else any
    free one), its address printed; None, with the install hint, without the extra."""
    if not web_available():
        err().print(f"no web console: {WEB_EXTRA_HINT}")
        return None
    from pgque.web import ConsoleSettings, loopback_hosts, start_in_thread

    console = ConsoleSettings(
        dsn=dsn, allow_writes=allow_writes, allowed_hosts=loopback_hosts("127.0.0.1")
    )
    try:
        running = start_in_thread(console, port=8765)
    except OSError:
        running = start_in_thread(console, port=0)
    out().print(f"web console: {running.url}", soft_wrap=True)
    return running


COMMANDS = [web_cmd]
