"""Seeded random schedules of queue operations for the differential test.

A schedule is a list of :class:`Op`. It depends only on the seed, the number of steps and
the set of enabled operation kinds, never on what the engines answer: results that an
operation needs (the open batch of a consumer, an event id of it, an earlier tick id)
are named symbolically and resolved by the runner while it executes the schedule.

Session 0 is the control session: queue administration, tickers, consumers and
maintenance, each operation in its own transaction. Sessions 1..N are producers: they
open transactions, insert (3- and 7-argument ``insert_event``, ``insert_event_raw``),
set, roll back and release savepoints, and commit or roll back in random order, so
transactions stay open across ticks and commit out of ``ev_id`` order.

Every operation kind can be switched off (``enabled``); kinds whose pgque function does
not exist yet are switched off by the runner (:data:`KIND_REQUIRES`).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

CONTROL = 0
"""Session number of the control session (admin, ticker, consumers, maintenance)."""

QUEUES = ("qa", "qb", "qc", "qd")
CONSUMERS = ("c1", "c2", "c3")
UNKNOWN_QUEUE = "q_unknown"
UNKNOWN_CONSUMER = "c_unknown"

TX_KINDS = ("begin", "commit", "rollback", "savepoint", "rollback_to", "release")
PRODUCER_KINDS = ("insert", "insert7", "insert_raw", "current_event_table")
TICKER_KINDS = ("ticker", "ticker_all", "force_tick", "external_tick")
CONSUMER_KINDS = (
    "next_batch",
    "next_batch_info",
    "next_batch_custom",
    "get_batch_events",
    "finish_batch",
    "get_batch_info",
    "batch_event_tables",
    "event_retry",
    "batch_retry",
)
ADMIN_KINDS = (
    "create_queue",
    "set_config",
    "drop_queue",
    "register",
    "register_at",
    "unregister",
)
MAINT_KINDS = ("maint_retry_events", "rotate_step1", "rotate_step2")
INFO_KINDS = ("queue_info", "consumer_info")
ALL_KINDS = frozenset(
    TX_KINDS
    + PRODUCER_KINDS
    + TICKER_KINDS
    + CONSUMER_KINDS
    + ADMIN_KINDS
    + MAINT_KINDS
    + INFO_KINDS
)

KIND_REQUIRES: dict[str, str] = {
    "event_retry": "pgque.event_retry(bigint,bigint,integer)",
    "batch_retry": "pgque.batch_retry(bigint,integer)",
    "maint_retry_events": "pgque.maint_retry_events()",
    "rotate_step1": "pgque.maint_rotate_tables_step1(text)",
    "rotate_step2": "pgque.maint_rotate_tables_step2()",
    "queue_info": "pgque.get_queue_info(text)",
    "consumer_info": "pgque.get_consumer_info(text,text)",
}
"""Operation kinds that need a pgque function which may not exist yet."""

# Ticker profiles a new queue gets: name -> (weight, [(parameter, value), ...]).
PROFILES: dict[str, tuple[int, tuple[tuple[str, str], ...]]] = {
    "eager": (30, (("ticker_max_lag", "1 microsecond"), ("ticker_idle_period", "1 microsecond"))),
    "default": (25, ()),
    "count": (20, (("ticker_max_count", "3"),)),
    "short": (20, (("ticker_max_lag", "20 ms"), ("ticker_idle_period", "80 ms"))),
    "external": (5, (("external_ticker", "true"),)),
}

PAYLOADS = ("plain", "", 'it\'s a "quote"', "back\\slash", "unicode ☃ é", '{"json": [1, 2]}')
EV_TYPES = ("I", "U", "D", "ins", "upd")


@dataclass(frozen=True)
class Op:
    """One step: an operation kind, the session it runs on and its (symbolic) arguments."""

    kind: str
    session: int = CONTROL
    args: tuple[Any, ...] = ()

    def __str__(self) -> str:
        return f"s{self.session} {self.kind}{self.args!r}"


@dataclass
class _ProducerState:
    in_tx: bool = False
    savepoints: list[str] = field(default_factory=list)
    touched: set[str] = field(default_factory=set)
    next_savepoint: int = 0


@dataclass
class ScheduleGenerator:
    """Builds a schedule from a seed, keeping a small model of queues, consumers and sessions."""

    seed: int
    steps: int
    enabled: frozenset[str] = ALL_KINDS
    producers: int = 3
    rng: random.Random = field(init=False)
    ops: list[Op] = field(init=False, default_factory=list)
    queues: dict[str, set[str]] = field(init=False, default_factory=dict)
    external: set[str] = field(init=False, default_factory=set)
    sessions: dict[int, _ProducerState] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.sessions = {n: _ProducerState() for n in range(1, self.producers + 1)}

    # -- public -------------------------------------------------------------------------------
    def generate(self) -> list[Op]:
        self.ops = []
        for queue in self.rng.sample(QUEUES, 2):
            self._create_queue(queue)
            for consumer in self.rng.sample(CONSUMERS, self.rng.randint(1, 2)):
                if self._emit("register", CONTROL, queue, consumer):
                    self.queues[queue].add(consumer)
        while len(self.ops) < self.steps:
            self._random_step()
        self._epilogue()
        return self.ops

    # -- helpers --------------------------------------------------------------------------------
    def _emit(self, kind: str, session: int = CONTROL, *args: Any) -> bool:
        if kind not in self.enabled:
            return False
        self.ops.append(Op(kind, session, tuple(args)))
        return True

    def _weighted(self, choices: Iterable[tuple[str, float]]) -> str:
        usable = [(kind, weight) for kind, weight in choices if weight > 0]
        kinds = [kind for kind, _ in usable]
        return self.rng.choices(kinds, weights=[w for _, w in usable])[0]

    def _queue(self, unknown: float = 0.03) -> str:
        if not self.queues or self.rng.random() < unknown:
            return self.rng.choice((UNKNOWN_QUEUE, *QUEUES))
        return self.rng.choice(sorted(self.queues))

    def _pair(self) -> tuple[str, str]:
        """A (queue, consumer) pair: mostly a registered one, sometimes any."""
        registered = sorted((q, c) for q, cs in self.queues.items() for c in cs)
        if registered and self.rng.random() < 0.88:
            return self.rng.choice(registered)
        queue = self._queue(unknown=0.1)
        return queue, self.rng.choice((*CONSUMERS, UNKNOWN_CONSUMER))

    def _text(self, step_tag: str) -> str | None:
        roll = self.rng.random()
        if roll < 0.15:
            return None
        if roll < 0.35:
            return self.rng.choice(PAYLOADS)
        return step_tag

    # -- the step mix ---------------------------------------------------------------------
    def _random_step(self) -> None:
        group = self._weighted(
            [
                ("producer", 40),
                ("ticker", 16),
                ("consumer", 28),
                ("admin", 9),
                ("maint", 6 if self.enabled & set(MAINT_KINDS) else 0),
                ("info", 2 if self.enabled & set(INFO_KINDS) else 0),
            ]
        )
        if group == "producer":
            self._producer_step(self.rng.randint(1, self.producers))
        elif group == "ticker":
            self._ticker_step()
        elif group == "consumer":
            self._consumer_step()
        elif group == "admin":
            self._admin_step()
        elif group == "maint":
            self._maint_step()
        else:
            self._emit(self.rng.choice(INFO_KINDS), CONTROL, self._queue(unknown=0.2))

    def _producer_step(self, session: int) -> None:
        state = self.sessions[session]
        if not state.in_tx:
            if self.rng.random() < 0.6 and self._emit("begin", session):
                state.in_tx = True
            else:
                self._insert(session, state)  # in a transaction of its own
            return
        kind = self._weighted(
            [
                ("insert", 55),
                ("current_event_table", 2),
                ("savepoint", 8),
                ("rollback_to", 5 if state.savepoints else 0),
                ("release", 4 if state.savepoints else 0),
                ("commit", 10),
                ("rollback", 4),
            ]
        )
        if kind == "insert":
            self._insert(session, state)
        elif kind == "current_event_table":
            self._emit(kind, session, self._queue())
        elif kind == "savepoint":
            name = f"sp{state.next_savepoint}"
            if self._emit(kind, session, name):
                state.next_savepoint += 1
                state.savepoints.append(name)
        elif kind == "rollback_to":
            name = self.rng.choice(state.savepoints)
            if self._emit(kind, session, name):
                del state.savepoints[state.savepoints.index(name) + 1 :]
        elif kind == "release":
            name = self.rng.choice(state.savepoints)
            if self._emit(kind, session, name):
                del state.savepoints[state.savepoints.index(name) :]
        else:
            self._end_tx(session, kind)

    def _end_tx(self, session: int, kind: str) -> None:
        state = self.sessions[session]
        if self._emit(kind, session):
            self.sessions[session] = _ProducerState(next_savepoint=state.next_savepoint)

    def _insert(self, session: int, state: _ProducerState) -> None:
        queue = self._queue()
        tag = f"s{session}.{len(self.ops)}"
        ev_type = self.rng.choice(EV_TYPES)
        kind = self._weighted([("insert", 80), ("insert7", 15), ("insert_raw", 5)])
        if kind == "insert":
            emitted = self._emit(kind, session, queue, ev_type, self._text(tag))
        elif kind == "insert7":
            extras = [self._text(f"{tag}.x{n}") for n in range(1, 5)]
            emitted = self._emit(kind, session, queue, ev_type, self._text(tag), *extras)
        else:
            ev_id = self.rng.choice((None, None, 10**6 + len(self.ops)))
            ev_time = self.rng.choice((None, "2020-02-02 02:02:02+00"))
            ev_retry = self.rng.choice((None, None, 2))
            extras = [self._text(f"{tag}.x{n}") for n in range(1, 5)]
            emitted = self._emit(
                kind, session, queue, ev_id, ev_time, ev_retry, ev_type, self._text(tag), *extras
            )
        if emitted and state.in_tx:
            state.touched.add(queue)

    def _ticker_step(self) -> None:
        kind = self._weighted(
            [
                ("ticker", 55),
                ("ticker_all", 25),
                ("force_tick", 15),
                ("external_tick", 15 if self.external else 1),
            ]
        )
        if kind == "ticker_all":
            self._emit(kind)
        elif kind == "external_tick":
            # Mostly a queue ticked externally; the tick id gap and the event sequence
            # increment keep ids and sequence values moving forward (see the runner).
            queue = self.rng.choice(sorted(self.external) or [self._queue()])
            self._emit(kind, CONTROL, queue, self.rng.randint(1, 3), self.rng.randint(0, 5))
        else:
            self._emit(kind, CONTROL, self._queue(unknown=0.04))

    def _consumer_step(self) -> None:
        queue, consumer = self._pair()
        kind = self._weighted(
            [
                ("consume", 30),
                ("next_batch", 12),
                ("next_batch_info", 6),
                ("next_batch_custom", 12),
                ("get_batch_events", 10),
                ("finish_batch", 10),
                ("get_batch_info", 5),
                ("batch_event_tables", 4),
                ("event_retry", 6),
                ("batch_retry", 3),
            ]
        )
        if kind == "consume":
            self._consume(queue, consumer)
        elif kind in ("next_batch", "next_batch_info"):
            self._emit(kind, CONTROL, queue, consumer, self.rng.random() < 0.1)
        elif kind == "next_batch_custom":
            self._emit(
                kind,
                CONTROL,
                queue,
                consumer,
                self.rng.choice((None, None, "0", "10 ms", "1 hour")),
                self.rng.choice((None, None, 0, 1, 3, 10, 10000)),
                self.rng.choice((None, None, "0", "5 ms", "10 minutes")),
                self.rng.random() < 0.1,
            )
        elif kind == "event_retry":
            self._emit(kind, CONTROL, queue, consumer, self.rng.randint(-1, 20), self._delay())
        elif kind == "batch_retry":
            self._emit(kind, CONTROL, queue, consumer, self._delay(), self._which())
        else:
            self._emit(kind, CONTROL, queue, consumer, self._which())

    def _which(self) -> str:
        """Which batch id a consumer operation uses: the open one, a finished one, unknown."""
        return self._weighted([("open", 85), ("finished", 10), ("unknown", 5)])

    def _delay(self) -> int:
        """Retry delay in seconds: due at once (0, negative) or never during the test."""
        return self.rng.choice((0, 0, -1, 3600))

    def _consume(self, queue: str, consumer: str) -> None:
        """The usual consumer loop: next batch, read it, retry some, finish it."""
        self._emit("next_batch", CONTROL, queue, consumer, False)
        self._emit("get_batch_events", CONTROL, queue, consumer, "open")
        if self.rng.random() < 0.3:
            self._emit("event_retry", CONTROL, queue, consumer, self.rng.randint(0, 5), 0)
        if self.rng.random() < 0.05:
            self._emit("batch_retry", CONTROL, queue, consumer, 0, "open")
        if self.rng.random() < 0.85:
            self._emit("finish_batch", CONTROL, queue, consumer, "open")

    def _admin_step(self) -> None:
        kind = self._weighted(
            [
                ("create_queue", 14),
                ("set_config", 10),
                ("drop_queue", 3),
                ("register", 26),
                ("register_at", 12),
                ("unregister", 10),
            ]
        )
        if kind == "create_queue":
            self._create_queue(self.rng.choice(QUEUES))
        elif kind == "set_config":
            self._set_config()
        elif kind == "drop_queue":
            self._drop_queue()
        elif kind in ("register", "register_at"):
            queue = self._queue(unknown=0.05)
            consumer = self.rng.choice(CONSUMERS)
            args: tuple[Any, ...] = (queue, consumer)
            if kind == "register_at":
                args += (self.rng.choice((0, 1, 1, 2, 3, 5, -1)),)
            if self._emit(kind, CONTROL, *args) and queue in self.queues:
                self.queues[queue].add(consumer)
        else:
            queue, consumer = self._pair()
            if self._emit(kind, CONTROL, queue, consumer) and queue in self.queues:
                self.queues[queue].discard(consumer)

    def _create_queue(self, queue: str) -> None:
        if not self._emit("create_queue", CONTROL, queue) or queue in self.queues:
            return
        self.queues[queue] = set()
        self.external.discard(queue)
        if "external_tick" not in self.enabled:
            profiles = [name for name in PROFILES if name != "external"]
        else:
            profiles = list(PROFILES)
        profile = self.rng.choices(profiles, weights=[PROFILES[p][0] for p in profiles])[0]
        for param, value in PROFILES[profile][1]:
            if self._emit("set_config", CONTROL, queue, param, value) and profile == "external":
                self.external.add(queue)
        if "rotate_step1" in self.enabled and self.rng.random() < 0.5:
            self._emit("set_config", CONTROL, queue, "rotation_period", "1 microsecond")

    def _set_config(self) -> None:
        queue = self._queue(unknown=0.05)
        param, value = self.rng.choice(
            [
                ("ticker_max_lag", "1 microsecond"),
                ("ticker_max_lag", "3 seconds"),
                ("ticker_idle_period", "1 microsecond"),
                ("ticker_idle_period", "50 ms"),
                ("ticker_max_count", "2"),
                ("ticker_max_count", "500"),
                ("ticker_paused", "true"),
                ("ticker_paused", "false"),
                ("ticker_paused", "false"),
                ("rotation_period", "1 microsecond"),
                ("rotation_period", "2 hours"),
                ("external_ticker", "false"),
                ("queue_ticker_max_lag", "1 microsecond"),
                ("no_such_param", "1"),
            ]
        )
        if self._emit("set_config", CONTROL, queue, param, value) and param == "external_ticker":
            self.external.discard(queue)

    def _drop_queue(self) -> None:
        # Dropping needs an exclusive lock on the event tables: never while a producer's open
        # transaction holds one (the single-threaded driver would wait forever).
        busy = set().union(*(s.touched for s in self.sessions.values() if s.in_tx))
        candidates = sorted(set(self.queues) - busy)
        if not candidates:
            return
        queue = self.rng.choice(candidates)
        force = self.rng.choice((None, False, True))
        if self._emit("drop_queue", CONTROL, queue, force) and (force or not self.queues[queue]):
            del self.queues[queue]
            self.external.discard(queue)

    def _maint_step(self) -> None:
        kind = self._weighted(
            [("maint_retry_events", 35), ("rotate_step1", 35), ("rotate_step2", 30)]
        )
        if kind == "rotate_step1":
            self._emit(kind, CONTROL, self._queue(unknown=0.05))
        else:
            self._emit(kind)

    def _epilogue(self) -> None:
        """Close every transaction, then tick and drain every consumer a few times."""
        for session, state in self.sessions.items():
            if state.in_tx:
                self._end_tx(session, self.rng.choice(("commit", "commit", "rollback")))
        for _ in range(3):
            self._emit("maint_retry_events")
            self._emit("rotate_step2")
            for queue in sorted(self.queues):
                self._emit("set_config", CONTROL, queue, "ticker_paused", "false")
                if queue in self.external:
                    self._emit("external_tick", CONTROL, queue, 1, 0)
                else:
                    self._emit("force_tick", CONTROL, queue)
                    self._emit("ticker", CONTROL, queue)
            for queue, consumers in sorted(self.queues.items()):
                for consumer in sorted(consumers):
                    for _ in range(3):
                        self._consume_fully(queue, consumer)

    def _consume_fully(self, queue: str, consumer: str) -> None:
        self._emit("next_batch", CONTROL, queue, consumer, False)
        self._emit("get_batch_events", CONTROL, queue, consumer, "open")
        self._emit("finish_batch", CONTROL, queue, consumer, "open")


def generate(
    seed: int, steps: int, enabled: Sequence[str] | frozenset[str] = ALL_KINDS
) -> list[Op]:
    """The schedule for ``seed``: ``steps`` random operations plus a draining epilogue."""
    return ScheduleGenerator(seed, steps, frozenset(enabled)).generate()
