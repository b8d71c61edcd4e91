"""The readers: a streaming source over tick ranges and a batch source.

Offsets are ``{"tick": <tick id>}``. A micro-batch from tick A to tick B
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
import pyarrow.csv as pa_csv  # type: ignore[import-untyped]
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

from pgque._queries import query
from pgque.errors import PgqueConsumerNotFound, PgqueError, PgqueInvalidArgument
from pgque.spark._db import call, connect
from pgque.spark._options import SourceOptions

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

ROWS_PER_BATCH = 10_000
"""Rows per Arrow record batch handed to Spark (Spark's default batch size)."""

_BYTES_PER_BATCH = 16 << 20  # or fewer rows, when they are big

_MAX_LIMIT = 2**62  # a ReadMaxRows at least this big is no limit

# The columns of queries.sql's spark_copy.
_CSV_COLUMNS = ["id", "micros", "type", "payload", "retry", "e1", "e2", "e3", "e4"]
_CSV_TYPES = {
    "id": pa.int64(),
    "micros": pa.int64(),
    "retry": pa.int32(),
    **{name: pa.string() for name in ("type", "payload", "e1", "e2", "e3", "e4")},
}
# COPY's CSV writes NULL as an unquoted empty field and '' as "".
_CSV_PARSE = pa_csv.ParseOptions(newlines_in_values=True)
_CSV_CONVERT = pa_csv.ConvertOptions(
    column_types=_CSV_TYPES,
    strings_can_be_null=True,
    quoted_strings_can_be_null=False,
    null_values=[""],
)


@dataclass(frozen=True)
class TickRange(InputPartition):
    """One Spark partition: partition ``part`` of ``parts`` of the events between two ticks."""

    dsn: str
    queue: str
    start_tick: int
    end_tick: int
    part: int
    parts: int


def _to_batch(rows: list[bytes], start: int, end: int) -> Any:
    """Parse whole CSV rows from COPY into an Arrow record batch of :data:`ARROW_SCHEMA`."""
    data = b"".join(rows)
    table = pa_csv.read_csv(
        pa.py_buffer(data),
        read_options=pa_csv.ReadOptions(
            column_names=_CSV_COLUMNS, block_size=len(data) + 1, use_threads=False
        ),
        parse_options=_CSV_PARSE,
        convert_options=_CSV_CONVERT,
    ).combine_chunks()
    n = table.num_rows

    def column(name: str) -> Any:
        return table.column(name).chunk(0)

    return pa.RecordBatch.from_arrays(
        [
            column("id"),
            pa.array([start] * n, pa.int64()),
            pa.array([end] * n, pa.int64()),
            column("type"),
            column("payload"),
            column("retry"),
            column("micros").cast(pa.timestamp("us", tz="UTC")),
            column("e1"),
            column("e2"),
            column("e3"),
            column("e4"),
        ],
        schema=ARROW_SCHEMA,
    )


def read_range(part: TickRange) -> Iterator[Any]:
    """Yield the partition's events as Arrow record batches.

    One transaction: ``spark_range_sql`` checks both ticks exist (a clear
    error when rotation removed one) and locks the queue against rotation
    until the transaction ends, so the read is complete or fails. The rows
    stream out with COPY (CSV, one row per message) and are parsed by
    pyarrow in batches.
    """
    if part.start_tick == part.end_tick:
        return
    with connect(part.dsn, autocommit=False) as conn:
        conn.execute(query("spark_client_encoding"))
        row = conn.execute(
            query("spark_range_sql"),
            (part.queue, part.start_tick, part.end_tick, part.part, part.parts),
        ).fetchone()
        assert row is not None
        # The range's query is SQL that pgque built: spliced in as such.
        copy_sql = sql.SQL(query("spark_copy")).format(sql.SQL(row[0]))
        with conn.cursor().copy(copy_sql) as copy:
            rows: list[bytes] = []
            size = 0
            while data := copy.read():
                rows.append(bytes(data))
                size += len(data)
                if len(rows) >= ROWS_PER_BATCH or size >= _BYTES_PER_BATCH:
                    yield _to_batch(rows, part.start_tick, part.end_tick)
                    rows, size = [], 0
            if rows:
                yield _to_batch(rows, part.start_tick, part.end_tick)


def _partitions(opts: SourceOptions, start: int, end: int) -> list[TickRange]:
    if start == end:
        return []
    n = opts.num_partitions
    return [TickRange(opts.dsn, opts.queue, start, end, i, n) for i in range(n)]


def _tick_of(offset: Any, what: str) -> int:
    """The tick id of an offset ``{"tick": id}``."""
    tick = offset.get("tick") if isinstance(offset, dict) else None
    if not isinstance(tick, int) or isinstance(tick, bool):
        raise PgqueError(
            f"pgque: the {what} offset {offset!r} is not a pgque offset {{'tick': <id>}};"
            " is the checkpoint from another source?"
        )
    return tick


class PgqueStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The streaming source: micro-batches are tick ranges of one queue.

    ``initialOffset`` (a query without checkpoint) subscribes the consumer if
    needed and starts at ``startingPosition``; ``latestOffset`` picks the end
    tick within ``maxTicksPerTrigger`` / ``maxEventsPerTrigger``;
    ``commit`` moves the consumer, which only decides what rotation may
    remove: Spark's checkpoint is the source of truth. Nothing here holds a
    connection.
    """

    def __init__(self, opts: SourceOptions) -> None:
        """Keep the checked options; no database work yet."""
        self.opts = opts
        self._initial: int | None = None
        self._target: int | None = None

    def initialOffset(self) -> dict[str, int]:
        """The start tick of a new query; the same on every call (Spark may call it twice)."""
        if self._initial is None:
            o = self.opts
            self._initial = int(
                call(
                    o.dsn,
                    query("spark_start_tick"),
                    o.queue,
                    o.consumer,
                    o.starting_position,
                )
            )
        return {"tick": self._initial}

    def _latest(self) -> int | None:
        tick = call(self.opts.dsn, query("spark_latest_tick"), self.opts.queue)
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
            query("spark_next_tick"),
            o.queue,
            o.consumer,
            _tick_of(start, "start"),
            self._target,
            max_ticks,
            max_events,
        )
        return {"tick": int(end)}

    def reportLatestOffset(self) -> dict[str, int] | None:
        """The queue's latest tick, shown in the query's progress."""
        tick = self._latest()
        return None if tick is None else {"tick": tick}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """``numPartitions`` disjoint slices (``ev_id % n``) of the tick range."""
        return _partitions(self.opts, _tick_of(start, "start"), _tick_of(end, "end"))

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Read one slice on an executor (its own connection)."""
        assert isinstance(partition, TickRange)
        return read_range(partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Move the consumer to ``end``: rotation may now drop what came before it."""
        o = self.opts
        call(o.dsn, query("spark_advance"), o.queue, o.consumer, _tick_of(end, "end"))

    def stop(self) -> None:
        """Nothing to release; the consumer stays subscribed (a restart needs its events)."""


class PgqueBatchReader(DataSourceReader):
    """The batch source: one tick range, from ``startTick`` or the consumer's position.

    The end is ``endTick`` or the latest tick when Spark plans the read.
    Reading moves nothing; move the consumer with
    :func:`pgque.spark.advance_consumer` once the result is safe.
    """

    def __init__(self, opts: SourceOptions) -> None:
        """Keep the checked options; the range is fixed in :meth:`partitions`."""
        self.opts = opts

    def tick_range(self) -> tuple[int, int]:
        """Resolve and check the range (both ticks must exist)."""
        o = self.opts
        with connect(o.dsn, autocommit=False) as conn:
            start = o.start_tick
            if start is None:
                row = conn.execute(query("spark_consumer_tick"), (o.queue, o.consumer)).fetchone()
                if row is None:
                    conn.execute(query("spark_latest_tick"), (o.queue,))  # raises for no queue
                    raise PgqueConsumerNotFound(
                        f"pgque batch source: consumer {o.consumer!r} is not subscribed to"
                        f" queue {o.queue!r} (option 'consumer')"
                    )
                start = int(row[0])
            end = o.end_tick
            if end is None:
                row = conn.execute(query("spark_latest_tick"), (o.queue,)).fetchone()
                end = start if row is None or row[0] is None else int(row[0])
            if start > end:
                raise PgqueInvalidArgument(
                    f"pgque batch source: start tick {start} is after end tick {end}"
                )
            # Raises for a missing tick, naming it.
            conn.execute(query("spark_range_sql"), (o.queue, start, end, 0, 1))
        return start, end

    def partitions(self) -> Sequence[InputPartition]:
        """The slices of the resolved range."""
        start, end = self.tick_range()
        return _partitions(self.opts, start, end)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Read one slice (nothing for the placeholder Spark uses for an empty range)."""
        if not isinstance(partition, TickRange):
            return iter(())
        return read_range(partition)
