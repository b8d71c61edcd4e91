"""Run every operation on PgQ and on pgque in the same transaction and compare the outcomes.

Both engines live in one PostgreSQL 15 database (schemas ``pgq`` and ``pgque``). A
:class:`Session` wraps one connection; :meth:`Session.pair` runs a statement template once
per engine (``{s}`` is replaced by the schema), each call inside its own savepoint so an
error in one engine neither aborts the transaction nor hides the other engine's result.
Because both calls share the transaction, they share its txid, ``now()`` and the
snapshots of other sessions: txids, event times and tick times are therefore *equal*
between the engines, not merely similar, and are compared exactly, like everything else
(return values, NULL-ness, batch and tick ids, every event column, error texts and
WARNINGs). Normalised are only: event table names, which embed an internal queue id;
float8 values, to 12 significant digits; and the order of events with equal ``ev_id``.

:class:`Differ` compares two :class:`Outcome` values and either accepts them (equal, or
matched by an entry of :data:`ALLOWED_DEVIATIONS` or :data:`RETRY_DEVIATIONS`) or raises
:class:`Mismatch` with enough context to reproduce the failure.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql

ENGINES = ("pgq", "pgque")
"""Schemas of the reference engine (PgQ, the C extension) and of pgque."""

Row = tuple[Any, ...]
Params = Sequence[Any]
Query = str | sql.SQL | sql.Composed


@dataclass(frozen=True)
class Outcome:
    """What one engine's call produced: its rows, or the error it raised, plus warnings."""

    rows: tuple[Row, ...] = ()
    error: str | None = None
    warnings: tuple[str, ...] = ()

    @property
    def value(self) -> Any:
        """The single value of a one-row, one-column result (``None`` otherwise)."""
        if self.error is None and len(self.rows) == 1 and len(self.rows[0]) == 1:
            return self.rows[0][0]
        return None

    def show(self) -> str:
        if self.error is not None:
            text = f"ERROR: {self.error}"
        else:
            text = "rows=[" + ", ".join(repr(r) for r in self.rows) + "]"
        if self.warnings:
            text += f" warnings={list(self.warnings)}"
        return text


@dataclass(frozen=True)
class Deviation:
    """A known difference between PgQ and pgque that the comparison accepts.

    ``applies(func, args, pgq_outcome, pgque_outcome)`` recognises it.
    """

    key: str
    why: str
    applies: Callable[[str, Sequence[Any], Outcome, Outcome], bool]


def _error_is(outcome: Outcome, pattern: str) -> bool:
    return outcome.error is not None and re.fullmatch(pattern, outcome.error) is not None


def _empty_name(args: Sequence[Any], index: int) -> bool:
    return len(args) > index and args[index] == ""


def _text_only(key: str, funcs: tuple[str, ...], pgq_text: str, pgque_text: str) -> Deviation:
    """Both engines raise, with different wording (the error itself is not a deviation)."""
    return Deviation(
        key,
        f"{'/'.join(funcs)}: both raise; PgQ says {pgq_text!r}, pgque {pgque_text!r}",
        lambda func, args, a, b: (
            func in funcs and _error_is(a, pgq_text) and _error_is(b, pgque_text)
        ),
    )


