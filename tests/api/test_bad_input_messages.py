"""Bad input to the modern API: a clear error naming the argument or object, nothing lost.

Each error must say which argument or object is wrong and carry a ``pgque:<code>``
DETAIL that :mod:`pgque.errors` maps to a class; inputs that have an obvious meaning
(a very long idempotency key, a purge age beyond the calendar) must simply work.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

import pgque
from _engine import make_queue, one, rows, tick
from pgque.errors import from_database_error
from pgque.serializers import RAW_TEXT

RAISE = psycopg.errors.RaiseException

#: 2,880 characters that do not compress (the key of the report: 2896-byte index row).
LONG_KEY = "".join(f"{i:04x}{(i * 7919) % 65521:05x}" for i in range(320))


@pytest.fixture
def queue(conn: psycopg.Connection[Any]) -> str:
    make_queue(conn, "q")
    assert one(conn, "select pgque.subscribe('q', 'c')") == 1
    return "q"


def refused(
    conn: psycopg.Connection[Any], query: str, *params: Any
) -> tuple[pgque.PgqueError, psycopg.Error]:
    """Run a call that must fail; return the mapped pgque error and the driver's."""
    with pytest.raises(psycopg.Error) as info:
        conn.execute(query, params or None)
    return from_database_error(info.value), info.value


def send_idem(conn: psycopg.Connection[Any], key: str, ttl: str = "1 hour") -> tuple[int, bool]:
    (row,) = rows(conn, "select * from pgque.send_idem('q', 't', 'b', %s, %s::interval)", key, ttl)
    return row[0], row[1]


# -- send_idem ------------------------------------------------------------------------


def test_send_idem_takes_a_key_of_any_length(conn: psycopg.Connection[Any], queue: str) -> None:
    assert len(LONG_KEY) == 2880
    huge = LONG_KEY * 40  # 115,200 characters
    first, deduped = send_idem(conn, LONG_KEY)
    assert deduped is False
    assert send_idem(conn, LONG_KEY) == (first, True)
    other, deduped = send_idem(conn, LONG_KEY[:-1] + "!")
    assert deduped is False and other != first
    big, deduped = send_idem(conn, huge)
    assert deduped is False
    assert send_idem(conn, huge) == (big, True)
    # The events carry no key.
    assert rows(conn, "select ev_extra2 from pgque.event_template") == [(None,), (None,), (None,)]


def test_send_idem_stores_only_digests(conn: psycopg.Connection[Any], queue: str) -> None:
    """pgque.idem holds a digest of every key, short or long; the digest itself, sent as
    a key, is another key; a claim an earlier version stored as given still matches
    once ``upgrade_schema()`` has run (as every install does)."""
    short_id, _ = send_idem(conn, "order-42")
    long_id, _ = send_idem(conn, LONG_KEY)
    stored = dict(rows(conn, "select event_id, idem_key from pgque.idem"))
    for event_id in (short_id, long_id):
        assert stored[event_id].startswith("\x01sha256:") and len(stored[event_id]) == 72
    assert "order-42" not in stored[short_id]
    # Sending the stored digest itself as a key is a different key.
    spelled, deduped = send_idem(conn, stored[long_id])
    assert deduped is False and spelled != long_id
    assert send_idem(conn, LONG_KEY) == (long_id, True)
    assert send_idem(conn, "order-42") == (short_id, True)
    # Claims stored as given by an earlier version: digested by the upgrade step.
    conn.execute(
        "insert into pgque.idem (queue_id, idem_key, event_id, expires_at)"
        " select queue_id, k, 4242 + n, now() + interval '1 hour'"
        " from pgque.queue, unnest(array['legacy-key', '']) with ordinality u(k, n)"
        " where queue_name = 'q'"
    )
    assert one(conn, "select pgque.upgrade_schema()") == 1
    assert one(conn, "select pgque.upgrade_schema()") == 0
    assert send_idem(conn, "legacy-key") == (4243, True)
    assert send_idem(conn, "") == (4244, True)
    assert one(conn, "select count(*) from pgque.idem where idem_key = 'legacy-key'") == 0


