"""Bad input: one line on stderr saying what to do, its own exit code, no traceback."""

from __future__ import annotations

import socket
import subprocess
import sys

import psycopg
import pytest
from cli_helpers import Pgque, child_env, invoke, one_error_line

from pgque.cli import ExitCode


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_server_down() -> None:
    run = invoke("status", dsn=f"postgresql://postgres@127.0.0.1:{free_port()}/postgres")
    assert run.code == ExitCode.CONNECTION
    line = one_error_line(run)
    assert "cannot connect" in line and "PGQUE_DSN" in line


def test_unparsable_dsn() -> None:
    run = invoke("queues", dsn="this is no dsn")
    assert run.code == ExitCode.USAGE
    assert "invalid DSN" in one_error_line(run)


def test_wrong_database(db: str) -> None:
    wrong = psycopg.conninfo.make_conninfo(db, dbname="no_such_database_here")
    run = invoke("status", dsn=wrong)
    assert run.code == ExitCode.CONNECTION
    assert "no_such_database_here" in one_error_line(run)


def test_dsn_option_beats_environment(db: str, empty_db: str) -> None:
    run = invoke("--dsn", db, "queues", "--json", dsn=empty_db)
    assert run.code == ExitCode.OK, run.stderr
    assert run.json() == []


@pytest.mark.parametrize(
    "args",
    [("status",), ("queues",), ("consumers",), ("depth", "q"), ("send", "q", "{}"), ("ticker",)],
)
def test_not_installed(empty_db: str, args: tuple[str, ...]) -> None:
    run = invoke(*args, dsn=empty_db)
    assert run.code == ExitCode.NOT_INSTALLED
    assert "pgque install" in one_error_line(run)


@pytest.mark.parametrize(
    "args",
    [
        ("depth", "nope"),
        ("drain", "nope", "--timeout", "1s"),
        ("consumers", "nope"),
        ("drop-queue", "nope"),
        ("pause", "nope"),
        ("resume", "nope"),
        ("replay-dlq", "nope"),
        ("purge-dlq", "nope"),
        ("send", "nope", "{}"),
        ("tail", "nope"),
    ],
)
def test_unknown_queue(pgque: Pgque, args: tuple[str, ...]) -> None:
    run = pgque(*args)
    assert run.code == ExitCode.NOT_FOUND, run.stderr
    assert "pgque queues" in one_error_line(run)


def test_drop_queue_with_consumers_needs_force(pgque: Pgque, conn: psycopg.Connection) -> None:
    conn.execute("select pgque.create_queue('q')")
    conn.execute("select pgque.subscribe('q', 'c')")
    run = pgque("drop-queue", "q")
    assert run.code == ExitCode.REFUSED
    assert "--force" in one_error_line(run)
    assert conn.execute("select count(*) from pgque.queue").fetchone() == (1,)


@pytest.mark.parametrize(
    "args",
    [
        ("create-queue", "q", "--option", "max_retries"),
        ("create-queue", "q", "-o", "=3"),
        ("depth", "q", "--watch", "5 parsecs"),
        ("drain", "q", "--timeout", "1x"),
        ("purge-dlq", "q", "--older-than", "soon"),
        ("tail", "q", "--timeout", "-"),
        ("no-such-command",),
        ("depth",),
    ],
)
def test_usage_errors(pgque: Pgque, args: tuple[str, ...]) -> None:
    run = pgque(*args)
    assert run.code == ExitCode.USAGE
    assert "--help" in one_error_line(run)


def test_refused_option_value(pgque: Pgque) -> None:
    run = pgque("create-queue", "q", "-o", "max_retries=-1")
    assert run.code == ExitCode.USAGE
    assert "max_retries" in one_error_line(run)
    assert pgque("queues", "--json").json() == []  # nothing created


def test_debug_shows_the_traceback(pgque: Pgque, conn: psycopg.Connection) -> None:
    conn.execute("select pgque.create_queue('q')")
    conn.execute("select pgque.subscribe('q', 'c')")
    run = pgque("--debug", "drop-queue", "q")
    assert run.code == ExitCode.REFUSED
    assert "Traceback" in run.stderr
    assert run.stderr.rstrip().splitlines()[-1].startswith("pgque: error:")


def test_console_script_exit_codes(empty_db: str) -> None:
    """The real entry point (not click's test runner): exit code and one stderr line."""
    proc = subprocess.run(
        [sys.executable, "-m", "pgque.cli", "status"],
        capture_output=True,
        text=True,
        env=child_env(empty_db),
        timeout=60,
    )
    assert proc.returncode == ExitCode.NOT_INSTALLED
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("pgque: error:")
