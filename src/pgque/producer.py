"""The :class:`Producer`: sends messages from many threads through a pool.

A producer is made from a DSN (it then owns a
:class:`psycopg_pool.ConnectionPool`, closed by :meth:`Producer.close`), from
a pool you own, or from one connection. Every method takes ``conn=`` to send
inside your own transaction instead (the transactional outbox): the message
commits or rolls back with your writes, and the producer never commits,
rolls back or closes a connection it did not open.

Payloads are encoded on the client by the serializer and stored through
pgque's ``text`` overloads: the server does not parse them again. With the
default :data:`~pgque.serializers.JSON` serializer objects become JSON (NaN
and infinities are refused), and a ``str`` is taken as JSON text already, as
in :class:`~pgque.PgqueClient`, but unchecked: pass objects, or text you know
to be JSON. :meth:`Producer.send_batch` sends any number of messages in one
statement (one round trip), with binary parameters and a prepared statement
where the connection allows it (``prepare_threshold`` not None).

The trace context of the current span (or of the producer's own ``send`` /
``create`` span when OpenTelemetry is configured) goes into a free extra
field of each message, as :mod:`pgque.tracing` describes.
"""

from __future__ import annotations

import itertools
import json
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import psycopg
from opentelemetry import metrics, trace
from opentelemetry.trace import SpanKind
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from pgque import tracing
from pgque._queries import LiteralString, query
from pgque._text import nul_error
from pgque.errors import (
    PgqueConnectionError,
    PgqueInvalidArgument,
    PgqueOperationRefused,
    from_database_error,
)
from pgque.otel import Telemetry, telemetry
from pgque.serializers import JSON, Serializer

if TYPE_CHECKING:
    from types import TracebackType

__all__ = ["Extras", "Producer", "ProducerBatch"]

#: The four extra fields of a message, ``ev_extra1..4`` (None: not set).
Extras = tuple[str | None, str | None, str | None, str | None]

_NO_EXTRAS: Extras = (None, None, None, None)
_POOL_DEFAULTS: dict[str, Any] = {"min_size": 1, "max_size": 8, "name": "pgque-producer"}


# -- checks and encoding, shared with pgque.async_producer ------------------------


def _check_queue(queue: object) -> str:
    if not isinstance(queue, str) or not queue:
        raise PgqueInvalidArgument(f"queue must be a non-empty string, got {queue!r}")
    if "\x00" in queue:
        raise nul_error("queue", queue)
    return queue


def _check_type(value: object, what: str = "type") -> str:
    if not isinstance(value, str) or not value:
        raise PgqueInvalidArgument(f"{what} must be a non-empty string, got {value!r}")
    if "\x00" in value:
        raise nul_error(what, value)
    return value


def _check_extras(extras: object, what: str = "extras") -> Extras:
    if extras is None:
        return _NO_EXTRAS
    if (
        not isinstance(extras, (tuple, list))
        or len(extras) != 4
        or not all(e is None or isinstance(e, str) for e in extras)
    ):
        raise PgqueInvalidArgument(
            f"{what} must be 4 values (ev_extra1..4), each a str or None, got {extras!r}"
        )
    for i, extra in enumerate(extras):
        if extra is not None and "\x00" in extra:
            raise nul_error(f"{what}[{i}]", extra)
    return (extras[0], extras[1], extras[2], extras[3])


_JSON_ENCODER = json.JSONEncoder(allow_nan=False)
"""``json.dumps(payload, allow_nan=False)``, without building an encoder per call."""


def _dumps(payload: Any) -> str:
    return _JSON_ENCODER.encode(payload)


def _encode_json(payload: Any) -> str:
    """The producer's JSON encoding: the JSON serializer's, minus NaN and infinities."""
    if isinstance(payload, str):
        return payload
    if isinstance(payload, (bytes, bytearray, memoryview)):
        JSON.encode(payload)  # raises its TypeError
    return _dumps(payload)


def _encoder(serializer: Serializer) -> Callable[[Any], str]:
    if not isinstance(serializer, Serializer):
        raise PgqueInvalidArgument(
            f"serializer must be a pgque.serializers.Serializer, got {serializer!r}"
        )
    return _encode_json if serializer is JSON else serializer.encode


