"""The ``pgque`` data source: what Spark instantiates for ``format("pgque")``."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from pgque.errors import PgqueInvalidArgument
from pgque.spark._options import (
    check_common_options,
    parse_sink_options,
    parse_source_options,
)
from pgque.spark._read import SCHEMA, PgqueBatchReader, PgqueStreamReader
from pgque.spark._write import PgqueBatchWriter, PgqueStreamWriter

__all__ = ["PgqueDataSource"]


def _check_read_schema(schema: StructType) -> None:
    """Refuse a user-given read schema other than :data:`SCHEMA`, naming the difference."""
    if schema == SCHEMA:
        return
    ours = {f.name: f for f in SCHEMA.fields}
    for field in schema.fields:
        if field.name not in ours:
            raise PgqueInvalidArgument(
                f"pgque source: column {field.name!r} of the given schema is not a pgque column;"
                f" the schema is fixed: {SCHEMA.simpleString()}"
            )
        if field.dataType != ours[field.name].dataType:
            raise PgqueInvalidArgument(
                f"pgque source: column {field.name!r} must be"
                f" {ours[field.name].dataType.simpleString()}, not {field.dataType.simpleString()}"
            )
    raise PgqueInvalidArgument(
        f"pgque source: the schema is fixed, leave it out (it is {SCHEMA.simpleString()})"
    )


class PgqueDataSource(DataSource):
    """Spark's ``pgque`` format: read events of a queue, write DataFrames into one.

    Streaming read options: ``dsn``, ``queue``, ``consumer`` (required),
    ``numPartitions``, ``maxTicksPerTrigger``, ``maxEventsPerTrigger``,
    ``startingPosition`` (``consumer``, ``latest`` or a tick id). Batch read:
    ``dsn``, ``queue``, ``startTick``/``endTick`` or ``consumer``,
    ``numPartitions``. Writes: ``dsn``, ``queue``, ``type``. See docs/spark.md.
    """

    @classmethod
    def name(cls) -> str:
        """The format name: ``pgque``."""
        return "pgque"

    def schema(self) -> StructType:
        """The fixed event schema (:data:`pgque.spark.SCHEMA`).

        Spark asks for it in ``load()``: options every use needs are checked
        here already, the rest when the read or write starts.
        """
        check_common_options(self.options)
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        """``spark.read.format("pgque")``."""
        _check_read_schema(schema)
        return PgqueBatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """``spark.readStream.format("pgque")``."""
        _check_read_schema(schema)
        return PgqueStreamReader(parse_source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """``df.write.format("pgque")`` (mode append only: a queue cannot be overwritten)."""
        opts = parse_sink_options(self.options, streaming=False)
        if overwrite:
            raise PgqueInvalidArgument(
                "pgque batch sink: mode 'overwrite' is not possible, a queue only appends;"
                " use .mode('append')"
            )
        return PgqueBatchWriter(opts, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """``df.writeStream.format("pgque")``; in complete mode every micro-batch sends all rows."""
        return PgqueStreamWriter(parse_sink_options(self.options, streaming=True), schema)
