"""A CLI-only user goes create -> subscribe -> send -> ... (issue 34, items 2 and 5).

``pgque subscribe``/``unsubscribe`` exist, ``create-queue --consumer`` creates
and subscribes in one command, and every message that names them is true.
Each test runs the real ``pgque`` command.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import psycopg
import pytest
from cli_helpers import one_error_line, run

import pgque
from _engine import one, rows
from pgque.cli import ExitCode
from pgque.errors import PgqueConsumerNotFound

ROOT = Path(__file__).resolve().parents[2]


def subscriptions(conn: psycopg.Connection[Any], queue: str) -> list[str]:
    return sorted(
        r[0] for r in rows(conn, "select consumer_name from pgque.get_consumer_info(%s)", queue)
    )


def test_create_subscribe_send_then_unsubscribe(db: str, conn: psycopg.Connection[Any]) -> None:
    assert run("create-queue", "orders", dsn=db).code == ExitCode.OK
    done = run("subscribe", "orders", "billing", dsn=db)
    assert done.code == ExitCode.OK, done.stderr
    assert done.stdout.startswith("subscribed consumer 'billing' to queue 'orders'")
    assert subscriptions(conn, "orders") == ["billing"]
    again = run("subscribe", "orders", "billing", "--json", dsn=db)
    assert again.code == ExitCode.OK, again.stderr
    assert again.json() == {"queue": "orders", "consumer": "billing", "subscribed": False}
    sent = run("send", "orders", '{"id": 1}', dsn=db)
    assert sent.code == ExitCode.OK and sent.stderr == "", sent.stderr
    gone = run("unsubscribe", "orders", "billing", dsn=db)
    assert gone.code == ExitCode.OK, gone.stderr
    assert gone.stdout.startswith("unsubscribed consumer 'billing' from queue 'orders'")
    assert subscriptions(conn, "orders") == []
    twice = run("unsubscribe", "orders", "billing", "--json", dsn=db)
    assert twice.code == ExitCode.OK, twice.stderr
    assert twice.json() == {"queue": "orders", "consumer": "billing", "unsubscribed": False}


def test_subscribe_to_a_missing_queue_says_so(db: str) -> None:
    done = run("subscribe", "nope", "billing", dsn=db)
    assert done.code == ExitCode.NOT_FOUND
    assert "no queue named 'nope'" in one_error_line(done)
    done = run("unsubscribe", "nope", "billing", dsn=db)
    assert done.code == ExitCode.NOT_FOUND
    assert "no queue named 'nope'" in one_error_line(done)


def test_create_queue_with_consumers(db: str, conn: psycopg.Connection[Any]) -> None:
    done = run("create-queue", "jobs", "--consumer", "a", "-c", "b", dsn=db)
    assert done.code == ExitCode.OK, done.stderr
    assert done.stdout == (
        "created queue 'jobs'\nsubscribed consumer 'a' to queue 'jobs'\n"
        "subscribed consumer 'b' to queue 'jobs'\n"
    )
    assert subscriptions(conn, "jobs") == ["a", "b"]
    again = run("create-queue", "jobs", "-c", "b", "-c", "c", "--json", dsn=db)
    assert again.json() == {
        "queue": "jobs", "created": False, "options": {}, "subscribed": {"b": False, "c": True}
    }  # fmt: skip
    # A bad consumer name creates nothing: one transaction.
    bad = run("create-queue", "other", "-c", "x#1", dsn=db)
    assert bad.code == ExitCode.USAGE, bad.stderr
    assert one(conn, "select count(*) from pgque.get_queue_info('other')") == 0


def test_drop_queue_names_the_consumers_and_the_command(db: str) -> None:
    run("create-queue", "jobs", "-c", "a", "-c", "b", dsn=db)
    done = run("drop-queue", "jobs", dsn=db)
    assert done.code == ExitCode.REFUSED
    line = one_error_line(done)
    assert "queue 'jobs' has consumers a, b" in line, line
    assert "`pgque unsubscribe jobs a`" in line and "--force" in line, line
    for name in ("a", "b"):
        assert run("unsubscribe", "jobs", name, dsn=db).code == ExitCode.OK
    assert run("drop-queue", "jobs", dsn=db).code == ExitCode.OK


def test_the_consumer_not_found_error_names_a_command_that_works(
    db: str, conn: psycopg.Connection[Any]
) -> None:
    one(conn, "select pgque.create_queue('orders')")
    consumer = pgque.Consumer(db, queue="orders", name="billing", ticker=False)
    with pytest.raises(PgqueConsumerNotFound) as caught:
        consumer.start()
    command = re.search(r"`pgque (subscribe [^`]+)`", str(caught.value))
    assert command is not None, str(caught.value)
    done = run(*shlex.split(command.group(1)), dsn=db)
    assert done.code == ExitCode.OK, done.stderr
    assert subscriptions(conn, "orders") == ["billing"]


def test_every_mention_of_the_commands_is_one_that_exists(db: str) -> None:
    """Each `pgque subscribe ...`/`pgque unsubscribe ...` in the docs and the package
    is a command that exists, with the arguments it takes."""
    sources = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"),
               *(ROOT / "src" / "pgque").rglob("*.py")]  # fmt: skip
    commands = set()
    for path in sources:
        commands.update(re.findall(r"pgque (un)?subscribe\b", path.read_text()))
    assert commands == {"", "un"}
    for prefix in sorted(commands):
        done = run(f"{prefix}subscribe", "--help", dsn=db)
        assert done.code == ExitCode.OK, done.stderr
        assert f"{prefix}subscribe [OPTIONS] QUEUE CONSUMER" in done.stdout, done.stdout
