"""Delayed delivery and queue options."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from _engine import make_queue, one, rows, tick

RAISE = psycopg.errors.RaiseException


@pytest.fixture
def queue(conn: psycopg.Connection[Any]) -> str:
    make_queue(conn, "q")
    one(conn, "select pgque.subscribe('q', 'c')")
    return "q"


def test_send_at_future_parks_then_delivers(conn: psycopg.Connection[Any], queue: str) -> None:
    de_id = one(
        conn, "select pgque.send_at('q', 'remind', '{\"u\": 7}'::jsonb, now() + interval '1 hour')"
    )
    assert rows(conn, "select de_id, de_type, de_data from pgque.delayed_events") == [
        (de_id, "remind", '{"u": 7}')
    ]
    assert one(conn, "select pgque.maint()") == 0
    conn.execute("update pgque.delayed_events set de_deliver_at = now() - interval '1 second'")
    assert one(conn, "select pgque.maint_deliver_delayed()") == 1
    assert one(conn, "select count(*) from pgque.delayed_events") == 0
    tick(conn, queue)
    assert [(m[2], m[3]) for m in rows(conn, "select * from pgque.receive('q', 'c')")] == [
        ("remind", '{"u": 7}')
    ]


def test_cancel_delayed(conn: psycopg.Connection[Any], queue: str) -> None:
    de_id = one(conn, "select pgque.send_at('q', 't', 'x', now() + interval '1 hour')")
    assert one(conn, "select pgque.cancel_delayed(%s)", de_id) == 1
    assert one(conn, "select pgque.cancel_delayed(%s)", de_id) == 0
    assert one(conn, "select count(*) from pgque.delayed_events") == 0
    with pytest.raises(RAISE, match="de_id must not be NULL"):
        conn.execute("select pgque.cancel_delayed(null)")


def test_send_at_past_sends_now(conn: psycopg.Connection[Any], queue: str) -> None:
    ev_id = one(conn, "select pgque.send_at('q', 't', 'text body', now() - interval '1 minute')")
    assert one(conn, "select ev_data from pgque.event_template where ev_id = %s", ev_id) == (
        "text body"
    )
    assert one(conn, "select count(*) from pgque.delayed_events") == 0


@pytest.mark.parametrize(
    ("deliver_at", "message"),
    [
        ("null", "send_at: deliver_at must not be null (queue q)"),
        ("'infinity'", "send_at: deliver_at must be a finite time, got infinity (queue q)"),
    ],
)
def test_send_at_bad_times(
    conn: psycopg.Connection[Any], queue: str, deliver_at: str, message: str
) -> None:
    with pytest.raises(RAISE, match=message.replace("(", r"\(").replace(")", r"\)")):
        conn.execute(f"select pgque.send_at('q', 't', 'x', {deliver_at}::timestamptz)")
    with pytest.raises(RAISE, match="queue not found: nope"):
        conn.execute("select pgque.send_at('nope', 't', 'x', now() + interval '1 hour')")
    assert one(conn, "select count(*) from pgque.delayed_events") == 0


def test_drop_queue_drops_its_delayed_messages(conn: psycopg.Connection[Any], queue: str) -> None:
    one(conn, "select pgque.send_at('q', 't', 'x', now() + interval '1 hour')")
    one(conn, "select pgque.drop_queue('q', true)")
    assert one(conn, "select count(*) from pgque.delayed_events") == 0


def test_create_queue_with_options(conn: psycopg.Connection[Any]) -> None:
    assert (
        one(
            conn,
            "select pgque.create_queue('opt', '{\"max_retries\": 3,"
            ' "ticker_max_lag": "1 microsecond", "ticker_paused": true, "event_ttl": "1 day"}\')',
        )
        == 1
    )
    assert rows(
        conn,
        "select queue_max_retries, queue_ticker_max_lag = '1 microsecond', queue_ticker_paused,"
        " queue_event_ttl = '1 day' from pgque.queue where queue_name = 'opt'",
    ) == [(3, True, True, True)]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ('{"max_retries": -1}', "set_queue_config: max_retries must be >= 0, got -1"),
        ('{"colour": "blue"}', 'cannot change parameter "colours"'),
        ('{"max_retries": [1]}', "option max_retries of queue bad must be a string"),
        ("[1, 2]", "create_queue: options must be a JSON object, got array"),
    ],
)
def test_bad_options_create_nothing(
    conn: psycopg.Connection[Any], options: str, message: str
) -> None:
    with pytest.raises(RAISE, match=message.replace("[", r"\[")):
        conn.execute("select pgque.create_queue('bad', %s::jsonb)", (options,))
    assert one(conn, "select count(*) from pgque.queue") == 0


def test_pause_and_resume(conn: psycopg.Connection[Any], queue: str) -> None:
    conn.execute("select pgque.pause_queue('q')")
    one(conn, "select pgque.send('q', 'x')")
    assert one(conn, "select pgque.ticker()") == 0
    conn.execute("select pgque.resume_queue('q')")
    assert one(conn, "select pgque.ticker()") == 1
    assert [m[3] for m in rows(conn, "select * from pgque.receive('q', 'c')")] == ["x"]
