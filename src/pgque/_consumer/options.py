"""A consumer's options, with their defaults and checks, in one place.

:class:`ConsumerOptions` holds every option of :class:`pgque.Consumer` and
:class:`pgque.AsyncConsumer` (``MultiQueueConsumer`` runs consumers made
with them) and checks them when made. The consumers expose each option as an
attribute (:class:`ConsumerSettings`): reading it reads ``consumer.options``,
setting it makes new options, checked as the constructor checks them, and
is refused while the consumer runs (its options are frozen once it starts).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
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


def _doc(text: str) -> dict[str, str]:
    """A field's metadata: what the option does, as the consumers' docstrings say it."""
    return {"doc": text}


@dataclass(frozen=True)
class ConsumerOptions:
    """Every option of a consumer, checked when made: a bad value raises ``ValueError``
    or ``TypeError`` naming it.

    The one declaration of the options: each field's name, type, default and
    description (``metadata["doc"]``) make the consumers' keyword arguments, their
    docstrings' ``Args`` and their attributes (``python tools/consumer_options.py``
    writes them; CI checks they are current).
    """

    queue: str = field(metadata=_doc("The queue to consume."))
    name: str = field(metadata=_doc("The consumer (subscription) name."))
    poll_interval: float = field(
        default=30,
        metadata=_doc("Longest wait between polls without a NOTIFY, in seconds. Defaults to 30."),
    )
    max_messages: int = field(
        default=ALL_MESSAGES,
        metadata=_doc(
            "Messages read per receive call; a larger batch is read to the end before the ack. "
            "Defaults to all of it."
        ),
    )
    retry_after: float = field(
        default=60,
        metadata=_doc(
            "Seconds before a failed message is retried, from 0 to 3,110,400,000 (100 years, "
            "``pgque.nack``'s bound). Defaults to 60."
        ),
    )
    unknown_handler_policy: str = field(
        default="nack",
        metadata=_doc(
            '``"nack"`` (default) retries messages without a handler; ``"ack"`` lets the batch '
            "ack cover them, with a warning."
        ),
    )
    subconsumer: str | None = field(
        default=None,
        metadata=_doc(
            "Join a cooperative consumer as this member (``receive_coop``); several processes "
            "then share ``name``'s stream."
        ),
    )
    dead_interval: str | None = field(
        default=None,
        metadata=_doc(
            "With ``subconsumer``, take over batches of members idle longer than this (a "
            'PostgreSQL interval such as ``"30 seconds"``).'
        ),
    )
    listen: bool = field(
        default=True, metadata=_doc("Wait for NOTIFY wakeups (default). ``False`` polls only.")
    )
    listen_dsn: str | None = field(
        default=None,
        metadata=_doc(
            "Connection string for the listening connection (to listen past a pooler); defaults "
            "to ``dsn`` (not with ``pooler``). It also feeds the in-process ticker."
        ),
    )
    ticker: bool | str = field(
        default="auto",
        metadata=_doc(
            '``"auto"`` (default) runs an in-process :class:`~pgque.Ticker` unless '
            "``pgque.config`` shows a scheduler (pg_cron, pg_timetable); ``True`` always, "
            "``False`` never."
        ),
    )
    concurrency: int = field(
        default=1,
        metadata=_doc(
            "Handle up to this many messages of a batch at once, in tasks; the batch is acked "
            "when all are done. Defaults to 1. Not with transactional handlers (they share the "
            "batch's connection)."
        ),
    )
    rate_limit: float | None = field(
        default=None,
        metadata=_doc(
            "At most this many messages a second (a token bucket with a burst of one second's "
            "worth; the batch stays open while throttled). Defaults to no limit."
        ),
    )
    max_batch_time: float | None = field(
        default=None,
        metadata=_doc(
            "Seconds one batch may take; messages not yet handled by then are nacked and the "
            "batch is acked, so a slow batch never holds rotation forever. Defaults to no limit."
        ),
    )
    shutdown_timeout: float = field(
        default=30.0,
        metadata=_doc(
            "Seconds the current batch gets to finish after a stop; past it the batch is rolled "
            "back (and redelivered). Defaults to 30."
        ),
    )
    retry_backoff: tuple[float, float] | None = field(
        default=None,
        metadata=_doc(
            "``(base, cap)`` seconds: a failed message is retried after ``min(cap, base * 2 ** "
            "retry_count)`` instead of the fixed ``retry_after``. Defaults to off."
        ),
    )
    max_abandoned: int = field(
        default=10,
        metadata=_doc(
            "How many handlers that outlive their ``timeout`` (a thread cannot be killed; a task "
            "that ignores its cancellation) the consumer tolerates before it exits with "
            ":class:`ConsumerGaveUp` for its supervisor to restart it. Defaults to 10."
        ),
    )
    max_settle_failures: int = field(
        default=5,
        metadata=_doc(
            "How many batches in a row may fail to settle (a dead letter, the ack or its commit "
            "refused; each is rolled back and tried again after a growing pause) before "
            ":meth:`start` raises :class:`ConsumerGaveUp`. Defaults to 5."
        ),
    )
    subscribe: bool = field(
        default=False,
        metadata=_doc(
            "Subscribe the consumer (or, with ``subconsumer``, the member; with ``partitions``, "
            "every slot) on every connection, if it is not yet. Defaults to False: a consumer "
            "that is not subscribed makes :meth:`start` raise "
            ":class:`~pgque.errors.PgqueConsumerNotFound`."
        ),
    )
    partitions: int | None = field(
        default=None,
        metadata=_doc(
            "Consume as a partitioned consumer of this many slots (``pgque.subscribe_slot``): "
            "messages of one partition key are handled in order, different keys in parallel by "
            "the workers holding their slots. The consumer claims free slots by lease, renews "
            "them by working, and moves on when another worker holds a slot. Not with "
            "``subconsumer`` or ``max_messages``."
        ),
    )
    max_slots: int | None = field(
        default=None,
        metadata=_doc(
            "With ``partitions``, the most slots this consumer holds at once: ``ceil(partitions /"
            " workers)`` spreads them over that many processes. Defaults to all."
        ),
    )
    lease_ttl: float = field(
        default=30,
        metadata=_doc(
            "With ``partitions``, seconds a slot stays leased without a call (a stopped worker's "
            "slots are taken over after it). The consumer polls at least every third of it. "
            "Defaults to 30."
        ),
    )
    worker_id: str | None = field(
        default=None,
        metadata=_doc(
            "With ``partitions``, this worker's id in the leases, unique per process. Defaults to"
            " ``host:pid:random``."
        ),
    )
    pooler: bool = field(
        default=False,
        metadata=_doc(
            "``dsn`` goes through a transaction-mode pooler (PgBouncer, Supavisor, RDS Proxy): no"
            " prepared statements (``prepare_threshold=None`` on the batch connection), no LISTEN"
            " through it (``listen_dsn`` listens past it, else the consumer polls every "
            "``poll_interval``: lower it), and an in-process ticker that runs in pooler mode too "
            "unless ``listen_dsn`` feeds it. Without it a pooler's symptoms end :meth:`start` "
            "with :class:`~pgque.errors.PgquePoolerError`. Defaults to False."
        ),
    )

    @classmethod
    def of(cls, arguments: Mapping[str, Any], **overrides: Any) -> ConsumerOptions:
        """The options among a constructor's ``arguments`` (its ``locals()``: every
        field must be there), with ``overrides``."""
        values = {f.name: arguments[f.name] for f in dataclasses.fields(cls)}
        return cls(**{**values, **overrides})

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
        if obj.running:
            raise AttributeError(
                f"consumer {obj.options.name!r}: {self.name} cannot change while the consumer"
                " runs (its options are frozen once it starts): stop it, set the option,"
                " start it again"
            )
        changes: dict[str, Any] = {self.name: value}
        options = dataclasses.replace(obj.options, **changes)
        obj._check_options(options)
        obj.options = options


class ConsumerSettings:
    """The consumer's options as attributes (``consumer.retry_after``): read from
    :attr:`options`; a value set is checked as the constructor checks it."""

    #: The consumer's options, checked.
    options: ConsumerOptions
    #: True while a runner runs the consumer (:meth:`start`): its options are frozen.
    running: bool = False

    def _check_options(self, options: ConsumerOptions) -> None:
        """Check options about to replace :attr:`options` against the rest of the
        consumer (its handlers); raise ``ValueError`` to refuse them."""

    # -- generated from ConsumerOptions by tools/consumer_options.py: do not edit --
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
    # -- end of generated --


ConsumerOptions.__module__ = "pgque"
