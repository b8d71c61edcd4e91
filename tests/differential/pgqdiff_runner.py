"""Execute a schedule (see ``pgqdiff_schedule``) on PgQ and pgque side by side.

Each operation runs on its session for both engines inside one transaction (see
``pgqdiff_harness``); the outcomes are compared at once, so the first divergence stops
the run with the seed, the step number, the operation and both results. Symbolic
arguments are resolved from PgQ's state just before the step runs (the engines agreed on
everything up to that point, so PgQ's state stands for both).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import psycopg
from pgqdiff_harness import (
    Comparator,
    Differ,
    Mismatch,
    Outcome,
    Params,
    Session,
    TableNames,
    sorted_events,
)
from pgqdiff_schedule import CONTROL, KIND_REQUIRES, Op

UNKNOWN_BATCH = 987_654_321
UNKNOWN_EVENT = 987_654_321
UNKNOWN_TICK = 987_654_321

_OPEN_BATCH = """
select s.sub_batch
  from pgq.subscription s
  join pgq.queue q on q.queue_id = s.sub_queue
  join pgq.consumer c on c.co_id = s.sub_consumer
 where q.queue_name = %s and c.co_name = %s
"""

_LAST_TICK_AND_SEQ = """
select (select max(t.tick_id) from pgq.tick t where t.tick_queue = q.queue_id),
       pgq.seq_getval(q.queue_event_seq)
  from pgq.queue q
 where q.queue_name = %s
"""

_TICK_BACK = """
select t.tick_id
  from pgq.tick t join pgq.queue q on q.queue_id = t.tick_queue
 where q.queue_name = %s
 order by t.tick_id desc offset %s limit 1
"""


def available_kinds(conn: psycopg.Connection[Any], kinds: frozenset[str]) -> frozenset[str]:
    """The kinds whose pgque functions exist in the connection's database."""
    missing = set()
    for kind, signature in KIND_REQUIRES.items():
        row = conn.execute("select to_regprocedure(%s) is not null", (signature,)).fetchone()
        if not (row and row[0]):
            missing.add(kind)
    return kinds - missing


