"""What the pages and the JSON API show, read through the client's admin calls.

Every read is bounded: the stats functions return a row per queue or
consumer, the charts a fixed number of buckets, events and dead letters at
most ``MAX_LIMIT`` rows. The pages render exactly these dicts, which the
JSON API sends as they are (through :func:`~pgque.web.formatting.jsonable`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

from pgque.async_client import AsyncPgqueClient
from pgque.errors import (
    PgqueError,
    PgqueInvalidArgument,
    PgqueMessageNotFound,
    PgqueQueueNotFound,
)
from pgque.monitoring import HealthCheck, Snapshot, aread_snapshot, worst
from pgque.records import (
    ConsumerStats,
    DeadLetter,
    DlqReplayResult,
    QueueStats,
    ThroughputBucket,
)
from pgque.web import judge, reads, ticking
from pgque.web.formatting import jsonable

__all__ = [
    "CHART_BUCKET",
    "CHART_PERIOD",
    "MAX_LIMIT",
    "ReplayOutcome",
    "checked_limit",
    "dead_letters",
    "overview",
    "queue_detail",
    "recent_events",
    "replay_ids",
]

CHART_PERIOD = timedelta(hours=1)
CHART_BUCKET = timedelta(minutes=2)
MAX_LIMIT = 1000


def checked_limit(text: str | None, default: int, queue: str) -> int:
    """A ``limit`` parameter as an int in 1..MAX_LIMIT; a clear error otherwise."""
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_LIMIT:
        raise PgqueInvalidArgument(
            f"limit must be a whole number from 1 to {MAX_LIMIT}, got {text!r} (queue {queue!r})"
        )
    return value


async def _throughput(client: AsyncPgqueClient, queue: str) -> list[ThroughputBucket]:
    """Every chart bucket of the last ``CHART_PERIOD``, oldest first, with 0 events where
    ``pgque.throughput()`` has no row (it lists only buckets holding ticks)."""
    rows = await client.throughput(queue, CHART_PERIOD, CHART_BUCKET)
    size = CHART_BUCKET.total_seconds()
    by_start = {int(b.bucket_start.timestamp()): b for b in rows}
    now = int(datetime.now(timezone.utc).timestamp())
    last = max([now // int(size) * int(size), *by_start])
    count = int(CHART_PERIOD / CHART_BUCKET)
    starts = [last - int(size) * i for i in reversed(range(count + 1))]
    empty = [ThroughputBucket(datetime.fromtimestamp(t, timezone.utc), 0, Decimal(0))
             for t in starts]  # fmt: skip
    return [by_start.get(int(b.bucket_start.timestamp()), b) for b in empty]


def _consumers(
    stats: QueueStats, consumers: list[ConsumerStats], checks: tuple[HealthCheck, ...],
    lag_warning: float,
) -> list[dict[str, Any]]:  # fmt: skip
    by_name = {c.name: c for c in checks}
    rows = []
    for consumer in consumers:
        row: dict[str, Any] = asdict(consumer)
        check = by_name.get(f"consumer_lag:{consumer.consumer_name}")
        row.update(judge.consumer_verdict(consumer, check, stats.rotation_period, lag_warning))
        rows.append(row)
    return rows


def _queue_row(
    stats: QueueStats, checks: tuple[HealthCheck, ...], consumers: list[dict[str, Any]]
) -> dict[str, Any]:
    row: dict[str, Any] = asdict(stats)
    reasons = judge.reasons([c for c in checks if not c.name.startswith("consumer_lag:")])
    reasons += [
        {"status": c["status"], "check": f"consumer_lag:{c['consumer_name']}",
         "text": f"consumer {c['consumer_name']}: {c['reason']}"}
        for c in consumers if c["status"] != "ok"
    ]  # fmt: skip
    row["health"] = worst(r["status"] for r in reasons).text
    row["health_reasons"] = reasons
    row["last_tick_age"] = (
        None if stats.last_tick_time is None
        else max(datetime.now(timezone.utc) - stats.last_tick_time, timedelta(0))
    )  # fmt: skip
    ticker = next((c for c in checks if c.name == "ticker_running"), None)
    row["ticker_check"] = None if ticker is None else {"status": ticker.status,
                                                       "detail": ticker.detail}  # fmt: skip
    return row


async def _scheduler(client: AsyncPgqueClient) -> dict[str, Any] | None:
    """``pgque.status()``'s scheduler and ticker rows; None for a role that may not read it."""
    try:
        components = await client.status()
    except PgqueError as error:
        if error.sqlstate != "42501":
            raise
        return None
    return {c.component: {"status": c.status, "detail": c.detail} for c in components}


async def overview(client: AsyncPgqueClient, lag_warning: float) -> dict[str, Any]:
    """Every queue with its figures, health (and why) and throughput sparkline; who ticks."""
    snapshot: Snapshot = await aread_snapshot(client)
    queues = []
    for stats in snapshot.queues:
        checks_here = snapshot.checks_of(stats.queue_name)
        consumers_here = snapshot.consumers_of(stats.queue_name)
        consumers = _consumers(stats, consumers_here, checks_here, lag_warning)
        row = _queue_row(stats, checks_here, consumers)
        row["throughput"] = [b.events for b in await _throughput(client, stats.queue_name)]
        queues.append(row)
    return {
        "queues": queues,
        "status": snapshot.status.text,
        "system_checks": [asdict(c) for c in snapshot.checks_of("system")],
        "components": await _scheduler(client),
        "ticking": await ticking.ticking(client, snapshot.queues, snapshot.checks),
    }


