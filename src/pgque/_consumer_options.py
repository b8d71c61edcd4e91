"""A consumer's options, with their defaults and checks, in one place.

:class:`ConsumerOptions` holds every option of :class:`pgque.Consumer` and
:class:`pgque.AsyncConsumer` (``MultiQueueConsumer`` runs consumers made
with them) and checks them when made. The consumers expose each option as an
attribute (:class:`ConsumerSettings`): reading it reads ``consumer.options``,
setting it makes new options, checked as the constructor checks them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, overload

import psycopg

from pgque._delays import MAX_RETRY_AFTER, RANGE, check_delay
from pgque.message import Message

__all__ = [
    "ALL_MESSAGES",
    "MAX_RETRY_AFTER",
    "ConsumerOptions",
    "ConsumerSettings",
    "Option",
    "check_backoff",
    "check_count",
    "check_delay",
    "check_handler",
    "check_source",
]

#: ``max_messages`` meaning "the whole batch".
ALL_MESSAGES = 2_147_483_647

T = TypeVar("T")


def check_backoff(value: object) -> tuple[float, float] | None:
    """``retry_backoff`` as ``(base, cap)`` seconds, or an error saying what is allowed."""
    if value is None:
        return None
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise TypeError(f"retry_backoff must be (base, cap) in seconds, got {value!r}")
    wanted = f"retry_backoff must be (base, cap) with base <= cap, each seconds {RANGE}"
    try:
        base, cap = (check_delay("retry_backoff", v) for v in value)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{wanted}, got {value!r}") from None
    if base > cap:
        raise ValueError(f"{wanted}, got {value!r}")
    return (base, cap)


def check_count(name: str, value: object) -> int:
    """``value`` as a positive integer, or an error naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer >= 1, got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return value


def check_source(dsn: object) -> None:
    """A connection given to a consumer must be in autocommit mode."""
    if isinstance(dsn, (psycopg.Connection, psycopg.AsyncConnection)) and not dsn.autocommit:
        raise ValueError(
            "the consumer needs an autocommit connection (it opens and commits"
            " each batch's transaction itself)"
        )


def check_handler(
    concurrency: int, transactional: bool, timeout: float | None, ordered_by: str | None
) -> None:
    """Check the options of ``consumer.on(...)``."""
    if transactional and concurrency > 1:
        raise ValueError(
            "transactional handlers need concurrency=1: they share the batch's connection"
        )
    if timeout is not None and timeout <= 0:
        raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
    fields = [f for f in Message.__dataclass_fields__ if not f.startswith("_")]
    if ordered_by is not None and ordered_by not in fields:
        raise ValueError(f"ordered_by must be a Message field such as 'extra1', got {ordered_by!r}")