ALLOWED_DEVIATIONS: tuple[Deviation, ...] = (
    Deviation(
        "force_tick-unknown-queue",
        "pgque.force_tick raises 'queue not found: <q>' for an unknown queue; PgQ returns NULL",
        lambda func, args, a, b: (
            func == "force_tick"
            and a.error is None
            and a.value is None
            and _error_is(b, r"queue not found: .*")
        ),
    ),
    Deviation(
        "force_tick-paused-or-external",
        "pgque.force_tick raises for a paused or externally ticked queue, as upstream PgQue's"
        " does; PgQ returns the latest tick and changes nothing (docs/sql-api.md, Deviations)",
        lambda func, args, a, b: (
            func == "force_tick"
            and a.error is None
            and _error_is(b, r"queue .* is paused .*|queue .* is configured for external ticker.*")
        ),
    ),
    Deviation(
        "empty-queue-name",
        "pgque.create_queue rejects an empty queue name; PgQ creates the queue",
        lambda func, args, a, b: (
            func == "create_queue"
            and _empty_name(args, 0)
            and _error_is(b, "queue name must not be empty")
        ),
    ),
    Deviation(
        "empty-consumer-name",
        "pgque rejects an empty consumer name at registration; PgQ registers it",
        lambda func, args, a, b: (
            func in ("register_consumer", "register_consumer_at")
            and _empty_name(args, 1)
            and _error_is(b, "consumer name must not be empty")
        ),
    ),
    _text_only(
        "insert-unknown-queue-text",
        ("insert_event", "insert_event_raw"),
        "No such queue",
        r"queue not found: .*",
    ),
    _text_only(
        "external-ticker-refusal-text",
        ("ticker",),
        r"queue not found or ticker disabled: .*",
        r"queue not found: .*|queue .* is paused .*|queue .* is not configured for external .*",
    ),
    Deviation(
        "external-ticker-monotonic",
        "ticker(q, tick_id, time, event_seq): pgque refuses a tick id not above the latest"
        " tick's, or an event_seq below it; PgQ inserts such a tick (or fails on the duplicate"
        " key)",
        lambda func, args, a, b: (
            func == "ticker"
            and len(args) > 1  # the external form: ticker(q, tick_id, [time,] event_seq)
            and _error_is(b, r"external ticker (tick_id must be strictly greater|event_seq must).*")
        ),
    ),
    _text_only(
        "batch-event-tables-unknown-batch-text",
        ("batch_event_tables",),
        r"Cannot find data for batch \d+",
        "batch not found",
    ),
)
"""The allow-list of intended deviations. Anything else that differs is a mismatch."""

RETRY_DEVIATIONS: tuple[Deviation, ...] = (
    Deviation(
        "event_retry-duplicated-ev_id",
        "event_retry of an ev_id the batch holds twice (original and the consumer's own retry"
        " copy, after register_consumer_at moved it back): PgQ hits the retry_queue key, returns"
        " 0 and queues nothing; pgque queues one copy and returns 1 (docs/sql-api.md, Deviations)",
        lambda func, args, a, b: func == "event_retry" and a.value == 0 and b.value == 1,
    ),
    Deviation(
        "batch_retry-duplicated-ev_id",
        "batch_retry of a batch holding an ev_id twice: PgQ fails on the retry_queue primary"
        " key, pgque queues one copy per ev_id (docs/sql-api.md, Deviations)",
        lambda func, args, a, b: (
            func == "batch_retry"
            and _error_is(a, "duplicate key value violates unique constraint .*")
            and b.error is None
        ),
    ),
)
"""Intended deviations of the retry functions, seen only when a rewound batch holds an
event and its own retry copy. They leave the engines' retry queues different, so the
random runner steers around them (it never retries an ev_id that occurs twice in the
batch); ``test_pgq_core.py`` shows each one."""


class Mismatch(AssertionError):
    """PgQ and pgque disagreed on an operation."""


@dataclass
class Differ:
    """Compares outcomes; counts accepted deviations; knows how to describe the context."""

    context: Callable[[], str] = lambda: ""
    allowed: Sequence[Deviation] = ALLOWED_DEVIATIONS + RETRY_DEVIATIONS
    deviations_seen: Counter[str] = field(default_factory=Counter)
    comparisons: int = 0

    def check(self, func: str, args: Sequence[Any], pgq: Outcome, pgque: Outcome) -> None:
        """Accept equal outcomes and allow-listed deviations; raise :class:`Mismatch` otherwise."""
        self.comparisons += 1
        pgq, pgque = _round_floats(pgq), _round_floats(pgque)
        if pgq == pgque:
            return
        for deviation in self.allowed:
            if deviation.applies(func, args, pgq, pgque):
                self.deviations_seen[deviation.key] += 1
                return
        raise Mismatch(
            f"{func}{tuple(args)!r}: PgQ and pgque differ\n"
            f"  pgq:   {pgq.show()}\n"
            f"  pgque: {pgque.show()}\n{self.context()}"
        )


