"""The CLI through the client: what a read-only role sees, and errors raised by client calls."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from cli_helpers import Pgque
from psycopg import sql
from psycopg.conninfo import make_conninfo

import pgque
from _engine import make_queue, one
from pgque.cli import ExitCode
from pgque.cli._errors import cli_error


@pytest.fixture
def reader_dsn(db: str, conn: psycopg.Connection[Any]) -> Iterator[str]:
    """``db`` as a role that is only a member of pgque_reader (set at connection start)."""
    role = f"t_cli_reader_{uuid.uuid4().hex[:8]}"
    conn.execute(sql.SQL("create role {} nologin").format(sql.Identifier(role)))
    conn.execute(sql.SQL("grant pgque_reader to {}").format(sql.Identifier(role)))
    try:
        yield make_conninfo(db, options=f"-c role={role}")
    finally:
        conn.execute(sql.SQL("drop role {}").format(sql.Identifier(role)))


def test_status_as_a_reader(pgque: Pgque, conn: psycopg.Connection[Any], reader_dsn: str) -> None:
    """pgque.status() is for admins: a reader gets no components, and all the rest."""
    make_queue(conn, "orders")
    one(conn, "select pgque.subscribe('orders', 'worker')")
    admin = pgque("status", "--json").json()
    assert {c["component"] for c in admin["components"]} >= {"scheduler", "ticker"}
    run = pgque("status", "--json", dsn=reader_dsn)
    assert run.code == ExitCode.OK, run.stderr
    data = run.json()
    assert data["components"] == [] and data["scheduler"] is None
    assert [q["queue_name"] for q in data["queues"]] == ["orders"]
    assert [c["consumer_name"] for c in data["consumers"]] == ["worker"]
    assert data["health"] and data["tick_period_ms"] == admin["tick_period_ms"]
    # Admin commands are refused to it, with the privilege named.
    run = pgque("pause", "orders", dsn=reader_dsn)
    assert run.code == ExitCode.FAILURE
    assert "this role lacks the privilege (grant it pgque_admin)" in run.stderr


def test_a_connection_lost_in_a_client_call_is_a_connection_error() -> None:
    with pytest.raises(psycopg.OperationalError) as caught:
        psycopg.connect("host=127.0.0.1 port=1 connect_timeout=2")
    wrapped = pgque.PgqueConnectionError("lost")
    wrapped.__cause__ = caught.value
    error = cli_error(wrapped)
    assert error.exit_code == ExitCode.CONNECTION
    assert error.message.startswith("cannot reach PostgreSQL (")
    assert error.message == cli_error(caught.value).message
    plain = cli_error(pgque.PgqueConnectionError("pool closed"))
    assert plain.exit_code == ExitCode.CONNECTION
    assert plain.message == "pool closed: check --dsn / PGQUE_DSN or the PG* variables"
