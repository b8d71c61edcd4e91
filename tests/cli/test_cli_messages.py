"""``send`` and ``tail`` (a throwaway consumer that unsubscribes on exit)."""

from __future__ import annotations

import json
import signal
import subprocess
from typing import Any

import psycopg
import pytest
from cli_helpers import Pgque, spawn

from _engine import make_queue, one, rows, tick
from _wait import wait_for
from pgque.cli import ExitCode


@pytest.fixture
def queue(conn: psycopg.Connection[Any]) -> str:
    make_queue(conn, "q")
    one(conn, "select pgque.subscribe('q', 'c')")
    return "q"


def test_send(pgque: Pgque, conn: psycopg.Connection[Any], queue: str) -> None:
    run = pgque("send", "q", '{"id": 42}', "--type", "order.created", "--json")
    assert run.code == ExitCode.OK, run.stderr
    sent = run.json()
    assert set(sent) == {"queue", "event_id", "type", "consumers"}
    assert (sent["type"], sent["consumers"]) == ("order.created", 1)
    text = pgque("send", "q", "plain words", "--text")
    assert text.stdout.startswith("sent event ")
    assert text.stderr == ""  # a consumer will receive it: nothing to note
    keyed = pgque("send", "q", '"hi"', "-k", "customer-7", "--json").json()
    stdin = pgque("send", "q", "-", "--json", input="[1, 2]\n").json()
    tick(conn, "q")
    got = rows(conn, "select msg_id, type, payload, extra1 from pgque.receive('q', 'c')")
    assert got == [
        (sent["event_id"], "order.created", '{"id": 42}', None),
        (got[1][0], "default", "plain words", None),
        (keyed["event_id"], "default", '"hi"', "customer-7"),
        (stdin["event_id"], "default", "[1, 2]", None),
    ]


def test_send_to_a_queue_without_consumers_says_nobody_receives_it(
    pgque: Pgque, conn: psycopg.Connection[Any]
) -> None:
    make_queue(conn, "lonely")
    run = pgque("send", "lonely", "{}")
    assert run.code == ExitCode.OK, run.stderr
    assert run.stdout.startswith("sent event ")
    assert run.stderr.strip() == (
        "note: queue 'lonely' has no consumers, so no consumer will receive this event"
        " unless one subscribes before the queue's next tick"
    )
    assert pgque("send", "lonely", "{}", "--json").json()["consumers"] == 0


def test_send_refuses_non_json(pgque: Pgque, queue: str) -> None:
    run = pgque("send", "q", "not json")
    assert run.code == ExitCode.USAGE
    assert "--text" in run.stderr and "Traceback" not in run.stderr


def tail_subscriptions(conn: psycopg.Connection[Any]) -> list[str]:
    return [r[0] for r in rows(conn, "select consumer_name from pgque.consumer_stats()"
                                     " where consumer_name like 'pgque\\_tail\\_%'")]  # fmt: skip


def test_tail_prints_new_messages_then_unsubscribes(
    db: str, conn: psycopg.Connection[Any], queue: str, processes: list[subprocess.Popen[str]]
) -> None:
    one(conn, "select pgque.send('q', '{\"old\": true}'::jsonb)")
    tick(conn, "q")  # delivered before tail subscribes: not shown
    proc = spawn("tail", "q", "--count", "2", "--json", dsn=db)
    processes.append(proc)
    wait_for(lambda: tail_subscriptions(conn), timeout=30, what="tail subscribed")
    for n in range(3):
        one(conn, "select pgque.send('q', 'note', %s::jsonb)", json.dumps({"n": n}))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == ExitCode.OK, err
    messages = [json.loads(line) for line in out.splitlines()]
    assert [m["payload"] for m in messages] == [{"n": 0}, {"n": 1}]
    assert set(messages[0]) == {
        "msg_id", "batch_id", "type", "payload", "retry_count", "created_at",
        "extra1", "extra2", "extra3", "extra4",
    }  # fmt: skip
    assert messages[0]["type"] == "note"
    assert tail_subscriptions(conn) == []
    # The queue's own consumer is untouched: it still gets everything.
    assert one(conn, "select count(*) from pgque.consumer_stats() where consumer_name = 'c'") == 1


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_tail_stops_on_signal(
    db: str,
    conn: psycopg.Connection[Any],
    queue: str,
    processes: list[subprocess.Popen[str]],
    sig: signal.Signals,
) -> None:
    proc = spawn("tail", "q", dsn=db)
    processes.append(proc)
    wait_for(lambda: tail_subscriptions(conn), timeout=30, what="tail subscribed")
    one(conn, "select pgque.send('q', 'note', '{\"hello\": 1}'::jsonb)")
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert " note " in line and '{"hello": 1}' in line
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == ExitCode.OK, err
    assert "Traceback" not in err
    assert tail_subscriptions(conn) == []


def test_tail_timeout(pgque: Pgque, conn: psycopg.Connection[Any], queue: str) -> None:
    run = pgque("tail", "q", "--timeout", "1s", "--no-ticker")
    assert run.code == ExitCode.OK, run.stderr
    assert run.stdout == ""
    assert tail_subscriptions(conn) == []