def _round_floats(outcome: Outcome) -> Outcome:
    """float8 results agree to 12 significant digits (PgQ divides numerics, pgque floats)."""
    if outcome.error is not None or not any(
        isinstance(v, float) for row in outcome.rows for v in row
    ):
        return outcome
    rows = tuple(
        tuple(float(f"{v:.12g}") if isinstance(v, float) else v for v in row)
        for row in outcome.rows
    )
    return Outcome(rows=rows, warnings=outcome.warnings)


_TABLE_NAME = re.compile(r"^(?P<schema>pgq|pgque)\.event_(?P<queue>\d+)(?P<rest>(_\d+)?)$")


class Session:
    """One connection to the database, driven explicitly (no implicit transactions).

    The connection runs in autocommit mode and transactions are opened with an explicit
    ``begin``, so the test decides exactly what shares a transaction.
    """

    def __init__(self, name: str, conn: psycopg.Connection[Any]) -> None:
        if not conn.autocommit:
            raise ValueError("Session needs an autocommit connection")
        self.name = name
        self.conn = conn
        self.in_tx = False
        self.savepoints: list[str] = []
        self._warnings: list[str] = []
        conn.add_notice_handler(self._on_notice)
        # Guard rails: a lock wait can never resolve in a single-threaded driver.
        conn.execute("set lock_timeout = '5s'")
        conn.execute("set statement_timeout = '60s'")

    def _on_notice(self, diag: psycopg.errors.Diagnostic) -> None:
        if diag.severity_nonlocalized == "WARNING" and diag.message_primary:
            self._warnings.append(diag.message_primary)

    # -- transaction control (applies to both engines at once) ---------------------------
    def execute(self, query: Query, params: Params | None = None) -> list[Row]:
        cur = self.conn.execute(query, params)
        return cur.fetchall() if cur.description is not None else []

    def begin(self) -> None:
        assert not self.in_tx, f"{self.name}: already in a transaction"
        self.execute("begin")
        self.in_tx = True

    def commit(self) -> None:
        assert self.in_tx, f"{self.name}: no transaction to commit"
        self.execute("commit")
        self.in_tx, self.savepoints = False, []

    def rollback(self) -> None:
        assert self.in_tx, f"{self.name}: no transaction to roll back"
        self.execute("rollback")
        self.in_tx, self.savepoints = False, []

    def savepoint(self, name: str) -> None:
        assert self.in_tx, f"{self.name}: savepoint outside a transaction"
        self.execute(sql.SQL("savepoint {}").format(sql.Identifier(name)))
        self.savepoints.append(name)

    def rollback_to(self, name: str) -> None:
        """Roll back to a savepoint; like PostgreSQL, later savepoints are gone, this one stays."""
        self.execute(sql.SQL("rollback to savepoint {}").format(sql.Identifier(name)))
        del self.savepoints[self.savepoints.index(name) + 1 :]

    def release(self, name: str) -> None:
        self.execute(sql.SQL("release savepoint {}").format(sql.Identifier(name)))
        del self.savepoints[self.savepoints.index(name) :]

    # -- engine calls ---------------------------------------------------------------------
    def call(self, query: Query, params: Params) -> Outcome:
        """Run one statement inside a savepoint of the open transaction; never raises for SQL."""
        assert self.in_tx, f"{self.name}: engine calls run inside a transaction"
        self._warnings.clear()
        self.execute("savepoint pgqdiff_call")
        try:
            rows = tuple(self.execute(query, params))
        except psycopg.Error as exc:
            self.execute("rollback to savepoint pgqdiff_call")
            self.execute("release savepoint pgqdiff_call")
            message = exc.diag.message_primary or str(exc).strip()
            return Outcome(error=message, warnings=tuple(self._warnings))
        self.execute("release savepoint pgqdiff_call")
        return Outcome(rows=rows, warnings=tuple(self._warnings))

    def pair(
        self,
        template: str,
        params: Params | Mapping[str, Params] = (),
        *,
        rollback: bool = False,
        repeat_until_zero: bool = False,
    ) -> tuple[Outcome, Outcome]:
        """Run ``template`` for PgQ, then for pgque, in one transaction of this session.

        ``{s}`` in the template is the engine's schema. ``params`` is either one parameter
        list for both engines or a mapping from engine to its own list. Outside an open
        transaction the pair gets its own transaction, committed (or rolled back with
        ``rollback``) afterwards. ``repeat_until_zero`` calls each engine again while it
        returns a non-zero single value (as a maintenance daemon does), and reports all
        values as rows.
        """
        own_tx = not self.in_tx
        if own_tx:
            self.begin()
        try:
            outcomes = []
            for engine in ENGINES:
                engine_params = params[engine] if isinstance(params, Mapping) else params
                query = sql.SQL(template).format(s=sql.Identifier(engine))
                outcome = self.call(query, engine_params)
                if repeat_until_zero:
                    outcome = self._repeat(query, engine_params, outcome)
                outcomes.append(outcome)
        finally:
            if own_tx:
                if rollback:
                    self.rollback()
                else:
                    self.commit()
        return outcomes[0], outcomes[1]

    def _repeat(self, query: Query, params: Params, first: Outcome) -> Outcome:
        values: list[Row] = []
        outcome = first
        for _ in range(1000):
            if outcome.error is not None:
                return outcome
            values.append(outcome.rows[0])
            if not outcome.value:
                break
            outcome = self.call(query, params)
        return Outcome(rows=tuple(values), warnings=outcome.warnings)


