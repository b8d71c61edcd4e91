"""The ``pgque`` data source: what Spark instantiates for ``format("pgque")``."""

from __future__ import annotations

from collections.abc import Mapping

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
from pgque.spark._payload import PayloadParser, parse_payload_schema
from pgque.spark._read import SCHEMA, PgqueBatchReader, PgqueStreamReader
from pgque.spark._write import PgqueBatchWriter, PgqueStreamWriter

__all__ = ["PgqueDataSource"]


def _payload_parser(options: Mapping[str, str]) -> PayloadParser | None:
    """The parser of option ``payloadSchema``, or None without it."""
    text = next((v for k, v in options.items() if k.lower() == "payloadschema"), None)
    if text is None or text.strip() == "":
        return None
    return PayloadParser(parse_payload_schema(text, "source"))


def _read_schema(options: Mapping[str, str]) -> StructType:
    """:data:`SCHEMA`, with ``payload`` of option ``payloadSchema``'s struct type when given."""
    parser = _payload_parser(options)
    return SCHEMA if parser is None else parser.schema(SCHEMA)


def _check_read_schema(schema: StructType, expected: StructType) -> None:
    """Refuse a user-given read schema other than ``expected``, naming the difference."""
    if schema == expected:
        return
    ours = {f.name: f for f in expected.fields}
    for field in schema.fields:
        if field.name not in ours:
            raise PgqueInvalidArgument(
                f"pgque source: column {field.name!r} of the given schema is not a pgque column;"
                f" the schema is fixed: {expected.simpleString()}"
            )
        if field.dataType != ours[field.name].dataType:
            hint = " (a parsed payload comes from option 'payloadSchema')"
            raise PgqueInvalidArgument(
                f"pgque source: column {field.name!r} must be"
                f" {ours[field.name].dataType.simpleString()}, not"
                f" {field.dataType.simpleString()}{hint if field.name == 'payload' else ''}"
            )
    raise PgqueInvalidArgument(
        f"pgque source: the schema is fixed, leave it out (it is {expected.simpleString()})"
    )


class PgqueDataSource(DataSource):
    """Spark's ``pgque`` format: read events of a queue, write DataFrames into one.

    Streaming read options: ``dsn``, ``queue``, ``consumer`` (required),
    ``numPartitions``, ``maxTicksPerTrigger``, ``maxEventsPerTrigger``,
    ``startingPosition`` (``consumer``, ``latest`` or a tick id),
    ``payloadSchema``. Batch read: ``dsn``, ``queue``, ``startTick``/``endTick``
    or ``consumer``, ``numPartitions``, ``payloadSchema``. Writes: ``dsn``,
    ``queue``, ``type``. See docs/spark.md.
    """

    @classmethod
    def name(cls) -> str:
        """The format name: ``pgque``."""
        return "pgque"

    def schema(self) -> StructType:
        """The event schema (:data:`pgque.spark.SCHEMA`; ``payload`` a struct with option
        ``payloadSchema``).

        Spark asks for it in ``load()``: options every use needs are checked
        here already, the rest when the read or write starts.
        """
        check_common_options(self.options)
        return _read_schema(self.options)

    def reader(self, schema: StructType) -> DataSourceReader:
        """``spark.read.format("pgque")``."""
        _check_read_schema(schema, _read_schema(self.options))
        opts = parse_source_options(self.options, streaming=False)
        return PgqueBatchReader(opts, _payload_parser(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """``spark.readStream.format("pgque")``."""
        _check_read_schema(schema, _read_schema(self.options))
        opts = parse_source_options(self.options, streaming=True)
        return PgqueStreamReader(opts, _payload_parser(self.options))

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