@pytest.mark.parametrize("ttl", ["1000000 years", "101 years", "-1 second", "0"])
def test_send_idem_refuses_a_ttl_out_of_range(
    conn: psycopg.Connection[Any], queue: str, ttl: str
) -> None:
    error, raw = refused(
        conn, "select * from pgque.send_idem('q', 't', 'b', 'k', %s::interval)", ttl
    )
    assert isinstance(error, pgque.PgqueInvalidArgument)
    assert str(error).startswith("ttl must be a positive interval")
    assert "at most 100 years" in str(error) and "queue q" in str(error)
    assert raw.diag.message_detail == "pgque:invalid_argument"
    assert one(conn, "select count(*) from pgque.idem") == 0
    assert send_idem(conn, "k", "100 years")[1] is False


# -- subscribe, receive ----------------------------------------------------------------


def test_subscribe_to_a_missing_queue_names_it(conn: psycopg.Connection[Any]) -> None:
    error, raw = refused(conn, "select pgque.subscribe('nope', 'c')")
    assert isinstance(error, pgque.PgqueQueueNotFound)
    assert str(error) == "Event queue not created yet: nope"
    assert raw.diag.message_hint is not None and "create_queue" in raw.diag.message_hint
    error, _ = refused(conn, "select pgque.subscribe(null, 'c')")
    assert isinstance(error, pgque.PgqueQueueNotFound)
    assert str(error) == "Event queue not created yet: <NULL>"
    error, _ = refused(conn, "select pgque.register_subconsumer('nope', 'g', 'm')")
    assert str(error) == "Event queue not created yet: nope"
    assert one(conn, "select count(*) from pgque.consumer") == 0


def test_register_consumer_keeps_pgq_text_and_names_the_queue_in_the_hint(
    conn: psycopg.Connection[Any],
) -> None:
    error, raw = refused(conn, "select pgque.register_consumer('nope', 'c')")
    assert isinstance(error, pgque.PgqueQueueNotFound)
    assert raw.diag.message_primary == "Event queue not created yet"  # PgQ's text, exactly
    assert raw.diag.message_hint is not None and "nope" in raw.diag.message_hint
    assert error.hint == raw.diag.message_hint


def test_receive_from_a_missing_queue_reports_the_queue(
    conn: psycopg.Connection[Any], queue: str
) -> None:
    error, raw = refused(conn, "select * from pgque.receive('nope', 'c')")
    assert isinstance(error, pgque.PgqueQueueNotFound)
    assert str(error) == "queue not found: nope"
    assert raw.diag.message_detail == "pgque:queue_not_found"
    error, _ = refused(conn, "select * from pgque.receive(null, 'c')")
    assert str(error) == "queue not found: <NULL>"
    error, _ = refused(conn, "select * from pgque.receive('', 'c')")
    assert isinstance(error, pgque.PgqueInvalidArgument)
    assert str(error) == "queue name must not be empty"
    # A queue that exists, a consumer that is not subscribed: what to run.
    error, raw = refused(conn, "select * from pgque.receive('q', 'nobody')")
    assert isinstance(error, pgque.PgqueConsumerNotFound)
    assert str(error) == "Not subscriber to queue: q/nobody"
    assert raw.diag.message_hint is not None and "pgque.subscribe" in raw.diag.message_hint


# -- nack and the dead letter queue -------------------------------------------------------


@pytest.mark.parametrize("retry_after", ["101 years", "1000000 years", "-1 second"])
def test_nack_refuses_a_delay_out_of_range(
    conn: psycopg.Connection[Any], queue: str, retry_after: str
) -> None:
    one(conn, "select pgque.send('q', 'x')")
    tick(conn, queue)
    ((msg_id, batch_id),) = rows(conn, "select msg_id, batch_id from pgque.receive('q', 'c')")
    error, raw = refused(
        conn, "select pgque.nack(%s, %s, %s::interval)", batch_id, msg_id, retry_after
    )
    assert isinstance(error, pgque.PgqueInvalidArgument)
    assert str(error).startswith("nack: retry_after must be")
    assert "at most 100 years" in str(error) and f"batch {batch_id}" in str(error)
    assert raw.diag.message_detail == "pgque:invalid_argument"
    # Nothing queued; the batch is still open and the longest delay works.
    assert one(conn, "select count(*) from pgque.retry_queue") == 0
    assert one(conn, "select pgque.nack(%s, %s, '100 years')", batch_id, msg_id) == 1
    assert one(conn, "select pgque.ack(%s)", batch_id) == 1
    assert one(conn, "select ev_retry_after > now() + interval '99 years' from pgque.retry_queue")


