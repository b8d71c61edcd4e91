"""Names and hints are printed as text, never read as rich markup (issue 34, item 1).

Each test runs the real ``pgque`` command, as a user or a probe would.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

import psycopg
import pytest
from cli_helpers import run

from _engine import one
from pgque.cli import ExitCode
from pgque.cli._output import err
from pgque.cli.web import WEB_EXTRA_HINT

NAMES = ["jobs[eu]", "a[/]b", "[bold]x", "x:smile:", "q[red]z[/red]"]


@pytest.mark.parametrize("name", NAMES)
def test_queue_names_with_brackets_are_printed_as_given(db: str, name: str) -> None:
    created = run("create-queue", name, dsn=db)
    assert created.code == ExitCode.OK, created.stderr
    assert created.stdout == f"created queue {name!r}\n"
    listed = run("queues", dsn=db)
    assert listed.code == ExitCode.OK, listed.stderr
    assert name in listed.stdout
    status = run("status", dsn=db)
    assert status.code == ExitCode.OK, status.stderr
    assert name in status.stdout
    dropped = run("drop-queue", name, dsn=db)
    assert dropped.code == ExitCode.OK, dropped.stderr
    assert dropped.stdout == f"dropped queue {name!r}\n"


def test_status_and_queues_keep_working_beside_such_a_queue(
    db: str, conn: psycopg.Connection[Any]
) -> None:
    for name in ("a[/]b", "jobs[eu]", "jobs"):
        one(conn, "select pgque.create_queue(%s)", name)
    one(conn, "select pgque.subscribe('a[/]b', 'c[/]d')")
    listed = run("queues", dsn=db)
    assert listed.code == ExitCode.OK, listed.stderr
    names = [line.split()[0] for line in listed.stdout.splitlines()[1:]]
    assert sorted(names) == ["a[/]b", "jobs", "jobs[eu]"]
    consumers = run("consumers", dsn=db)
    assert consumers.code == ExitCode.OK, consumers.stderr
    assert "c[/]d" in consumers.stdout
    for args in (("status",), ("status", "--json"), ("depth", "a[/]b"), ("dlq", "a[/]b")):
        done = run(*args, dsn=db)
        assert done.code == ExitCode.OK, (args, done.stderr)
    sent = run("send", "jobs[eu]", '{"x": "[bold]y"}', dsn=db)
    assert sent.code == ExitCode.OK, sent.stderr
    assert "queue 'jobs[eu]' has no consumers" in sent.stderr


def test_the_web_extra_hint_keeps_its_brackets() -> None:
    # What the demo prints without the web extra.
    assert "'.[web]'" in WEB_EXTRA_HINT
    buffer = io.StringIO()
    with contextlib.redirect_stderr(buffer):
        err().print(f"no web console: {WEB_EXTRA_HINT}")
    assert "'.[web]'" in buffer.getvalue()


@pytest.mark.parametrize("args", [("depth", "q", "--watch", "0"), ("depth", "q", "--watch", "0s"),
                                  ("drain", "q", "--interval", "0")])  # fmt: skip
def test_a_pause_of_zero_is_refused_not_spun(db: str, args: tuple[str, ...]) -> None:
    # Issue 34, item 8: `depth --watch 0` sampled about 17 times a second.
    run("create-queue", "q", dsn=db)
    done = run(*args, "--count", "3", dsn=db) if args[0] == "depth" else run(*args, dsn=db)
    assert done.code == ExitCode.USAGE, done.stdout
    assert done.stdout == ""
    assert "too short: the pause between looks must be at least 100ms" in done.stderr


def test_unclear_messages_are_whole_and_name_the_problem(db: str) -> None:
    # Issue 34, item 6: cut-off and misleading messages.
    missing = run("dlq", "show", "99999", dsn=db)
    assert missing.code == ExitCode.NOT_FOUND
    assert missing.stderr == (
        "pgque: error: no dead letter with id 99999:"
        " `pgque dlq QUEUE` lists the dead letters of a queue\n"
    )
    empty = run("create-queue", "", dsn=db)
    assert empty.code == ExitCode.USAGE
    assert empty.stderr == "pgque: error: invalid argument: queue name must not be empty\n"
    empty = run("create-queue", "", "-o", "max_retries=3", dsn=db)
    assert empty.stderr == "pgque: error: invalid argument: queue name must not be empty\n"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("create-queue", "nl\nx"), 'queue name "nl\\nx" must not contain control characters'),
        (("create-queue", "x ", "-o", "max_retries=3"),
         'queue name "x " must not begin or end with a space'),
        (("subscribe", "q", "c\nd"), 'consumer name "c\\nd" must not contain control characters'),
        (("subscribe", "q", " c"), 'consumer name " c" must not begin or end with a space'),
        (("create-queue", "q2", "-c", "c\t"),
         'consumer name "c\\t" must not contain control characters'),
    ],
)  # fmt: skip
def test_names_a_table_cannot_show_are_refused(db: str, args: tuple[str, ...], says: str) -> None:
    run("create-queue", "q", dsn=db)
    done = run(*args, dsn=db)
    assert done.code == ExitCode.USAGE, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"pgque: error: invalid argument: {says}"), lines
    listed = run("queues", "--json", dsn=db).json()
    assert [q["queue_name"] for q in listed] == ["q"]
    assert run("consumers", "q", "--json", dsn=db).json() == []
