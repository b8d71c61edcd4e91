"""The sinks: ``df.write`` and ``df.writeStream`` into a queue.

Columns: ``payload`` (required: a string is sent verbatim, any other type as
JSON), ``type`` (string; NULL or missing means option ``type``, default
``'default'``) and ``extra1`` .. ``extra4`` (strings). Any other column is
an error, raised when the query starts.

Two phases. Every task stages its rows under the write's id and a stage id
of its own (``pgque.spark_stage``, in chunks, in one transaction per task,
so a failed or killed task stages nothing) and reports them in its commit
message; the driver's commit publishes exactly the reported stages,
set-based and in one transaction (``pgque.spark_publish``), then drops every
row staged under the write id, those of failed task attempts included.
Abort drops them by write id too (its message list may lack failed tasks).
A streaming write's id is ``<query id>:<batch id>``, known to every task
and to the commit, and the publish records (query id, batch id): a replayed
micro-batch publishes nothing.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pyspark import TaskContext
from pyspark.sql import types as st
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from pgque._executor import fetch_value
from pgque.errors import PgqueError, PgqueInvalidArgument
from pgque.spark._db import call, connect
from pgque.spark._options import SinkOptions

__all__ = ["PgqueBatchWriter", "PgqueStreamWriter", "StagedRows", "check_schema"]

COLUMNS = ("payload", "type", "extra1", "extra2", "extra3", "extra4")
"""The columns a DataFrame written to pgque may have."""

CHUNK_ROWS = 20_000
CHUNK_BYTES = 8 << 20

_LEAVES = (
    st.StringType,
    st.BooleanType,
    st.ByteType,
    st.ShortType,
    st.IntegerType,
    st.LongType,
    st.FloatType,
    st.DoubleType,
    st.DecimalType,
    st.DateType,
    st.TimestampType,
    st.TimestampNTZType,
    st.NullType,
)


@dataclass(frozen=True)
class StagedRows(WriterCommitMessage):
    """What one task staged: its stage id and row count under the write id."""

    write_id: str
    stage_id: str
    rows: int
    query_id: str | None = None
    batch_id: int | None = None


def _check_json_type(dtype: st.DataType, path: str) -> None:
    if isinstance(dtype, st.StructType):
        for field in dtype.fields:
            _check_json_type(field.dataType, f"{path}.{field.name}")
    elif isinstance(dtype, st.ArrayType):
        _check_json_type(dtype.elementType, f"{path}[]")
    elif isinstance(dtype, st.MapType):
        if not isinstance(
            dtype.keyType, (st.StringType, st.IntegerType, st.LongType, st.ShortType, st.ByteType)
        ):
            raise PgqueInvalidArgument(
                f"pgque sink: column {path!r} is a map with {dtype.keyType.simpleString()} keys;"
                " JSON objects need string or integer keys"
            )
        _check_json_type(dtype.valueType, f"{path}{{}}")
    elif not isinstance(dtype, _LEAVES):
        hint = (
            " (cast it, e.g. to base64 or hex strings)" if isinstance(dtype, st.BinaryType) else ""
        )
        raise PgqueInvalidArgument(
            f"pgque sink: column {path!r} has type {dtype.simpleString()}, which has no JSON"
            f" form{hint}"
        )


def check_schema(schema: st.StructType) -> None:
    """Refuse a DataFrame the sink cannot send, naming the column.

    Raises:
        PgqueInvalidArgument: No ``payload`` column, an unknown column, a
            non-string ``type`` or extra, or a payload type without JSON form.
    """
    names = [f.name for f in schema.fields]
    if "payload" not in names:
        raise PgqueInvalidArgument(
            f"pgque sink: the DataFrame has no 'payload' column (columns: {', '.join(names)})"
        )
    for name in names:
        if name not in COLUMNS:
            raise PgqueInvalidArgument(
                f"pgque sink: column {name!r} is not one of {', '.join(COLUMNS)}; select or"
                " rename the columns to send"
            )
    if len(set(names)) != len(names):
        raise PgqueInvalidArgument(f"pgque sink: duplicate column names in {names}")
    for field in schema.fields:
        if field.name == "payload":
            _check_json_type(field.dataType, "payload")
        elif not isinstance(field.dataType, (st.StringType, st.NullType)):
            raise PgqueInvalidArgument(
                f"pgque sink: column {field.name!r} must be a string, not"
                f" {field.dataType.simpleString()}"
            )


def _json_converter(dtype: st.DataType) -> Callable[[Any], Any]:
    """Turn a value of ``dtype``, as Arrow's ``to_pylist`` gives it, into JSON data."""
    if isinstance(dtype, st.StructType):
        fields = [(f.name, _json_converter(f.dataType)) for f in dtype.fields]
        return lambda v: None if v is None else {name: conv(v[name]) for name, conv in fields}
    if isinstance(dtype, st.ArrayType):
        item = _json_converter(dtype.elementType)
        return lambda v: None if v is None else [item(x) for x in v]
    if isinstance(dtype, st.MapType):
        value = _json_converter(dtype.valueType)
        return lambda v: None if v is None else {str(k): value(x) for k, x in v}
    if isinstance(dtype, st.DecimalType):
        return _decimal
    if isinstance(dtype, (st.DateType, st.TimestampType, st.TimestampNTZType)):
        return lambda v: None if v is None else v.isoformat()
    return lambda v: v


