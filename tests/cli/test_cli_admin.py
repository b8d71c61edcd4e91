"""Queue administration: create, drop, pause, resume, replay and purge dead letters."""

from __future__ import annotations

from typing import Any

import psycopg
from cli_helpers import Pgque

from _engine import make_queue, one, rows, tick
from pgque.cli import ExitCode


def test_create_queue_with_options(pgque: Pgque, conn: psycopg.Connection[Any]) -> None:
    run = pgque("create-queue", "orders", "-o", "max_retries=3", "--option", "ticker_max_lag=1s",
                "--json")  # fmt: skip
    assert run.code == ExitCode.OK, run.stderr
    assert run.json() == {
        "queue": "orders", "created": True,
        "options": {"max_retries": "3", "ticker_max_lag": "1s"},
    }  # fmt: skip
    assert rows(conn, "select queue_max_retries, queue_ticker_max_lag::text from pgque.queue") == [
        (3, "00:00:01")
    ]
    again = pgque("create-queue", "orders", "-o", "max_retries=4")
    assert again.code == ExitCode.OK
    assert "exists; options applied" in again.stdout
    assert one(conn, "select queue_max_retries from pgque.queue") == 4
    assert pgque("create-queue", "plain").stdout.strip() == "created queue 'plain'"


def test_drop_queue(pgque: Pgque, conn: psycopg.Connection[Any]) -> None:
    make_queue(conn, "a")
    make_queue(conn, "b")
    one(conn, "select pgque.subscribe('b', 'c')")
    assert pgque("drop-queue", "a", "--json").json() == {"queue": "a", "dropped": True}
    run = pgque("drop-queue", "b", "--force")
    assert run.code == ExitCode.OK, run.stderr
    assert run.stdout.strip() == "dropped queue 'b'"
    assert one(conn, "select count(*) from pgque.queue") == 0


def test_pause_and_resume(pgque: Pgque, conn: psycopg.Connection[Any]) -> None:
    make_queue(conn, "q")
    assert pgque("pause", "q", "--json").json() == {"queue": "q", "paused": True}
    assert one(conn, "select queue_ticker_paused from pgque.queue") is True
    assert one(conn, "select pgque.ticker()") == 0  # paused queues are not ticked
    assert pgque("resume", "q").stdout.strip() == "resumed queue 'q'"
    assert one(conn, "select queue_ticker_paused from pgque.queue") is False


def dead_letters(conn: psycopg.Connection[Any], n: int) -> None:
    """Queue q (no retries), consumer c, n messages dead-lettered at once."""
    make_queue(conn, "q")
    one(conn, "select pgque.set_queue_config('q', 'max_retries', '0')")
    one(conn, "select pgque.subscribe('q', 'c')")
    for i in range(n):
        one(conn, "select pgque.send('q', 'job', %s::jsonb)", f'{{"i": {i}}}')
    tick(conn, "q")
    msgs = rows(conn, "select batch_id, msg_id from pgque.receive('q', 'c')")
    for batch_id, msg_id in msgs:
        conn.execute("select pgque.nack(%s, %s::bigint, '0 seconds', 'boom')", (batch_id, msg_id))
    one(conn, "select pgque.ack(%s)", msgs[0][0])
    assert one(conn, "select count(*) from pgque.dead_letter") == n


def test_replay_dlq(pgque: Pgque, conn: psycopg.Connection[Any]) -> None:
    dead_letters(conn, 3)
    oldest = rows(conn, "select ev_data from pgque.dead_letter order by dl_id limit 2")
    run = pgque("replay-dlq", "q", "--limit", "2", "--json")
    assert run.code == ExitCode.OK, run.stderr
    report = run.json()
    events = report.pop("events")
    assert report == {"queue": "q", "replayed": 2, "failed": 0, "first_error": None}
    assert [e["dl_id"] for e in events] == [1, 2]
    assert one(conn, "select count(*) from pgque.dead_letter") == 1
    tick(conn, "q")
    replayed = rows(conn, "select msg_id, payload from pgque.receive('q', 'c') order by msg_id")
    assert [payload for _, payload in replayed] == [data for (data,) in oldest]
    assert [e["ev_id"] for e in events] == [msg_id for msg_id, _ in replayed]
    text = pgque("replay-dlq", "q")
    assert text.code == ExitCode.OK
    assert text.stdout.strip() == (
        "replayed 1 dead letter of queue 'q' as new events"
        " (every consumer of the queue receives them)"
    )
    assert one(conn, "select count(*) from pgque.dead_letter") == 0
    nothing = pgque("replay-dlq", "q")
    assert nothing.stdout.strip() == "queue 'q' has no dead letters: nothing replayed"


def test_replay_dlq_names_each_dead_letter_and_its_new_event(
    pgque: Pgque, conn: psycopg.Connection[Any]
) -> None:
    dead_letters(conn, 2)
    [(first_dl,)] = rows(conn, "select min(dl_id) from pgque.dead_letter")
    run = pgque("replay-dlq", "q", "--limit", "1")
    assert run.code == ExitCode.OK, run.stderr
    [(new_event,)] = rows(conn, "select max(ev_id) from pgque.recent_events('q', 1)")
    assert run.stdout.splitlines() == [
        f"dead letter {first_dl} sent again as event {new_event}",
        "replayed 1 dead letter of queue 'q' as new events"
        " (every consumer of the queue receives them)",
    ]


def test_purge_dlq(pgque: Pgque, conn: psycopg.Connection[Any]) -> None:
    dead_letters(conn, 2)
    assert pgque("purge-dlq", "q", "--json").json() == {
        "queue": "q", "purged": 0, "older_than_seconds": 30 * 86400,
    }  # fmt: skip
    assert pgque("purge-dlq", "q", "--older-than", "1h", "--json").json()["purged"] == 0
    kept = pgque("purge-dlq", "q", "--older-than", "12h")
    assert kept.stdout.strip() == "queue 'q' has no dead letters older than 12h: nothing purged"
    assert one(conn, "select count(*) from pgque.dead_letter") == 2
    run = pgque("purge-dlq", "q", "--older-than", "0s")
    assert run.code == ExitCode.OK, run.stderr
    assert run.stdout.strip() == "purged 2 dead letters of any age from queue 'q'"
    assert one(conn, "select count(*) from pgque.dead_letter") == 0
    dead_letters_of_one(conn)
    one_left = pgque("purge-dlq", "q", "--older-than", "0")
    assert one_left.stdout.strip() == "purged 1 dead letter of any age from queue 'q'"


def dead_letters_of_one(conn: psycopg.Connection[Any]) -> None:
    """One more dead letter on the existing queue q (consumer c)."""
    one(conn, "select pgque.send('q', 'job', '{}'::jsonb)")
    tick(conn, "q")
    [(batch_id, msg_id)] = rows(conn, "select batch_id, msg_id from pgque.receive('q', 'c')")
    conn.execute("select pgque.nack(%s, %s::bigint, '0 seconds', 'boom')", (batch_id, msg_id))
    one(conn, "select pgque.ack(%s)", batch_id)
