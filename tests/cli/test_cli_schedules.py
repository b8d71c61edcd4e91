"""``pgque schedule add|list|rm`` (issue 36 item 3), run as the real ``pgque`` command."""

from __future__ import annotations

from datetime import timezone
from typing import Any

import psycopg
from cli_helpers import one_error_line, run

from _engine import make_queue, one, rows
from pgque.cli import ExitCode


def test_add_list_and_remove(db: str, conn: psycopg.Connection[Any]) -> None:
    make_queue(conn, "reports")
    added = run("schedule", "add", "reports", "nightly", "0 2 * * *", "--payload",
                '{"kind": "sales"}', "--type", "report.run", "--time-zone", "Europe/Paris",
                dsn=db)  # fmt: skip
    assert added.code == ExitCode.OK, added.stderr
    next_run = one(conn, "select next_run from pgque.schedules()")
    assert added.stdout.startswith(
        "scheduled 'nightly' on queue 'reports' (0 2 * * *, Europe/Paris): next run "
        + next_run.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    ), added.stdout
    assert rows(conn, "select cron, time_zone, type_name, payload from pgque.schedules()") == [
        ("0 2 * * *", "Europe/Paris", "report.run", '{"kind": "sales"}')
    ]
    # A name that looks like rich markup is printed as it is.
    assert run("schedule", "add", "reports", "[bold]x[/bold]", "@hourly", dsn=db).code == 0
    listed = run("schedule", "list", dsn=db)
    assert listed.code == ExitCode.OK, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["queue", "name", "cron", "time", "zone", "type", "next", "run",
                                "(UTC)", "last", "run", "(UTC)", "last", "event"]  # fmt: skip
    assert "[bold]x[/bold]" in listed.stdout and "report.run" in listed.stdout
    as_json = run("schedule", "list", "reports", "--json", dsn=db).json()
    assert [(s["schedule_name"], s["payload"], s["last_run"]) for s in as_json] == [
        ("[bold]x[/bold]", None, None),
        ("nightly", {"kind": "sales"}, None),
    ]
    assert as_json[1]["next_run"] == next_run.isoformat()
    removed = run("schedule", "rm", "reports", "nightly", dsn=db)
    assert removed.code == ExitCode.OK, removed.stderr
    assert removed.stdout.strip() == "removed schedule 'nightly' of queue 'reports'"
    again = run("schedule", "rm", "reports", "nightly", dsn=db)
    assert again.code == ExitCode.NOT_FOUND
    assert "queue 'reports' has no schedule named 'nightly'" in one_error_line(again)
    assert run("schedule", "rm", "reports", "nightly", "--json", dsn=db).json() == {
        "queue": "reports", "schedule": "nightly", "removed": False,
    }  # fmt: skip


def test_errors_are_one_line_saying_what_is_wrong(db: str, conn: psycopg.Connection[Any]) -> None:
    make_queue(conn, "q")
    for args, code, text in [
        (("add", "nope", "s", "@daily"), ExitCode.NOT_FOUND, "no queue named 'nope'"),
        (("add", "q", "s", "61 * * * *"), ExitCode.USAGE,
         "invalid argument: cron '61 * * * *': the minute field '61' is out of range"),
        (("add", "q", "s", "@daily", "--time-zone", "Mars/Base"), ExitCode.USAGE,
         "unknown time zone 'Mars/Base'"),
        (("add", "q", "s", "@daily", "--payload", "hi"), ExitCode.USAGE,
         "--payload is not JSON"),
        (("list", "nope"), ExitCode.NOT_FOUND, "no queue named 'nope'"),
    ]:  # fmt: skip
        done = run("schedule", *args, dsn=db)
        assert done.code == code, (args, done.stderr)
        assert text in one_error_line(done), args
    empty = run("schedule", "list", dsn=db)
    assert empty.stdout.strip() == (
        "there are no schedules: `pgque schedule add QUEUE NAME CRON` adds one"
    )