class TableNames:
    """Maps ``<schema>.event_<queue_id>[_<n>]`` to ``event[<queue name>][_<n>]`` per engine.

    Queue ids are internal (PgQ and pgque may number queues differently), names are not.
    """

    def __init__(self, session: Session) -> None:
        self.session = session
        self.names: dict[tuple[str, int], str] = {}

    def refresh(self) -> None:
        for engine in ENGINES:
            query = sql.SQL("select queue_id, queue_name from {}.queue").format(
                sql.Identifier(engine)
            )
            for queue_id, queue_name in self.session.execute(query):
                self.names[(engine, queue_id)] = queue_name

    def normalize(self, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        match = _TABLE_NAME.match(value)
        if match is None:
            return value
        key = (match["schema"], int(match["queue"]))
        if key not in self.names:
            self.refresh()
        queue = self.names.get(key, f"?{match['queue']}")
        return f"event[{queue}]{match['rest']}"

    def normalize_outcome(self, outcome: Outcome) -> Outcome:
        if outcome.error is not None:
            return outcome
        rows = tuple(tuple(self.normalize(v) for v in row) for row in outcome.rows)
        return Outcome(rows=rows, warnings=outcome.warnings)


def sorted_events(outcome: Outcome) -> Outcome:
    """Events are returned ordered by ev_id; order ties (same ev_id) by the whole row.

    Also checks the ordering contract, as an error text that will surface as a mismatch.
    """
    if outcome.error is not None:
        return outcome
    ids = [row[0] for row in outcome.rows]
    if ids != sorted(ids):
        return Outcome(error=f"events not ordered by ev_id: {ids}", warnings=outcome.warnings)
    rows = tuple(sorted(outcome.rows, key=lambda row: (row[0], repr(row))))
    return Outcome(rows=rows, warnings=outcome.warnings)


@dataclass
class Comparator:
    """Runs a template on both engines through a session, normalises and compares the outcomes."""

    differ: Differ
    tables: TableNames

    def run(
        self,
        session: Session,
        func: str,
        template: str,
        params: Params | Mapping[str, Params] = (),
        *,
        args: Sequence[Any] | None = None,
        normalize: Callable[[Outcome], Outcome] | None = None,
        rollback: bool = False,
        repeat_until_zero: bool = False,
    ) -> Outcome:
        """Compare one operation (``args`` names it in reports); return PgQ's outcome."""
        pgq, pgque = session.pair(
            template, params, rollback=rollback, repeat_until_zero=repeat_until_zero
        )
        pgq, pgque = self.tables.normalize_outcome(pgq), self.tables.normalize_outcome(pgque)
        if normalize is not None:
            pgq, pgque = normalize(pgq), normalize(pgque)
        if args is None:
            args = params if not isinstance(params, Mapping) else params[ENGINES[0]]
        self.differ.check(func, list(args), pgq, pgque)
        return pgq
