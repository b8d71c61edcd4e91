"""An application's test suite using pgque's pytest plugin.

Nothing to configure: installing pgque registers the plugin. Each test that
asks for a ``pgque_*`` fixture gets a fresh database with pgque installed, on
the server named by ``PGQUE_TEST_DSN`` or on a throwaway PostgreSQL.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from orders import SCHEMA, Billing, place_order

import pgque
from pgque.testing import PgqueTestDatabase


@pytest.fixture
def app_conn(pgque_db: PgqueTestDatabase) -> psycopg.Connection[Any]:
    """The application's connection, with its table and the queue it sends to."""
    pgque_db.create_queue("orders", consumers=["billing"])
    conn = pgque_db.connect()
    conn.execute(SCHEMA)
    return conn


def test_an_order_is_announced_with_its_row(
    pgque_db: PgqueTestDatabase, pgque_producer: pgque.Producer, app_conn: psycopg.Connection[Any]
) -> None:
    place_order(app_conn, pgque_producer, 1, 100)
    place_order(app_conn, pgque_producer, 2, 250)
    billing = Billing()
    seen = pgque_db.drain("orders", "billing", billing.handle)
    assert billing.billed == [1, 2]
    assert [m.type for m in seen] == ["order.placed", "order.placed"]


def test_a_failed_order_sends_nothing(
    pgque_db: PgqueTestDatabase, pgque_producer: pgque.Producer, app_conn: psycopg.Connection[Any]
) -> None:
    place_order(app_conn, pgque_producer, 1, 100)
    with pytest.raises(psycopg.errors.UniqueViolation):
        place_order(app_conn, pgque_producer, 1, 999)  # rolled back, message included
    billing = Billing()
    pgque_db.drain("orders", "billing", billing.handle)
    assert billing.billed == [1]


def test_an_impossible_order_is_dead_lettered(
    pgque_db: PgqueTestDatabase,
    pgque_producer: pgque.Producer,
    pgque_conn: psycopg.Connection[Any],
    app_conn: psycopg.Connection[Any],
) -> None:
    place_order(app_conn, pgque_producer, 3, -5)
    billing = Billing()
    pgque_db.drain("orders", "billing", billing.handle)
    assert billing.billed == []
    row = pgque_conn.execute("select dl_reason from pgque.dead_letter").fetchone()
    assert row == ("negative amount",)


def test_a_failing_handler_is_retried(
    pgque_db: PgqueTestDatabase, pgque_client: pgque.PgqueClient
) -> None:
    pgque_db.create_queue("jobs", consumers=["worker"])
    pgque_client.send("jobs", {"job": 1})
    attempts: list[int | None] = []

    def flaky(msg: pgque.Message) -> None:
        attempts.append(msg.retry_count)
        if msg.retry_count is None:  # the first delivery fails
            raise RuntimeError("try again")

    with pytest.raises(RuntimeError):
        pgque_db.drain("jobs", "worker", flaky)  # by default the error propagates, batch unacked
    done = pgque_db.drain("jobs", "worker", flaky, on_error="nack")  # nacked, then retried
    assert attempts == [None, None, 1]
    assert [(m.json(), m.retry_count) for m in done] == [({"job": 1}, 1)]


def test_the_client_and_force_tick(
    pgque_db: PgqueTestDatabase, pgque_client: pgque.PgqueClient, pgque_dsn: str
) -> None:
    pgque_db.create_queue("events", consumers=["reader"])
    pgque_client.send_batch("events", "t", [{"n": 1}, {"n": 2}])
    assert pgque_db.force_tick("events") is not None
    msgs = pgque_client.receive("events", "reader")
    assert [m.json() for m in msgs] == [{"n": 1}, {"n": 2}]
    assert pgque_client.ack(msgs[0].batch_id) == 1
    assert pgque_dsn == pgque_db.dsn
