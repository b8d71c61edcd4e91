"""The asyncio twin of :class:`pgque.Producer`: safe to share between tasks.

Same arguments, checks, SQL, tracing and metrics as the threaded producer
(see :mod:`pgque.producer`); ``tests/sdk/test_async_parity.py`` keeps the two
in step. One difference follows from asyncio: a producer made from a
connection string opens its :class:`~psycopg_pool.AsyncConnectionPool` on
``await producer.open()``, ``async with producer:`` or the first send, not
in the constructor.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import psycopg
from opentelemetry import metrics, trace
from opentelemetry.trace import SpanKind
from psycopg_pool import AsyncConnectionPool, PoolClosed, PoolTimeout

from pgque import tracing
from pgque._queries import LiteralString
from pgque.errors import PgqueConnectionError, PgqueInvalidArgument, from_database_error
from pgque.otel import Telemetry, telemetry
from pgque.producer import (
    _POOL_DEFAULTS,
    Columns,
    Extras,
    _batch_statement,
    _check_extras,
    _check_queue,
    _check_type,
    _check_types,
    _client_side,
    _deliver_at_statement,
    _encode_many,
    _encode_one,
    _encoder,
    _extras_columns,
    _map_pool_error,
    _Pending,
    _place_carriers,
    _single_statement,
)
from pgque.serializers import JSON, Serializer

if TYPE_CHECKING:
    from types import TracebackType

__all__ = ["AsyncProducer", "AsyncProducerBatch"]


class AsyncProducer:
    """Sends messages from asyncio code; safe to share between tasks.

    Args:
        source: A connection string (the producer then owns an
            :class:`~psycopg_pool.AsyncConnectionPool` of autocommit
            connections, opened by :meth:`open` or the first send and closed
            by :meth:`close`), an :class:`~psycopg_pool.AsyncConnectionPool`
            or :class:`~psycopg_pool.AsyncNullConnectionPool` you own and
            opened, or a :class:`psycopg.AsyncConnection` you own (sends join
            its current transaction; you commit).
        serializer: How payloads become text. Defaults to
            :data:`~pgque.serializers.JSON`.
        create_spans: As for :class:`pgque.Producer`. Defaults to True.
        pool_kwargs: As for :class:`pgque.Producer`.
        tracer_provider: OpenTelemetry tracer provider. Defaults to the global one.
        meter_provider: OpenTelemetry meter provider. Defaults to the global one.

    Example:
        >>> async with pgque.AsyncProducer("dbname=app") as producer:  # doctest: +SKIP
        ...     await producer.send("orders", {"id": 1}, type="order.created")
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
    ) -> None:
        self._encode = _encoder(serializer)
        self.serializer = serializer
        self.create_spans = create_spans
        self._telemetry: Telemetry = telemetry(tracer_provider, meter_provider)
        self._dsn: str | None = None
        self._pool: AsyncConnectionPool[Any] | None = None
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._pool_kwargs = dict(pool_kwargs or {})
        self._owns_pool = False
        self._closed = False
        self._opening: asyncio.Lock | None = None
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

    # -- lifecycle -------------------------------------------------------------

    async def open(self) -> AsyncProducer:
        """Open the pool made from a connection string; returns self. Harmless when open.

        Checks the connection string with one connection first, so a bad one
        fails here with its real error.
        """
        if self._closed:
            raise PgqueConnectionError("the producer is closed")
        if self._dsn is None or self._pool is not None:
            return self
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._pool is None:
                await self._open_pool(self._dsn)
        return self

    async def _open_pool(self, dsn: str) -> None:
        options = {**_POOL_DEFAULTS, **self._pool_kwargs}
        kwargs = {"autocommit": True, **dict(options.pop("kwargs", None) or {})}
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
            raise _map_pool_error(exc) from exc

    @staticmethod
    async def _value(
        conn: psycopg.AsyncConnection[Any],
        statement: LiteralString,
        params: Sequence[Any],
        *,
        binary: bool = False,
    ) -> Any:
        prepare = None if conn.prepare_threshold is None or _client_side(conn) else True
        try:
            async with conn.cursor(binary=binary) as cur:
                await cur.execute(statement, params, prepare=prepare)
                row = await cur.fetchone()
        except psycopg.Error as exc:
            raise from_database_error(exc) from exc
        return None if row is None else row[0]

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
        """Send one message; returns its event id (see :meth:`pgque.Producer.send`)."""
        _check_queue(queue)
        _check_type(type)
        fields = _check_extras(extras)
        text = _encode_one(self._encode, payload)
        with self._telemetry.operation("send", queue, kind=SpanKind.PRODUCER, sent=1) as op:
            fields = tracing.trace_fields(fields, tracing.current_carrier())
            statement, params = _single_statement(queue, type, text, fields)
            async with self._connection(conn) as c:
                event_id = int(await self._value(c, statement, params))
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
        """Send many messages in one statement; ids in input order (see
        :meth:`pgque.Producer.send_batch`)."""
        _check_queue(queue)
        _check_type(type)
        texts = _encode_many(self._encode, payloads)
        n = len(texts)
        checked_types = _check_types(types, n, type)
        columns = _extras_columns(extras, n)
        if n == 0:
            return []
        return await self._send_encoded(queue, type, texts, checked_types, columns, conn)

    async def _send_encoded(
        self,
        queue: str,
        type: str,
        texts: list[str],
        types: list[str] | None,
        columns: Columns,
        conn: psycopg.AsyncConnection[Any] | None,
    ) -> list[int]:
        n = len(texts)
        tel = self._telemetry
        creation = tel.create(queue, n) if self.create_spans else None
        try:
            with tel.operation(
                "send", queue, kind=SpanKind.CLIENT, batch_count=n, sent=n,
                links=creation.links if creation is not None else None,
            ):  # fmt: skip
                if creation is not None:
                    columns = _place_carriers(columns, creation.carriers, n)
                else:
                    carrier = tracing.current_carrier()
                    if carrier is not None:
                        columns = _place_carriers(columns, [carrier] * n, n)
                async with self._connection(conn) as c:
                    client_side = _client_side(c)
                    statement, params = _batch_statement(
                        queue, type, texts, types, columns, client_side=client_side
                    )
                    value = await self._value(c, statement, params, binary=not client_side)
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
        """Send one message for delivery at ``at`` or after ``delay`` (see
        :meth:`pgque.Producer.send_at`)."""
        _check_queue(queue)
        _check_type(type)
        statement, when = _deliver_at_statement(at, delay)
        text = _encode_one(self._encode, payload)
        with self._telemetry.operation("send", queue, kind=SpanKind.PRODUCER, sent=1) as op:
            async with self._connection(conn) as c:
                ident = int(await self._value(c, statement, (queue, type, text, when)))
            op.set_message_id(ident)
        return ident

    def batch(
        self,
        queue: str,
        *,
        type: str = "default",
        conn: psycopg.AsyncConnection[Any] | None = None,
    ) -> AsyncProducerBatch:
        """Collect messages in an ``async with`` block; sent at its end as one batch.

        Nothing is sent if the block raises; ``batch.send()`` is a plain call::

            async with producer.batch("orders") as batch:
                batch.send({"id": 1})
            print(batch.ids)
        """
        return AsyncProducerBatch(self, _check_queue(queue), _check_type(type), conn)


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
        self._pending = _Pending(producer._encode, type)

    def send(self, payload: Any, *, type: str | None = None, extras: Extras | None = None) -> None:
        """Add a message (encoded now, so a bad payload raises here)."""
        self._pending.add(payload, type, extras)

    def __len__(self) -> int:
        """How many messages were added."""
        return len(self._pending.texts)

    async def __aenter__(self) -> AsyncProducerBatch:
        """Start collecting."""
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
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
