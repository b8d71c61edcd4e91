"""``pgque web``: the install hint without the extra, option checks, and serving."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from typing import Any

from web_helpers import seed_queue


def _pgque(*args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pgque.cli", *args],
        capture_output=True, text=True, timeout=60, **kwargs,
    )  # fmt: skip


def test_without_the_extra_it_names_the_install_line() -> None:
    code = "import sys; sys.modules['starlette'] = None; from pgque.cli import main; main(['web'])"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "pip install '.[web]'" in result.stderr
    assert "pgque[" not in result.stderr


def test_user_needs_a_password(db: str) -> None:
    result = _pgque("-d", db, "web", "--user", "ops", env={**os.environ, "PGQUE_WEB_PASSWORD": ""})
    assert result.returncode == 2 and "--password" in result.stderr


def test_serves_the_console_and_prints_its_address(db: str, conn: Any) -> None:
    seed_queue(conn, "orders")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pgque.cli", "-d", db, "web", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "read-only" in line and "http://127.0.0.1:" in line, line
        url = line.rsplit(" ", 1)[1].strip()
        with urllib.request.urlopen(url + "api/queues", timeout=10) as response:
            body = json.load(response)
        assert [q["queue_name"] for q in body["queues"]] == ["orders"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_lag_warning_is_an_option(db: str, conn: Any) -> None:
    seed_queue(conn, "orders")
    bad = _pgque("-d", db, "web", "--lag-warning", "soon")
    assert bad.returncode == 2 and "--lag-warning" in bad.stderr
    proc = subprocess.Popen(
        [sys.executable, "-m", "pgque.cli", "-d", db, "web", "--port", "0", "--lag-warning", "90s"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().rsplit(" ", 1)[1].strip()
        with urllib.request.urlopen(url + "api/queues/orders", timeout=10) as response:
            assert json.load(response)["lag_warning"] == 90
    finally:
        proc.terminate()
        proc.wait(timeout=30)