def _decimal(v: Decimal | None) -> int | float | None:
    if v is None:
        return None
    return int(v) if v == v.to_integral_value() else float(v)


def _json_text(column: str, dtype: st.DataType) -> Callable[[list[Any]], list[str | None]]:
    """A function turning a column's values into JSON texts (NULL stays NULL)."""
    conv = _json_converter(dtype)

    def encode(values: list[Any]) -> list[str | None]:
        out: list[str | None] = []
        for value in values:
            if value is None:
                out.append(None)
                continue
            try:
                out.append(json.dumps(conv(value), allow_nan=False))
            except (TypeError, ValueError) as exc:
                raise PgqueInvalidArgument(
                    f"pgque sink: a value of column {column!r} cannot be sent as JSON ({exc}):"
                    f" {_short(value)}"
                ) from None
        return out

    return encode


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


class _Stager:
    """Stage a task's rows in chunks under (write id, stage id); count them."""

    def __init__(self, opts: SinkOptions, schema: st.StructType, write_id: str) -> None:
        self.opts = opts
        self.write_id = write_id
        self.stage_id = uuid.uuid4().hex
        names = schema.fieldNames()
        self.index = {name: names.index(name) for name in COLUMNS if name in names}
        payload_type = schema["payload"].dataType
        self.payload_text: Callable[[list[Any]], list[str | None]] | None = (
            None if isinstance(payload_type, st.StringType) else _json_text("payload", payload_type)
        )
        self.rows = 0

    def stage(self, batches: Iterator[Any]) -> int:
        """Stage every row of the Arrow batches in one transaction; return how many.

        A task that fails or is killed leaves nothing staged (its transaction
        rolls back); the rows become visible when the task succeeds.
        """
        cols: dict[str, list[Any]] = {name: [] for name in COLUMNS}
        size = 0
        with connect(self.opts.dsn, autocommit=False) as conn:
            # Zero rows first: takes the write's lock (its publish or abort waits for this
            # task's transaction) and fails at once when the write is over already.
            self._flush(conn, cols)
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                values = self._columns(batch)
                for name in COLUMNS:
                    cols[name].extend(values[name])
                size += sum(map(len, values["payload"]))
                if len(cols["payload"]) >= CHUNK_ROWS or size >= CHUNK_BYTES:
                    self._flush(conn, cols)
                    cols = {name: [] for name in COLUMNS}
                    size = 0
            if cols["payload"]:
                self._flush(conn, cols)
        return self.rows

    def _columns(self, batch: Any) -> dict[str, list[Any]]:
        n = batch.num_rows
        payload_col = batch.column(self.index["payload"])
        if payload_col.null_count:
            nulls = [i for i, v in enumerate(payload_col.is_null().to_pylist()) if v]
            raise PgqueInvalidArgument(
                f"pgque sink: column 'payload' is NULL in {payload_col.null_count} row(s) (row"
                f" {self.rows + nulls[0] + 1} of this task); nothing of this write is sent"
            )
        raw = payload_col.to_pylist()
        payloads = raw if self.payload_text is None else self.payload_text(raw)
        out: dict[str, list[Any]] = {"payload": payloads}
        default_type = self.opts.type
        if "type" in self.index:
            out["type"] = [
                default_type if t is None else t
                for t in batch.column(self.index["type"]).to_pylist()
            ]
        else:
            out["type"] = [default_type] * n
        for name in ("extra1", "extra2", "extra3", "extra4"):
            out[name] = batch.column(self.index[name]).to_pylist() if name in self.index else []
        return out

    def _flush(self, conn: Any, cols: dict[str, list[Any]]) -> None:
        def extra(name: str) -> list[Any] | None:
            return cols[name] or None

        staged = fetch_value(
            conn,
            "spark_stage",
            (
                self.write_id,
                self.stage_id,
                self.rows,
                cols["type"],
                cols["payload"],
                extra("extra1"),
                extra("extra2"),
                extra("extra3"),
                extra("extra4"),
            ),
        )
        self.rows += int(staged)


