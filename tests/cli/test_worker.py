"""``pgque worker MODULE:ATTR``: real worker processes on module files the tests write.

Each worker runs as ``python -P -m pgque.cli worker ...`` in a directory of
the test's: ``-P`` keeps the current directory off ``sys.path``, as the
``pgque`` console script does, so the command's own lookup in the current
directory is what finds the module. Handlers write lines to a log file; a
handler that must stay busy waits for a file the test creates (with a
deadline). Ticks are forced by the test (the consumers run no ticker).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from cli_helpers import child_env

from _engine import one
from _wait import wait_for
from pgque.cli import ExitCode

# What every module of these tests starts with: the DSN, the log, the go file.
PRELUDE = """\
from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

import pgque

DSN = os.environ["PGQUE_DSN"]
LOG = Path(os.environ["WORKER_LOG"])
GO = Path(os.environ["WORKER_GO"])
OPTIONS = {"ticker": False, "poll_interval": 0.2}


def note(line: str) -> None:
    with LOG.open("a") as log:
        log.write(line + "\\n")


def wait_for_go() -> None:
    deadline = time.monotonic() + 60
    while not GO.exists():
        if time.monotonic() > deadline:
            raise TimeoutError("the test never let the handler finish")
        time.sleep(0.01)
"""

Spawn = Callable[..., subprocess.Popen[str]]


def default_sigint() -> None:
    """In the child: SIGINT as in a terminal, whoever started the suite (a job put in
    the background inherits it ignored, and the async consumer leaves it so)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def worker_command(*args: str) -> list[str]:
    return [sys.executable, "-P", "-m", "pgque.cli", "worker", *args]


@pytest.fixture
def app(tmp_path: Path) -> Callable[[str], None]:
    """``app(code)``: write ``app.py`` (the prelude, then ``code``) in the test's directory."""

    def write(code: str) -> None:
        (tmp_path / "app.py").write_text(PRELUDE + textwrap.dedent(code), encoding="utf-8")

    return write


def env_for(tmp_path: Path, dsn: str | None) -> dict[str, str]:
    env = child_env(dsn)
    env["WORKER_LOG"] = str(tmp_path / "log")
    env["WORKER_GO"] = str(tmp_path / "go")
    return env


@pytest.fixture
def spawn(db: str, tmp_path: Path) -> Iterator[Spawn]:
    """``spawn(*args)``: start ``pgque worker ARGS`` in the test's directory, stdout and
    stderr to files; killed (by pid) at teardown if still running."""
    started: list[subprocess.Popen[str]] = []
    (tmp_path / "log").touch()

    def start(*args: str) -> subprocess.Popen[str]:
        with (tmp_path / "stderr").open("w") as err, (tmp_path / "stdout").open("w") as out:
            proc = subprocess.Popen(
                worker_command(*args), cwd=tmp_path, env=env_for(tmp_path, db), text=True,
                stdin=subprocess.DEVNULL, stdout=out, stderr=err, preexec_fn=default_sigint,
            )  # fmt: skip
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def log_lines(tmp_path: Path) -> list[str]:
    return (tmp_path / "log").read_text().splitlines()


def done(tmp_path: Path) -> list[str]:
    return [line for line in log_lines(tmp_path) if line.startswith("done")]


def stderr_of(tmp_path: Path) -> str:
    return (tmp_path / "stderr").read_text()


def make_queue(conn: psycopg.Connection[Any], queue: str = "q", consumer: str = "c") -> None:
    one(conn, "select pgque.create_queue(%s)", queue)
    one(conn, "select pgque.subscribe(%s, %s)", queue, consumer)


def send_and_tick(conn: psycopg.Connection[Any], n: int, queue: str = "q") -> None:
    for i in range(n):
        one(conn, "select pgque.send(%s, %s::jsonb)", queue, str(i))
    one(conn, "select pgque.force_next_tick(%s)", queue)
    one(conn, "select pgque.ticker(%s)", queue)


