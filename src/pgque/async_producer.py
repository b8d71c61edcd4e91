"""The producer: sends messages through a pool; safe to share between tasks.

A producer is made from a DSN (it then owns a
:class:`psycopg_pool.AsyncConnectionPool`, closed by
:meth:`AsyncProducer.close`), from a pool you own, or from one connection.
Every method takes ``conn=`` to send inside your own transaction instead
(the transactional outbox): the message commits or rolls back with your
writes, and the producer never commits, rolls back or closes a connection it
did not open.

Payloads are encoded on the client by the serializer and stored through
pgque's ``text`` overloads: the server does not parse them again. With the
default :data:`~pgque.serializers.JSON` serializer objects become JSON (NaN
and infinities are refused), and a ``str`` is taken as JSON text already, as
in :class:`~pgque.PgqueClient`, but unchecked: pass objects, or text you know
to be JSON. :meth:`AsyncProducer.send_batch` sends any number of messages in
one statement (one round trip), with binary parameters and a prepared
statement where the connection allows it (``prepare_threshold`` not None),
except with ``pooler=True`` (a transaction-mode pooler in front: nothing is
prepared). Sends go through the one send path the clients take too
(:mod:`pgque._send_plan`, :mod:`pgque._async_send`), with the payloads stored
verbatim.

The trace context of the current span (or of the producer's own ``send`` /
``create`` span when OpenTelemetry is configured) goes into a free extra
field of each message, as :mod:`pgque.tracing` describes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import psycopg
from opentelemetry import metrics, trace
from opentelemetry.trace import SpanKind
from psycopg_pool import AsyncConnectionPool, PoolClosed, PoolTimeout

from pgque import tracing
from pgque._acompat import ASYNC, Lock
from pgque._async_send import deliver
from pgque._producer_common import (
    POOL_DEFAULTS,
    NoConsumerWarning,
    Pending,
    map_pool_error,
    place_carriers,
)
from pgque._send_plan import (
    Columns,
    Extras,
    SendPath,
    check_extras,
    check_queue,
    client_side,
    deliver_time,
    extras_columns,
)
from pgque.errors import PgqueConnectionError, PgqueInvalidArgument
from pgque.otel import Telemetry, telemetry
from pgque.serializers import JSON, Serializer

if TYPE_CHECKING:
    pass

__all__ = ["AsyncProducer", "AsyncProducerBatch", "Extras"]


class AsyncProducer:
    """Sends messages; safe to share between tasks.

    Args:
        source: A connection string (the producer then owns a
            :class:`~psycopg_pool.AsyncConnectionPool` of autocommit
            connections, opened on the first send or ``async with``
            (:meth:`open`), closed by :meth:`close`), a
            :class:`~psycopg_pool.AsyncConnectionPool` or
            :class:`~psycopg_pool.AsyncNullConnectionPool` you own (each send
            borrows a connection, and the pool commits it on return), or a
            :class:`psycopg.AsyncConnection` you own (sends join its current
            transaction; you commit).
        serializer: How payloads become text. Defaults to
            :data:`~pgque.serializers.JSON`.
        create_spans: With OpenTelemetry configured, give each message of a
            batch its own ``create`` span (linked from the batch's ``send``
            span, its context stored in the message). ``False`` stores the
            ``send`` span's context in every message instead. Defaults to True.
        pool_kwargs: Arguments for the pool made from a connection string,
            over the defaults ``min_size=1, max_size=8`` (connection
            arguments go in ``kwargs``; ``autocommit`` is on unless set).
        tracer_provider: OpenTelemetry tracer provider. Defaults to the global one.
        meter_provider: OpenTelemetry meter provider. Defaults to the global one.
        pooler: A transaction-mode pooler (PgBouncer, Supavisor, RDS Proxy) is in
            front: prepare no statement (the pool made from a connection string
            gets ``prepare_threshold=None``; given connections are sent every
            statement unprepared). Without it, a pooler's symptoms raise
            :class:`~pgque.errors.PgquePoolerError`. Defaults to False.

    Raises:
        PgqueConnectionError: ``source`` is a connection string and no
            connection could be opened with it.

    Example:
        >>> async with pgque.AsyncProducer("dbname=app") as producer:  # doctest: +SKIP
        ...     await producer.send("orders", {"id": 1}, type="order.created")
        ...     ids = await producer.send_batch("orders", [{"id": 2}, {"id": 3}])
    """

    def __init__(
        self,
        source: str | AsyncConnectionPool[Any] | psycopg.AsyncConnection[Any],
        *,
        serializer: Serializer = JSON,
        create_spans: bool = True,
        pool_kwargs: Mapping[str, Any] | None = None,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        pooler: bool = False,
    ) -> None:
        if not isinstance(pooler, bool):
            raise TypeError(f"pooler must be True or False, got {pooler!r}")
        #: True when a transaction-mode pooler is in front (nothing is prepared).
        self.pooler = pooler
        self._path = SendPath(serializer, "text")
        self.serializer = serializer
        self.create_spans = create_spans
        self._telemetry: Telemetry = telemetry(tracer_provider, meter_provider)
        self._dsn: str | None = None
        self._pool: AsyncConnectionPool[Any] | None = None
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._pool_kwargs = dict(pool_kwargs or {})
        self._owns_pool = False
        self._closed = False
        self._opening = Lock()
        self._no_consumers = NoConsumerWarning()
        if isinstance(source, str):
            self._dsn = source
        elif isinstance(source, AsyncConnectionPool):
            self._pool = source
        elif isinstance(source, psycopg.AsyncConnection):
            self._conn = source
        else:
            raise TypeError(
                "source must be a connection string, a psycopg_pool.AsyncConnectionPool"
                f" or a psycopg.AsyncConnection, got {type(source).__name__}"
            )
        if pool_kwargs is not None and self._dsn is None:
            raise PgqueInvalidArgument(
                "pool_kwargs applies only when source is a connection string"
            )
        if not ASYNC:
            self.open()

    # -- lifecycle -------------------------------------------------------------

    async def open(self) -> AsyncProducer:
        """Open the pool made from a connection string; returns self. Harmless when open.

        The first send opens it otherwise. A connection is tried first, so a
        bad connection string fails here with its real error.
        """
        if self._closed:
            raise PgqueConnectionError("the producer is closed")
        if self._dsn is None or self._pool is not None:
            return self
        async with self._opening:
            if self._pool is None:
                await self._open_pool(self._dsn)
        return self

    async def _open_pool(self, dsn: str) -> None:
        options = {**POOL_DEFAULTS, **self._pool_kwargs}
        kwargs = {"autocommit": True, **dict(options.pop("kwargs", None) or {})}
        if self.pooler:
            kwargs["prepare_threshold"] = None
        try:
            probe = await psycopg.AsyncConnection.connect(dsn, **kwargs)
        except psycopg.Error as exc:
            raise PgqueConnectionError(str(exc).strip()) from exc
        await probe.close()
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            dsn, kwargs=kwargs, open=False, **options
        )
        await pool.open()
        self._pool = pool
        self._owns_pool = True

    async def close(self) -> None:
        """Close the pool if the producer made it; later sends raise. Harmless twice."""
        self._closed = True
        if self._owns_pool and self._pool is not None:
            await self._pool.close()

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._closed

    async def __aenter__(self) -> AsyncProducer:
        """Open the producer and return it."""
        return await self.open()

    async def __aexit__(self, *exc_info: object) -> None:
        """Close the producer."""
        await self.close()

    @asynccontextmanager
    async def _connection(
        self, conn: psycopg.AsyncConnection[Any] | None
    ) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        if self._closed:
            raise PgqueConnectionError("the producer is closed")
        if conn is not None:
            yield conn
            return
        if self._conn is not None:
            yield self._conn
            return
        if self._pool is None:
            await self.open()
        assert self._pool is not None
        try:
            async with self._pool.connection() as pooled:
                yield pooled
        except (PoolTimeout, PoolClosed) as exc:
            raise map_pool_error(exc) from exc

    def _prepare(self, conn: psycopg.AsyncConnection[Any]) -> bool | None:
        """Whether to prepare the send: never behind a pooler, always where the
        connection allows (psycopg's threshold otherwise)."""
        if self.pooler:
            return False
        if conn.prepare_threshold is not None and not client_side(conn):
            return True
        return None

    # -- sending ---------------------------------------------------------------

    async def send(
        self,
        queue: str,
        payload: Any,
        *,
        type: str = "default",
        extras: Extras | None = None,
        conn: psycopg.AsyncConnection[Any] | None = None,
    ) -> int:
        """Send one message; returns its event id.

        Args:
            queue: The queue.
            payload: The message, encoded by the serializer (a pydantic v2
                model, dataclass or msgspec Struct as its fields; an
                :class:`~pgque.Event` gives its type too).
            type: The message type. Defaults to ``"default"``.
            extras: ``(extra1, extra2, extra3, extra4)``; the trace context
                takes extra1 if it is None, else extra4.
            conn: Send on this connection, inside its current transaction
                (never committed by the producer).

        Raises:
            PgqueInvalidArgument: A bad queue name, type or extras.
            TypeError: The serializer cannot encode the payload.
            PgqueQueueNotFound: No such queue.
            PgqueConnectionError: No usable connection.
        """
        queue, type, text = self._path.message(queue, payload, type)
        fields = check_extras(extras)
        with self._telemetry.operation("send", queue, kind=SpanKind.PRODUCER, sent=1) as op:
            fields = tracing.trace_fields(fields, tracing.current_carrier())
            statement = self._path.one(queue, type, text, fields)
            async with self._connection(conn) as c:
                event_id = int(
                    await deliver(c, statement, self._no_consumers, prepare=self._prepare(c))
                )
            op.set_message_id(event_id)
        return event_id

    async def send_batch(
        self,
        queue: str,
        payloads: Iterable[Any],
        *,
        type: str = "default",
        types: Sequence[str | None] | None = None,
        extras: Sequence[Extras | None] | None = None,
        conn: psycopg.AsyncConnection[Any] | None = None,
    ) -> list[int]:
        """Send many messages in one statement; returns their event ids in input order.

        All or none are sent. An empty ``payloads`` sends nothing and returns ``[]``.

        Args:
            queue: The queue.
            payloads: The messages (a list, or any iterable), encoded as by
                :meth:`send`.
            type: The type of every message without one in ``types``.
                Defaults to ``"default"``.
            types: One type per payload (None: ``type``), or None.
            extras: One entry per payload, each a 4-tuple ``(extra1, ...,
                extra4)`` or None; or None for none at all.
            conn: Send on this connection, inside its current transaction.

        Raises:
            PgqueInvalidArgument: A bad queue name or type, or ``types`` /
                ``extras`` of the wrong length or shape.
            TypeError: A payload the serializer cannot encode (the message
                says which), or ``payloads`` is not a sequence.
        """
        check_queue(queue)
        type = self._path.check_type(type)
        if types is None and extras is None and isinstance(payloads, list):
            # Plain JSON values go as one JSON array unless trace carriers fill
            # an extra field (then each is encoded; _send_encoded decides).
            array = self._path.json_array(payloads)
            if array is not None:
                return await self._send_encoded(
                    queue, type, payloads, None, [None, None, None, None], conn, array
                )
        texts = self._path.encode_many(queue, payloads)
        n = len(texts)
        checked_types = self._path.check_types(types, n, type)
        columns = extras_columns(extras, n)
        if n == 0:
            return []
        return await self._send_encoded(queue, type, texts, checked_types, columns, conn)

    async def _send_encoded(
        self,
        queue: str,
        type: str,
        texts: list[Any],
        types: list[str] | None,
        columns: Columns,
        conn: psycopg.AsyncConnection[Any] | None,
        array: str | None = None,
    ) -> list[int]:
        """Send a batch: ``texts`` are the encoded payloads or, with ``array`` (their
        JSON array text), the payloads themselves, then encoded here only where
        trace carriers need per-message extras."""
        n = len(texts)
        tel = self._telemetry
        creation = tel.create(queue, n) if self.create_spans else None
        try:
            with tel.operation(
                "send", queue, kind=SpanKind.CLIENT, batch_count=n, sent=n,
                links=creation.links if creation is not None else None,
            ):  # fmt: skip
                if creation is not None:
                    columns = place_carriers(columns, creation.carriers, n)
                else:
                    carrier = tracing.current_carrier()
                    if carrier is not None:
                        columns = place_carriers(columns, [carrier] * n, n)
                async with self._connection(conn) as c:
                    on_client = client_side(c)
                    if array is not None and all(column is None for column in columns):
                        statement = self._path.array_statement(queue, type, array, on_client)
                    else:
                        if array is not None:
                            texts = self._path.encode_many(queue, texts)
                        statement = self._path.many(
                            queue, type, texts, types, columns, on_client=on_client
                        )
                    value = await deliver(
                        c, statement, self._no_consumers, prepare=self._prepare(c)
                    )
                    ids = [int(i) for i in value]
        except BaseException as exc:
            if creation is not None:
                creation.end(error=exc)
            raise
        if creation is not None:
            creation.end(ids)
        return ids

    async def send_at(
        self,
        queue: str,
        payload: Any,
        *,
        at: datetime | None = None,
        delay: timedelta | None = None,
        type: str = "default",
        conn: psycopg.AsyncConnection[Any] | None = None,
    ) -> int:
        """Send one message for delivery at a time (``at``) or after a ``delay``.

        A message not yet due waits in ``pgque.delayed_events`` until the
        ticker's maintenance moves it into the queue (as a new event), so
        the returned number is the event id when the time has come already,
        else the delayed message's id. ``delay`` is added to the server's
        clock, ``at`` must be timezone-aware. Delayed messages carry no trace
        context (``pgque.send_at`` takes no extra fields).

        Args:
            queue: The queue.
            payload: The message, encoded as by :meth:`send`.
            at: When to deliver (timezone-aware).
            delay: How long from now to wait (not negative).
            type: The message type. Defaults to ``"default"``.
            conn: Send on this connection, inside its current transaction.

        Raises:
            PgqueInvalidArgument: Not exactly one of ``at``/``delay``, a naive
                ``at``, a negative ``delay``, or a bad queue name or type.
        """
        when = deliver_time(at, delay)
        queue, type, text = self._path.message(queue, payload, type)
        statement = self._path.later(queue, type, text, when)
        with self._telemetry.operation("send", queue, kind=SpanKind.PRODUCER, sent=1) as op:
            async with self._connection(conn) as c:
                ident = int(
                    await deliver(c, statement, self._no_consumers, prepare=self._prepare(c))
                )
            op.set_message_id(ident)
        return ident

    def batch(
        self,
        queue: str,
        *,
        type: str = "default",
        conn: psycopg.AsyncConnection[Any] | None = None,
    ) -> AsyncProducerBatch:
        """Collect messages in an ``async with`` block and send them at its end as one batch.

        Nothing is sent if the block raises; ``batch.send()`` is a plain call.
        After the block ``batch.ids`` holds the event ids::

            async with producer.batch("orders") as batch:
                for order in orders:
                    batch.send(order, type="order.created")
            print(batch.ids)

        Args:
            queue: The queue.
            type: The type of messages sent without one. Defaults to ``"default"``.
            conn: Send on this connection, inside its current transaction.
        """
        return AsyncProducerBatch(self, check_queue(queue), self._path.check_type(type), conn)


class AsyncProducerBatch:
    """Messages collected by :meth:`AsyncProducer.batch`, sent as one ``send_batch`` at exit."""

    def __init__(
        self,
        producer: AsyncProducer,
        queue: str,
        type: str,
        conn: psycopg.AsyncConnection[Any] | None,
    ) -> None:
        self.producer = producer
        self.queue = queue
        self.conn = conn
        #: The event ids, in the order of the :meth:`send` calls, once sent.
        self.ids: list[int] = []
        self._pending = Pending(producer._path, queue, type)

    def send(self, payload: Any, *, type: str | None = None, extras: Extras | None = None) -> None:
        """Add a message (encoded now, so a bad payload raises here).

        Args:
            payload: The message.
            type: Its type. Defaults to the batch's.
            extras: ``(extra1, extra2, extra3, extra4)``, or None.
        """
        self._pending.add(payload, type, extras)

    def __len__(self) -> int:
        """How many messages were added."""
        return len(self._pending.texts)

    async def __aenter__(self) -> AsyncProducerBatch:
        """Start collecting."""
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *exc_info: object) -> None:
        """Send everything collected in one statement, unless the block raised."""
        pending = self._pending
        pending.sent = True
        if exc_type is not None or not pending.texts:
            return
        texts, types, columns = pending.arrays()
        self.ids = await self.producer._send_encoded(
            self.queue, pending.type, texts, types, columns, self.conn
        )


AsyncProducer.__module__ = "pgque"
AsyncProducerBatch.__module__ = "pgque"
