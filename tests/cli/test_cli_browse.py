"""``events`` and ``dlq``: the CLI shows the events and dead letters it can change."""

from __future__ import annotations

import json
from typing import Any

import psycopg
from cli_helpers import Pgque, one_error_line

from _engine import make_queue, one, rows, tick
from pgque.cli import ExitCode


def send(conn: psycopg.Connection[Any], queue: str, type_: str, payload: str) -> int:
    return int(one(conn, "select pgque.send(%s, %s, %s::jsonb)", queue, type_, payload))


def test_events_newest_first_with_type_and_limit(
    pgque: Pgque, conn: psycopg.Connection[Any]
) -> None:
    make_queue(conn, "q")
    ids = [send(conn, "q", f"t{n % 2}", f'{{"n": {n}}}') for n in range(5)]
    run = pgque("events", "q", "--json")
    assert run.code == ExitCode.OK, run.stderr
    events = run.json()
    assert [e["ev_id"] for e in events] == ids[::-1]
    assert set(events[0]) == {
        "ev_id", "ev_time", "ev_txid", "ev_retry", "ev_type", "ev_data",
        "ev_extra1", "ev_extra2", "ev_extra3", "ev_extra4",
    }  # fmt: skip
    assert json.loads(events[0]["ev_data"]) == {"n": 4}
    typed = pgque("events", "q", "--type", "t1", "--json").json()
    assert [e["ev_id"] for e in typed] == [ids[3], ids[1]]
    assert [e["ev_id"] for e in pgque("events", "q", "-n", "2", "--json").json()] == ids[:2:-1]
    text = pgque("events", "q", "--limit", "2")
    assert text.code == ExitCode.OK
    lines = text.stdout.splitlines()
    assert lines[0].split() == ["ID", "TIME", "TYPE", "RETRY", "PAYLOAD", "EXTRAS"]
    assert lines[1].split()[0] == str(ids[4]) and '{"n": 4}' in lines[1]
    assert lines[-1] == "2 events, newest first"


def test_events_show_extras_and_empty_queues(pgque: Pgque, conn: psycopg.Connection[Any]) -> None:
    make_queue(conn, "q")
    assert pgque("events", "q").stdout.strip() == "queue 'q' holds no recent events"
    assert pgque("events", "q", "--json").json() == []
    one(conn, "select pgque.send('q', 'k', '{}'::jsonb, 'customer-7')")
    text = pgque("events", "q")
    assert "extra1=customer-7" in text.stdout
    assert text.stdout.splitlines()[-1] == "1 event, newest first"
    none = pgque("events", "q", "--type", "other")
    assert none.stdout.strip() == "queue 'q' holds no recent events of type 'other'"


def test_events_errors(pgque: Pgque, conn: psycopg.Connection[Any]) -> None:
    missing = pgque("events", "nosuch")
    assert missing.code == ExitCode.NOT_FOUND
    assert "no queue named 'nosuch'" in one_error_line(missing)
    make_queue(conn, "q")
    for bad in ("0", "1001", "x"):
        run = pgque("events", "q", "--limit", bad)
        assert run.code == ExitCode.USAGE, (bad, run.stderr)
        assert "--limit" in one_error_line(run)


def dead_letters(conn: psycopg.Connection[Any], n: int) -> list[int]:
    """Queue q (no retries), consumer c, n events dead-lettered with reasons r0, r1 ...;
    returns the dead letters' ids, oldest first."""
    make_queue(conn, "q")
    one(conn, "select pgque.set_queue_config('q', 'max_retries', '0')")
    one(conn, "select pgque.subscribe('q', 'c')")
    for i in range(n):
        one(conn, "select pgque.send('q', 'job', %s::jsonb, 'trace-' || %s)", f'{{"i": {i}}}', i)
    tick(conn, "q")
    msgs = rows(conn, "select batch_id, msg_id from pgque.receive('q', 'c') order by msg_id")
    for i, (batch_id, msg_id) in enumerate(msgs):
        conn.execute(
            "select pgque.nack(%s, %s::bigint, '0 seconds', %s)", (batch_id, msg_id, f"r{i}")
        )
    one(conn, "select pgque.ack(%s)", msgs[0][0])
    return [r[0] for r in rows(conn, "select dl_id from pgque.dead_letter order by dl_id")]


def test_dlq_lists_the_dead_letters(pgque: Pgque, conn: psycopg.Connection[Any]) -> None:
    ids = dead_letters(conn, 3)
    run = pgque("dlq", "q", "--json")
    assert run.code == ExitCode.OK, run.stderr
    listed = run.json()
    assert [d["dl_id"] for d in listed] == ids[::-1]
    assert [d["dl_reason"] for d in listed] == ["r2", "r1", "r0"]
    assert json.loads(listed[0]["ev_data"]) == {"i": 2}
    text = pgque("dlq", "q")
    lines = text.stdout.splitlines()
    assert lines[0].split() == ["ID", "DEAD", "SINCE", "TYPE", "RETRY", "REASON", "PAYLOAD"]
    assert lines[1].split()[0] == str(ids[2]) and "r2" in lines[1] and '{"i": 2}' in lines[1]
    assert lines[-1] == (
        "3 dead letters, newest first: `pgque dlq show ID` shows one,"
        " `pgque replay-dlq q` sends them again"
    )
    assert [d["dl_id"] for d in pgque("dlq", "q", "-n", "1", "--json").json()] == [ids[2]]


def test_dlq_of_a_queue_without_dead_letters_and_of_none(
    pgque: Pgque, conn: psycopg.Connection[Any]
) -> None:
    make_queue(conn, "q")
    assert pgque("dlq", "q").stdout.strip() == "queue 'q' has no dead letters"
    assert pgque("dlq", "q", "--json").json() == []
    missing = pgque("dlq", "nosuch")
    assert missing.code == ExitCode.NOT_FOUND
    assert "no queue named 'nosuch'" in one_error_line(missing)


def test_dlq_show_one_dead_letter(pgque: Pgque, conn: psycopg.Connection[Any]) -> None:
    ids = dead_letters(conn, 2)
    run = pgque("dlq", "show", str(ids[0]), "--json")
    assert run.code == ExitCode.OK, run.stderr
    shown = run.json()
    assert (shown["dl_id"], shown["dl_reason"], shown["ev_extra1"]) == (ids[0], "r0", "trace-0")
    text = pgque("dlq", "show", str(ids[1])).stdout
    assert f"dead letter: {ids[1]}" in text
    assert "reason:      r1" in text
    assert "extra1:      trace-1" in text
    assert text.rstrip().endswith('payload:\n{\n  "i": 1\n}')
    missing = pgque("dlq", "show", "999999")
    assert missing.code == ExitCode.NOT_FOUND
    assert "no dead letter with id 999999" in one_error_line(missing)
    wrong = pgque("dlq", "q", "5")
    assert wrong.code == ExitCode.USAGE
    assert "pgque dlq show ID" in one_error_line(wrong)
