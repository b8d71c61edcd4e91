"""Helpers for the CLI tests: run ``pgque`` in-process (click's runner) or as a process.

``pgque`` gets its database from ``PGQUE_DSN``, as a user's shell would give it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from click.testing import CliRunner

from pgque.cli import cli


@dataclass
class Run:
    """The outcome of one ``pgque`` invocation."""

    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        """stdout parsed as one JSON document."""
        return json.loads(self.stdout)

    def json_lines(self) -> list[Any]:
        """stdout parsed as JSON lines."""
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]


Pgque = Callable[..., Run]


def invoke(*args: str, dsn: str | None = None, input: str | None = None) -> Run:
    """Run ``pgque ARGS`` in-process; ``dsn`` goes into PGQUE_DSN."""
    env = {"PGQUE_DSN": dsn, "COLUMNS": "160"}
    result = CliRunner(env=env).invoke(cli, list(args), input=input, catch_exceptions=False)
    return Run(result.exit_code, result.stdout, result.stderr)


def child_env(dsn: str | None) -> dict[str, str]:
    """The environment of a ``pgque`` child process: PGQUE_DSN set (or removed)."""
    env = {k: v for k, v in os.environ.items() if k != "PGQUE_DSN"}
    if dsn is not None:
        env["PGQUE_DSN"] = dsn
    env["PYTHONUNBUFFERED"] = "1"
    return env


def spawn(*args: str, dsn: str | None) -> subprocess.Popen[str]:
    """Start ``python -m pgque.cli ARGS`` as a child process (text pipes)."""
    return subprocess.Popen(
        [sys.executable, "-m", "pgque.cli", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(dsn),
    )


def one_error_line(run: Run) -> str:
    """The single stderr line of a failed run (fails on a traceback or several lines)."""
    assert "Traceback" not in run.stderr, run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("pgque: "), lines[0]
    return lines[0]


def run(*args: str, dsn: str | None, input: str | None = None, timeout: float = 120) -> Run:
    """Run the real ``pgque ARGS`` command (``python -m pgque.cli``) as a child process."""
    done = subprocess.run(
        [sys.executable, "-m", "pgque.cli", *args],
        input=input,
        capture_output=True,
        text=True,
        env=child_env(dsn),
        timeout=timeout,
        stdin=None if input is not None else subprocess.DEVNULL,
    )
    return Run(done.returncode, done.stdout, done.stderr)
