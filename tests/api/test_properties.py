"""Property tests: random names and payloads through the SQL API and the SDK.

Every call either works or raises a :mod:`pgque.errors` class (a specific one, never the
bare base class) whose message names the bad value; and whatever was refused, the
queue stays consistent: every event that was sent is received exactly once per
consumer (its retries aside), and no batch is left open.

Each example starts from a database without queues (the previous example's are dropped),
so examples are independent while sharing one database; the example counts are kept
small so that the whole module runs in well under a minute.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pgque
from pgque.errors import from_database_error

SETTINGS = settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,  # no example store in the work tree; failures print their example
)

#: Characters PostgreSQL text can hold: anything but NUL (and unpaired surrogates,
#: which UTF-8 cannot encode).
TEXT_CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
ANY_CHARS = st.characters(blacklist_categories=("Cs",))

SPECIAL_NAMES = [
    "", "q", "a.b", "a#0/1", "#", "we'ird", 'dq"x', "q'; drop table pgque.queue; --",
    "Mixed Case", " ", "名前", "é" * 28, "é" * 29, "x" * 57, "x" * 58, "\\", "%s", "<NULL>",
]  # fmt: skip

names = st.one_of(
    st.none(), st.sampled_from(SPECIAL_NAMES), st.text(TEXT_CHARS, min_size=0, max_size=70)
)
sdk_names = st.one_of(st.sampled_from(SPECIAL_NAMES), st.text(ANY_CHARS, min_size=1, max_size=70))
text_payloads = st.one_of(st.none(), st.text(TEXT_CHARS, max_size=200))
idem_keys = st.one_of(
    st.none(),
    st.text(TEXT_CHARS, max_size=40),
    st.text(st.sampled_from("0123456789abcdefghijklmnopqrstuvwxyz"), min_size=2600, max_size=4000),
)
intervals = st.sampled_from(
    [None, "0", "-1 second", "1 hour", "100 years", "101 years", "1000000 years"]
)
limits = st.one_of(st.none(), st.integers(-3, 3), st.sampled_from([-(2**31), 2**31 - 1]))
# Floats stay below 1e15: jsonb prints a number in exponent notation as plain digits, which
# Python would read back as an int of another value.
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**30), 10**30),
    st.floats(min_value=-1e15, max_value=1e15, allow_nan=False),
    st.text(ANY_CHARS, max_size=30),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(ANY_CHARS, max_size=8), inner, max_size=4),
    ),
    max_leaves=12,
)
top_payloads = st.one_of(
    st.dictionaries(st.text(ANY_CHARS, max_size=8), json_values, max_size=4),
    st.lists(json_values, max_size=4),
    json_scalars.filter(lambda v: not isinstance(v, str)),
)


#: Arguments given as interval literals: the server prints them its own way, so the
#: message must name the argument instead of repeating the literal.
INTERVAL_ARGUMENTS = {"ttl", "retry_after"}


def names_it(message: str, value: Any, argument: str) -> bool:
    """Does the error message point at ``value`` (or, for non-text values, at the argument)?"""
    if argument in INTERVAL_ARGUMENTS and value is not None:
        return argument in message
    if value is None:
        return any(word in message for word in ("NULL", "null", "empty"))
    if isinstance(value, str):
        if value == "":
            return "empty" in message
        # Names with control characters are quoted as JSON (to_json) in messages.
        return (
            value in message
            or json.dumps(value, ensure_ascii=False) in message
            or f"{len(value.encode())} bytes" in message
        )
    if isinstance(value, int):
        return str(value) in message
    return argument in message


def name_allowed(conn: psycopg.Connection[Any], name: str) -> bool:
    """Whether pgque takes ``name`` for a queue (no control characters, no spaces at
    either end: as the server's regular expressions class them)."""
    try:
        with conn.transaction():
            conn.execute("select pgque._check_queue_name(%s)", (name,))
    except psycopg.errors.RaiseException:
        return False
    return True


def call(
    conn: psycopg.Connection[Any], query: str, params: Sequence[Any], about: dict[str, Any]
) -> list[tuple[Any, ...]] | None:
    """Run one call; on error check its class and message and return None."""
    try:
        return conn.execute(query, params).fetchall()
    except psycopg.Error as exc:
        error = from_database_error(exc)
        assert type(error) is not pgque.PgqueError, f"{query} {params!r}: unmapped {error!r}"
        assert isinstance(error, pgque.PgqueError)
        assert any(names_it(str(error), v, a) for a, v in about.items()), (
            f"{query} {params!r}: {error!r} names none of {about!r}"
        )
        return None


def reset(conn: psycopg.Connection[Any]) -> None:
    """Drop every queue (and so every consumer and event) of earlier examples."""
    conn.execute("select pgque.drop_queue(queue_name, true) from pgque.queue")
    assert conn.execute("select count(*) from pgque.consumer").fetchone() == (0,)


def tick(conn: psycopg.Connection[Any], queue: str) -> None:
    conn.execute("select pgque.force_next_tick(%s)", (queue,))
    conn.execute("select pgque.ticker(%s)", (queue,))


def drain(
    conn: psycopg.Connection[Any],
    queue: str,
    consumer: str,
    nack_with: str | None,
) -> list[tuple[int, str | None, int | None]]:
    """Receive until nothing is left: (msg_id, payload, retry_count) of every delivery.

    The first message of each first delivery is nacked with ``nack_with``; a refused
    nack must leave the batch as it was, a valid one brings the message back when due
    (``'0'``: at once; a later retry stays in ``retry_queue``, which is not a loss).
    """
    seen: list[tuple[int, str | None, int | None]] = []
    for _ in range(20):
        conn.execute("select pgque.maint_retry_events()")
        tick(conn, queue)
        msgs = conn.execute(
            "select msg_id, batch_id, payload, retry_count from pgque.receive(%s, %s, 1000)",
            (queue, consumer),
        ).fetchall()
        if not msgs:
            due = "select count(*) from pgque.retry_queue where ev_retry_after <= now()"
            if conn.execute(due).fetchone() == (0,):
                return seen
            continue
        batch_id = msgs[0][1]
        first = msgs[0]
        if first[3] is None:
            call(
                conn,
                "select pgque.nack(%s, %s, %s::interval)",
                (batch_id, first[0], nack_with),
                {"retry_after": nack_with},
            )
        seen.extend((m[0], m[2], m[3]) for m in msgs)
        assert conn.execute("select pgque.ack(%s)", (batch_id,)).fetchone() == (1,)
    raise AssertionError(f"queue {queue!r} did not drain")


@SETTINGS
@given(
    queue=names,
    consumer=names,
    payloads=st.lists(text_payloads, max_size=4),
    batch=st.lists(text_payloads, max_size=4),
    key=idem_keys,
    ttl=intervals,
    max_return=limits,
    dlq_limit=limits,
    nack_with=intervals,
)
def test_sql_api_with_random_input(
    conn: psycopg.Connection[Any],
    queue: str | None,
    consumer: str | None,
    payloads: list[str | None],
    batch: list[str | None],
    key: str | None,
    ttl: str | None,
    max_return: int | None,
    dlq_limit: int | None,
    nack_with: str | None,
) -> None:
    reset(conn)
    created = call(conn, "select pgque.create_queue(%s)", (queue,), {"queue": queue})
    if created is None:
        assert conn.execute("select count(*) from pgque.queue").fetchone() == (0,)
        return
    assert queue is not None
    subscribed = call(
        conn, "select pgque.subscribe(%s, %s)", (queue, consumer), {"consumer": consumer}
    )
    if subscribed is None:
        assert conn.execute("select count(*) from pgque.subscription").fetchone() == (0,)
        consumer = "fallback"
        conn.execute("select pgque.subscribe(%s, %s)", (queue, consumer))
    assert consumer is not None

    sent: dict[int, str | None] = {}
    for payload in payloads:
        (row,) = conn.execute("select pgque.send(%s, 't', %s::text)", (queue, payload)).fetchall()
        sent[row[0]] = payload
    ids = conn.execute("select pgque.send_batch(%s, 't', %s::text[])", (queue, batch)).fetchone()
    assert ids is not None
    sent.update(zip(ids[0], batch, strict=True))
    idem = call(
        conn,
        "select * from pgque.send_idem(%s, 't', 'idem', %s, %s::interval)",
        (queue, key, ttl),
        {"idem_key": key, "ttl": ttl},
    )
    if idem is not None:
        ((event_id, deduped),) = idem
        assert deduped is False
        sent[event_id] = "idem"
        again = conn.execute(
            "select * from pgque.send_idem(%s, 't', 'again', %s, %s::interval)", (queue, key, ttl)
        ).fetchall()
        assert again == [(event_id, True)]
    else:
        assert conn.execute("select count(*) from pgque.idem").fetchone() == (0,)

    # Bad limits are refused before anything is opened.
    tick(conn, queue)
    got = call(
        conn,
        "select msg_id from pgque.receive(%s, %s, %s)",
        (queue, consumer, max_return),
        {"max_return": max_return},
    )
    if got is None:
        assert conn.execute(
            "select count(*) from pgque.subscription where sub_batch is not null"
        ).fetchone() == (0,)
    call(
        conn,
        "select * from pgque.dlq_inspect(%s, %s)",
        (queue, dlq_limit),
        {"limit_count": dlq_limit},
    )
    call(
        conn, "select * from pgque.receive(%s, %s)", (queue + "?", consumer), {"queue": queue + "?"}
    )

    deliveries = drain(conn, queue, consumer, nack_with)
    first = [(m, p) for m, p, retry in deliveries if retry is None]
    assert sorted(first, key=lambda d: d[0]) == sorted(sent.items())
    retried = [m for m, _, retry in deliveries if retry is not None]
    waiting = [r[0] for r in conn.execute("select ev_id from pgque.retry_queue").fetchall()]
    assert len(retried + waiting) == len(set(retried + waiting)) <= 1
    assert set(retried + waiting) <= set(sent)
    assert all(sent[m] == p for m, p, _ in deliveries)
    assert conn.execute(
        "select count(*) from pgque.subscription where sub_batch is not null"
    ).fetchone() == (0,)
    assert conn.execute("select count(*) from pgque.dead_letter").fetchone() == (0,)


def sdk_call(action: Any, about: dict[str, Any]) -> Any:
    """Run an SDK call; on error check its class and message and return the error."""
    try:
        return action()
    except pgque.PgqueError as error:
        assert type(error) is not pgque.PgqueError, f"unmapped {error!r}"
        assert any(names_it(str(error), v, a) for a, v in about.items()) or any(
            f"{a} contains a NUL" in str(error) for a in about
        ), f"{error!r} names none of {about!r}"
        return error


@SETTINGS
@given(
    queue=sdk_names,
    payloads=st.lists(top_payloads, max_size=4),
    via_producer=st.lists(st.booleans(), min_size=4, max_size=4),
)
def test_sdk_with_random_input(
    db: str,
    conn: psycopg.Connection[Any],
    queue: str,
    payloads: list[Any],
    via_producer: list[bool],
) -> None:
    reset(conn)
    valid_name = "\x00" not in queue and 0 < len(queue.encode()) <= 57 and name_allowed(conn, queue)
    if valid_name:
        conn.execute("select pgque.create_queue(%s)", (queue,))
    client = pgque.PgqueClient(conn)
    if isinstance(sdk_call(lambda: client.subscribe(queue, "c"), {"queue": queue}), Exception):
        assert not valid_name
        assert conn.execute("select count(*) from pgque.subscription").fetchone() == (0,)
        return
    assert valid_name
    with pgque.Producer(db) as producer:
        for i, payload in enumerate(payloads):
            if via_producer[i]:
                producer.send(queue, payload)
            else:
                client.send(queue, payload)
        if payloads:
            producer.send_batch(queue, payloads)
            client.send_batch(queue, "t", payloads)
    expected = payloads * 3
    tick(conn, queue)
    messages = client.receive(queue, "c", 1000)
    assert [m.json() for m in messages] == expected
    if messages:
        assert client.ack(messages[0].batch_id) == 1
    tick(conn, queue)
    assert client.receive(queue, "c") == []
    assert conn.execute(
        "select count(*) from pgque.subscription where sub_batch is not null"
    ).fetchone() == (0,)


@pytest.mark.parametrize("name", ["q\x00", "\x00"])
def test_sdk_names_with_nul_name_the_argument(conn: psycopg.Connection[Any], name: str) -> None:
    client = pgque.PgqueClient(conn)
    error = sdk_call(lambda: client.subscribe(name, "c"), {"queue": name})
    assert isinstance(error, pgque.PgqueInvalidArgument)
    assert str(error).startswith("queue contains a NUL")
    error = sdk_call(lambda: client.send("q", {}, type=name), {"type": name})
    assert isinstance(error, pgque.PgqueInvalidArgument)
    assert json.dumps(name) not in str(error)  # the value is shown as Python repr