async def queue_detail(client: AsyncPgqueClient, queue: str, lag_warning: float) -> dict[str, Any]:
    """A queue's figures, consumers (lag, position, health), cooperative members,
    partition slots, periodic schedules, throughput and error-rate buckets and health checks.

    Raises:
        PgqueQueueNotFound: No such queue.
    """
    snapshot = await aread_snapshot(client, queue)
    found = snapshot.queues
    if not found:
        raise PgqueQueueNotFound(f"no queue named {queue!r}: the overview lists the queues")
    checks = snapshot.checks_of(queue)
    positions = await client.consumer_positions(queue)
    consumers = _consumers(found[0], list(snapshot.consumers), checks, lag_warning)
    for row in consumers:
        row["position"] = positions.get(row["consumer_name"])
        row["ticks_behind"] = (
            None if row["position"] is None else max(found[0].last_tick_id - row["position"], 0)
        )
    return {
        "queue": _queue_row(found[0], checks, consumers),
        "lag_warning": lag_warning,
        "consumers": consumers,
        "subconsumers": [asdict(m) for m in await client.subconsumer_stats(queue)],
        "partition_slots": [asdict(s) for s in await client.partition_slots(queue)],
        "schedules": [asdict(s) for s in await client.schedules(queue)],
        "throughput": [asdict(b) for b in await _throughput(client, queue)],
        "error_rate": [asdict(b) for b in
                       await client.error_rate(queue, CHART_PERIOD, CHART_BUCKET)],
        "checks": [asdict(c) for c in checks],
    }  # fmt: skip


def event_id(text: str | None, queue: str) -> int:
    """An event id from a URL: a whole number from 1 to 2^63-1; a clear error otherwise."""
    value = (text or "").strip()
    if not (value.isascii() and value.isdigit() and 1 <= int(value) <= 2**63 - 1):
        shown = value if len(value) <= 40 else value[:40] + "..."
        raise PgqueInvalidArgument(
            f"event id: give a whole number from 1 to 2^63-1, got {shown!r} (queue {queue!r})"
        )
    return int(value)


async def event(client: AsyncPgqueClient, queue: str, ev_id: int) -> dict[str, Any]:
    """One event of ``queue``: its copies in the event tables (original first, then
    each retry copy), its pending retries and its dead letters, payload up to
    :data:`~pgque.web.reads.EVENT_PAGE_CUT` characters.

    Raises:
        PgqueQueueNotFound: No such queue.
        PgqueMessageNotFound: No trace of the event (never sent, or its table rotated away).
    """
    found = await client.queue_stats(queue)
    if not found:
        raise PgqueQueueNotFound(f"no queue named {queue!r}: the overview lists the queues")
    history = await reads.event_history(client, found[0].queue_id, ev_id)
    if not any(history.values()):
        raise PgqueMessageNotFound(
            f"no event {ev_id} in queue {queue!r}: not in its event tables (rotated away once"
            " every consumer was past it, or never sent), its retries or its dead letters"
        )
    first = (history["copies"] or history["dead_letters"])[0]
    source = history["copies"][0] if history["copies"] else first
    return {
        "ev_id": ev_id,
        "ev_type": source.get("ev_type"),
        "ev_time": source.get("ev_time"),
        "ev_data": source.get("ev_data"),
        "ev_size": source.get("ev_size"),
        "extras": {f"ev_extra{i}": source.get(f"ev_extra{i}") for i in range(1, 5)},
        "cut": reads.EVENT_PAGE_CUT,
        **history,
    }


async def recent_events(
    client: AsyncPgqueClient, queue: str, limit: int, type: str | None
) -> list[dict[str, Any]]:
    """The queue's newest events, newest first (``pgque.recent_events()``)."""
    return [asdict(e) for e in await client.recent_events(queue, limit=limit, type=type)]


async def dead_letters(client: AsyncPgqueClient, queue: str, limit: int) -> list[dict[str, Any]]:
    """The queue's newest dead letters (``pgque.dlq_inspect()``).

    Raises:
        PgqueQueueNotFound: No such queue.
    """
    if not await client.queue_stats(queue):
        raise PgqueQueueNotFound(f"no queue named {queue!r}: the overview lists the queues")
    return [asdict(d) for d in await client.dlq_inspect(queue, limit)]


@dataclass
class ReplayOutcome:
    """What a replay did: dead letters replayed (with their new event ids), failed, not found."""

    replayed: int = 0
    failed: int = 0
    not_found: list[int] | None = None
    new_event_ids: list[int] | None = None
    first_error: str | None = None

    @classmethod
    def of_all(cls, result: DlqReplayResult) -> ReplayOutcome:
        """The outcome of ``dlq_replay_all``."""
        return cls(replayed=result.replayed, failed=result.failed, first_error=result.first_error)

    def as_json(self) -> dict[str, Any]:
        """The outcome as the JSON API sends it."""
        return jsonable(asdict(self))  # type: ignore[no-any-return]


async def replay_ids(client: AsyncPgqueClient, queue: str, ids: list[int]) -> ReplayOutcome:
    """Replay the given dead letters of ``queue``, one transaction each; ids of other
    queues' dead letters, or of none, are reported as not found and left alone."""
    found = await client.queue_stats(queue)
    if not found:
        raise PgqueQueueNotFound(f"no queue named {queue!r}: the overview lists the queues")
    missing: list[int] = []
    new_ids: list[int] = []
    outcome = ReplayOutcome(not_found=missing, new_event_ids=new_ids)
    for dl_id in dict.fromkeys(ids):
        letter: DeadLetter | None = await client.dead_letter(dl_id)
        if letter is None or letter.dl_queue_id != found[0].queue_id:
            missing.append(dl_id)
            continue
        try:
            new_ids.append(await client.dlq_replay(dl_id))
            outcome.replayed += 1
        except PgqueError as error:
            outcome.failed += 1
            outcome.first_error = outcome.first_error or str(error)
    return outcome
