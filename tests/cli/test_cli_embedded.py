"""``pgque demo`` and ``pgque dev``: a throwaway server that leaves nothing behind.

The demo runs as a real process and is interrupted like a user would
(SIGINT is Ctrl-C) or a service manager would (SIGTERM); afterwards no
server process and no data directory may be left.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg
import pytest
from cli_helpers import child_env, spawn

import pgque
from pgque.cli import ExitCode

PG_VERSION = os.environ.get("PGQUE_TEST_PG") or "18"


class Lines:
    """The lines a child process writes to one pipe, readable with a timeout."""

    def __init__(self, stream: object) -> None:
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []

        def pump() -> None:
            for line in stream:  # type: ignore[attr-defined]
                self._lines.put(line)
            self._lines.put(None)

        threading.Thread(target=pump, daemon=True).start()

    def rest(self, timeout: float = 60.0) -> str:
        """Everything up to the end of the output, all of it seen so far included."""
        while True:
            line = self._lines.get(timeout=timeout)
            if line is None:
                return "".join(self.seen)
            self.seen.append(line)

    def until(self, pattern: str, timeout: float = 90.0) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                pytest.fail(f"no line matching {pattern!r} in {timeout} s: {''.join(self.seen)}")
            if line is None:
                pytest.fail(f"output ended before {pattern!r}: {''.join(self.seen)}")
            self.seen.append(line)
            match = re.search(pattern, line)
            if match:
                return match


def server_pids(data_dir: Path) -> list[int]:
    """The postmaster's pid and its children's."""
    postmaster = int((data_dir / "postmaster.pid").read_text().split()[0])
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[1] == str(postmaster):
                children.append(int(entry.name))
    assert children, "a running server has child processes"
    return [postmaster, *children]


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def processes_mentioning(path: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if str(path) in cmdline and int(entry.name) != os.getpid():
                found.append(int(entry.name))
    return found


def assert_nothing_left(data_dir: Path, pids: list[int]) -> None:
    assert not data_dir.parent.exists(), f"{data_dir.parent} was left behind"
    assert [p for p in pids if running(p)] == [], "server processes were left running"
    assert processes_mentioning(data_dir.parent) == []


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_demo_interrupted_leaves_nothing(
    processes: list[subprocess.Popen[str]], sig: signal.Signals
) -> None:
    proc = spawn("demo", "--pg-version", PG_VERSION, "--rate", "40", dsn=None)
    processes.append(proc)
    out = Lines(proc.stdout)
    data_dir = Path(out.until(r"data directory: (\S+)").group(1))
    received = out.until(r"received (\d+)")
    while int(received.group(1)) == 0:
        received = out.until(r"received (\d+)")
    pids = server_pids(data_dir)
    line = out.until(r"p50 ([\d.]+) ms")  # latency is measured
    assert float(line.group(1)) < 5000

    proc.send_signal(sig)
    assert proc.wait(timeout=120) == ExitCode.OK, "".join(out.seen)
    text = out.rest()
    assert "nothing left running" in text
    assert re.search(r"sent \d+, received [1-9]\d*", text)
    assert_nothing_left(data_dir, pids)
    assert proc.stderr is not None
    assert "Traceback" not in proc.stderr.read()


@pytest.mark.slow
def test_demo_stops_by_itself(processes: list[subprocess.Popen[str]]) -> None:
    proc = spawn("demo", "--pg-version", PG_VERSION, "--duration", "3s", "--rate", "100",
                 dsn=None)  # fmt: skip
    processes.append(proc)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == ExitCode.OK, err
    data_dir = Path(re.search(r"data directory: (\S+)", out).group(1))  # type: ignore[union-attr]
    sent, got = map(int, re.search(r"sent (\d+), received (\d+)", out).groups())  # type: ignore[union-attr]
    assert sent >= 100 and got >= sent - 20
    assert_nothing_left(data_dir, [])


def test_demo_in_an_existing_database(db: str, processes: list[subprocess.Popen[str]]) -> None:
    proc = spawn("demo", "--duration", "2s", dsn=db)
    processes.append(proc)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == ExitCode.OK, err
    assert "queue 'pgque_demo'" in out and "dropped queue 'pgque_demo'" in out
    with psycopg.connect(db) as conn:
        assert conn.execute("select count(*) from pgque.queue").fetchone() == (0,)


@pytest.mark.slow
def test_dev_prints_a_working_dsn_and_cleans_up(processes: list[subprocess.Popen[str]]) -> None:
    proc = spawn("dev", "--pg-version", PG_VERSION, "--json", dsn=None)
    processes.append(proc)
    assert proc.stdout is not None
    info = json.loads(proc.stdout.readline())
    assert set(info) == {"dsn", "socket_dsn", "data_dir", "postgresql_version", "pgque_version"}
    assert info["dsn"].startswith("postgresql://postgres@127.0.0.1:")
    data_dir = Path(info["data_dir"])
    for dsn in (info["dsn"], info["socket_dsn"]):
        with psycopg.connect(dsn) as conn:
            assert pgque.installed_version(conn) == info["pgque_version"] == pgque.__version__
    pids = server_pids(data_dir)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == ExitCode.OK
    assert_nothing_left(data_dir, pids)


@pytest.mark.slow
def test_dev_text_output(processes: list[subprocess.Popen[str]]) -> None:
    proc = spawn("dev", "--pg-version", PG_VERSION, "--no-install", dsn=None)
    processes.append(proc)
    out = Lines(proc.stdout)
    data_dir = Path(out.until(r"data directory: (\S+)").group(1))
    dsn = out.until(r"export PGQUE_DSN='(\S+)'").group(1)
    with psycopg.connect(dsn) as conn:
        assert pgque.installed_version(conn) is None
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=120) == ExitCode.OK
    assert_nothing_left(data_dir, [])


@pytest.mark.slow
def test_demo_says_what_it_creates_and_what_it_keeps(
    processes: list[subprocess.Popen[str]],
) -> None:
    """Issue 34, item 8: run as root the demo named neither the OS user it runs the
    server as nor the initdb cache it left in $TMPDIR ("nothing left")."""
    tmpdir = Path(tempfile.mkdtemp(prefix="pgque-test-tmpdir-"))
    tmpdir.chmod(0o755)  # the server's unprivileged user works in it under root
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pgque.cli", "demo", "--pg-version", PG_VERSION,
             "--duration", "1s", "--no-web"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=child_env(None) | {"TMPDIR": str(tmpdir)},
        )  # fmt: skip
        processes.append(proc)
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == ExitCode.OK, err
        lines = out.splitlines()
        as_root = [line for line in lines if "refuses to run as root" in line]
        if os.geteuid() == 0:
            assert as_root == [
                "PostgreSQL refuses to run as root: the server runs as OS user 'pgque_pg'"
                " (an existing user)"  # the suite's own servers created it already
            ], out
        else:
            assert as_root == [], out
        kept = [line for line in lines if line.startswith("kept for a faster next start: ")]
        assert len(kept) == 1, out
        left = sorted(str(path) for path in tmpdir.iterdir())
        assert left, "the initdb cache is kept"
        named = re.match(r"kept for a faster next start: (.*) \((\d+) MB\); `rm -rf (.*)`", kept[0])
        assert named is not None, kept[0]
        assert sorted(named[1].split()) == left == sorted(named[3].split())
        assert int(named[2]) > 0
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
