"""Periodic schedules from Python: the clients' schedule/unschedule/schedules and
``@consumer.every`` on both consumer twins.

Time is driven by moving a schedule's next run into the past (as the owner),
never by waiting for the clock; ``pgque.ticker()`` then sends the occurrence.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from typing import Any

import psycopg
import pytest
from test_client_admin import open_client
from twins import Running, force_tick, make

import pgque
from _engine import make_queue, one, rows
from _wait import wait_for


@pytest.fixture(params=["sync", "async"])
def client(request: pytest.FixtureRequest, db: str) -> Iterator[Any]:
    """A client of each kind on an autocommit connection to ``db``."""
    with open_client(request.param, db) as opened:
        yield opened


def make_due(conn: psycopg.Connection[Any]) -> None:
    """Every schedule's next run to the start of the minute a second ago."""
    conn.execute(
        "update pgque.schedule set sc_next_run = date_trunc('minute', now() - interval '1 s')"
    )


# -- the clients -------------------------------------------------------------------------


def test_schedule_list_replace_and_remove(client: Any, conn: psycopg.Connection[Any]) -> None:
    make_queue(conn, "q")
    make_queue(conn, "other")
    next_run = client.schedule("q", "nightly", "0 2 * * *", {"kind": "sales"}, type="report.run",
                               time_zone="Europe/Paris")  # fmt: skip
    assert isinstance(next_run, datetime) and next_run > one(conn, "select now()")
    client.schedule("other", "tick", "@hourly", pgque.Event([1, 2], type="ev"))
    listed = client.schedules()
    assert [(s.queue_name, s.schedule_name) for s in listed] == [
        ("other", "tick"),
        ("q", "nightly"),
    ]
    [nightly] = client.schedules("q")
    assert nightly == pgque.Schedule(
        "q", "nightly", "0 2 * * *", "Europe/Paris", "report.run", '{"kind": "sales"}',
        next_run, None, None,
    )  # fmt: skip
    assert client.schedules("other")[0].type_name == "ev"
    # The same timing keeps the next run; a new payload replaces the old.
    conn.execute("update pgque.schedule set sc_next_run = now() + interval '5 hours'")
    kept = client.schedules("q")[0].next_run
    assert client.schedule("q", "nightly", "0 2 * * *", None, time_zone="Europe/Paris") == kept
    assert (client.schedules("q")[0].payload, client.schedules("q")[0].type_name) == ("null", None)
    assert client.unschedule("q", "nightly") is True
    assert client.unschedule("q", "nightly") is False
    assert client.schedules("q") == []


def test_a_sent_occurrence_is_listed(client: Any, conn: psycopg.Connection[Any]) -> None:
    make_queue(conn, "q")
    client.schedule("q", "s", "* * * * *", 7)
    make_due(conn)
    client.ticker_all()
    [s] = client.schedules()
    assert s.last_event_id is not None and s.last_run is not None and s.next_run > s.last_run
    [(data, name, at)] = rows(conn, "select ev_data, ev_extra2, ev_extra3 from pgque.event_1")
    assert (data, name) == ("7", "s")
    assert at == s.last_run.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "text"),
    [
        (("nope", "s", "@daily", {}), {}, pgque.PgqueQueueNotFound, "queue not found: nope"),
        (("q", "s", "61 * * * *", {}), {}, pgque.PgqueInvalidArgument,
         "the minute field '61' is out of range"),
        (("q", "s", "@daily", {}), {"time_zone": "Mars/Base"}, pgque.PgqueInvalidArgument,
         "unknown time zone 'Mars/Base'"),
        (("q", "s", "@daily", "not json"), {}, pgque.PgqueInvalidArgument,
         "payload is not valid JSON"),
        (("q", "s\x00", "@daily", {}), {}, pgque.PgqueInvalidArgument, "name contains a NUL"),
    ],
)  # fmt: skip
def test_bad_arguments_say_what_is_wrong(
    client: Any, conn: psycopg.Connection[Any], args: Any, kwargs: Any, error: Any, text: str
) -> None:
    make_queue(conn, "q")
    with pytest.raises(error, match=None) as caught:
        client.schedule(*args, **kwargs)
    assert text in str(caught.value)
    assert client.schedules() == []


# -- @consumer.every ------------------------------------------------------------------


def every(consumer: Any, received: list[pgque.Message], **options: Any) -> None:
    """``@consumer.every("* * * * *", type="report.tick", ...)`` appending to ``received``."""
    options.setdefault("type", "report.tick")
    if isinstance(consumer, pgque.AsyncConsumer):

        async def handler(msg: pgque.Message) -> None:
            received.append(msg)

        consumer.every("* * * * *", **options)(handler)
    else:
        consumer.every("* * * * *", **options)(received.append)


