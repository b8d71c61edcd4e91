"""The readers: a streaming source over tick ranges and a batch source.

Offsets are ``{"tick": <tick id>, "queue": <queue>}``. A micro-batch from tick A to tick B
reads the events visible in B's snapshot and not in A's, split into
``numPartitions`` partitions by ``ev_id % n``; each partition is one Spark
task, streaming its rows with COPY inside one transaction that keeps
rotation from truncating the tables under it (``pgque.spark_range_sql``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
from adbc_driver_postgresql import StatementOptions  # type: ignore[import-untyped,unused-ignore]
from psycopg import sql
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from pgque._executor import execute, fetch_one
from pgque._queries import query
from pgque.errors import PgqueConsumerNotFound, PgqueError, PgqueInvalidArgument
from pgque.spark._adbc import arrow_connect
from pgque.spark._db import call, connect
from pgque.spark._options import SourceOptions
from pgque.spark._payload import PayloadParser

__all__ = ["SCHEMA", "PgqueBatchReader", "PgqueStreamReader", "TickRange", "read_range"]

SCHEMA = StructType(
    [
        StructField("msg_id", LongType(), nullable=False),
        StructField("start_tick", LongType(), nullable=False),
        StructField("end_tick", LongType(), nullable=False),
        StructField("type", StringType(), nullable=True),
        StructField("payload", StringType(), nullable=True),
        StructField("retry_count", IntegerType(), nullable=True),
        StructField("created_at", TimestampType(), nullable=False),
        StructField("extra1", StringType(), nullable=True),
        StructField("extra2", StringType(), nullable=True),
        StructField("extra3", StringType(), nullable=True),
        StructField("extra4", StringType(), nullable=True),
    ]
)
"""The rows of the ``pgque`` source: one event each.

``msg_id`` is the event id, ``start_tick``/``end_tick`` the tick range of
the micro-batch (or batch read) that returned it, ``created_at`` the start
time of the sending transaction (UTC), ``retry_count`` NULL (retry copies
belong to the consumer that nacked them and are never read by Spark).
"""

ARROW_SCHEMA = pa.schema(
    [
        pa.field("msg_id", pa.int64(), nullable=False),
        pa.field("start_tick", pa.int64(), nullable=False),
        pa.field("end_tick", pa.int64(), nullable=False),
        pa.field("type", pa.string()),
        pa.field("payload", pa.string()),
        pa.field("retry_count", pa.int32()),
        pa.field("created_at", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("extra1", pa.string()),
        pa.field("extra2", pa.string()),
        pa.field("extra3", pa.string()),
        pa.field("extra4", pa.string()),
    ]
)

_MAX_LIMIT = 2**62  # a ReadMaxRows at least this big is no limit

BATCH_BYTES = 16 << 20
"""About how many bytes of rows go into one Arrow record batch handed to Spark."""


@dataclass(frozen=True)
class TickRange(InputPartition):
    """One Spark partition: partition ``part`` of ``parts`` of the events between two ticks."""

    dsn: str
    queue: str
    start_tick: int
    end_tick: int
    part: int
    parts: int
    payload: PayloadParser | None = None


def _to_batch(batch: Any, part: TickRange) -> Any:
    """The rows of ``spark_arrow_read`` as a record batch of the source's Arrow schema."""
    n = batch.num_rows
    payload = batch.column(3)
    schema = ARROW_SCHEMA
    if part.payload is not None:
        payload = part.payload.parse(payload, batch.column(0))
        schema = ARROW_SCHEMA.set(4, pa.field("payload", part.payload.arrow_type()))
    return pa.RecordBatch.from_arrays(
        [
            batch.column(0),
            pa.repeat(pa.scalar(part.start_tick, pa.int64()), n),
            pa.repeat(pa.scalar(part.end_tick, pa.int64()), n),
            batch.column(2),
            payload,
            batch.column(4),
            batch.column(1),
            batch.column(5),
            batch.column(6),
            batch.column(7),
            batch.column(8),
        ],
        schema=schema,
    )