@pytest.mark.parametrize("limit", [-1, -100])
def test_dlq_inspect_refuses_a_negative_limit(
    conn: psycopg.Connection[Any], queue: str, limit: int
) -> None:
    error, raw = refused(conn, "select * from pgque.dlq_inspect('q', %s)", limit)
    assert isinstance(error, pgque.PgqueInvalidArgument)
    assert str(error) == (
        f"dlq_inspect: limit_count must be >= 0 (NULL: no limit), got {limit} (queue q)"
    )
    assert raw.diag.message_detail == "pgque:invalid_argument"
    assert rows(conn, "select * from pgque.dlq_inspect('q', 0)") == []
    assert rows(conn, "select * from pgque.dlq_inspect('q', null)") == []


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("select * from pgque.dlq_inspect(null)", "dlq_inspect: queue name must not be null"),
        ("select * from pgque.dlq_replay_all(null)", "dlq_replay_all: queue name must not be null"),
        ("select pgque.dlq_purge(null)", "dlq_purge: queue name must not be null"),
    ],
)
def test_dlq_functions_refuse_a_null_queue(
    conn: psycopg.Connection[Any], queue: str, query: str, message: str
) -> None:
    error, _ = refused(conn, query)
    assert isinstance(error, pgque.PgqueInvalidArgument)
    assert str(error) == message


def test_dlq_purge_of_ages_beyond_the_calendar_purges_nothing(
    conn: psycopg.Connection[Any], queue: str
) -> None:
    one(conn, "select pgque.send('q', 'x')")
    tick(conn, queue)
    ((msg_id, batch_id),) = rows(conn, "select msg_id, batch_id from pgque.receive('q', 'c')")
    one(conn, "select pgque.dead_letter_event(%s, %s, 'bad')", batch_id, msg_id)
    one(conn, "select pgque.ack(%s)", batch_id)
    assert one(conn, "select pgque.dlq_purge('q', '1000000 years')") == 0
    assert one(conn, "select pgque.dlq_purge('q', '178000000 years')") == 0
    assert one(conn, "select count(*) from pgque.dead_letter") == 1


# -- cooperative members and partition slots ----------------------------------------------


def test_receive_coop_dead_interval(conn: psycopg.Connection[Any], queue: str) -> None:
    # Longer than the calendar: nobody is ever taken over, no overflow.
    assert rows(conn, "select * from pgque.receive_coop('q', 'g', 'm', 10, '1000000 years')") == []
    error, raw = refused(conn, "select * from pgque.receive_coop('q', 'g', 'm', 10, '-1 second')")
    assert isinstance(error, pgque.PgqueInvalidArgument)
    assert str(error) == (
        "dead_interval must be a non-negative interval or NULL, got -00:00:01"
        " (consumer g.m on queue q)"
    )
    assert raw.diag.message_detail == "pgque:invalid_argument"


@pytest.mark.parametrize("ttl", ["1000000 years", "101 years"])
def test_claim_slot_refuses_a_lease_beyond_100_years(
    conn: psycopg.Connection[Any], queue: str, ttl: str
) -> None:
    conn.execute("select pgque.subscribe_slot('q', 's', 0, 1)")
    error, raw = refused(conn, "select pgque.claim_slot('q', 's', 0, 'w', %s::interval)", ttl)
    assert isinstance(error, pgque.PgqueInvalidArgument)
    assert str(error).startswith("lease ttl must be >= 1 second and at most 100 years, got ")
    assert raw.diag.message_detail == "pgque:invalid_argument"
    assert one(conn, "select epoch from pgque.partition_slot") == 0
    assert one(conn, "select pgque.claim_slot('q', 's', 0, 'w', '100 years')") == 1


# -- the Python SDK: NUL characters --------------------------------------------------------


def consume_payloads(conn: psycopg.Connection[Any]) -> list[str]:
    tick(conn, "q")
    msgs = rows(conn, "select payload, batch_id from pgque.receive('q', 'c')")
    one(conn, "select pgque.ack(%s)", msgs[0][1])
    return [m[0] for m in msgs]