def test_worker_handles_messages_and_sigterm_drains_the_batch(
    conn: psycopg.Connection[Any], app: Callable[[str], None], spawn: Spawn, tmp_path: Path
) -> None:
    app("""
        consumer = pgque.Consumer(DSN, queue="q", name="c", **OPTIONS)


        @consumer.on("*")
        def handle(msg: pgque.Message) -> None:
            note(f"start {msg.msg_id}")
            wait_for_go()
            note(f"done {msg.msg_id}")
    """)
    make_queue(conn)
    send_and_tick(conn, 3)
    proc = spawn("app:consumer")
    wait_for(lambda: log_lines(tmp_path), timeout=30, what="the first handler call")
    proc.send_signal(signal.SIGTERM)
    said = "stopping once the batch in progress (if any) is done"
    wait_for(lambda: said in stderr_of(tmp_path), timeout=30, what="the SIGTERM heard")
    assert proc.poll() is None, stderr_of(tmp_path)  # draining: the handler still waits
    (tmp_path / "go").touch()
    assert proc.wait(60) == 0, stderr_of(tmp_path)
    assert len(done(tmp_path)) == 3  # the whole batch finished before the exit
    assert one(conn, "select sub_batch is null from pgque.subscription")
    assert one(conn, "select sub_last_tick from pgque.subscription") == 2  # acked
    text = stderr_of(tmp_path)
    assert "Traceback" not in text, text
    assert "pgque worker (pid" in text and "Consumer from app:consumer" in text, text
    assert "'c' of queue 'q' (concurrency 1)" in text, text
    assert "stopped" in text.splitlines()[-1], text


def test_async_consumer_and_ctrl_c_with_log_level(
    conn: psycopg.Connection[Any], app: Callable[[str], None], spawn: Spawn, tmp_path: Path
) -> None:
    app("""
        consumer = pgque.AsyncConsumer(DSN, queue="q", name="c", **OPTIONS)


        @consumer.on("*")
        async def handle(msg: pgque.Message) -> None:
            note(f"done {msg.msg_id} in a task: {asyncio.current_task() is not None}")
    """)
    make_queue(conn)
    proc = spawn("app:consumer", "--log-level", "WARNING")
    send_and_tick(conn, 2)
    wait_for(lambda: len(done(tmp_path)) == 2, timeout=30, what="two messages handled")
    assert all(line.endswith("in a task: True") for line in done(tmp_path))
    wait_for(lambda: one(conn, "select sub_last_tick from pgque.subscription") == 2, timeout=30)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(60) == 0, stderr_of(tmp_path)
    text = stderr_of(tmp_path)
    assert "SIGINT: stopping once the batch in progress" in text, text  # a WARNING
    assert "pgque worker (pid" not in text, text  # INFO: below --log-level warning
    assert "Traceback" not in text, text


def test_factory_and_concurrency(
    conn: psycopg.Connection[Any], app: Callable[[str], None], spawn: Spawn, tmp_path: Path
) -> None:
    # Two handlers must meet at the barrier: only with concurrency 2 do both finish
    # (with one at a time the first would wait for the second until the barrier breaks).
    app("""
        barrier = threading.Barrier(2, timeout=120)


        def make_consumer() -> pgque.Consumer:
            consumer = pgque.Consumer(DSN, queue="q", name="c", **OPTIONS)

            @consumer.on("*")
            def handle(msg: pgque.Message) -> None:
                barrier.wait()
                note(f"done {msg.msg_id} concurrency={consumer.concurrency}")

            return consumer
    """)
    make_queue(conn)
    send_and_tick(conn, 2)
    proc = spawn("app:make_consumer", "--concurrency", "2")
    wait_for(lambda: len(done(tmp_path)) == 2, timeout=60, what="both handlers past the barrier")
    assert all(line.endswith("concurrency=2") for line in done(tmp_path))
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 0, stderr_of(tmp_path)
    assert "Consumer from app:make_consumer: 'c' of queue 'q' (concurrency 2)" in stderr_of(
        tmp_path
    )