def _encode_one(encode: Callable[[Any], str], payload: Any, where: str = "payload") -> str:
    try:
        text = encode(payload)
    except TypeError as exc:
        raise TypeError(f"{where} cannot be serialised: {exc}") from exc
    except ValueError as exc:
        raise PgqueInvalidArgument(f"{where} cannot be serialised: {exc}") from exc
    if not isinstance(text, str):
        raise TypeError(f"the serializer returned {type(text).__name__}, not str, for {where}")
    if "\x00" in text:
        raise nul_error(where, text, payload=True)
    return text


def _encode_many(encode: Callable[[Any], str], payloads: Iterable[Any]) -> list[str]:
    if isinstance(payloads, (str, bytes, bytearray, memoryview, Mapping)):
        raise TypeError(
            f"payloads must be a sequence of payloads, got {type(payloads).__name__}"
            " (for one message use send())"
        )
    items = payloads if isinstance(payloads, list) else list(payloads)
    try:
        if encode is _encode_json:
            texts = [p if p.__class__ is str else _encode_json(p) for p in items]
        else:
            texts = [encode(p) for p in items]
    except (TypeError, ValueError):
        for i, p in enumerate(items):  # again, to say which one
            _encode_one(encode, p, f"payloads[{i}]")
        raise  # pragma: no cover - the loop raises
    if encode is not _encode_json and not all(t.__class__ is str for t in texts):
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"the serializer returned {type(t).__name__}, not str,"
                                f" for payloads[{i}]")  # fmt: skip
    if any(map(operator.contains, texts, itertools.repeat("\x00"))):
        i = next(i for i, t in enumerate(texts) if "\x00" in t)
        raise nul_error(f"payloads[{i}]", texts[i], payload=True)
    return texts


def _check_types(types: Sequence[str | None] | None, n: int, default: str) -> list[str] | None:
    """Per-message types as a full list (None elements become ``default``); None if not given."""
    if types is None:
        return None
    if isinstance(types, (str, bytes)) or len(types) != n:
        raise PgqueInvalidArgument(
            f"types must be a sequence of {n} types (one per payload), got {types!r:.80}"
        )
    out: list[str] = []
    for i, t in enumerate(types):
        out.append(default if t is None else _check_type(t, f"types[{i}]"))
    return out


Columns = list[list[str | None] | None]


def _extras_columns(extras: Sequence[Extras | None] | None, n: int) -> Columns:
    """Per-message extras (a 4-tuple or None each) as four columns (None: all NULL)."""
    if extras is None:
        return [None, None, None, None]
    if not isinstance(extras, Sequence) or len(extras) != n:
        raise PgqueInvalidArgument(
            f"extras must be a list of {n} entries (one 4-tuple or None per payload),"
            f" got {extras!r:.80}"
        )
    rows = [_check_extras(e, f"extras[{i}]") for i, e in enumerate(extras)]
    columns: Columns = []
    for k in range(4):
        column = [row[k] for row in rows]
        columns.append(column if any(v is not None for v in column) else None)
    return columns


def _place_carriers(columns: Columns, carriers: Sequence[str | None], n: int) -> Columns:
    """Put each message's trace carrier where the field map says (extra1, else extra4)."""
    if columns[0] is None:
        return [list(carriers), columns[1], columns[2], columns[3]]
    first: list[str | None] = list(columns[0])
    fourth: list[str | None] = list(columns[3]) if columns[3] is not None else [None] * n
    for i, carrier in enumerate(carriers):
        if carrier is None:
            continue
        if first[i] is None:
            first[i] = carrier
        elif fourth[i] is None:
            fourth[i] = carrier
    return [first, columns[1], columns[2], fourth]


