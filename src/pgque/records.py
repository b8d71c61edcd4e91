"""The rows the client's admin and status calls return, one dataclass per SQL function.

Field names are the SQL function's column names, so ``dataclasses.asdict`` of a
row gives what ``select * from pgque.<function>()`` gives (the CLI prints them
so with ``--json``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

__all__ = [
    "ComponentStatus",
    "ConsumerStats",
    "DeadLetter",
    "DlqReplayResult",
    "ErrorRateBucket",
    "EventRecord",
    "MetricSample",
    "PartitionSlot",
    "QueueStats",
    "Schedule",
    "SubconsumerStats",
    "ThroughputBucket",
    "WritePrivileges",
]


@dataclass(frozen=True)
class QueueStats:
    """One row of ``pgque.queue_stats()``: a queue's depth, rate, rotation and dead letters.

    Attributes:
        queue_name: The queue.
        queue_id: Its id.
        depth: Events its slowest consumer has not finished (an estimate; 0
            without consumers).
        oldest_msg_age: Age of the oldest such event (None without consumers).
        consumers: Subscribed consumers.
        events_per_sec: Events per second over the last minute.
        cur_table: The event table now written (0, 1 or 2).
        rotation_age: Time since the last rotation.
        rotation_period: The queue's rotation period.
        ticker_paused: Whether ticking is paused.
        last_tick_time: When the latest tick was taken.
        last_tick_id: The latest tick.
        dlq_count: Dead letters of the queue.
    """

    queue_name: str
    queue_id: int
    depth: int
    oldest_msg_age: timedelta | None
    consumers: int
    events_per_sec: Decimal | None
    cur_table: int
    rotation_age: timedelta | None
    rotation_period: timedelta
    ticker_paused: bool
    last_tick_time: datetime | None
    last_tick_id: int | None
    dlq_count: int


@dataclass(frozen=True)
class ConsumerStats:
    """One row of ``pgque.consumer_stats()``: a subscription's lag and open batch.

    Attributes:
        queue_name: The queue.
        consumer_name: The consumer.
        lag: Age of its oldest ticked, unfinished event (0 when caught up).
        pending_events: Ticked events it has not finished.
        last_batch_start: When it last took a batch (None: never).
        batch_active: Whether it has an open batch.
        batch_id: The open batch, if any.
    """

    queue_name: str
    consumer_name: str
    lag: timedelta
    pending_events: int | None
    last_batch_start: datetime | None
    batch_active: bool
    batch_id: int | None


@dataclass(frozen=True)
class ComponentStatus:
    """One row of ``pgque.status()``: a component (``scheduler``, ``ticker`` ...) and its state."""

    component: str
    status: str
    detail: str | None


@dataclass(frozen=True)
class DeadLetter:
    """One row of ``pgque.dlq_inspect()``: a dead-lettered event.

    Attributes:
        dl_id: The dead letter's id (for :meth:`pgque.PgqueClient.dlq_replay`).
        dl_queue_id: The queue's id.
        dl_consumer_id: The id of the consumer that dead-lettered it.
        dl_time: When it was dead-lettered.
        dl_reason: Why (the nack or dead-letter reason), if given.
        ev_id: The event's id.
        ev_time: When the event was sent.
        ev_retry: Its retry count when it was dead-lettered.
        ev_type: Its type.
        ev_data: Its payload, as stored.
        ev_extra1: Its first extra field (and so on to ``ev_extra4``).
    """

    dl_id: int
    dl_queue_id: int
    dl_consumer_id: int
    dl_time: datetime
    dl_reason: str | None
    ev_id: int
    ev_time: datetime
    ev_retry: int | None
    ev_type: str | None
    ev_data: str | None
    ev_extra1: str | None
    ev_extra2: str | None
    ev_extra3: str | None
    ev_extra4: str | None


@dataclass(frozen=True)
class DlqReplayResult:
    """What ``pgque.dlq_replay_all()`` did: replayed and failed dead letters, the first error."""

    replayed: int
    failed: int
    first_error: str | None


@dataclass(frozen=True)
class EventRecord:
    """One row of ``pgque.recent_events()``: an event as stored in the queue's event tables.

    Attributes:
        ev_id: The event's id.
        ev_time: When it was sent.
        ev_txid: The id of the transaction that sent it.
        ev_retry: Its retry count (None: never retried).
        ev_type: Its type.
        ev_data: Its payload, as stored.
        ev_extra1: Its first extra field (and so on to ``ev_extra4``; the
            trace context is kept in one of them, see :mod:`pgque.tracing`).
    """

    ev_id: int
    ev_time: datetime
    ev_txid: int
    ev_retry: int | None
    ev_type: str | None
    ev_data: str | None
    ev_extra1: str | None
    ev_extra2: str | None
    ev_extra3: str | None
    ev_extra4: str | None


@dataclass(frozen=True)
class ThroughputBucket:
    """One row of ``pgque.throughput()``: events sent in one time bucket.

    Attributes:
        bucket_start: Where the bucket starts (a multiple of the bucket size
            since the Unix epoch).
        events: Events counted by its ticks (an estimate from the ticks).
        events_per_sec: The same per second of the whole bucket.
    """

    bucket_start: datetime
    events: int
    events_per_sec: Decimal


@dataclass(frozen=True)
class ErrorRateBucket:
    """One row of ``pgque.error_rate()``: retries and dead letters in one time bucket."""

    bucket_start: datetime
    retries: int
    dead_letters: int


@dataclass(frozen=True)
class MetricSample:
    """One row of ``pgque.otel_metrics()``: a gauge's value with its labels.

    Attributes:
        metric_name: The OpenTelemetry-style name (``pgque.queue.depth`` ...).
        metric_type: ``gauge``.
        value: The figure.
        labels: ``queue`` and, for consumers, ``consumer``.
    """

    metric_name: str
    metric_type: str
    value: Decimal
    labels: dict[str, str]


@dataclass(frozen=True)
class SubconsumerStats:
    """A member (subconsumer) of a cooperative consumer and its open batch.

    Attributes:
        queue_name: The queue.
        consumer_name: The cooperative consumer.
        subconsumer_name: The member.
        last_seen: Time since it last received or touched.
        batch_id: Its open batch, if any.
        last_tick: The tick its last batch ended at (None: none yet).
    """

    queue_name: str
    consumer_name: str
    subconsumer_name: str
    last_seen: timedelta
    batch_id: int | None
    last_tick: int | None


@dataclass(frozen=True)
class PartitionSlot:
    """One row of ``pgque.partition_slot_status``: a partition slot, its lease and position.

    Attributes:
        queue_name: The queue.
        consumer: The partitioned consumer.
        slot: The slot number (0 to ``n - 1``).
        n: The consumer's number of slots.
        lease_owner: The worker holding the slot's lease, if any.
        lease_until: When the lease ends.
        epoch: Incremented at each new lease (a fencing token).
        last_tick: The slot's position.
        pending_events: Events after its position (an estimate).
    """

    queue_name: str
    consumer: str
    slot: int
    n: int
    lease_owner: str | None
    lease_until: datetime | None
    epoch: int
    last_tick: int | None
    pending_events: int | None


@dataclass(frozen=True)
class Schedule:
    """One row of ``pgque.schedules()``: a periodic schedule of a queue.

    Attributes:
        queue_name: The queue its messages go to.
        schedule_name: Its name (unique per queue; the ``extra2`` of its messages).
        cron: The five-field cron expression (or ``@hourly``, ``@daily`` ...).
        time_zone: The time zone the cron expression is read in.
        type_name: The type of its messages (None: ``default``).
        payload: The payload of its messages, as stored (JSON text).
        next_run: The next occurrence it will send.
        last_run: The occurrence it sent last (None: none yet); its messages'
            ``extra3`` in UTC ISO 8601.
        last_event_id: The id of the event it sent last.
    """

    queue_name: str
    schedule_name: str
    cron: str
    time_zone: str
    type_name: str | None
    payload: str
    next_run: datetime
    last_run: datetime | None
    last_event_id: int | None


@dataclass(frozen=True)
class WritePrivileges:
    """Which of pgque's write calls the connected role may execute.

    Attributes:
        pause_resume: ``pause_queue`` and ``resume_queue``.
        replay: ``dlq_replay`` and ``dlq_replay_all``.
        purge: ``dlq_purge``.
    """

    pause_resume: bool
    replay: bool
    purge: bool


for _cls in (
    QueueStats, ConsumerStats, ComponentStatus, DeadLetter, DlqReplayResult, EventRecord,
    ThroughputBucket, ErrorRateBucket, MetricSample, SubconsumerStats, PartitionSlot,
    Schedule, WritePrivileges,
):  # fmt: skip
    _cls.__module__ = "pgque"
del _cls
