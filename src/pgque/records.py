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
    "EventRecord",
    "QueueStats",
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


for _cls in (QueueStats, ConsumerStats, ComponentStatus, DeadLetter, DlqReplayResult, EventRecord):
    _cls.__module__ = "pgque"
del _cls