def _batch_statement(
    queue: str,
    type: str,
    texts: list[str],
    types: list[str] | None,
    columns: Columns,
    *,
    client_side: bool = False,
) -> tuple[LiteralString, tuple[Any, ...]]:
    """The send_batch statement: arrays bound in binary unless the cursor binds on the client."""
    if types is None and all(c is None for c in columns):
        plain = "producer_send_batch_client_side" if client_side else "producer_send_batch"
        return query(plain), (queue, type, texts)
    if types is None and type != "default":
        types = [type] * len(texts)
    extras = (
        "producer_send_batch_extras_client_side" if client_side else "producer_send_batch_extras"
    )
    return query(extras), (queue, types, texts, *columns)


def _client_side(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """True when the connection's cursors bind parameters on the client (no binary, no prepare)."""
    return issubclass(conn.cursor_factory, (psycopg.ClientCursor, psycopg.AsyncClientCursor))


def _single_statement(
    queue: str, type: str, text: str, fields: Extras
) -> tuple[LiteralString, tuple[Any, ...]]:
    if fields == _NO_EXTRAS:
        return query("send_text"), (queue, type, text)
    return query("send_text_extras"), (queue, type, text, *fields)


def _deliver_at_statement(
    at: datetime | None, delay: timedelta | None
) -> tuple[LiteralString, datetime | timedelta]:
    if (at is None) == (delay is None):
        raise PgqueInvalidArgument("send_at needs exactly one of at= (a datetime) or delay=")
    if at is not None:
        if not isinstance(at, datetime):
            raise PgqueInvalidArgument(f"at must be a datetime, got {type(at).__name__}")
        if at.tzinfo is None or at.utcoffset() is None:
            raise PgqueInvalidArgument(
                "at must be timezone-aware (e.g. datetime.now(timezone.utc) + ...);"
                " a naive datetime's zone would be the server's guess"
            )
        return query("producer_send_at"), at
    if not isinstance(delay, timedelta):
        raise PgqueInvalidArgument(f"delay must be a timedelta, got {type(delay).__name__}")
    if delay < timedelta(0):
        raise PgqueInvalidArgument(f"delay must not be negative, got {delay}")
    return query("producer_send_after"), delay


class _Pending:
    """The messages of a batch block: encoded as they are added, sent at its end."""

    def __init__(self, encode: Callable[[Any], str], type: str) -> None:
        self.encode = encode
        self.type = type
        self.texts: list[str] = []
        self.types: list[str] = []
        self.extras: list[Extras | None] = []
        self.mixed_types = False
        self.has_extras = False
        self.sent = False

    def add(self, payload: Any, type: str | None, extras: Extras | None) -> None:
        if self.sent:
            raise PgqueOperationRefused("this batch was sent already; start a new producer.batch()")
        where = f"payload of batch message {len(self.texts)}"
        msg_type = self.type if type is None else _check_type(type)
        checked = None if extras is None else _check_extras(extras)
        self.texts.append(_encode_one(self.encode, payload, where))
        self.types.append(msg_type)
        self.extras.append(checked)
        self.mixed_types = self.mixed_types or msg_type != self.type
        self.has_extras = self.has_extras or checked is not None

    def arrays(self) -> tuple[list[str], list[str] | None, Columns]:
        n = len(self.texts)
        types = self.types if self.mixed_types else None
        columns: Columns = [None, None, None, None]
        if self.has_extras:
            columns = _extras_columns(self.extras, n)
        return self.texts, types, columns


def _map_pool_error(exc: Exception) -> PgqueConnectionError:
    if isinstance(exc, PoolTimeout):
        return PgqueConnectionError(f"no connection from the producer's pool in time: {exc}")
    return PgqueConnectionError(f"the producer's pool is closed: {exc}")


# -- the producer ----------------------------------------------------------------


class Producer:
    """Sends messages; safe to share between threads.

    Args:
        source: A connection string (the producer then owns a
            :class:`~psycopg_pool.ConnectionPool` of autocommit connections,
            opened now and closed by :meth:`close`), a
            :class:`~psycopg_pool.ConnectionPool` or
            :class:`~psycopg_pool.NullConnectionPool` you own (each send
            borrows a connection, and the pool commits it on return), or a
            :class:`psycopg.Connection` you own (sends join its current
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

    Raises:
        PgqueConnectionError: ``source`` is a connection string and no
            connection could be opened with it.

    Example:
        >>> with pgque.Producer("dbname=app") as producer:  # doctest: +SKIP
        ...     producer.send("orders", {"id": 1}, type="order.created")
        ...     ids = producer.send_batch("orders", [{"id": 2}, {"id": 3}])
    """

    def __init__(
        self,
        source: str | ConnectionPool[Any] | psycopg.Connection[Any],
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
        self._pool: ConnectionPool[Any] | None = None
        self._conn: psycopg.Connection[Any] | None = None
        self._pool_kwargs = dict(pool_kwargs or {})
        self._owns_pool = False
        self._closed = False
        if isinstance(source, str):
            self._dsn = source
        elif isinstance(source, ConnectionPool):
            self._pool = source
        elif isinstance(source, psycopg.Connection):
            self._conn = source
        else:
            raise TypeError(
                "source must be a connection string, a psycopg_pool.ConnectionPool"
                f" or a psycopg.Connection, got {type(source).__name__}"
            )
        if pool_kwargs is not None and self._dsn is None:
            raise PgqueInvalidArgument(
                "pool_kwargs applies only when source is a connection string"
            )
        self.open()

    # -- lifecycle -------------------------------------------------------------

    def open(self) -> Producer:
        """Open the pool made from a connection string (done by the constructor); returns self.

        Checks the connection string with one connection first, so a bad one
        fails here with its real error. Harmless when open already.
        """
        if self._closed:
            raise PgqueConnectionError("the producer is closed")
        if self._dsn is None or self._pool is not None:
            return self
        options = {**_POOL_DEFAULTS, **self._pool_kwargs}
        kwargs = {"autocommit": True, **dict(options.pop("kwargs", None) or {})}
        try:
            psycopg.connect(self._dsn, **kwargs).close()
        except psycopg.Error as exc:
            raise PgqueConnectionError(str(exc).strip()) from exc
        self._pool = ConnectionPool(self._dsn, kwargs=kwargs, open=True, **options)
        self._owns_pool = True
        return self

    def close(self) -> None:
        """Close the pool if the producer made it; later sends raise. Harmless twice."""
        self._closed = True
        if self._owns_pool and self._pool is not None:
            self._pool.close()

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._closed

    def __enter__(self) -> Producer:
        """Return the (open) producer."""
        return self.open()

    def __exit__(self, *exc_info: object) -> None:
        """Close the producer."""
        self.close()

    @contextmanager
    def _connection(
        self, conn: psycopg.Connection[Any] | None
    ) -> Iterator[psycopg.Connection[Any]]:
        if self._closed:
            raise PgqueConnectionError("the producer is closed")
        if conn is not None:
            yield conn
            return
        if self._conn is not None:
            yield self._conn
            return
        assert self._pool is not None
        try:
            with self._pool.connection() as pooled:
                yield pooled
        except (PoolTimeout, PoolClosed) as exc:
            raise _map_pool_error(exc) from exc

    @staticmethod
    def _value(
        conn: psycopg.Connection[Any],
        statement: LiteralString,
        params: Sequence[Any],
        *,
        binary: bool = False,
    ) -> Any:
        prepare = None if conn.prepare_threshold is None or _client_side(conn) else True
        try:
            with conn.cursor(binary=binary) as cur:
                cur.execute(statement, params, prepare=prepare)
                row = cur.fetchone()
        except psycopg.Error as exc:
            raise from_database_error(exc) from exc
        return None if row is None else row[0]

    # -- sending ---------------------------------------------------------------

    def send(
        self,
        queue: str,
        payload: Any,
        *,
        type: str = "default",
        extras: Extras | None = None,
        conn: psycopg.Connection[Any] | None = None,
    ) -> int:
        """Send one message; returns its event id.

        Args:
            queue: The queue.
            payload: The message, encoded by the serializer.
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
        _check_queue(queue)
        _check_type(type)
        fields = _check_extras(extras)
        text = _encode_one(self._encode, payload)
        with self._telemetry.operation("send", queue, kind=SpanKind.PRODUCER, sent=1) as op:
            fields = tracing.trace_fields(fields, tracing.current_carrier())
            statement, params = _single_statement(queue, type, text, fields)
            with self._connection(conn) as c:
                event_id = int(self._value(c, statement, params))
            op.set_message_id(event_id)
        return event_id

    def send_batch(
        self,
        queue: str,
        payloads: Iterable[Any],
        *,
        type: str = "default",
        types: Sequence[str | None] | None = None,
        extras: Sequence[Extras | None] | None = None,
        conn: psycopg.Connection[Any] | None = None,
    ) -> list[int]:
        """Send many messages in one statement; returns their event ids in input order.

        All or none are sent. An empty ``payloads`` sends nothing and returns ``[]``.

        Args:
            queue: The queue.
            payloads: The messages (a list, or any iterable).
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
        _check_queue(queue)
        _check_type(type)
        texts = _encode_many(self._encode, payloads)
        n = len(texts)
        checked_types = _check_types(types, n, type)
        columns = _extras_columns(extras, n)
        if n == 0:
            return []
        return self._send_encoded(queue, type, texts, checked_types, columns, conn)

    def _send_encoded(
        self,
        queue: str,
        type: str,
        texts: list[str],
        types: list[str] | None,
        columns: Columns,
        conn: psycopg.Connection[Any] | None,
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
                with self._connection(conn) as c:
                    client_side = _client_side(c)
                    statement, params = _batch_statement(
                        queue, type, texts, types, columns, client_side=client_side
                    )
                    value = self._value(c, statement, params, binary=not client_side)
                    ids = [int(i) for i in value]
        except BaseException as exc:
            if creation is not None:
                creation.end(error=exc)
            raise
        if creation is not None:
            creation.end(ids)
        return ids

    def send_at(
        self,
        queue: str,
        payload: Any,
        *,
        at: datetime | None = None,
        delay: timedelta | None = None,
        type: str = "default",
        conn: psycopg.Connection[Any] | None = None,
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
            payload: The message, encoded by the serializer.
            at: When to deliver (timezone-aware).
            delay: How long from now to wait (not negative).
            type: The message type. Defaults to ``"default"``.
            conn: Send on this connection, inside its current transaction.

        Raises:
            PgqueInvalidArgument: Not exactly one of ``at``/``delay``, a naive
                ``at``, a negative ``delay``, or a bad queue name or type.
        """
        _check_queue(queue)
        _check_type(type)
        statement, when = _deliver_at_statement(at, delay)
        text = _encode_one(self._encode, payload)
        with self._telemetry.operation("send", queue, kind=SpanKind.PRODUCER, sent=1) as op:
            with self._connection(conn) as c:
                ident = int(self._value(c, statement, (queue, type, text, when)))
            op.set_message_id(ident)
        return ident

    def batch(
        self,
        queue: str,
        *,
        type: str = "default",
        conn: psycopg.Connection[Any] | None = None,
    ) -> ProducerBatch:
        """Collect messages in a ``with`` block and send them at its end as one batch.

        Nothing is sent if the block raises. After the block ``batch.ids``
        holds the event ids::

            with producer.batch("orders") as batch:
                for order in orders:
                    batch.send(order, type="order.created")
            print(batch.ids)

        Args:
            queue: The queue.
            type: The type of messages sent without one. Defaults to ``"default"``.
            conn: Send on this connection, inside its current transaction.
        """
        return ProducerBatch(self, _check_queue(queue), _check_type(type), conn)


class ProducerBatch:
    """Messages collected by :meth:`Producer.batch`, sent as one ``send_batch`` at exit."""

    def __init__(
        self,
        producer: Producer,
        queue: str,
        type: str,
        conn: psycopg.Connection[Any] | None,
    ) -> None:
        self.producer = producer
        self.queue = queue
        self.conn = conn
        #: The event ids, in the order of the :meth:`send` calls, once sent.
        self.ids: list[int] = []
        self._pending = _Pending(producer._encode, type)

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

    def __enter__(self) -> ProducerBatch:
        """Start collecting."""
        return self

    def __exit__(
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
        self.ids = self.producer._send_encoded(
            self.queue, pending.type, texts, types, columns, self.conn
        )


Producer.__module__ = "pgque"
ProducerBatch.__module__ = "pgque"