def _check_queue(opts: SinkOptions) -> None:
    """Fail at query start for an unknown queue (or a DSN that does not work)."""
    call(opts.dsn, "spark_latest_tick", opts.queue)


def _publish(
    opts: SinkOptions, write_id: str, messages: list[StagedRows], batch: tuple[str, int] | None
) -> int:
    stage_ids = [m.stage_id for m in messages]
    counts = [m.rows for m in messages]
    query_id, batch_id = batch if batch is not None else (None, None)
    return int(
        call(
            opts.dsn,
            "spark_publish",
            opts.queue,
            write_id,
            stage_ids,
            counts,
            query_id,
            batch_id,
        )
    )


def _messages(messages: list[Any]) -> list[StagedRows]:
    found = [m for m in messages if m is not None]
    for m in found:
        if not isinstance(m, StagedRows):
            raise PgqueError(f"pgque sink: unexpected commit message {m!r}")
    return found


class PgqueBatchWriter(DataSourceArrowWriter):
    """``df.write.format("pgque")``: all rows in one publish, or none.

    The same writer object (and so the same write id) reaches the tasks and
    the driver's commit.
    """

    def __init__(self, opts: SinkOptions, schema: st.StructType) -> None:
        """Check the DataFrame's columns and the queue; choose the write id."""
        check_schema(schema)
        _check_queue(opts)
        self.opts = opts
        self.schema = schema
        self.write_id = uuid.uuid4().hex

    def write(self, iterator: Iterator[Any]) -> StagedRows:
        """Stage this task's rows (on an executor)."""
        stager = _Stager(self.opts, self.schema, self.write_id)
        rows = stager.stage(iterator)
        return StagedRows(self.write_id, stager.stage_id, rows)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Publish every task's rows in one transaction."""
        _publish(self.opts, self.write_id, _messages(messages), None)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Drop everything staged under the write id (failed tasks' rows included)."""
        call(self.opts.dsn, "spark_discard", self.write_id)


def _task_batch() -> tuple[str, int]:
    """The streaming query id and micro-batch id of the running task."""
    ctx = TaskContext.get()
    query_id = ctx.getLocalProperty("sql.streaming.queryId") if ctx is not None else None
    batch_id = ctx.getLocalProperty("streaming.sql.batchId") if ctx is not None else None
    if not query_id or batch_id is None:
        raise PgqueError(
            "pgque streaming sink: the task does not know its streaming query id and batch id"
        )
    return query_id, int(batch_id)


class PgqueStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("pgque")``: each micro-batch published once.

    Spark builds a fresh writer for ``commit``, so every id travels in the
    commit messages; the write id ``<query id>:<batch id>`` is known to every
    task of a micro-batch and to its replays.
    """

    def __init__(self, opts: SinkOptions, schema: st.StructType) -> None:
        """Check the DataFrame's columns and the queue."""
        check_schema(schema)
        _check_queue(opts)
        self.opts = opts
        self.schema = schema

    def write(self, iterator: Iterator[Any]) -> StagedRows:
        """Stage this task's rows of the micro-batch (on an executor)."""
        query_id, batch_id = _task_batch()
        write_id = f"{query_id}:{batch_id}"
        stager = _Stager(self.opts, self.schema, write_id)
        rows = stager.stage(iterator)
        return StagedRows(write_id, stager.stage_id, rows, query_id, batch_id)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Publish the micro-batch unless (query id, batch id) was published before."""
        found = _messages(messages)
        if not found:
            return
        query_id = found[0].query_id
        assert query_id is not None
        write_id = f"{query_id}:{batchId}"
        for m in found:
            if m.write_id != write_id:
                raise PgqueError(
                    f"pgque streaming sink: a task of batch {batchId} staged under {m.write_id!r}"
                )
        _publish(self.opts, write_id, found, (query_id, batchId))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Drop the micro-batch's staged rows (replays and later commits also clean up)."""
        found = _messages(messages)
        if found and found[0].query_id is not None:
            call(self.opts.dsn, "spark_discard", f"{found[0].query_id}:{batchId}")