class ScheduleRunner:
    """Runs operations on one control session and N producer sessions, comparing each."""

    def __init__(self, sessions: Sequence[Session], *, label: str, history: int = 30) -> None:
        self.sessions = list(sessions)
        self.control = self.sessions[CONTROL]
        self.label = label
        self.step = 0
        self.total = 0
        self.recent: deque[str] = deque(maxlen=history)
        self.differ = Differ(context=self._context)
        self.comparator = Comparator(self.differ, TableNames(self.control))
        self.finished: dict[tuple[str, str], int] = {}
        self.batch_events: dict[int, list[int]] = {}
        self.stats: Counter[str] = Counter()
        self._handlers: Mapping[str, Callable[[Op], None]] = {
            "begin": lambda op: self._session(op).begin(),
            "commit": lambda op: self._session(op).commit(),
            "rollback": lambda op: self._session(op).rollback(),
            "savepoint": lambda op: self._session(op).savepoint(op.args[0]),
            "rollback_to": lambda op: self._session(op).rollback_to(op.args[0]),
            "release": lambda op: self._session(op).release(op.args[0]),
            "insert": self._simple("insert_event", "select {s}.insert_event(%s, %s, %s)"),
            "insert7": self._simple(
                "insert_event", "select {s}.insert_event(%s, %s, %s, %s, %s, %s, %s)"
            ),
            "insert_raw": self._simple(
                "insert_event_raw",
                "select {s}.insert_event_raw(%s, %s::bigint, %s::timestamptz, null,"
                " %s::integer, %s, %s, %s, %s, %s, %s)",
            ),
            "current_event_table": self._simple(
                "current_event_table", "select {s}.current_event_table(%s)"
            ),
            "create_queue": self._simple("create_queue", "select {s}.create_queue(%s)"),
            "set_config": self._simple(
                "set_queue_config", "select {s}.set_queue_config(%s, %s, %s)"
            ),
            "drop_queue": self._drop_queue,
            "register": self._simple("register_consumer", "select {s}.register_consumer(%s, %s)"),
            "register_at": self._register_at,
            "unregister": self._simple(
                "unregister_consumer", "select {s}.unregister_consumer(%s, %s)"
            ),
            "ticker": self._ticker("select {s}.ticker(%s)"),
            "ticker_all": self._ticker("select {s}.ticker()"),
            "force_tick": self._simple("force_tick", "select {s}.force_tick(%s)"),
            "external_tick": self._external_tick,
            "next_batch": self._next_batch("next_batch", "select {s}.next_batch(%s, %s)"),
            "next_batch_info": self._next_batch(
                "next_batch_info", "select * from {s}.next_batch_info(%s, %s)"
            ),
            "next_batch_custom": self._next_batch(
                "next_batch_custom",
                "select * from {s}.next_batch_custom(%s, %s, %s::interval, %s::integer,"
                " %s::interval)",
            ),
            "get_batch_events": self._get_batch_events,
            "finish_batch": self._finish_batch,
            "get_batch_info": self._batch_call(
                "get_batch_info", "select * from {s}.get_batch_info(%s::bigint)"
            ),
            "batch_event_tables": self._batch_call(
                "batch_event_tables",
                "select t from {s}.batch_event_tables(%s::bigint) t order by 1",
            ),
            "event_retry": self._event_retry,
            "batch_retry": self._batch_retry,
            "maint_retry_events": self._maint_retry_events,
            "rotate_step1": self._rotate_step1,
            "rotate_step2": self._simple(
                "maint_rotate_tables_step2", "select {s}.maint_rotate_tables_step2()"
            ),
            "queue_info": self._simple(
                "get_queue_info", "select * from {s}.get_queue_info(%s) order by 1"
            ),
            "consumer_info": self._simple(
                "get_consumer_info", "select * from {s}.get_consumer_info(%s) order by 1, 2"
            ),
        }

    # -- running ----------------------------------------------------------------------------
    def run(self, ops: Sequence[Op]) -> None:
        self.total = len(ops)
        for self.step, op in enumerate(ops, start=1):
            self.recent.append(f"#{self.step} {op}")
            self._handlers[op.kind](op)

    def _context(self) -> str:
        lines = [f"  {self.label}, step {self.step} of {self.total}", "  recent steps:"]
        lines += [f"    {line}" for line in self.recent]
        return "\n".join(lines)

    def _session(self, op: Op) -> Session:
        return self.sessions[op.session]

    def compare(
        self,
        op: Op,
        func: str,
        template: str,
        params: Params | Mapping[str, Params],
        *,
        args: Sequence[Any] | None = None,
        normalize: Callable[[Outcome], Outcome] | None = None,
        rollback: bool = False,
        repeat_until_zero: bool = False,
    ) -> Outcome:
        """Run one operation on both engines, compare, and return PgQ's outcome."""
        try:
            outcome = self.comparator.run(
                self._session(op),
                func,
                template,
                params,
                args=op.args if args is None else args,
                normalize=normalize,
                rollback=rollback,
                repeat_until_zero=repeat_until_zero,
            )
        except Mismatch:
            self.recent[-1] += "  -> MISMATCH"
            raise
        self.recent[-1] += f"  -> {outcome.show()[:200]}"
        return outcome

    # -- resolving symbolic arguments (from PgQ's committed state) ------------------------
    def _value(self, query: str, params: Params) -> Any:
        rows = self.control.execute(query, params)
        return rows[0][0] if rows else None

    def _batch_id(self, queue: str, consumer: str, which: str) -> int:
        if which == "open":
            batch = self._value(_OPEN_BATCH, (queue, consumer))
        elif which == "finished":
            batch = self.finished.get((queue, consumer))
        else:
            batch = None
        return UNKNOWN_BATCH if batch is None else int(batch)

    # -- handlers -------------------------------------------------------------------------
    def _simple(self, func: str, template: str) -> Callable[[Op], None]:
        def handler(op: Op) -> None:
            self.compare(op, func, template, op.args)

        return handler

    def _drop_queue(self, op: Op) -> None:
        queue, force = op.args
        if force is None:
            self.compare(op, "drop_queue", "select {s}.drop_queue(%s)", (queue,))
        else:
            self.compare(op, "drop_queue", "select {s}.drop_queue(%s, %s)", (queue, force))

    def _register_at(self, op: Op) -> None:
        queue, consumer, back = op.args
        tick = self._value(_TICK_BACK, (queue, back)) if back >= 0 else None
        tick = UNKNOWN_TICK if tick is None else tick
        self.compare(
            op,
            "register_consumer_at",
            "select {s}.register_consumer_at(%s, %s, %s::bigint)",
            (queue, consumer, tick),
        )

    def _next_batch(self, func: str, template: str) -> Callable[[Op], None]:
        def handler(op: Op) -> None:
            *params, rollback = op.args
            self.compare(op, func, template, params, args=params, rollback=rollback)

        return handler

    def _batch_call(self, func: str, template: str) -> Callable[[Op], None]:
        def handler(op: Op) -> None:
            queue, consumer, which = op.args
            batch = self._batch_id(queue, consumer, which)
            self.compare(op, func, template, (batch,))

        return handler

    def _get_batch_events(self, op: Op) -> None:
        queue, consumer, which = op.args
        batch = self._batch_id(queue, consumer, which)
        outcome = self.compare(
            op,
            "get_batch_events",
            "select * from {s}.get_batch_events(%s::bigint)",
            (batch,),
            normalize=sorted_events,
        )
        if outcome.error is None:
            self.batch_events[batch] = [row[0] for row in outcome.rows]
            if outcome.rows and which == "open":
                self.stats["non-empty batches"] += 1
                self.stats["events delivered"] += len(outcome.rows)
                self.stats["retried events delivered"] += sum(
                    1 for row in outcome.rows if row[3] is not None
                )

    def _finish_batch(self, op: Op) -> None:
        queue, consumer, which = op.args
        batch = self._batch_id(queue, consumer, which)
        outcome = self.compare(op, "finish_batch", "select {s}.finish_batch(%s::bigint)", (batch,))
        if outcome.value == 1:
            self.finished[(queue, consumer)] = batch

    def _event_ids(self, batch: int) -> list[int]:
        """The ev_ids of a batch as PgQ returns them (read-only, outside any transaction)."""
        if batch not in self.batch_events:
            try:
                rows = self.control.execute(
                    "select ev_id from pgq.get_batch_events(%s::bigint)", (batch,)
                )
            except psycopg.Error:
                rows = []
            self.batch_events[batch] = [row[0] for row in rows]
        return self.batch_events[batch]

    def _skip(self, reason: str) -> None:
        self.recent[-1] += f"  -> skipped: {reason}"
        self.stats[f"skipped: {reason}"] += 1

    def _event_retry(self, op: Op) -> None:
        queue, consumer, pick, seconds = op.args
        batch = self._batch_id(queue, consumer, "open")
        events = self._event_ids(batch)
        # Never an ev_id that occurs twice in the batch (RETRY_DEVIATIONS: the engines diverge).
        unique = [event for event in events if events.count(event) == 1]
        if events and not unique:
            self._skip("retry of a duplicated ev_id (known bug)")
            return
        event = unique[pick % len(unique)] if unique and pick >= 0 else UNKNOWN_EVENT
        self.compare(
            op,
            "event_retry",
            "select {s}.event_retry(%s::bigint, %s::bigint, %s::integer)",
            (batch, event, seconds),
        )

    def _batch_retry(self, op: Op) -> None:
        queue, consumer, seconds, which = op.args
        batch = self._batch_id(queue, consumer, which)
        events = self._event_ids(batch)
        if len(set(events)) != len(events):
            self._skip("retry of a duplicated ev_id (known bug)")
            return
        self.compare(
            op, "batch_retry", "select {s}.batch_retry(%s::bigint, %s::integer)", (batch, seconds)
        )

    def _maint_retry_events(self, op: Op) -> None:
        # Called until it returns 0 (as pgqd does), all in one transaction: which 10 rows
        # one call moves among equal ev_retry_after values is arbitrary in PgQ itself.
        outcome = self.compare(
            op,
            "maint_retry_events",
            "select {s}.maint_retry_events()",
            (),
            repeat_until_zero=True,
        )
        self.stats["retry events moved"] += sum(row[0] for row in outcome.rows if row[0])

    def _ticker(self, template: str) -> Callable[[Op], None]:
        def handler(op: Op) -> None:
            outcome = self.compare(op, "ticker", template, op.args)
            if outcome.value and any(s.in_tx for s in self.sessions[CONTROL + 1 :]):
                self.stats["ticks with producer transactions open"] += 1

        return handler

    def _external_tick(self, op: Op) -> None:
        queue, gap, seq_increment = op.args
        rows = self.control.execute(_LAST_TICK_AND_SEQ, (queue,))
        last_tick, seq = rows[0] if rows else (None, None)
        tick_id = (last_tick or 0) + gap
        event_seq = (seq or 0) + seq_increment
        outcome = self.compare(
            op,
            "ticker",
            "select {s}.ticker(%s, %s::bigint, now(), %s::bigint)",
            (queue, tick_id, event_seq),
        )
        if outcome.value is not None:
            self.stats["external ticks"] += 1

    def _rotate_step1(self, op: Op) -> None:
        query = "select queue_switch_step1::text from pgq.queue where queue_name = %s"
        before = self._value(query, op.args)
        self.compare(
            op, "maint_rotate_tables_step1", "select {s}.maint_rotate_tables_step1(%s)", op.args
        )
        if before is not None and self._value(query, op.args) != before:
            self.stats["rotations"] += 1


__all__ = ["Mismatch", "ScheduleRunner", "available_kinds"]
