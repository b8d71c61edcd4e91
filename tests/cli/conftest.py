"""Fixtures for the CLI tests, against a real server (``db`` / ``empty_db``)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
from cli_helpers import Pgque, Run, invoke


@pytest.fixture
def pgque(db: str) -> Pgque:
    """``pgque(*args, dsn=db)``: run the CLI in-process against the test's database."""

    def run(*args: str, dsn: str | None = None, input: str | None = None) -> Run:
        return invoke(*args, dsn=dsn or db, input=input)

    return run


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    """Child processes to kill (by pid) if a test leaves them running."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
