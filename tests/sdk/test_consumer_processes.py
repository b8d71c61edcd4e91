"""Consumers as real processes (both twins): killed mid-batch, two of one name, signals."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from _engine import one
from _wait import wait_for

SCRIPT = Path(__file__).with_name("consumer_process.py")
SRC = Path(__file__).resolve().parents[2] / "src"


def default_sigint() -> None:
    """In the child: SIGINT handled as in a terminal, whoever started the suite. A job
    a non-interactive shell put in the background inherits SIGINT ignored, and a
    Python process then leaves it ignored (so no Ctrl-C could reach the consumer)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def spawn(
    tmp_path: Path, kind: str
) -> Iterator[Callable[..., tuple[subprocess.Popen[bytes], Path]]]:
    """Start consumer processes of the test's kind (``spawn(dsn, sleep)``); killed at teardown."""
    procs: list[subprocess.Popen[bytes]] = []

    def spawn(dsn: str, sleep: float, *extra: str) -> tuple[subprocess.Popen[bytes], Path]:
        log = tmp_path / f"log{len(procs)}"
        log.touch()
        env = {"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"}
        proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), dsn, str(log), str(sleep), kind, *extra], env=env,
            preexec_fn=default_sigint,
        )  # fmt: skip
        procs.append(proc)
        return proc, log

    yield spawn
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def lines(log: Path) -> list[str]:
    return log.read_text().splitlines()


def send_and_tick(conn: psycopg.Connection[Any], n: int) -> None:
    for i in range(n):
        one(conn, "select pgque.send('q', %s::jsonb)", str(i))
    one(conn, "select pgque.force_next_tick('q')")
    one(conn, "select pgque.ticker('q')")


def test_sigkilled_consumer_gets_its_batch_again(
    db: str, conn: psycopg.Connection[Any], queue: str, spawn: Any
) -> None:
    send_and_tick(conn, 2)
    proc, log = spawn(db, 30)
    wait_for(lambda: len(lines(log)) >= 1, timeout=20)  # its handler is busy with the first message
    first = lines(log)[0]
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    # The server rolls the batch back when the connection goes.
    wait_for(lambda: one(conn, "select sub_batch is null from pgque.subscription"), timeout=20)
    assert one(conn, "select sub_last_tick from pgque.subscription") == 1
    _, log2 = spawn(db, 0)
    wait_for(lambda: len([x for x in lines(log2) if x.startswith("done")]) == 2, timeout=20)
    assert lines(log2)[0] == first  # the same message first, in a new process
    wait_for(lambda: one(conn, "select sub_last_tick from pgque.subscription") == 2, timeout=20)


def test_two_processes_of_one_name_never_share_a_batch(
    db: str, conn: psycopg.Connection[Any], queue: str, spawn: Any
) -> None:
    (_, log_a), (_, log_b) = spawn(db, 0.05), spawn(db, 0.05)
    for _ in range(10):
        send_and_tick(conn, 2)
    wait_for(lambda: one(conn, "select sub_last_tick from pgque.subscription") == 11, timeout=40)
    done = [x for x in lines(log_a) + lines(log_b) if x.startswith("done")]
    assert len(done) == len(set(done)) == 20


def test_signals_drain_then_roll_back(
    db: str, conn: psycopg.Connection[Any], queue: str, spawn: Any
) -> None:
    send_and_tick(conn, 3)
    proc, log = spawn(db, 1.0)
    wait_for(lambda: len(lines(log)) >= 1, timeout=20)
    proc.send_signal(signal.SIGTERM)  # first: finish the batch, then stop
    assert proc.wait(20) == 0
    assert len([x for x in lines(log) if x.startswith("done")]) == 3
    assert one(conn, "select sub_last_tick from pgque.subscription") == 2

    send_and_tick(conn, 3)
    proc, log = spawn(db, 5.0)
    wait_for(lambda: len(lines(log)) >= 1, timeout=20)
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)  # two signals sent at once would merge into one in the kernel
    proc.send_signal(signal.SIGTERM)  # second: stop now, the handler interrupted
    assert proc.wait(20) == 0
    assert len([x for x in lines(log) if x.startswith("done")]) == 0
    wait_for(lambda: one(conn, "select sub_batch is null from pgque.subscription"), timeout=20)
    assert one(conn, "select sub_last_tick from pgque.subscription") == 2  # redelivered later


def test_ctrl_c_says_what_happens_and_twice_stops_now(
    db: str, conn: psycopg.Connection[Any], queue: str, tmp_path: Path, kind: str
) -> None:
    """Issue 34, item 7: the first Ctrl-C said nothing; the second said "stopping now"
    and still waited for the handler. A real process, real SIGINTs."""
    send_and_tick(conn, 3)
    log = tmp_path / "log"
    log.touch()
    err = tmp_path / "stderr"
    with err.open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), db, str(log), "120", kind, "90"],
            env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"}, stderr=stderr,
            preexec_fn=default_sigint,
        )  # fmt: skip
    try:
        wait_for(lambda: lines(log), timeout=20)  # a handler started: it sleeps 120 s
        proc.send_signal(signal.SIGINT)
        said = "stopping once the batch in progress (if any) is done, waiting at most 90 s"
        wait_for(lambda: said in err.read_text(), timeout=20, what="the first Ctrl-C's words")
        text = err.read_text()
        assert "SIGINT" in text and "press Ctrl-C again" in text and "to stop now" in text, text
        assert proc.poll() is None  # still waiting for the handler
        proc.send_signal(signal.SIGINT)
        # Stops without waiting for the handler's 120 s (deadline well below it).
        assert proc.wait(60) == 0, err.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    text = err.read_text()
    assert "second signal: stopping now, without waiting for the handler" in text, text
    assert "stopped now; a batch in progress was rolled back" in text, text
    assert "Traceback" not in text, text
    assert [line.split()[0] for line in lines(log)] == ["start"]  # it never finished
    # The batch was rolled back: the consumer's position is where it was, the
    # three events come again.
    wait_for(lambda: one(conn, "select sub_batch is null from pgque.subscription"), timeout=20)
    assert one(conn, "select sub_last_tick from pgque.subscription") == 1
