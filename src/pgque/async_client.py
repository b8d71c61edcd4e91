"""The client: one :class:`psycopg.AsyncConnection` and a method per pgque SQL call.

Methods never commit or roll back: with the default (non-autocommit)
connection the caller commits between send, tick and receive, because a
batch only holds what committed before its tick. Database errors are raised
as :mod:`pgque.errors` classes, chained to the psycopg error.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import psycopg

from pgque import _send_plan as plan
from pgque import health as _health
from pgque import tracing
from pgque._args import ConfigValue, config_text, interval, queue_options
from pgque._async_executor import execute, fetch_all, fetch_one, fetch_value
from pgque._async_send import deliver, run
from pgque._producer_common import NoConsumerWarning
from pgque._text import check_text
from pgque.errors import PgqueConnectionError, PgqueError, from_database_error
from pgque.health import Health, HealthCheck
from pgque.message import Event, Message
from pgque.records import (
    ComponentStatus,
    ConsumerStats,
    DeadLetter,
    DlqReplayResult,
    ErrorRateBucket,
    EventRecord,
    MetricSample,
    PartitionSlot,
    QueueStats,
    Schedule,
    SubconsumerStats,
    ThroughputBucket,
    WritePrivileges,
)
from pgque.serializers import JSON, Serializer

__all__ = ["AsyncPgqueClient", "connect_async"]


class AsyncPgqueClient:
    """pgque's SQL API on one connection.

    ``AsyncPgqueClient(conn)`` wraps a connection you own (``close()`` leaves
    it open); :func:`connect_async` opens one the client owns. ``client.conn``
    is the connection, for your own commits and queries.

    Args:
        conn: An open :class:`psycopg.AsyncConnection`.
        serializer: How payloads are encoded; :data:`pgque.serializers.JSON`
            (the default) or :data:`pgque.serializers.RAW_TEXT` for verbatim text.
    """

    def __init__(
        self, conn: psycopg.AsyncConnection[Any], *, serializer: Serializer = JSON
    ) -> None:
        self.conn = conn
        self.serializer = serializer
        self._owned = False
        self._no_consumers = NoConsumerWarning()

    # -- lifecycle -----------------------------------------------------------

    async def close(self) -> None:
        """Close the connection if this client opened it; harmless twice."""
        if self._owned and not self.conn.closed:
            await self.conn.close()

    async def __aenter__(self) -> AsyncPgqueClient:
        """Return the client."""
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Close the client (and the connection, if it opened it)."""
        await self.close()

    @property
    def _path(self) -> plan.SendPath:  # the current serializer's: it may be set at any time
        return plan.client_path(self.serializer)

    async def _one(self, name: str, params: Sequence[Any] | None = None) -> Any:
        """The first value of the named statement's first row (None without rows)."""
        return await fetch_value(self.conn, name, params)

    async def _all(self, name: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        """Every row of the named statement."""
        return await fetch_all(self.conn, name, params)

    # -- producing -----------------------------------------------------------

    async def send(
        self,
        queue: str,
        payload: Any = None,
        *,
        type: str | None = "default",
        extras: tuple[str | None, str | None, str | None, str | None] | None = None,
    ) -> int:
        """Send one message; returns its event id.

        With the JSON serializer a payload is JSON-encoded (a pydantic v2 model,
        dataclass or msgspec Struct as its fields; a ``str`` is JSON text), checked
        and stored canonically by the server (``jsonb``; one holding a ``\\u0000``
        escape as encoded). An :class:`~pgque.Event` gives payload and type. ``extras``
        sets ``ev_extra1..4``; the current span's trace context goes into a free one.

        Raises:
            PgqueInvalidArgument: A NUL character in a str argument or in the
                encoded payload, or a payload that is not JSON (named).
            TypeError: A payload the serializer cannot encode.
        """
        queue, type, text = self._path.message(queue, payload, type)
        fields = tracing.trace_fields(plan.check_extras(extras), tracing.current_carrier())
        statement = self._path.one(queue, type, text, fields)
        return int(await deliver(self.conn, statement, self._no_consumers))

    async def send_batch(self, queue: str, type: str, payloads: list[Any]) -> list[int]:
        """Send many messages of one type in one statement; returns their ids in input order.

        Payloads are encoded and stored as by :meth:`send` (one holding a ``\\u0000``
        escape: the whole batch as encoded); ``[]`` sends nothing. Plain values (no str,
        None or model) go as one JSON array, others as an array of texts."""
        statement = self._path.batch(queue, type, payloads, on_client=plan.client_side(self.conn))
        if statement is None:
            return []
        return list(await deliver(self.conn, statement, self._no_consumers))

    async def send_at(
        self,
        queue: str,
        payload: Any = None,
        *,
        at: datetime | None = None,
        delay: timedelta | None = None,
        type: str | None = "default",
    ) -> int:
        """Send one message, encoded and stored as by :meth:`send`, for delivery at ``at``
        (timezone-aware) or after ``delay`` (on the server's clock), exactly one: the
        event id when that time has come, else its ``pgque.delayed_events`` id."""
        when = plan.deliver_time(at, delay)
        queue, type, text = self._path.message(queue, payload, type)
        statement = self._path.later(queue, type, text, when)
        return int(await deliver(self.conn, statement, self._no_consumers))

    # -- consuming -----------------------------------------------------------

    async def subscribe(self, queue: str, consumer: str) -> int:
        """Subscribe a consumer at the queue's latest tick: 1, or 0 when it already was."""
        check_text(queue=queue, consumer=consumer)
        return int(await self._one("subscribe", (queue, consumer)))

    async def unsubscribe(self, queue: str, consumer: str) -> int:
        """Remove a subscription: 1, or 0 when there was none."""
        check_text(queue=queue, consumer=consumer)
        return int(await self._one("unsubscribe", (queue, consumer)))

    async def receive(self, queue: str, consumer: str, max_messages: int = 100) -> list[Message]:
        """Up to ``max_messages`` messages of the consumer's open or next batch.

        The same batch comes back until :meth:`ack`, which finishes all of
        it, messages beyond ``max_messages`` included.
        """
        check_text(queue=queue, consumer=consumer)
        rows = await self._all("receive", (queue, consumer, max_messages))
        return [Message(*row) for row in rows]

    async def receive_rest(self, batch_id: int, after_msg_id: int) -> list[Message]:
        """The batch's messages after ``after_msg_id``: read them before acking a batch
        that ``receive`` cut at its limit."""
        rows = await self._all("batch_rest", (batch_id, batch_id, after_msg_id))
        return [Message(*row) for row in rows]

    async def ack(self, batch_id: int) -> int:
        """Finish the whole batch: 1, or 0 (a WARNING) when it is not open."""
        return int(await self._one("ack", (batch_id,)))

    async def nack(
        self, batch_id: int, msg: Message, retry_after: float = 60, reason: str | None = None
    ) -> None:
        """Retry ``msg`` after ``retry_after`` seconds, or dead-letter it after max retries.

        The batch stays open: ack it afterwards.
        """
        check_text(reason=reason)
        payload = msg.payload
        if isinstance(payload, (dict, list)):
            payload = json.dumps(payload)
        fields = (
            msg.msg_id, msg.batch_id, msg.type, payload, msg.retry_count, msg.created_at,
            msg.extra1, msg.extra2, msg.extra3, msg.extra4,
        )  # fmt: skip
        await execute(self.conn, "nack", (batch_id, *fields, f"{retry_after} seconds", reason))

    # -- ticking -------------------------------------------------------------

    async def ticker(self, queue: str) -> int | None:
        """Tick the queue if due; the new tick id, or None."""
        check_text(queue=queue)
        value = await self._one("ticker", (queue,))
        return None if value is None else int(value)

    async def ticker_all(self) -> int:
        """Tick every due queue; how many got a tick."""
        return int(await self._one("ticker_all"))

    async def force_next_tick(self, queue: str) -> int | None:
        """Make the next ticker call tick the queue; the latest tick id (None if none)."""
        check_text(queue=queue)
        value = await self._one("force_next_tick", (queue,))
        return None if value is None else int(value)

    async def force_tick(self, queue: str) -> int | None:
        """Deprecated alias of :meth:`force_next_tick`."""
        return await self.force_next_tick(queue)

    # -- cooperative consumers -----------------------------------------------

    async def subscribe_subconsumer(self, queue: str, consumer: str, subconsumer: str) -> int:
        """Add a subconsumer to a cooperative consumer: 1 if something was created, else 0."""
        check_text(queue=queue, consumer=consumer, subconsumer=subconsumer)
        return int(await self._one("subscribe_subconsumer", (queue, consumer, subconsumer)))

    async def unsubscribe_subconsumer(
        self, queue: str, consumer: str, subconsumer: str, *, batch_handling: int = 0
    ) -> int:
        """Remove a subconsumer (``batch_handling=1`` retries its open batch first)."""
        check_text(queue=queue, consumer=consumer, subconsumer=subconsumer)
        return int(
            await self._one(
                "unsubscribe_subconsumer", (queue, consumer, subconsumer, batch_handling)
            )
        )

    async def receive_coop(
        self,
        queue: str,
        consumer: str,
        subconsumer: str,
        *,
        max_messages: int = 100,
        dead_interval: str | None = None,
    ) -> list[Message]:
        """Receive as one subconsumer of a cooperative consumer (registers it if needed)."""
        check_text(queue=queue, consumer=consumer, subconsumer=subconsumer)
        rows = await self._all(
            "receive_coop", (queue, consumer, subconsumer, max_messages, dead_interval)
        )
        return [Message(*row) for row in rows]

    async def touch_subconsumer(self, queue: str, consumer: str, subconsumer: str) -> int:
        """Heartbeat of a subconsumer; rows touched."""
        check_text(queue=queue, consumer=consumer, subconsumer=subconsumer)
        return int(await self._one("touch_subconsumer", (queue, consumer, subconsumer)))

    # -- partition slots -----------------------------------------------------

    async def subscribe_slot(self, queue: str, consumer: str, slot: int, n: int) -> None:
        """Subscribe slot ``slot`` of ``n`` of a partitioned consumer (nothing if it is)."""
        check_text(queue=queue, consumer=consumer)
        await self._one("subscribe_slot", (queue, consumer, slot, n))

    async def unsubscribe_slot(self, queue: str, consumer: str, slot: int) -> None:
        """Remove one slot's subscription and lease (the last one unpins ``n``)."""
        check_text(queue=queue, consumer=consumer)
        await self._one("unsubscribe_slot", (queue, consumer, slot))

    async def claim_slot(
        self, queue: str, consumer: str, slot: int, worker: str, ttl: timedelta | float = 30
    ) -> int | None:
        """Take or renew ``worker``'s lease on a slot: the epoch, or None when another
        worker holds a live lease (try another slot)."""
        check_text(queue=queue, consumer=consumer, worker=worker)
        params = (queue, consumer, slot, worker, interval(ttl, "ttl"))
        value = await self._one("claim_slot", params)
        return None if value is None else int(value)

    async def release_slot(self, queue: str, consumer: str, slot: int, worker: str) -> bool:
        """Give up ``worker``'s lease on a slot; False when it was not the owner."""
        check_text(queue=queue, consumer=consumer, worker=worker)
        return bool(await self._one("release_slot", (queue, consumer, slot, worker)))

    async def receive_partitioned(
        self, queue: str, consumer: str, slot: int, n: int, worker: str, max_messages: int = 100
    ) -> list[Message]:
        """:meth:`receive` for a slot ``worker`` holds (the call renews its lease)."""
        check_text(queue=queue, consumer=consumer, worker=worker)
        params = (queue, consumer, slot, n, worker, max_messages)
        return [Message(*row) for row in await self._all("receive_partitioned", params)]

    async def ack_partitioned(
        self, queue: str, consumer: str, slot: int, n: int, worker: str
    ) -> int:
        """Finish the slot's open batch: 1, or 0 when it has none (renews the lease)."""
        check_text(queue=queue, consumer=consumer, worker=worker)
        return int(await self._one("ack_partitioned", (queue, consumer, slot, n, worker)))

    async def nack_partitioned(
        self, queue: str, consumer: str, slot: int, n: int, worker: str, msg: Message,
        retry_after: float = 60, reason: str | None = None,
    ) -> int:  # fmt: skip
        """:meth:`nack` for a message of the slot's open batch (renews the lease)."""
        check_text(queue=queue, consumer=consumer, worker=worker, reason=reason)
        params = (queue, consumer, slot, n, worker, msg.msg_id,
                  interval(retry_after, "retry_after"), reason)  # fmt: skip
        return int(await self._one("nack_partitioned_by_id", params))

    async def dead_letter_partitioned(
        self, queue: str, consumer: str, slot: int, n: int, worker: str, msg: Message,
        reason: str | None = None,
    ) -> int:  # fmt: skip
        """Dead-letter a message of the slot's open batch (renews the lease)."""
        check_text(queue=queue, consumer=consumer, worker=worker, reason=reason)
        params = (queue, consumer, slot, n, worker, msg.msg_id, reason)
        return int(await self._one("dead_letter_partitioned", params))

    # -- queues --------------------------------------------------------------

    async def create_queue(
        self, queue: str, options: Mapping[str, ConfigValue] | None = None
    ) -> int:
        """Create a queue and apply ``options`` (:meth:`set_queue_config` names) with it.

        One transaction: a bad option creates nothing. An existing queue gets
        the options applied. Returns 1, or 0 when the queue existed.
        """
        check_text(queue=queue)
        return int(await self._one("create_queue", (queue, queue_options(options))))

    async def drop_queue(self, queue: str, *, force: bool = False) -> int:
        """Drop a queue with its events, ticks and dead letters; returns 1.

        A queue with consumers is refused (:class:`~pgque.PgqueOperationRefused`)
        unless ``force``, which unsubscribes them first.
        """
        check_text(queue=queue)
        return int(await self._one("drop_queue", (queue, force)))

    async def set_queue_config(self, queue: str, name: str, value: ConfigValue) -> int:
        """Set one queue setting (``max_retries``, ``ticker_max_lag``, ``ticker_paused`` ...).

        ``value`` is the setting's text, or a bool, number or timedelta
        (seconds); None puts the default back. Returns 1.
        """
        text = config_text(value)
        check_text(queue=queue, name=name, value=text)
        return int(await self._one("set_queue_config", (queue, name, text)))

    async def pause_queue(self, queue: str) -> None:
        """Stop ticking the queue: sends still succeed, consumers get nothing new."""
        check_text(queue=queue)
        await self._one("pause_queue", (queue,))

    async def resume_queue(self, queue: str) -> None:
        """Resume ticking a paused queue."""
        check_text(queue=queue)
        await self._one("resume_queue", (queue,))

    # -- browsing ------------------------------------------------------------

    async def recent_events(
        self, queue: str, *, limit: int = 50, type: str | None = None
    ) -> list[EventRecord]:
        """The queue's newest events, newest first (by transaction, then id).

        Reads each event table backwards along its index, so it costs the
        same on a queue of millions. ``limit`` is 1 to 1000. With ``type``,
        only events of that type among the newest 10000 of each event table.

        Raises:
            PgqueQueueNotFound: No such queue.
            PgqueInvalidArgument: ``limit`` outside 1..1000.
        """
        check_text(queue=queue, type=type)
        rows = await self._all("recent_events", (queue, limit, type))
        return [EventRecord(*row) for row in rows]

    # -- dead letters --------------------------------------------------------

    async def dlq_inspect(self, queue: str, limit: int | None = 100) -> list[DeadLetter]:
        """The queue's dead letters, newest first, at most ``limit`` (None: all)."""
        check_text(queue=queue)
        rows = await self._all("dlq_inspect", (queue, limit))
        return [DeadLetter(*row) for row in rows]

    async def dead_letter(self, dead_letter_id: int) -> DeadLetter | None:
        """The dead letter with this id, or None when there is none."""
        rows = await self._all("dlq_get", (dead_letter_id,))
        return DeadLetter(*rows[0]) if rows else None

    async def dlq_replay(self, dead_letter_id: int) -> int:
        """Send a dead letter again as a new event and delete it; the new event's id.

        Raises:
            PgqueMessageNotFound: No dead letter has this id.
        """
        return int(await self._one("dlq_replay", (dead_letter_id,)))

    async def dlq_replay_all(self, queue: str) -> DlqReplayResult:
        """Replay every dead letter of the queue, oldest first; failures are counted, not raised."""
        check_text(queue=queue)
        [row] = await self._all("dlq_replay_all", (queue,))
        return DlqReplayResult(*row)

    async def dlq_purge(
        self, queue: str, older_than: timedelta | float = timedelta(days=30)
    ) -> int:
        """Delete the queue's dead letters older than ``older_than`` (a timedelta or
        seconds; 0 for all); how many."""
        check_text(queue=queue)
        age = interval(older_than, "older_than")
        return int(await self._one("dlq_purge", (queue, age)))

    # -- scheduler -----------------------------------------------------------

    async def start_scheduler(self) -> None:
        """Schedule the ticker and maintenance jobs in pg_cron (``pgque.start()``).

        Raises:
            PgqueOperationRefused: pg_cron is missing (or too old) in this database.
        """
        await self._one("start_scheduler")

    async def start_timetable(self, ticks_per_second: int = 10) -> None:
        """Schedule pgque's jobs in pg_timetable instead (``pgque.start_timetable()``)."""
        await self._one("start_timetable", (ticks_per_second,))

    async def stop_scheduler(self) -> None:
        """Remove pgque's scheduler jobs (``pgque.stop()``); harmless when there are none."""
        await self._one("stop_scheduler")

    # -- status --------------------------------------------------------------

    async def status(self) -> list[ComponentStatus]:
        """The rows of ``pgque.status()``: versions, scheduler, ticker and maintenance jobs."""
        return [ComponentStatus(*row) for row in await self._all("status")]

    async def queue_stats(self, queue: str | None = None) -> list[QueueStats]:
        """Depth, rate, rotation and dead letters of every queue, or of ``queue`` (``[]``
        when it does not exist), from ``pgque.queue_stats()``."""
        check_text(queue=queue)
        return [QueueStats(*row) for row in await self._all("queue_stats", (queue, queue))]

    async def consumer_stats(self, queue: str | None = None) -> list[ConsumerStats]:
        """Lag, pending events and open batch of every consumer (of ``queue``, if given),
        from ``pgque.consumer_stats()``."""
        check_text(queue=queue)
        rows = await self._all("consumer_stats", (queue, queue))
        return [ConsumerStats(*row) for row in rows]

    async def queue_health(self) -> list[HealthCheck]:
        """The rows of ``pgque.queue_health()``; unlike :meth:`health`, database errors raise."""
        return [HealthCheck(*row) for row in await self._all("queue_health")]

    async def throughput(
        self, queue: str, period: timedelta | float, bucket: timedelta | float
    ) -> list[ThroughputBucket]:
        """Events per bucket over the last ``period``, oldest first, from
        ``pgque.throughput()`` (only buckets holding ticks); periods and buckets are
        timedeltas or seconds."""
        check_text(queue=queue)
        params = (queue, interval(period, "period"), interval(bucket, "bucket"))
        return [ThroughputBucket(*row) for row in await self._all("throughput", params)]

    async def error_rate(
        self, queue: str, period: timedelta | float, bucket: timedelta | float
    ) -> list[ErrorRateBucket]:
        """Retries and dead letters per bucket over the last ``period``, from
        ``pgque.error_rate()`` (it reads the period's events of the queue)."""
        check_text(queue=queue)
        params = (queue, interval(period, "period"), interval(bucket, "bucket"))
        return [ErrorRateBucket(*row) for row in await self._all("error_rate", params)]

    async def metric_samples(self) -> list[MetricSample]:
        """The gauges of ``pgque.otel_metrics()``: depth, ages, lag, dead letters, throughput."""
        return [MetricSample(*row) for row in await self._all("metric_samples")]

    async def consumer_positions(self, queue: str) -> dict[str, int | None]:
        """Each consumer of the queue and the tick its position is at (None: none yet)."""
        check_text(queue=queue)
        rows = await self._all("consumer_positions", (queue,))
        return {str(name): None if tick is None else int(tick) for name, tick in rows}

    async def subconsumer_stats(self, queue: str, limit: int = 200) -> list[SubconsumerStats]:
        """The members of the queue's cooperative consumers, at most ``limit``."""
        check_text(queue=queue)
        rows = await self._all("subconsumer_stats", (queue, limit))
        return [SubconsumerStats(*row) for row in rows]

    async def partition_slots(self, queue: str, limit: int = 500) -> list[PartitionSlot]:
        """The queue's partition slots with their leases (``pgque.partition_slot_status``)."""
        check_text(queue=queue)
        rows = await self._all("partition_slots", (queue, limit))
        return [PartitionSlot(*row) for row in rows]

    async def write_privileges(self) -> WritePrivileges:
        """Which write calls (pause and resume, replay, purge) this role may execute."""
        [row] = await self._all("write_privileges")
        return WritePrivileges(*row)

    # -- health ----------------------------------------------------------------

    async def health(self) -> Health:
        """pgque's health checks (``pgque.queue_health()``) and this client's state.

        Never raises for database trouble: what could not be read is said in
        ``notes`` (``pgque_health_unavailable`` when the function is missing
        or not granted). The reads run in a savepoint inside your open
        transaction, or in a short transaction of their own, so they never
        spoil a transaction; nothing is read while it has failed.
        """
        state = _health.client_state(self.conn)
        rows: list[tuple[Any, ...]] | None = None
        if not _health.can_query(state):
            return _health.finish(state, rows)
        try:
            async with self.conn.transaction():
                probe = await fetch_one(self.conn, "health_probe")
                health_fn, version_fn = probe if probe is not None else ("missing", "missing")
                _health.probe_notes(state, health_fn, version_fn)
                if version_fn == "ok":
                    version = await fetch_one(self.conn, "health_version")
                    state.pgque_version = None if version is None else version[0]
                if health_fn == "ok":
                    rows = await fetch_all(self.conn, "queue_health")
        except (psycopg.Error, PgqueError) as exc:
            rows = None
            state.connected = not (self.conn.closed or self.conn.broken)
            error = from_database_error(exc) if isinstance(exc, psycopg.Error) else exc
            state.notes.append(f"pgque_health_unavailable: {error}")
        return _health.finish(state, rows)

    # -- schedules -------------------------------------------------------------

    async def schedule(
        self, queue: str, name: str, cron: str, payload: Any, *, type: str | None = None,
        time_zone: str = "UTC",
    ) -> datetime:  # fmt: skip
        """Create or replace the queue's periodic schedule ``name``; returns its next run.

        Whatever ticks the queue sends ``payload`` (encoded as :meth:`send`
        does; an :class:`~pgque.Event` gives its type too) as a message of
        ``type`` (None: ``default``) at each occurrence of ``cron`` (five
        fields, or ``@hourly``, ``@daily`` ...) in ``time_zone``, once per
        occurrence; the message's ``extra2`` is ``name``, ``extra3`` the
        occurrence (UTC, ISO 8601). A replacement with the same cron and
        time zone keeps its next run, so declaring it at every start neither
        skips nor repeats one. Needs pgque_admin.

        Raises:
            PgqueQueueNotFound: No such queue.
            PgqueInvalidArgument: A bad cron, time zone or name, or a payload
                that is not JSON; the message says what is wrong.
        """
        if isinstance(payload, Event):
            payload, type = payload.payload, payload.type
        check_text(queue=queue, name=name, cron=cron, type=type, time_zone=time_zone)
        params = (queue, name, cron, self._path.encode_one(queue, payload), type, time_zone)
        statement = plan.Statement("schedule", params, "jsonb", params[3:4])
        next_run: datetime = await run(self.conn, statement)  # a payload not JSON: named
        return next_run

    async def unschedule(self, queue: str, name: str) -> bool:
        """Remove the queue's schedule ``name``; False when there was none. Needs pgque_admin."""
        check_text(queue=queue, name=name)
        return bool(await self._one("unschedule", (queue, name)))

    async def schedules(self, queue: str | None = None) -> list[Schedule]:
        """Every periodic schedule (of ``queue``, if given) by queue and name, with its next
        run and the occurrence it sent last (``pgque.schedules()``)."""
        check_text(queue=queue)
        return [Schedule(*row) for row in await self._all("schedules", (queue, queue))]


async def connect_async(dsn: str, *, autocommit: bool = False) -> AsyncPgqueClient:
    """Open an async connection and return a client that owns it.

    Raises:
        PgqueConnectionError: the connection could not be opened.
    """
    try:
        conn = await psycopg.AsyncConnection.connect(dsn, autocommit=autocommit)
    except psycopg.OperationalError as exc:
        raise PgqueConnectionError(str(exc).strip()) from exc
    client = AsyncPgqueClient(conn)
    client._owned = True
    return client


AsyncPgqueClient.__module__ = "pgque"