def test_async_factory_of_a_multi_queue_consumer(
    conn: psycopg.Connection[Any], app: Callable[[str], None], spawn: Spawn, tmp_path: Path
) -> None:
    app("""
        async def make() -> pgque.AsyncMultiQueueConsumer:
            consumers = []
            for queue in ("urgent", "bulk"):
                consumer = pgque.AsyncConsumer(DSN, queue=queue, name="c", **OPTIONS)

                @consumer.on("*")
                async def handle(msg: pgque.Message, consumer=consumer) -> None:
                    note(f"done {consumer.queue} {msg.msg_id} concurrency={consumer.concurrency}")

                consumers.append(consumer)
            return pgque.AsyncMultiQueueConsumer(consumers)
    """)
    make_queue(conn, "urgent")
    make_queue(conn, "bulk")
    proc = spawn("app:make", "--concurrency", "3")
    send_and_tick(conn, 1, "urgent")
    send_and_tick(conn, 1, "bulk")
    wait_for(lambda: len(done(tmp_path)) == 2, timeout=30, what="one message of each queue")
    assert sorted(line.split()[1] for line in done(tmp_path)) == ["bulk", "urgent"]
    assert all(line.endswith("concurrency=3") for line in done(tmp_path))
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 0, stderr_of(tmp_path)
    assert "AsyncMultiQueueConsumer from app:make" in stderr_of(tmp_path)


# -- one line and a non-zero exit for each mistake ----------------------------------------

BROKEN_APP = """
    consumer = pgque.Consumer(DSN, queue="q", name="c", **OPTIONS)
    name = "orders"


    def make_consumer() -> pgque.Consumer:
        return consumer


    def needs_arguments(dsn: str, queue: str = "q") -> pgque.Consumer:
        return consumer


    def returns_a_number():
        return 42


    def raises() -> pgque.Consumer:
        raise RuntimeError("no configuration for this environment")


    async def async_makes_a_sync_one() -> pgque.Consumer:
        return consumer


    billing = pgque.Consumer(DSN, queue="q", name="billing", **OPTIONS)


    @billing.on("*", transactional=True)
    def bill(msg: pgque.Message, conn: object) -> None:
        pass
"""

MISTAKES = [
    # (args, exit code, what the one line says)
    (["missing_module:consumer"], ExitCode.USAGE,
     "cannot import module 'missing_module': there is no module 'missing_module' in the"
     " current directory"),
    (["broken_import:consumer"], ExitCode.FAILURE,
     "cannot import module 'broken_import': ModuleNotFoundError: No module named"
     " 'not_installed_dependency' (broken_import.py, line 2)"),
    (["bad_option:consumer"], ExitCode.FAILURE,
     "cannot import module 'bad_option': ValueError: concurrency must be >= 1, got 0"
     " (bad_option.py, line 3)"),  # the application's line, not pgque's check
    (["broken_syntax:consumer"], ExitCode.FAILURE,
     "cannot import module 'broken_syntax': SyntaxError: "),
    (["app:consumers"], ExitCode.USAGE,
     "module 'app' has no 'consumers': it has app:async_makes_a_sync_one, app:billing,"
     " app:consumer, app:make_consumer, app:raises"),
    (["app"], ExitCode.USAGE,
     "'app' names no consumer: give MODULE:ATTR; it has app:async_makes_a_sync_one,"),
    (["app.py:consumer"], ExitCode.USAGE,
     "'app.py' is a file, not a module name: write `pgque worker app:consumer`"),
    (["app:name"], ExitCode.USAGE,
     "app:name is a str ('orders'), not a consumer: give a pgque.Consumer, AsyncConsumer,"
     " MultiQueueConsumer or AsyncMultiQueueConsumer, or a function of no arguments"),
    (["app:OPTIONS"], ExitCode.USAGE, "app:OPTIONS is a dict ("),
    (["pgque:Consumer"], ExitCode.USAGE,
     "pgque:Consumer is the class Consumer, not a consumer (the class itself: make one"),
    (["app:needs_arguments"], ExitCode.USAGE, "app:needs_arguments takes arguments (dsn): "),
    (["app:returns_a_number"], ExitCode.USAGE,
     "app:returns_a_number() returned an int (42), not a consumer: "),
    (["app:raises"], ExitCode.FAILURE,
     "app:raises() failed: RuntimeError: no configuration for this environment (app.py, line"),
    (["app:async_makes_a_sync_one"], ExitCode.USAGE,
     "app:async_makes_a_sync_one() is a coroutine that returned a Consumer: an async function"
     " must return an AsyncConsumer"),
    (["app:consumer", "--concurrency", "0"], ExitCode.USAGE,
     "--concurrency 0: concurrency must be >= 1, got 0 (consumer 'c')"),
    (["app:billing", "--concurrency", "2"], ExitCode.USAGE,
     "--concurrency 2: consumer billing: concurrency=2 refused: transactional handlers"
     " need concurrency=1"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "code", "said"), MISTAKES, ids=[m[0][0] for m in MISTAKES])
