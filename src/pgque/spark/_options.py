"""Parsing and checking the options of the ``pgque`` Spark data source.

Pure Python (no pyspark import), so the rules are easy to test. Spark hands
options over with lower-cased keys; errors name them as the user wrote them
in the documentation (``numPartitions``, ``maxTicksPerTrigger`` ...).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from pgque.errors import PgqueInvalidArgument

__all__ = [
    "SinkOptions",
    "SourceOptions",
    "check_common_options",
    "parse_sink_options",
    "parse_source_options",
]

# Canonical spellings, by lower-cased key.
_NAMES = {
    name.lower(): name
    for name in (
        "dsn",
        "queue",
        "consumer",
        "numPartitions",
        "maxTicksPerTrigger",
        "maxEventsPerTrigger",
        "startingPosition",
        "startTick",
        "endTick",
        "type",
        "payloadSchema",
    )
}
_STREAM_READ = {"dsn", "queue", "consumer", "numPartitions", "maxTicksPerTrigger",
                "maxEventsPerTrigger", "startingPosition", "payloadSchema"}  # fmt: skip
_BATCH_READ = {"dsn", "queue", "consumer", "numPartitions", "startTick", "endTick",
               "payloadSchema"}  # fmt: skip
_WRITE = {"dsn", "queue", "type"}
# Added by Spark itself, not by the user.
_SPARK_KEYS = {"checkpointlocation"}

DEFAULT_PARTITIONS = 2
"""Partitions of a read when ``numPartitions`` is not given."""

_TICK = re.compile(r"[0-9]{1,18}")


@dataclass(frozen=True)
class SourceOptions:
    """The checked options of a read (streaming or batch)."""

    dsn: str
    queue: str
    consumer: str | None
    num_partitions: int
    max_ticks: int | None = None
    max_events: int | None = None
    starting_position: str = "consumer"
    start_tick: int | None = None
    end_tick: int | None = None
    payload_schema: str | None = None
    """Option ``payloadSchema`` as given (parsed by ``pgque.spark._payload``)."""


@dataclass(frozen=True)
class SinkOptions:
    """The checked options of a write (streaming or batch)."""

    dsn: str
    queue: str
    type: str = "default"


def _lowered(options: Mapping[str, str], allowed: set[str], what: str) -> dict[str, str]:
    """Lower-case the keys; refuse unknown ones and ``path``."""
    result: dict[str, str] = {}
    allowed_lower = {name.lower() for name in allowed}
    for key, value in options.items():
        low = key.lower()
        if low in _SPARK_KEYS:
            continue
        if low == "path":
            raise PgqueInvalidArgument(
                f"pgque {what}: a path is not taken (got {value!r}); name the queue with"
                " .option('queue', ...)"
            )
        if low not in allowed_lower:
            known = ", ".join(sorted(allowed, key=str.lower))
            hint = ""
            if low in {n.lower() for n in _STREAM_READ | _BATCH_READ | _WRITE}:
                hint = f" ({_NAMES[low]} does not apply to a {what})"
            raise PgqueInvalidArgument(
                f"pgque {what}: unknown option {key!r}{hint}; the options are: {known}"
            )
        result[low] = value
    return result


def _required(values: dict[str, str], name: str, what: str) -> str:
    value = values.get(name.lower())
    if value is None or value.strip() == "":
        raise PgqueInvalidArgument(f"pgque {what}: option {name!r} is required")
    return value


def _positive(values: dict[str, str], name: str, what: str) -> int | None:
    raw = values.get(name.lower())
    if raw is None:
        return None
    try:
        number = int(raw.strip())
    except ValueError:
        raise PgqueInvalidArgument(
            f"pgque {what}: option {name!r} must be a positive integer, not {raw!r}"
        ) from None
    if number < 1 or number > 2**62:
        raise PgqueInvalidArgument(
            f"pgque {what}: option {name!r} must be a positive integer, not {raw!r}"
        )
    return number


def _tick(values: dict[str, str], name: str, what: str) -> int | None:
    raw = values.get(name.lower())
    if raw is None:
        return None
    if not _TICK.fullmatch(raw.strip()):
        raise PgqueInvalidArgument(f"pgque {what}: option {name!r} must be a tick id, not {raw!r}")
    return int(raw.strip())


def _payload_schema(values: dict[str, str], what: str) -> str | None:
    raw = values.get("payloadschema")
    if raw is not None and raw.strip() == "":
        raise PgqueInvalidArgument(f"pgque {what}: option 'payloadSchema' must not be empty")
    return raw


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Check the options of ``spark.readStream`` (``streaming``) or ``spark.read``.

    Raises:
        PgqueInvalidArgument: A missing, unknown or malformed option; the
            message names it.
    """
    what = "streaming source" if streaming else "batch source"
    values = _lowered(options, _STREAM_READ if streaming else _BATCH_READ, what)
    dsn = _required(values, "dsn", what)
    queue = _required(values, "queue", what)
    consumer = values.get("consumer")
    if consumer is not None and consumer.strip() == "":
        raise PgqueInvalidArgument(f"pgque {what}: option 'consumer' must not be empty")
    parts = _positive(values, "numPartitions", what) or DEFAULT_PARTITIONS
    if parts > 1024:
        raise PgqueInvalidArgument(
            f"pgque {what}: option 'numPartitions' must be at most 1024, not {parts}"
        )
    if streaming:
        if consumer is None:
            raise PgqueInvalidArgument(
                f"pgque {what}: option 'consumer' is required: the query's consumer keeps"
                " the events it has not read from rotation (give every query its own)"
            )
        position = values.get("startingposition", "consumer").strip()
        if position not in ("consumer", "latest") and not _TICK.fullmatch(position):
            raise PgqueInvalidArgument(
                f"pgque {what}: option 'startingPosition' must be consumer, latest or a tick id,"
                f" not {position!r}"
            )
        return SourceOptions(
            dsn=dsn,
            queue=queue,
            consumer=consumer,
            num_partitions=parts,
            max_ticks=_positive(values, "maxTicksPerTrigger", what),
            max_events=_positive(values, "maxEventsPerTrigger", what),
            starting_position=position,
            payload_schema=_payload_schema(values, what),
        )
    start = _tick(values, "startTick", what)
    end = _tick(values, "endTick", what)
    if start is None and consumer is None:
        raise PgqueInvalidArgument(
            f"pgque {what}: give option 'startTick' (a tick range) or 'consumer' (its pending"
            " events)"
        )
    if start is not None and end is not None and start > end:
        raise PgqueInvalidArgument(
            f"pgque {what}: option 'startTick' ({start}) is after 'endTick' ({end})"
        )
    return SourceOptions(
        dsn=dsn,
        queue=queue,
        consumer=consumer,
        num_partitions=parts,
        start_tick=start,
        end_tick=end,
        payload_schema=_payload_schema(values, what),
    )


def parse_sink_options(options: Mapping[str, str], *, streaming: bool) -> SinkOptions:
    """Check the options of ``df.writeStream`` (``streaming``) or ``df.write``.

    Raises:
        PgqueInvalidArgument: A missing, unknown or malformed option; the
            message names it.
    """
    what = "streaming sink" if streaming else "batch sink"
    values = _lowered(options, _WRITE, what)
    msg_type = values.get("type", "default")
    if msg_type.strip() == "":
        raise PgqueInvalidArgument(f"pgque {what}: option 'type' must not be empty")
    return SinkOptions(
        dsn=_required(values, "dsn", what), queue=_required(values, "queue", what), type=msg_type
    )


def check_common_options(options: Mapping[str, str]) -> None:
    """Check what every use of the source needs (known keys, ``dsn``, ``queue``).

    Raises:
        PgqueInvalidArgument: An unknown option, or ``dsn`` or ``queue`` missing.
    """
    values = _lowered(options, _STREAM_READ | _BATCH_READ | _WRITE, "source")
    _required(values, "dsn", "source")
    _required(values, "queue", "source")
