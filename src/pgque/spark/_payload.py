"""Option ``payloadSchema``: JSON payloads read as a struct column of a given Spark schema.

The schema is parsed where Spark asks for the source's schema (a DDL string
such as ``"order_id long, region string"``, or a StructType's JSON); tasks
receive it pickled and
parse each Arrow batch's payloads with pyarrow's JSON reader, all of a
batch's payloads in one call (no Python step per row). Only a batch that
fails is looked at row by row, to name the event whose payload does not
fit.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]
import pyarrow.json as pa_json  # type: ignore[import-untyped]
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from pgque.errors import PgqueInvalidArgument

__all__ = ["PayloadParser", "parse_payload_schema"]


_TOKEN = re.compile(r"\s*(?:(`(?:[^`]|``)*`)|([A-Za-z_][A-Za-z0-9_]*)|([0-9]+)|(.))")

_SIMPLE: dict[str, DataType] = {
    **dict.fromkeys(("string", "varchar", "char"), StringType()),
    "boolean": BooleanType(),
    **dict.fromkeys(("tinyint", "byte"), ByteType()),
    **dict.fromkeys(("smallint", "short"), ShortType()),
    **dict.fromkeys(("int", "integer"), IntegerType()),
    **dict.fromkeys(("bigint", "long"), LongType()),
    **dict.fromkeys(("float", "real"), FloatType()),
    "double": DoubleType(),
    "date": DateType(),
    **dict.fromkeys(("timestamp", "timestamp_ltz"), TimestampType()),
    "timestamp_ntz": TimestampNTZType(),
    "binary": BinaryType(),
}


class _Ddl:
    """A small parser of Spark's DDL for a struct: ``a long, b struct<c: string>``.

    ``DataSource.schema()`` runs in a Python worker without a JVM, where
    PySpark's own DDL parser cannot run.
    """

    def __init__(self, text: str) -> None:
        self.tokens = [m.group(1) or m.group(2) or m.group(3) or m.group(4)
                       for m in _TOKEN.finditer(text) if m.group(0).strip()]  # fmt: skip
        self.pos = 0

    def _peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def _take(self, expected: str | None = None) -> str:
        token = self._peek()
        if token is None or (expected is not None and token.lower() != expected):
            raise ValueError(f"expected {expected or 'more'} at {token or 'the end'!r}")
        self.pos += 1
        return token

    def struct(self) -> StructType:
        """The whole text as the fields of a struct."""
        fields = self._fields(None)
        if self._peek() is not None:
            raise ValueError(f"unexpected {self._peek()!r}")
        return StructType(fields)

    def _fields(self, end: str | None) -> list[StructField]:
        fields = []
        while True:
            name = self._take()
            if name.startswith("`"):
                name = name[1:-1].replace("``", "`")
            if self._peek() == ":":
                self._take(":")
            fields.append(StructField(name, self._type(), True))
            if self._peek() != ",":
                break
            self._take(",")
        if end is not None:
            self._take(end)
        return fields

    def _type(self) -> DataType:
        word = self._take().lower()
        if word in _SIMPLE:
            if word in ("varchar", "char") and self._peek() == "(":
                self.pos += 3  # (n): the length does not matter to JSON
            return _SIMPLE[word]
        if word in ("decimal", "dec", "numeric"):
            if self._peek() != "(":
                return DecimalType()
            self._take("(")
            precision = int(self._take())
            scale = 0
            if self._peek() == ",":
                self._take(",")
                scale = int(self._take())
            self._take(")")
            return DecimalType(precision, scale)
        if word == "array":
            self._take("<")
            element = self._type()
            self._take(">")
            return ArrayType(element)
        if word == "map":
            self._take("<")
            key = self._type()
            self._take(",")
            value = self._type()
            self._take(">")
            return MapType(key, value)
        if word == "struct":
            self._take("<")
            return StructType(self._fields(">"))
        raise ValueError(f"unknown type {word!r}")


def parse_payload_schema(text: str, what: str) -> StructType:
    """The Spark struct type option ``payloadSchema`` names (DDL or a StructType's JSON),
    or an error naming the option."""
    stripped = text.strip()
    try:
        if stripped.startswith("{"):
            parsed: Any = StructType.fromJson(json.loads(stripped))
        elif stripped.lower().startswith("struct<") and stripped.endswith(">"):
            parsed = _Ddl(stripped[len("struct<") : -1]).struct()
        else:
            parsed = _Ddl(stripped).struct()
    except Exception as exc:
        raise PgqueInvalidArgument(
            f"pgque {what}: option 'payloadSchema' is not a Spark schema ({exc}): {text!r};"
            " write it as DDL, e.g. 'order_id long, region string'"
        ) from None
    if not isinstance(parsed, StructType) or not parsed.fields:
        raise PgqueInvalidArgument(
            f"pgque {what}: option 'payloadSchema' must be a struct of fields (the JSON"
            f" objects' keys), not {parsed.simpleString()}"
        )
    try:
        to_arrow_type(parsed, timezone="UTC")
    except Exception as exc:
        raise PgqueInvalidArgument(
            f"pgque {what}: option 'payloadSchema' has a type Arrow cannot hold ({exc})"
        ) from None
    return parsed


class PayloadParser:
    """Parses a batch's payload column into a struct column of ``struct`` (pickled to tasks)."""

    def __init__(self, struct: StructType) -> None:
        """Keep the Spark struct type; the Arrow types are derived where they are used."""
        self.struct = struct
        self._arrow: Any = None

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the Spark type only."""
        return {"struct": self.struct, "_arrow": None}

    def schema(self, base: StructType) -> StructType:
        """``base`` (the source's schema) with ``payload`` of the struct type."""
        return StructType(
            [
                StructField(f.name, self.struct, True) if f.name == "payload" else f
                for f in base.fields
            ]
        )

    def arrow_type(self) -> Any:
        """The Arrow struct type of the payload column."""
        if self._arrow is None:
            self._arrow = to_arrow_type(self.struct, timezone="UTC")
        return self._arrow

    def parse(self, payload: Any, ids: Any) -> Any:
        """The payloads (a string array, NULL allowed) as a struct array; ``ids`` name
        the event of a payload that is not a JSON object of the schema."""
        struct_type = self.arrow_type()
        n = len(payload)
        valid = pc.is_valid(payload)
        # Raw newlines are never inside a JSON string: as whitespace they may go.
        text = pc.replace_substring_regex(pc.fill_null(payload, "{}"), "[\r\n]", " ")
        lines = pc.binary_join(pa.ListArray.from_arrays(pa.array([0, n], pa.int32()), text), "\n")
        data = lines[0].as_buffer()
        try:
            table = self._read(data)
        except pa.ArrowInvalid:
            table = None
        if table is None or table.num_rows != n:
            self._raise_for_row(text, ids)
        columns = [table.column(f.name).combine_chunks() for f in struct_type]
        return pa.StructArray.from_arrays(columns, fields=list(struct_type), mask=pc.invert(valid))

    def _read(self, data: Any) -> Any:
        struct_type = self.arrow_type()
        return pa_json.read_json(
            pa.BufferReader(data),
            read_options=pa_json.ReadOptions(use_threads=False, block_size=max(len(data), 1) + 1),
            parse_options=pa_json.ParseOptions(
                explicit_schema=pa.schema(list(struct_type)),
                unexpected_field_behavior="ignore",
            ),
        )

    def _raise_for_row(self, text: Any, ids: Any) -> None:
        """Find the first payload that does not parse alone and raise, naming its event."""
        for i, value in enumerate(text.to_pylist()):
            problem = None
            if not value.strip():
                problem = "an empty text"
            else:
                try:
                    if self._read(pa.py_buffer(value.encode())).num_rows != 1:
                        problem = "not one JSON object"
                except pa.ArrowInvalid as exc:
                    problem = str(exc)
            if problem is not None:
                excerpt = value if len(value) <= 200 else value[:200] + "..."
                raise PgqueInvalidArgument(
                    f"pgque source: the payload of event msg_id {ids[i].as_py()} does not fit"
                    f" option 'payloadSchema' ({self.struct.simpleString()}): {problem};"
                    f" payload: {excerpt!r}"
                )
        raise PgqueInvalidArgument(  # pragma: no cover - a batch fails, some row must
            f"pgque source: the payloads do not fit option 'payloadSchema'"
            f" ({self.struct.simpleString()})"
        )