@dataclass(frozen=True)
class ConsumerOptions:
    """Every option of a consumer (each described at :class:`pgque.Consumer`), checked
    when made: a bad value raises ``ValueError`` or ``TypeError`` naming it."""

    queue: str
    name: str
    poll_interval: float = 30
    max_messages: int = ALL_MESSAGES
    retry_after: float = 60
    unknown_handler_policy: str = "nack"
    subconsumer: str | None = None
    dead_interval: str | None = None
    listen: bool = True
    listen_dsn: str | None = None
    ticker: bool | str = "auto"
    concurrency: int = 1
    rate_limit: float | None = None
    max_batch_time: float | None = None
    shutdown_timeout: float = 30.0
    retry_backoff: tuple[float, float] | None = None
    max_abandoned: int = 10
    max_settle_failures: int = 5
    subscribe: bool = False
    partitions: int | None = None
    max_slots: int | None = None
    lease_ttl: float = 30
    worker_id: str | None = None
    pooler: bool = False

    def __post_init__(self) -> None:
        if self.unknown_handler_policy not in ("nack", "ack"):
            raise ValueError(
                "unknown_handler_policy must be 'nack' or 'ack',"
                f" got {self.unknown_handler_policy!r}"
            )
        if self.dead_interval is not None and self.subconsumer is None:
            raise ValueError("dead_interval needs subconsumer= (it applies to cooperative members)")
        if self.poll_interval <= 0:
            raise ValueError(f"poll_interval must be > 0, got {self.poll_interval}")
        if self.max_messages < 1:
            raise ValueError(f"max_messages must be >= 1, got {self.max_messages}")
        if self.ticker not in (True, False, "auto"):
            raise ValueError(f"ticker must be True, False or 'auto', got {self.ticker!r}")
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")
        if self.rate_limit is not None and self.rate_limit <= 0:
            raise ValueError(f"rate_limit must be > 0 messages/s, got {self.rate_limit}")
        for option in ("max_batch_time", "shutdown_timeout"):
            value = getattr(self, option)
            if value is not None and value < 0:
                raise ValueError(f"{option} must be >= 0 seconds, got {value}")
        check_delay("retry_after", self.retry_after)
        check_count("max_settle_failures", self.max_settle_failures)
        for flag in ("subscribe", "pooler"):
            if not isinstance(getattr(self, flag), bool):
                raise TypeError(f"{flag} must be True or False, got {getattr(self, flag)!r}")
        object.__setattr__(self, "retry_backoff", check_backoff(self.retry_backoff))
        self._check_partitions()

    def _check_partitions(self) -> None:
        if self.partitions is None:
            if self.max_slots is not None or self.worker_id is not None:
                raise ValueError("max_slots and worker_id need partitions= (the slot count)")
            return
        check_count("partitions", self.partitions)
        if self.max_slots is not None:
            check_count("max_slots", self.max_slots)
        if self.subconsumer is not None:
            raise ValueError("partitions= and subconsumer= exclude each other: choose one")
        if self.max_messages != ALL_MESSAGES:
            raise ValueError(
                "max_messages cannot be combined with partitions=: a slot's share of a batch"
                " is handled whole"
            )
        if check_delay("lease_ttl", self.lease_ttl) < 1:
            raise ValueError(f"lease_ttl must be at least 1 second, got {self.lease_ttl!r}")
        worker = self.worker_id
        if worker is not None and (not isinstance(worker, str) or not worker or "\x00" in worker):
            raise ValueError(f"worker_id must be a non-empty string, got {worker!r}")


class Option(Generic[T]):
    """An attribute of a consumer backed by its :class:`ConsumerOptions`."""

    name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> Option[T]: ...

    @overload
    def __get__(self, obj: ConsumerSettings, objtype: type | None = None) -> T: ...

    def __get__(self, obj: ConsumerSettings | None, objtype: type | None = None) -> Any:
        return self if obj is None else getattr(obj.options, self.name)

    def __set__(self, obj: ConsumerSettings, value: T) -> None:
        changes: dict[str, Any] = {self.name: value}
        options = dataclasses.replace(obj.options, **changes)
        obj._check_options(options)
        obj.options = options


class ConsumerSettings:
    """The consumer's options as attributes (``consumer.retry_after``): read from
    :attr:`options`; a value set is checked as the constructor checks it."""

    #: The consumer's options, checked.
    options: ConsumerOptions

    def _check_options(self, options: ConsumerOptions) -> None:
        """Check options about to replace :attr:`options` against the rest of the
        consumer (its handlers); raise ``ValueError`` to refuse them."""

    queue = Option[str]()
    name = Option[str]()
    poll_interval = Option[float]()
    max_messages = Option[int]()
    retry_after = Option[float]()
    unknown_handler_policy = Option[str]()
    subconsumer = Option[str | None]()
    dead_interval = Option[str | None]()
    listen = Option[bool]()
    listen_dsn = Option[str | None]()
    ticker = Option[bool | str]()
    concurrency = Option[int]()
    rate_limit = Option[float | None]()
    max_batch_time = Option[float | None]()
    shutdown_timeout = Option[float]()
    retry_backoff = Option[tuple[float, float] | None]()
    max_abandoned = Option[int]()
    max_settle_failures = Option[int]()
    subscribe = Option[bool]()
    partitions = Option[int | None]()
    max_slots = Option[int | None]()
    lease_ttl = Option[float]()
    worker_id = Option[str | None]()
    pooler = Option[bool]()


ConsumerOptions.__module__ = "pgque"