def test_a_mistake_is_one_line(
    args: list[str], code: ExitCode, said: str, app: Callable[[str], None], tmp_path: Path
) -> None:
    app(BROKEN_APP)
    (tmp_path / "broken_import.py").write_text("import os\nimport not_installed_dependency\n")
    (tmp_path / "broken_syntax.py").write_text("handlers = (\n")
    (tmp_path / "bad_option.py").write_text(
        'import pgque\n\nconsumer = pgque.Consumer("", queue="q", name="c", concurrency=0)\n'
    )
    # No database is reached: the DSN names one that is never connected to.
    proc = subprocess.run(
        worker_command(*args), cwd=tmp_path, env=env_for(tmp_path, "dbname=never_used"),
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"pgque: error: {said}"), lines[0]
    assert proc.returncode == code, proc.stderr


SETUP_ERRORS = [
    # (the consumer's declaration, exit code, the error line's start)
    ('consumer = pgque.Consumer(DSN, queue="q", name="nobody", **OPTIONS)',
     ExitCode.NOT_FOUND,
     "consumer 'nobody' is not subscribed to queue 'q': run `pgque subscribe q nobody` (or"
     " select pgque.subscribe(...)), or pass subscribe=True to the consumer to subscribe"
     " when it connects"),
    ('consumer = pgque.Consumer(DSN, queue="nowhere", name="c", **OPTIONS)',
     ExitCode.NOT_FOUND, "queue 'nowhere' does not exist: create it"),
    ('consumer = pgque.Consumer(DSN, queue="q", name="c", **OPTIONS)\n'
     '@consumer.every("61 * * * *", type="report")\n'
     "def report(msg: pgque.Message) -> None:\n"
     "    pass\n",
     ExitCode.USAGE, "consumer 'c', @every schedule 'report': cron '61 * * * *': the minute"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("declaration", "code", "said"), SETUP_ERRORS, ids=["not-subscribed", "no-queue", "bad-cron"]
)
def test_the_consumers_setup_error_ends_it_with_its_words(
    declaration: str, code: ExitCode, said: str,
    db: str, conn: psycopg.Connection[Any], app: Callable[[str], None], tmp_path: Path,
) -> None:  # fmt: skip
    """What ends the consumer's start() is said in its own words (they say what to do),
    with the exit code of its kind. The DSN reaches the module through -d (PGQUE_DSN
    is not in the environment)."""
    app(declaration)
    make_queue(conn)
    proc = subprocess.run(
        [*worker_command()[:-1], "-d", db, "worker", "app:consumer"], cwd=tmp_path,
        env=env_for(tmp_path, None), capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert "Traceback" not in proc.stderr, proc.stderr
    last = proc.stderr.splitlines()[-1]
    assert last.startswith(f"pgque: error: {said}"), proc.stderr
    assert proc.returncode == code, proc.stderr