def test_client_and_producer_store_a_json_nul_alike(
    db: str, conn: psycopg.Connection[Any], queue: str
) -> None:
    """JSON can carry U+0000 (as the escape \\u0000), jsonb cannot: both SDK paths store the
    JSON text instead of failing, and the consumer decodes the very payload that was sent."""
    payload = {"a": "x\x00y", "b": ["\x00"]}
    with pgque.connect(db, autocommit=True) as client:
        client.send("q", payload)
        client.send("q", payload, type="typed", extras=("e1", None, None, None))
        client.send("q", '"\\u0000 as JSON text"')
        assert len(client.send_batch("q", "t", [payload, {"plain": 1}])) == 2
    with pgque.Producer(db) as producer:
        producer.send("q", payload)
        producer.send_batch("q", [payload])
    got = [json.loads(p) for p in consume_payloads(conn)]
    assert got == [payload, payload, "\x00 as JSON text", payload, {"plain": 1}, payload, payload]


def test_client_still_refuses_json_text_that_is_not_json(db: str, queue: str) -> None:
    with pgque.connect(db, autocommit=True) as client:
        with pytest.raises(pgque.PgqueInvalidArgument, match="payload is not valid JSON"):
            client.send("q", '{"a": "\\u0000"')
        with pytest.raises(pgque.PgqueInvalidArgument, match=r"payloads\[1\] is not valid JSON"):
            client.send_batch("q", "t", [{"ok": 1}, "{nope"])


@pytest.mark.parametrize("serializer", ["json", "raw"])
def test_a_nul_that_text_cannot_hold_is_a_clear_error(
    db: str, conn: psycopg.Connection[Any], queue: str, serializer: str
) -> None:
    """A raw NUL in text (not JSON-escaped) cannot be stored: both SDK paths say which
    argument holds it, and send nothing."""
    kwargs: dict[str, Any] = {"serializer": RAW_TEXT} if serializer == "raw" else {}
    bad = "x\x00y" if serializer == "raw" else '"x\x00y"'
    with psycopg.connect(db, autocommit=True) as raw_conn:
        client = pgque.PgqueClient(raw_conn, **kwargs)
        with pytest.raises(pgque.PgqueInvalidArgument, match=r"^payload contains a NUL"):
            client.send("q", bad)
        with pytest.raises(pgque.PgqueInvalidArgument, match=r"^payloads\[1\] contains a NUL"):
            client.send_batch("q", "t", ["1" if serializer == "json" else "a", bad])
        with pytest.raises(pgque.PgqueInvalidArgument, match=r"^queue contains a NUL"):
            client.send("q\x00", "1")
        with pytest.raises(pgque.PgqueInvalidArgument, match=r"^consumer contains a NUL"):
            client.receive("q", "c\x00")
    with pgque.Producer(db, **kwargs) as producer:
        with pytest.raises(pgque.PgqueInvalidArgument, match=r"^payload contains a NUL"):
            producer.send("q", bad)
        with pytest.raises(pgque.PgqueInvalidArgument, match=r"^payloads\[0\] contains a NUL"):
            producer.send_batch("q", [bad])
        with pytest.raises(pgque.PgqueInvalidArgument, match=r"^type contains a NUL"):
            producer.send("q", "1", type="t\x00")
        with pytest.raises(pgque.PgqueInvalidArgument, match=r"^queue contains a NUL"):
            producer.send("q\x00", "1")
        with pytest.raises(pgque.PgqueInvalidArgument, match=r"^extras\[2\] contains a NUL"):
            producer.send("q", "1", extras=(None, None, "\x00", None))
    assert one(conn, "select count(*) from pgque.event_template") == 0


def test_data_errors_from_the_server_are_invalid_arguments(
    conn: psycopg.Connection[Any], queue: str
) -> None:
    error, _ = refused(conn, "select pgque.send('q', %s::jsonb)", '{"a": "\\u0000"}')
    assert isinstance(error, pgque.PgqueInvalidArgument)
    assert error.sqlstate == "22P05"
    error, _ = refused(conn, "select pgque.send_idem('q', 't', 'b', 'k', 'soon')")
    assert isinstance(error, pgque.PgqueInvalidArgument)
