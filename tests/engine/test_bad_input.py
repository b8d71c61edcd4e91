"""Bad input: a clear error naming the object, and nothing changed."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from _engine import consume, make_queue, one, rows, tick

RAISE = psycopg.errors.RaiseException  # SQLSTATE P0001


def snapshot(conn: psycopg.Connection[Any]) -> dict[str, list[tuple[Any, ...]]]:
    """Everything a bad call could have changed."""
    return {
        table: rows(conn, f"select * from pgque.{table} order by 1, 2")
        for table in ("queue", "consumer", "subscription", "retry_queue")
    } | {
        "tick": rows(conn, "select tick_queue, tick_id from pgque.tick order by 1, 2"),
        "events": rows(conn, "select ev_id, ev_data from pgque.event_template order by 1"),
    }


@pytest.fixture
def state(conn: psycopg.Connection[Any]) -> dict[str, list[tuple[Any, ...]]]:
    make_queue(conn, "q")
    one(conn, "select pgque.register_consumer('q', 'c')")
    one(conn, "select pgque.insert_event('q', 't', 'x')")
    tick(conn, "q")
    return snapshot(conn)


@pytest.mark.parametrize(
    ("query", "message", "code"),
    [
        ("select pgque.insert_event('nope', 't', 'd')", "queue not found: nope", "queue_not_found"),
        ("select pgque.insert_event(null, 't', 'd')", "queue not found: <NULL>", "queue_not_found"),
        (
            "select pgque.register_consumer('nope', 'c')",
            "Event queue not created yet",
            "queue_not_found",
        ),
        (
            "select pgque.register_consumer('q', '')",
            "consumer name must not be empty",
            "invalid_argument",
        ),
        (
            "select pgque.register_consumer('q', null)",
            "consumer name must not be empty",
            "invalid_argument",
        ),
        (
            "select pgque.subscribe('q', E'nl\\nx')",
            'consumer name "nl\\nx" must not contain control characters',
            "invalid_argument",
        ),
        (
            "select pgque.register_consumer('q', ' c')",
            'consumer name " c" must not begin or end with a space',
            "invalid_argument",
        ),
        (
            "select pgque.subscribe_subconsumer('q', 'g', E'm\\t')",
            'consumer name "g.m\\t" must not contain control characters',
            "invalid_argument",
        ),
        (
            "select pgque.next_batch('q', 'nobody')",
            "Not subscriber to queue: q/nobody",
            "consumer_not_found",
        ),
        (
            "select pgque.next_batch(null, null)",
            "Not subscriber to queue: NULL/NULL",
            "consumer_not_found",
        ),
        ("select pgque.ticker('nope')", "no such queue", "queue_not_found"),
        ("select pgque.force_tick('nope')", "queue not found: nope", "queue_not_found"),
        ("select pgque.create_queue(null)", "Invalid NULL value", "invalid_argument"),
        ("select pgque.create_queue('')", "queue name must not be empty", "invalid_argument"),
        (
            "select pgque.create_queue(repeat('x', 58))",
            "queue name too long: 58 bytes (max 57). pg_notify channel 'pgque_<queue_name>' must"
            " fit in 63 bytes.",
            "invalid_argument",
        ),
        (
            "select pgque.create_queue(repeat('é', 29))",
            "queue name too long: 58 bytes",
            "invalid_argument",
        ),
        ("select pgque.drop_queue('nope')", "No such event queue", "queue_not_found"),
        (
            "select pgque.set_queue_config('nope', 'ticker_max_count', '1')",
            "No such event queue",
            "queue_not_found",
        ),
        (
            "select pgque.set_queue_config('q', 'queue_ticker_max_count', '1')",
            'cannot change parameter "queue_ticker_max_counts"',
            "invalid_argument",
        ),
        (
            "select pgque.set_queue_config('q', 'ticker_max_count', '0')",
            "set_queue_config: ticker_max_count must be > 0, got 0",
            "invalid_argument",
        ),
        (
            "select pgque.set_queue_config('q', 'ticker_max_lag', '-1 second')",
            "set_queue_config: ticker_max_lag must be > 0, got -00:00:01",
            "invalid_argument",
        ),
        (
            "select pgque.set_queue_config('q', 'max_retries', '-1')",
            "set_queue_config: max_retries must be >= 0, got -1",
            "invalid_argument",
        ),
        ("select pgque.set_queue_config('q', null, '1')", "Invalid NULL value", "invalid_argument"),
        (
            "select pgque.register_consumer_at('q', 'c', 999)",
            "cannot reposition, tick not found: 999",
            "tick_not_found",
        ),
        ("select * from pgque.get_batch_events(999)", "batch not found", "batch_not_found"),
        ("select pgque.current_event_table('nope')", "Event queue not found", "queue_not_found"),
    ],
)
def test_bad_call_raises_and_changes_nothing(
    conn: psycopg.Connection[Any],
    state: dict[str, list[tuple[Any, ...]]],
    query: str,
    message: str,
    code: str,
) -> None:
    with pytest.raises(RAISE) as info:
        conn.execute(query)
    assert info.value.diag.message_primary is not None
    assert info.value.diag.message_primary.startswith(message)
    assert info.value.diag.message_detail == f"pgque:{code}"
    assert snapshot(conn) == state


def test_bad_literal_in_config_is_a_cast_error(
    conn: psycopg.Connection[Any], state: dict[str, list[tuple[Any, ...]]]
) -> None:
    with pytest.raises(psycopg.errors.InvalidTextRepresentation):
        conn.execute("select pgque.set_queue_config('q', 'ticker_max_count', 'many')")
    with pytest.raises(psycopg.errors.InvalidDatetimeFormat):
        conn.execute("select pgque.set_queue_config('q', 'ticker_max_lag', 'soon')")
    assert snapshot(conn) == state


def test_disabled_queue_refuses_inserts(conn: psycopg.Connection[Any]) -> None:
    make_queue(conn, "q")
    conn.execute("update pgque.queue set queue_disable_insert = true")
    with pytest.raises(RAISE, match="Insert into queue disallowed"):
        conn.execute("select pgque.insert_event('q', 't', 'd')")
    conn.execute("set session_replication_role = replica")
    assert one(conn, "select pgque.insert_event('q', 't', 'd')") is not None


def test_nul_byte_payload_is_refused_before_the_server(
    conn: psycopg.Connection[Any], state: dict[str, list[tuple[Any, ...]]]
) -> None:
    with pytest.raises(psycopg.DataError, match="NUL"):
        conn.execute("select pgque.insert_event('q', 't', %s)", ("a\x00b",))
    assert snapshot(conn) == state


def test_invalid_utf8_payload_is_refused(
    conn: psycopg.Connection[Any], state: dict[str, list[tuple[Any, ...]]]
) -> None:
    with pytest.raises(psycopg.errors.CharacterNotInRepertoire):
        conn.execute("select pgque.insert_event('q', 't', convert_from('\\xc328'::bytea, 'UTF8'))")
    assert snapshot(conn) == state


@pytest.mark.parametrize(
    "name",
    ["q'; drop table pgque.queue; --", 'we"ird', "Mixed Case.and dots", "x\\y", "名前"],
)
def test_names_with_quotes_and_sql_are_plain_data(
    conn: psycopg.Connection[Any], connect: Any, name: str
) -> None:
    listener = connect()
    listener.execute(psycopg.sql.SQL("listen {}").format(psycopg.sql.Identifier(f"pgque_{name}")))
    make_queue(conn, name)
    one(conn, "select pgque.register_consumer(%s, %s)", name, name)
    one(conn, "select pgque.insert_event(%s, 't', 'x')", name)
    tick(conn, name)
    assert consume(conn, name, name) == ["x"]
    assert one(conn, "select count(*) from pgque.queue where queue_name = %s", name) == 1
    assert {n.channel for n in listener.notifies(timeout=5, stop_after=1)} == {f"pgque_{name}"}
    assert one(conn, "select pgque.drop_queue(%s, true)", name) == 1
