"""The client: one psycopg connection and a method per pgque SQL call.

Methods never commit or roll back: with the default (non-autocommit)
connection the caller commits between send, tick and receive, because a
batch only holds what committed before its tick. Database errors are raised
as :mod:`pgque.errors` classes, chained to the psycopg error.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg

from pgque import health as _health
from pgque import tracing
from pgque._queries import query
from pgque._text import check_text, json_error, send_batch_statement, send_statement
from pgque.errors import PgqueConnectionError, PgqueError, from_database_error
from pgque.health import Health
from pgque.message import Event, Message
from pgque.serializers import JSON, Serializer

__all__ = ["PgqueClient", "connect"]


@contextmanager
def _mapped_errors() -> Iterator[None]:
    try:
        yield
    except psycopg.Error as exc:
        raise from_database_error(exc) from exc


class PgqueClient:
    """pgque's SQL API on one psycopg connection.

    ``PgqueClient(conn)`` wraps a connection you own (``close()`` leaves it
    open); :func:`connect` opens one the client owns. ``client.conn`` is the
    connection, for your own commits and queries.

    Args:
        conn: An open psycopg connection.
        serializer: How payloads are encoded; :data:`pgque.serializers.JSON`
            (the default) or :data:`pgque.serializers.RAW_TEXT` for verbatim text.
    """

    def __init__(self, conn: psycopg.Connection[Any], *, serializer: Serializer = JSON) -> None:
        self.conn = conn
        self.serializer = serializer
        self._owned = False

    # -- lifecycle -----------------------------------------------------------

    def close(self) -> None:
        """Close the connection if this client opened it; harmless twice."""
        if self._owned and not self.conn.closed:
            self.conn.close()

    def __enter__(self) -> PgqueClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _one(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        with _mapped_errors():
            row = self.conn.execute(sql, params).fetchone()
        return None if row is None else row[0]

    def _all(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        with _mapped_errors():
            return list(self.conn.execute(sql, params).fetchall())

    # -- producing -----------------------------------------------------------

    def send(
        self,
        queue: str,
        payload: Any = None,
        *,
        type: str | None = "default",
        extras: tuple[str | None, str | None, str | None, str | None] | None = None,
    ) -> int:
        """Send one message; returns its event id.

        An :class:`~pgque.Event` supplies both payload and type. With the JSON
        serializer, dict and list payloads are JSON-encoded, ``None`` is JSON
        null and a ``str`` is taken as JSON text; the server checks the JSON
        and stores it canonically (``jsonb``), except a JSON text holding a
        ``\u0000`` escape, which ``jsonb`` cannot hold: it is stored as
        encoded. ``extras`` sets ``ev_extra1..4``; the current span's trace
        context goes into a free one (see :mod:`pgque.tracing`).

        Raises:
            PgqueInvalidArgument: A NUL character in a str argument or in the
                encoded payload (which PostgreSQL text cannot store), or a
                payload that is not JSON; the message names the argument.
        """
        if isinstance(payload, Event):
            payload, type = payload.payload, payload.type
        text = self.serializer.encode(payload)
        fields = tracing.trace_fields(extras or (None, None, None, None), tracing.current_carrier())
        statement, params = send_statement(self.serializer, queue, text, type, fields, extras)
        try:
            return int(self._one(statement, params))
        except PgqueError as error:
            if self.serializer.sql_type != "jsonb":
                raise
            raise json_error(error, [text], "payload") from error.__cause__

    def send_batch(self, queue: str, type: str, payloads: list[Any]) -> list[int]:
        """Send many messages of one type in one statement; returns their ids in input order.

        Payloads are encoded and stored as by :meth:`send`; if one of them
        holds a ``\u0000`` escape, the whole batch is stored as encoded.
        """
        texts = [self.serializer.encode(p) for p in payloads]
        statement, params = send_batch_statement(self.serializer, queue, type, texts)
        try:
            return list(self._one(statement, params))
        except PgqueError as error:
            if self.serializer.sql_type != "jsonb":
                raise
            raise json_error(error, texts, "payloads") from error.__cause__

    # -- consuming -----------------------------------------------------------

    def subscribe(self, queue: str, consumer: str) -> int:
        """Subscribe a consumer at the queue's latest tick: 1, or 0 when it already was."""
        check_text(queue=queue, consumer=consumer)
        return int(self._one(query("subscribe"), (queue, consumer)))

    def unsubscribe(self, queue: str, consumer: str) -> int:
        """Remove a subscription: 1, or 0 when there was none."""
        check_text(queue=queue, consumer=consumer)
        return int(self._one(query("unsubscribe"), (queue, consumer)))

    def receive(self, queue: str, consumer: str, max_messages: int = 100) -> list[Message]:
        """Up to ``max_messages`` messages of the consumer's open or next batch.

        The same batch comes back until :meth:`ack`, which finishes all of
        it, messages beyond ``max_messages`` included.
        """
        check_text(queue=queue, consumer=consumer)
        rows = self._all(query("receive"), (queue, consumer, max_messages))
        return [Message(*row) for row in rows]

    def receive_rest(self, batch_id: int, after_msg_id: int) -> list[Message]:
        """The batch's messages after ``after_msg_id``: read them before acking a batch
        that ``receive`` cut at its limit."""
        rows = self._all(query("batch_rest"), (batch_id, batch_id, after_msg_id))
        return [Message(*row) for row in rows]

    def ack(self, batch_id: int) -> int:
        """Finish the whole batch: 1, or 0 (a WARNING) when it is not open."""
        return int(self._one(query("ack"), (batch_id,)))

    def nack(
        self, batch_id: int, msg: Message, retry_after: float = 60, reason: str | None = None
    ) -> None:
        """Retry ``msg`` after ``retry_after`` seconds, or dead-letter it after max retries.

        The batch stays open: ack it afterwards.
        """
        check_text(reason=reason)
        payload = msg.payload
        if isinstance(payload, (dict, list)):
            payload = json.dumps(payload)
        fields = (
            msg.msg_id, msg.batch_id, msg.type, payload, msg.retry_count, msg.created_at,
            msg.extra1, msg.extra2, msg.extra3, msg.extra4,
        )  # fmt: skip
        with _mapped_errors():
            self.conn.execute(query("nack"), (batch_id, *fields, f"{retry_after} seconds", reason))

    # -- ticking -------------------------------------------------------------

    def ticker(self, queue: str) -> int | None:
        """Tick the queue if due; the new tick id, or None."""
        check_text(queue=queue)
        value = self._one(query("ticker"), (queue,))
        return None if value is None else int(value)

    def ticker_all(self) -> int:
        """Tick every due queue; how many got a tick."""
        return int(self._one(query("ticker_all")))

    def force_next_tick(self, queue: str) -> int | None:
        """Make the next ticker call tick the queue; the latest tick id (None if none)."""
        check_text(queue=queue)
        value = self._one(query("force_next_tick"), (queue,))
        return None if value is None else int(value)

    def force_tick(self, queue: str) -> int | None:
        """Deprecated alias of :meth:`force_next_tick`."""
        return self.force_next_tick(queue)

    # -- cooperative consumers -----------------------------------------------

    def subscribe_subconsumer(self, queue: str, consumer: str, subconsumer: str) -> int:
        """Add a subconsumer to a cooperative consumer: 1 if something was created, else 0."""
        check_text(queue=queue, consumer=consumer, subconsumer=subconsumer)
        return int(self._one(query("subscribe_subconsumer"), (queue, consumer, subconsumer)))

    def unsubscribe_subconsumer(
        self, queue: str, consumer: str, subconsumer: str, *, batch_handling: int = 0
    ) -> int:
        """Remove a subconsumer (``batch_handling=1`` retries its open batch first)."""
        check_text(queue=queue, consumer=consumer, subconsumer=subconsumer)
        return int(
            self._one(
                query("unsubscribe_subconsumer"), (queue, consumer, subconsumer, batch_handling)
            )
        )

    def receive_coop(
        self,
        queue: str,
        consumer: str,
        subconsumer: str,
        *,
        max_messages: int = 100,
        dead_interval: str | None = None,
    ) -> list[Message]:
        """Receive as one subconsumer of a cooperative consumer (registers it if needed)."""
        check_text(queue=queue, consumer=consumer, subconsumer=subconsumer)
        rows = self._all(
            query("receive_coop"), (queue, consumer, subconsumer, max_messages, dead_interval)
        )
        return [Message(*row) for row in rows]

    def touch_subconsumer(self, queue: str, consumer: str, subconsumer: str) -> int:
        """Heartbeat of a subconsumer; rows touched."""
        check_text(queue=queue, consumer=consumer, subconsumer=subconsumer)
        return int(self._one(query("touch_subconsumer"), (queue, consumer, subconsumer)))

    # -- health ----------------------------------------------------------------

    def health(self) -> Health:
        """pgque's health checks (``pgque.queue_health()``) and this client's state.

        Never raises for database trouble: what could not be read is said in
        ``notes`` (``pgque_health_unavailable`` when the function is missing
        or not granted). The reads run in a savepoint inside your open
        transaction, or in a short transaction of their own, so they never
        spoil a transaction; nothing is read while it has failed.
        """
        state = _health.client_state(self.conn)
        rows: list[tuple[Any, ...]] | None = None
        if not _health.can_query(state):
            return _health.finish(state, rows)
        try:
            with self.conn.transaction():
                probe = self.conn.execute(query("health_probe")).fetchone()
                health_fn, version_fn = probe if probe is not None else ("missing", "missing")
                _health.probe_notes(state, health_fn, version_fn)
                if version_fn == "ok":
                    version = self.conn.execute(query("health_version")).fetchone()
                    state.pgque_version = None if version is None else version[0]
                if health_fn == "ok":
                    rows = list(self.conn.execute(query("queue_health")).fetchall())
        except psycopg.Error as exc:
            rows = None
            state.connected = not (self.conn.closed or self.conn.broken)
            state.notes.append(f"pgque_health_unavailable: {from_database_error(exc)}")
        return _health.finish(state, rows)


def connect(dsn: str, *, autocommit: bool = False) -> PgqueClient:
    """Open a connection and return a client that owns it.

    Raises:
        PgqueConnectionError: the connection could not be opened.
    """
    try:
        conn = psycopg.connect(dsn, autocommit=autocommit)
    except psycopg.OperationalError as exc:
        raise PgqueConnectionError(str(exc).strip()) from exc
    client = PgqueClient(conn)
    client._owned = True
    return client


PgqueClient.__module__ = "pgque"