def next_run(conn: psycopg.Connection[Any]) -> Any:
    return one(conn, "select next_run from pgque.schedules()")


def test_every_handles_each_occurrence_once_across_a_restart(
    kind: str, db: str, queue: str, conn: psycopg.Connection[Any],
    start: Callable[[Any], Running],
) -> None:  # fmt: skip
    received: list[pgque.Message] = []
    consumer = make(kind, db, poll_interval=0.2)
    every(consumer, received, payload={"report": "daily"})
    running = start(consumer)
    wait_for(lambda: consumer.last_poll_at, what="the consumer's first poll")
    [(name, cron, type_name)] = rows(conn, "select schedule_name, cron, type_name"
                                           " from pgque.schedules()")  # fmt: skip
    assert (name, cron, type_name) == ("report.tick", "* * * * *", "report.tick")
    for n in (1, 2):
        make_due(conn)
        one(conn, "select pgque.ticker()")
        force_tick(conn)
        wait_for(lambda n=n: len(received) == n, what=f"occurrence {n} handled")  # type: ignore[misc]
    assert [m.json() for m in received] == [{"report": "daily"}] * 2
    assert {m.extra2 for m in received} == {"report.tick"}
    assert received[-1].extra3 == one(
        conn, "select to_char(last_run at time zone 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"
              " from pgque.schedules()"
    )  # fmt: skip
    # A restart upserts the schedule again: it keeps its next run, sends nothing.
    before = next_run(conn)
    running.stop()
    assert running.outcome(10) is None
    again = make(kind, db, poll_interval=0.2)
    every(again, received, payload={"report": "daily"})
    start(again)
    wait_for(lambda: again.last_poll_at, what="the restarted consumer's first poll")
    assert next_run(conn) == before
    one(conn, "select pgque.ticker()")
    force_tick(conn)
    wait_for(lambda: one(conn, "select sub_batch is null from pgque.subscription"),
             what="the batch after the restart")  # fmt: skip
    assert len(received) == 2
    make_due(conn)
    one(conn, "select pgque.ticker()")
    force_tick(conn)
    wait_for(lambda: len(received) == 3, what="occurrence 3 handled")
    assert one(conn, "select count(*) from pgque.event_1 where ev_extra2 = 'report.tick'") == 3


def test_every_refuses_what_it_cannot_schedule(
    kind: str, db: str, queue: str, start: Callable[[Any], Running]
) -> None:
    consumer = make(kind, db)
    received: list[pgque.Message] = []
    with pytest.raises(ValueError, match="needs the messages' type"):
        every(consumer, received, type="*")
    every(consumer, received, name="tick")
    with pytest.raises(ValueError, match="a schedule named 'tick' already"):
        every(consumer, received, name="tick")
    bad = make(kind, db)
    if kind == "async":

        async def handler(msg: pgque.Message) -> None:
            pass

        bad.every("0 0 31 2 *", type="t")(handler)
    else:
        bad.every("0 0 31 2 *", type="t")(lambda msg: None)
    error = start(bad).outcome(10)
    assert isinstance(error, pgque.PgqueInvalidArgument)
    assert "consumer 'c', @every schedule 't': cron '0 0 31 2 *': no date ever matches" in str(
        error
    )


def test_a_reader_consumer_starts_when_the_schedule_exists(
    kind: str, db: str, queue: str, conn: psycopg.Connection[Any],
    start: Callable[[Any], Running],
) -> None:  # fmt: skip
    role = f"t_reader_{kind}"
    conn.execute(f"create role {role} nologin in role pgque_reader")
    try:
        reader_dsn = f"{db} options='-c role={role}'"
        consumer = make(kind, reader_dsn)
        every(consumer, [], payload=[1])
        error = start(consumer).outcome(10)
        assert isinstance(error, pgque.PgqueError)
        assert "consumer 'c' may not schedule 'report.tick' on queue 'q'" in str(error)
        assert "pgque_admin" in str(error) and "pgque schedule add" in str(error)
        with pgque.connect(db, autocommit=True) as admin:
            admin.schedule("q", "report.tick", "* * * * *", [1], type="report.tick")
        received: list[pgque.Message] = []
        consumer = make(kind, reader_dsn, poll_interval=0.2)
        every(consumer, received, payload=[1])
        start(consumer)
        wait_for(lambda: consumer.last_poll_at, what="the reader consumer's first poll")
        make_due(conn)
        one(conn, "select pgque.ticker()")
        force_tick(conn)
        wait_for(lambda: len(received) == 1, what="the occurrence handled")
    finally:
        conn.execute(f"drop owned by {role}")
        conn.execute(f"drop role {role}")
