"""The ticker's functions read only the queue's own objects.

``_ticker_sequences``, ``_ticker_arm_wake``, ``_tick_stragglers``, ``_tick`` and
``ticker_eager`` run as
pgque's owner (here a superuser). A queue row changed behind pgque's back
(by the superuser, as a bug or an old install without the CHECK
``queue_objects_follow_id`` might have left it) must not make them read an
object outside pgque: they derive each object from the queue id in schema
pgque, and report the queue's real sequence.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from _engine import make_queue, one, rows, tick

OUTSIDER_VALUE = 424242


@pytest.fixture
def tampered(conn: psycopg.Connection[Any]) -> int:
    """Queue ``jobs`` with 3 events, its stored names pointing at public objects.

    Returns the queue's real event sequence value.
    """
    make_queue(conn, "jobs")
    for payload in ("a", "b", "c"):
        one(conn, "select pgque.send('jobs', %s)", payload)
    real = one(
        conn,
        "select pg_catalog.pg_sequence_last_value(pg_catalog.to_regclass("
        " 'pgque.event_' || queue_id || '_id_seq')) from pgque.queue where queue_name = 'jobs'",
    )
    assert real is not None and real != OUTSIDER_VALUE
    conn.execute("create sequence public.app_seq")
    conn.execute("select pg_catalog.setval('public.app_seq', %s)", (OUTSIDER_VALUE,))
    conn.execute("create table public.app_data_0 (ev_txid xid8)")
    conn.execute("alter table pgque.queue drop constraint queue_objects_follow_id")
    conn.execute(
        "update pgque.queue set queue_event_seq = 'public.app_seq',"
        " queue_data_pfx = 'public.app_data' where queue_name = 'jobs'"
    )
    return int(real)


def _outsider_untouched(conn: psycopg.Connection[Any]) -> None:
    assert one(conn, "select last_value from public.app_seq") == OUTSIDER_VALUE


def test_ticker_sequences_reports_the_queues_own_sequence(
    conn: psycopg.Connection[Any], tampered: int
) -> None:
    assert rows(conn, "select queue_name, event_seq from pgque._ticker_sequences()") == [
        ("jobs", tampered)
    ]
    _outsider_untouched(conn)


def test_arming_the_wakeup_reports_the_queues_own_sequence(
    conn: psycopg.Connection[Any], tampered: int
) -> None:
    assert rows(conn, "select queue_name, event_seq from pgque._ticker_arm_wake()") == [
        ("jobs", tampered)
    ]
    _outsider_untouched(conn)


def test_stragglers_read_only_the_queues_own_event_tables(
    conn: psycopg.Connection[Any], connect: Any
) -> None:
    make_queue(conn, "jobs")
    # A producer still running when the tick is taken: a straggler.
    producer = connect(autocommit=False)
    producer.execute("select pgque.send('jobs', 'late')")
    one(conn, "select pgque.force_tick('jobs')")
    tick(conn, "jobs")
    producer.commit()
    # Its event is in the queue's own table; a public look-alike (empty) would
    # hide it.
    conn.execute("create table public.app_data_0 (ev_txid xid8)")
    conn.execute("alter table pgque.queue drop constraint queue_objects_follow_id")
    conn.execute(
        "update pgque.queue set queue_data_pfx = 'public.app_data' where queue_name = 'jobs'"
    )
    assert one(conn, "select pgque._tick_stragglers('jobs')") == 1


def test_ticks_record_the_queues_own_sequence(conn: psycopg.Connection[Any], tampered: int) -> None:
    """``_tick`` (through ``ticker``) and ``ticker_eager`` read the queue's event
    sequence and draw the tick id from its tick sequence, both by the queue id."""
    conn.execute("create sequence public.app_tick_seq")
    conn.execute("select pg_catalog.setval('public.app_tick_seq', %s)", (OUTSIDER_VALUE,))
    conn.execute(
        "update pgque.queue set queue_tick_seq = 'public.app_tick_seq' where queue_name = 'jobs'"
    )
    eager = one(conn, "select pgque.ticker_eager('jobs', '0 seconds')")
    assert eager is not None and eager != OUTSIDER_VALUE + 1
    assert rows(
        conn,
        "select tick_id, tick_event_seq from pgque.tick t join pgque.queue q"
        " on q.queue_id = t.tick_queue where q.queue_name = 'jobs'"
        " order by tick_id desc limit 1",
    ) == [(eager, tampered)]
    _outsider_untouched(conn)
    assert one(conn, "select last_value from public.app_tick_seq") == OUTSIDER_VALUE