def read_range(part: TickRange) -> Iterator[Any]:
    """Yield the partition's events as Arrow record batches.

    One transaction: ``spark_range_sql`` checks both ticks exist (a clear
    error when rotation removed one) and locks the queue against rotation
    until the transaction ends, so the read is complete or fails. ADBC runs
    the range's query as binary COPY and decodes it into Arrow batches
    (no Python step per row).
    """
    if part.start_tick == part.end_tick:
        return
    with arrow_connect(part.dsn) as conn:
        cur = conn.cursor()
        try:
            cur.execute(query("spark_client_encoding"))
            cur.execute(
                query("spark_range_sql_arrow"),
                (part.queue, part.start_tick, part.end_tick, part.part, part.parts),
            )
            row = cur.fetchone()
            assert row is not None
            # The range's query is SQL that pgque built: spliced in as such.
            read_sql = sql.SQL(query("spark_arrow_read")).format(sql.SQL(row[0])).as_string(None)
            cur.adbc_statement.set_options(
                **{StatementOptions.BATCH_SIZE_HINT_BYTES.value: str(BATCH_BYTES)}
            )
            cur.execute(read_sql)
            for batch in cur.fetch_record_batch():
                if batch.num_rows:
                    yield _to_batch(batch, part)
        finally:
            cur.close()


def _partitions(
    opts: SourceOptions, start: int, end: int, payload: PayloadParser | None
) -> list[TickRange]:
    if start == end:
        return []
    n = opts.num_partitions
    return [TickRange(opts.dsn, opts.queue, start, end, i, n, payload) for i in range(n)]


def _tick_of(offset: Any, what: str, queue: str) -> int:
    """The tick id of an offset ``{"tick": id, "queue": name}`` of ``queue`` (offsets of
    earlier versions have no queue)."""
    tick = offset.get("tick") if isinstance(offset, dict) else None
    if not isinstance(tick, int) or isinstance(tick, bool):
        raise PgqueError(
            f"pgque: the {what} offset {offset!r} is not a pgque offset {{'tick': <id>}};"
            " is the checkpoint from another source?"
        )
    of_queue = offset.get("queue", queue)
    if of_queue != queue:
        raise PgqueInvalidArgument(
            f"pgque streaming source: the checkpoint's {what} offset is of queue {of_queue!r},"
            f" option 'queue' is {queue!r}; a checkpoint belongs to one query: give this one"
            " a checkpointLocation of its own"
        )
    return tick


def _offset(tick: int, queue: str) -> dict[str, Any]:
    return {"tick": tick, "queue": queue}


class PgqueStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The streaming source: micro-batches are tick ranges of one queue.

    ``initialOffset`` (a query without checkpoint) subscribes the consumer if
    needed and starts at ``startingPosition``; ``latestOffset`` picks the end
    tick within ``maxTicksPerTrigger`` / ``maxEventsPerTrigger``;
    ``commit`` moves the consumer, which only decides what rotation may
    remove: Spark's checkpoint is the source of truth. Nothing here holds a
    connection.
    """

    def __init__(self, opts: SourceOptions, payload: PayloadParser | None = None) -> None:
        """Keep the checked options (and the ``payloadSchema`` parser); no database work yet."""
        self.opts = opts
        self.payload = payload
        self._initial: int | None = None
        self._target: int | None = None

    def initialOffset(self) -> dict[str, int]:
        """The start tick of a new query; the same on every call (Spark may call it twice)."""
        if self._initial is None:
            o = self.opts
            self._initial = int(
                call(
                    o.dsn,
                    "spark_start_tick",
                    o.queue,
                    o.consumer,
                    o.starting_position,
                )
            )
        return _offset(self._initial, self.opts.queue)

    def _latest(self) -> int | None:
        tick = call(self.opts.dsn, "spark_latest_tick", self.opts.queue)
        return None if tick is None else int(tick)

    def prepareForTriggerAvailableNow(self) -> None:
        """Pin the latest tick: an ``availableNow`` run reads up to it and stops."""
        self._target = self._latest() or 0

    def getDefaultReadLimit(self) -> ReadLimit:
        """``maxEventsPerTrigger`` as a row limit; any limit option makes Spark pass one."""
        o = self.opts
        if o.max_events is not None:
            return ReadMaxRows(o.max_events)
        if o.max_ticks is not None:
            return ReadMaxRows(_MAX_LIMIT)
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, int]:
        """The end tick of the next micro-batch (the start tick when nothing is new)."""
        o = self.opts
        max_ticks: int | None = o.max_ticks
        max_events: int | None = o.max_events
        if isinstance(limit, ReadAllAvailable):
            max_ticks = max_events = None
        elif isinstance(limit, ReadMaxRows):
            max_events = limit.max_rows if limit.max_rows < _MAX_LIMIT else None
        end = call(
            o.dsn,
            "spark_next_tick",
            o.queue,
            o.consumer,
            _tick_of(start, "start", o.queue),
            self._target,
            max_ticks,
            max_events,
        )
        return _offset(int(end), o.queue)

    def reportLatestOffset(self) -> dict[str, int] | None:
        """The queue's latest tick, shown in the query's progress."""
        tick = self._latest()
        return None if tick is None else _offset(tick, self.opts.queue)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """``numPartitions`` disjoint slices (``ev_id % n``) of the tick range."""
        return _partitions(
            self.opts,
            _tick_of(start, "start", self.opts.queue),
            _tick_of(end, "end", self.opts.queue),
            self.payload,
        )

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Read one slice on an executor (its own connection)."""
        assert isinstance(partition, TickRange)
        return read_range(partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Move the consumer to ``end``: rotation may now drop what came before it."""
        o = self.opts
        call(o.dsn, "spark_advance", o.queue, o.consumer, _tick_of(end, "end", o.queue))

    def stop(self) -> None:
        """Nothing to release; the consumer stays subscribed (a restart needs its events)."""


class PgqueBatchReader(DataSourceReader):
    """The batch source: one tick range, from ``startTick`` or the consumer's position.

    The end is ``endTick`` or the latest tick when Spark plans the read.
    Reading moves nothing; move the consumer with
    :func:`pgque.spark.advance_consumer` once the result is safe.
    """

    def __init__(self, opts: SourceOptions, payload: PayloadParser | None = None) -> None:
        """Keep the checked options (and the ``payloadSchema`` parser); the range is fixed
        in :meth:`partitions`."""
        self.opts = opts
        self.payload = payload

    def tick_range(self) -> tuple[int, int]:
        """Resolve and check the range (both ticks must exist)."""
        o = self.opts
        with connect(o.dsn, autocommit=False) as conn:
            start = o.start_tick
            if start is None:
                row = fetch_one(conn, "spark_consumer_tick", (o.queue, o.consumer))
                if row is None:
                    execute(conn, "spark_latest_tick", (o.queue,))  # raises for no queue
                    raise PgqueConsumerNotFound(
                        f"pgque batch source: consumer {o.consumer!r} is not subscribed to"
                        f" queue {o.queue!r} (option 'consumer')"
                    )
                start = int(row[0])
            end = o.end_tick
            if end is None:
                row = fetch_one(conn, "spark_latest_tick", (o.queue,))
                end = start if row is None or row[0] is None else int(row[0])
            if start > end:
                raise PgqueInvalidArgument(
                    f"pgque batch source: start tick {start} is after end tick {end}"
                )
            # Raises for a missing tick, naming it.
            execute(conn, "spark_range_sql", (o.queue, start, end, 0, 1))
        return start, end

    def partitions(self) -> Sequence[InputPartition]:
        """The slices of the resolved range."""
        start, end = self.tick_range()
        return _partitions(self.opts, start, end, self.payload)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Read one slice (nothing for the placeholder Spark uses for an empty range)."""
        if not isinstance(partition, TickRange):
            return iter(())
        return read_range(partition)
