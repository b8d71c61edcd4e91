"""Faults a consumer must survive or report, never loop on: each test runs twice,
against :class:`pgque.Consumer` and :class:`pgque.AsyncConsumer`.

* A retry delay out of range is refused where it is given (constructor,
  ``msg.nack``), naming the argument and the range.
* A settle the server refuses (nack, dead letter, ack) never re-runs the
  batch's handlers at full speed: a refused nack dead-letters the message with
  the cause; batches that still cannot be settled are retried after a
  growing pause, and ``start()`` raises ``ConsumerGaveUp`` after
  ``max_settle_failures`` of them in a row.
* A setup error (no subscription, no queue, pgque not installed) ends
  ``start()`` at once, saying what to run; ``subscribe=True`` subscribes.
* A consumer started before its database decides about its ticker once it
  connects; its reconnect pause starts again after every successful poll.

The server refuses a settle because a trigger of the test's own makes it so;
nothing is mocked. Ticks are forced (``force_next_tick`` + ``ticker``), except
where the consumer's own ticker is the subject.
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from typing import Any, cast

import psycopg
import pytest
from twins import batch_done, force_tick, handle, make, multi_class

import pgque
from _db import PgServer
from _engine import one, rows
from _wait import wait_for
from pgque._cluster import TempCluster

#: The largest retry delay, in seconds: PostgreSQL's 100 years (a year is 360 days).
MAX_DELAY = 3_110_400_000


def refuse(conn: psycopg.Connection[Any], table: str, when: str = "") -> None:
    """Make the server refuse writes to a pgque table (a trigger of the test's);
    ``when`` (a trigger condition) limits it to updates that match."""
    conn.execute(
        "create or replace function public.refuse() returns trigger language plpgsql as"
        " $$ begin raise exception 'refused by the test (%)', tg_table_name; end $$"
    )
    conn.execute(
        f"create trigger refuse_{table.split('.')[-1]}"
        f" before {'update' if when else 'insert or update'} on {table}"
        f" for each row {when} execute function public.refuse()"
    )


# -- retry delays --------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"retry_after": -1}, ValueError),
        ({"retry_after": MAX_DELAY + 1}, ValueError),
        ({"retry_after": 2**31 * 100}, ValueError),
        ({"retry_after": math.nan}, ValueError),
        ({"retry_after": math.inf}, ValueError),
        ({"retry_after": "60"}, TypeError),
        ({"retry_after": True}, TypeError),
        ({"retry_backoff": (-1, 10)}, ValueError),
        ({"retry_backoff": (1, MAX_DELAY * 2)}, ValueError),
        ({"retry_backoff": (5, 1)}, ValueError),
        ({"max_settle_failures": 0}, ValueError),
    ],
)
def test_bad_delays_are_refused_at_construction(
    kind: str, db: str, options: dict[str, Any], error: type[Exception]
) -> None:
    with pytest.raises(error) as raised:
        make(kind, db, **options)
    message = str(raised.value)
    assert next(iter(options)) in message
    if "max_settle_failures" not in options:
        assert f"0 to {MAX_DELAY}" in message  # the allowed range, in seconds


def test_the_largest_delay_is_accepted(kind: str, db: str) -> None:
    assert make(kind, db, retry_after=MAX_DELAY).retry_after == MAX_DELAY
    assert make(kind, db, retry_backoff=(0, MAX_DELAY)).retry_backoff == (0, MAX_DELAY)


@pytest.mark.parametrize("delay", [-1, MAX_DELAY + 1, 2**31 * 100, math.nan, math.inf])
def test_message_nack_refuses_a_delay_out_of_range(delay: float) -> None:
    msg = pgque.Message(1, 1, "t", None)
    with pytest.raises(ValueError, match=rf"retry_after must be .*0 to {MAX_DELAY}"):
        msg.nack(retry_after=delay)
    with pytest.raises(TypeError, match="retry_after"):
        msg.nack(retry_after="1 hour")  # type: ignore[arg-type]
    msg.nack(retry_after=MAX_DELAY)


def test_every_delay_in_range_reaches_the_server(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, start: Any
) -> None:
    """Tiny, fractional and the largest delays: the server takes them all."""
    delays = [1e-05, 0.5, MAX_DELAY]
    consumer = make(kind, db, poll_interval=0.1)
    calls: list[int] = []

    def later(msg: pgque.Message) -> None:
        calls.append(msg.msg_id)
        msg.nack(retry_after=delays[int(msg.json())])

    handle(consumer, later)
    for n in range(len(delays)):
        one(conn, "select pgque.send('q', %s::jsonb)", str(n))
    force_tick(conn)
    running = start(consumer)
    wait_for(lambda: batch_done(conn), what="the batch is acked")
    assert one(conn, "select count(*) from pgque.retry_queue") == 3
    far = one(conn, "select max(ev_retry_after) - now() from pgque.retry_queue")
    assert far.days >= 35_999
    assert len(calls) == 3 and running.thread.is_alive()


# -- settling the server refuses -------------------------------------------------


def test_a_refused_nack_dead_letters_the_message_with_the_cause(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, start: Any
) -> None:
    refuse(conn, "pgque.retry_queue")
    consumer = make(kind, db, poll_interval=0.1, retry_after=0)
    calls: list[int] = []

    def fail(msg: pgque.Message) -> None:
        calls.append(msg.msg_id)
        if msg.type != "ok":
            raise RuntimeError("the handler fails")

    handle(consumer, fail)
    msg_id = one(conn, "select pgque.send('q', '{}'::jsonb)")
    one(conn, "select pgque.send('q', 'ok', '{}'::jsonb)")
    force_tick(conn)
    running = start(consumer)
    wait_for(lambda: batch_done(conn), what="the batch is acked")
    [(ev_id, reason)] = rows(conn, "select ev_id, dl_reason from pgque.dead_letter")
    assert ev_id == msg_id
    assert "nack failed" in reason and "refused by the test (retry_queue)" in reason
    assert sorted(calls) == sorted({*calls}) and len(calls) == 2  # each handled once
    assert running.thread.is_alive()


@pytest.mark.parametrize("refused", ["nack and dead letter", "dead letter", "ack"])
def test_settles_that_keep_failing_end_start_after_a_pause_each(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, start: Any, refused: str
) -> None:
    if "nack" in refused:
        refuse(conn, "pgque.retry_queue")
    if "dead letter" in refused:
        refuse(conn, "pgque.dead_letter")
    if refused == "ack":
        finishing = "when (old.sub_batch is not null and new.sub_batch is null)"
        refuse(conn, "pgque.subscription", finishing)
    consumer = make(kind, db, poll_interval=0.1, retry_after=0, max_settle_failures=3)
    calls: list[float] = []

    def work(msg: pgque.Message) -> None:
        calls.append(time.monotonic())
        if refused == "dead letter":
            msg.dead_letter("poison")
        elif refused != "ack":
            raise RuntimeError("the handler fails")

    handle(consumer, work)
    one(conn, "select pgque.send('q', '{}'::jsonb)")
    force_tick(conn)
    error = start(consumer).outcome(timeout=20)
    assert isinstance(error, pgque.ConsumerGaveUp), error
    assert "3 batches in a row" in str(error) and "refused by the test" in str(error)
    assert len(calls) == 3  # bounded: the handler ran once per attempt
    pauses = [b - a for a, b in itertools.pairwise(calls)]
    assert min(pauses) >= 0.08  # never at full speed: 0.1 s, then 0.2 s (with jitter)
    assert one(conn, "select sub_last_tick from pgque.subscription") == 1  # rolled back
    assert rows(conn, "select * from pgque.dead_letter") == []


def test_a_successful_batch_resets_the_count_of_failed_settles(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, start: Any
) -> None:
    refuse(conn, "pgque.dead_letter")
    consumer = make(kind, db, poll_interval=0.1, max_settle_failures=2)
    calls: list[str] = []

    def work(msg: pgque.Message) -> None:
        calls.append(msg.json())
        if msg.json() == "poison" and calls.count("poison") < 2:
            msg.dead_letter("poison")  # refused once: one failed settle

    handle(consumer, work)
    running = start(consumer)
    for payload in ("poison", "fine", "poison"):  # 1 failed settle, 0, 1: never 2 in a row
        calls.clear()
        one(conn, "select pgque.send('q', %s::jsonb)", f'"{payload}"')
        force_tick(conn)
        last = one(conn, "select max(tick_id) from pgque.tick")
        wait_for(lambda t=last: one(conn, "select sub_last_tick from pgque.subscription") == t,
                 what=f"the {payload} batch is acked")  # fmt: skip
    assert running.thread.is_alive(), running.error
    assert rows(conn, "select * from pgque.dead_letter") == []


# -- setup errors ------------------------------------------------------------------


def test_a_consumer_not_subscribed_stops_at_once_saying_what_to_run(
    kind: str, db: str, queue: str, start: Any
) -> None:
    consumer = make(kind, db, name="nobody", poll_interval=0.1)
    handle(consumer, lambda msg: None)
    error = start(consumer).outcome(timeout=5)
    assert isinstance(error, pgque.PgqueConsumerNotFound), error
    assert "pgque subscribe q nobody" in str(error) and "subscribe=True" in str(error)
    assert consumer.reconnects == 0


def test_a_missing_queue_stops_at_once_naming_it(kind: str, db: str, start: Any) -> None:
    for options in ({}, {"subscribe": True}, {"subconsumer": "m1"}):
        consumer = make(kind, db, queue="nope", poll_interval=0.1, **options)
        handle(consumer, lambda msg: None)
        error = start(consumer).outcome(timeout=5)
        assert isinstance(error, pgque.PgqueQueueNotFound), (options, error)
        assert "'nope'" in str(error) and "pgque create-queue nope" in str(error)
        assert consumer.reconnects == 0


def test_a_database_without_pgque_stops_at_once(kind: str, empty_db: str, start: Any) -> None:
    consumer = make(kind, empty_db, poll_interval=0.1)
    handle(consumer, lambda msg: None)
    error = start(consumer).outcome(timeout=5)
    assert isinstance(error, pgque.PgqueNotInstalledError), error
    assert "pgque install" in str(error)


def test_subscribe_true_subscribes_on_connect(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, start: Any
) -> None:
    consumer = make(kind, db, name="newcomer", poll_interval=0.1, subscribe=True)
    got: list[int] = []
    handle(consumer, lambda msg: got.append(msg.msg_id))
    start(consumer)
    subscribed = "select count(*) from pgque.get_consumer_info('q', 'newcomer')"
    wait_for(lambda: one(conn, subscribed) == 1, what="subscribed")
    msg_id = one(conn, "select pgque.send('q', '{}'::jsonb)")
    force_tick(conn)
    wait_for(lambda: got == [msg_id], what="the message is handled")


# -- connecting --------------------------------------------------------------------


def test_started_while_the_database_is_down_it_ticks_once_up(
    kind: str, pg_server: PgServer, start: Any
) -> None:
    with TempCluster(pg_server.version) as cluster:
        dsn = cluster.dsn()
        with psycopg.connect(dsn, autocommit=True) as conn:
            pgque.install(conn)
            conn.execute("select pgque.create_queue('q')")
            conn.execute("select pgque.subscribe('q', 'c')")
        cluster._run("pg_ctl", "stop", "-w", "-m", "fast")
        consumer = make(kind, dsn, ticker="auto", poll_interval=30)
        got: list[int] = []
        handle(consumer, lambda msg: got.append(msg.msg_id))
        running = start(consumer)
        wait_for(lambda: consumer.reconnects >= 1, what="a failed connection attempt")
        cluster._run("pg_ctl", "start", "-w", "-l", str(cluster.log_file))
        with psycopg.connect(dsn, autocommit=True) as conn:
            for _ in range(20):
                conn.execute("select pgque.send('q', '{}'::jsonb)")  # never ticked by the test
        wait_for(lambda: len(got) == 20, timeout=30, what="20 messages handled")
        running.stop()
        assert running.outcome(timeout=10) is None


def test_the_reconnect_pause_starts_again_after_a_successful_poll(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, start: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    caplog.set_level(logging.WARNING, logger="pgque")
    app = f"blip_{kind}"
    consumer = make(kind, f"{db} application_name={app}", poll_interval=0.05, listen=False)
    handle(consumer, lambda msg: None)
    start(consumer)
    backends = f"select pid from pg_stat_activity where application_name = '{app}'"
    for blip in range(5):
        polled = time.time()
        wait_for(lambda p=polled: rows(conn, backends) and (consumer.last_poll_at or 0) > p,
                 what="a poll on a new connection")  # fmt: skip
        conn.execute(f"select pg_terminate_backend(pid) from ({backends}) b")
        wait_for(lambda n=blip: consumer.reconnects == n + 1, what="a reconnect")  # type: ignore[misc]
    pauses = [cast(tuple[Any, ...], r.args)[-1] for r in caplog.records
              if "reconnecting in" in r.getMessage()]  # fmt: skip
    assert len(pauses) == 5
    assert max(pauses) <= 0.1 * 1.2 + 1e-9, pauses  # each the first step: 100 ms +- 20 %


def test_a_multi_queue_consumer_stops_at_once_on_a_setup_error(
    kind: str, db: str, queue: str, start: Any
) -> None:
    """The same rule where several consumers share a connection."""
    consumers = [make(kind, db, poll_interval=0.1), make(kind, db, name="nobody")]
    for consumer in consumers:
        handle(consumer, lambda msg: None)
    error = start(multi_class(kind)(consumers)).outcome(timeout=5)
    assert isinstance(error, pgque.PgqueConsumerNotFound), error
    assert "pgque subscribe q nobody" in str(error)


def test_a_dead_letter_says_which_error_the_handler_raised_last(
    kind: str, db: str, conn: psycopg.Connection[Any], queue: str, start: Any
) -> None:
    """After its retries, a message whose handler keeps raising is dead-lettered with
    the error of its last attempt, not a bare "max retries exceeded"."""
    one(conn, "select pgque.set_queue_config('q', 'max_retries', '1')")
    consumer = make(kind, db, poll_interval=0.05, retry_after=0)
    attempts: list[int | None] = []

    def fail(msg: pgque.Message) -> None:
        attempts.append(msg.retry_count)
        raise ValueError(f"no such customer (attempt {len(attempts)})")

    handle(consumer, fail)
    one(conn, "select pgque.send('q', '{}'::jsonb)")
    force_tick(conn)
    start(consumer)

    def dead_letters() -> list[Any]:
        one(conn, "select pgque.maint_retry_events()")  # a due retry back into the queue
        force_tick(conn)
        return rows(conn, "select dl_reason from pgque.dead_letter")

    [(reason,)] = wait_for(dead_letters, what="the dead letter")
    assert attempts == [None, 1]
    assert reason == (
        "max retries exceeded after 2 attempts;"
        " last error: ValueError: no such customer (attempt 2)"
    )
