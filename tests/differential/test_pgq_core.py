"""Hand-written differential cases: PgQ's own core walk-through, run on PgQ and pgque.

Every call runs on both engines in one transaction and must agree (see
``pgqdiff_harness``); the tests also assert PgQ's documented values, so a case that both
engines got wrong in the same way still fails. The last tests pin the allow-list: each
intended deviation must still be exactly what the allow-list says, and each known pgque
bug has a strict-xfail reproduction that starts passing (and so fails) once it is fixed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

import pytest
from pgqdiff_harness import (
    ALLOWED_DEVIATIONS,
    ENGINES,
    Comparator,
    Differ,
    Outcome,
    Params,
    Session,
    TableNames,
    sorted_events,
)
from pgqdiff_schedule import CONTROL

pytestmark = pytest.mark.pgq

NULL_BATCH_ROW = (None,) * 7


class Both:
    """``both(template, *params)``: run on PgQ and pgque in one transaction, compare."""

    def __init__(self, session: Session, differ: Differ | None = None) -> None:
        self.session = session
        self.differ = differ if differ is not None else Differ()
        self.comparator = Comparator(self.differ, TableNames(session))

    def __call__(
        self,
        template: str,
        *params: Any,
        per_engine: Mapping[str, Params] | None = None,
        rollback: bool = False,
        on: Session | None = None,
    ) -> Outcome:
        match = re.search(r"\{s\}\.(\w+)", template)
        assert match is not None, template
        normalize = sorted_events if match[1] == "get_batch_events" else None
        return self.comparator.run(
            on or self.session,
            match[1],
            template,
            per_engine if per_engine is not None else params,
            args=params,
            normalize=normalize,
            rollback=rollback,
        )

    def value(self, template: str, *params: Any, **kwargs: Any) -> Any:
        outcome = self(template, *params, **kwargs)
        assert outcome.error is None, outcome.show()
        return outcome.value

    def row(self, template: str, *params: Any, **kwargs: Any) -> tuple[Any, ...]:
        outcome = self(template, *params, **kwargs)
        assert outcome.error is None and len(outcome.rows) == 1, outcome.show()
        return outcome.rows[0]


@pytest.fixture
def both(sessions: Callable[[int], list[Session]]) -> Both:
    return Both(sessions(0)[CONTROL])


def _eager_queue(both: Both, queue: str) -> None:
    """A queue whose ticker ticks on every call (PgQ's tests do the same)."""
    assert both.value("select {s}.create_queue(%s)", queue) == 1
    assert (
        both.value("select {s}.set_queue_config(%s, 'ticker_max_lag', '1 microsecond')", queue) == 1
    )
    assert (
        both.value("select {s}.set_queue_config(%s, 'ticker_idle_period', '1 microsecond')", queue)
        == 1
    )


def test_create_register_unregister_drop_round_trip(both: Both) -> None:
    assert both.value("select {s}.create_queue(%s)", "rt") == 1
    assert both.value("select {s}.create_queue(%s)", "rt") == 0
    assert both.value("select {s}.register_consumer(%s, %s)", "rt", "cons") == 1
    assert both.value("select {s}.register_consumer(%s, %s)", "rt", "cons") == 0
    assert both("select {s}.drop_queue(%s)", "rt").error == (
        "cannot drop queue, consumers still attached"
    )
    assert both.value("select {s}.unregister_consumer(%s, %s)", "rt", "cons") == 1
    assert both.value("select {s}.unregister_consumer(%s, %s)", "rt", "cons") == 0
    assert both.value("select {s}.drop_queue(%s)", "rt") == 1
    assert both("select {s}.drop_queue(%s)", "rt").error == "No such event queue"
    assert both("select {s}.register_consumer(%s, %s)", "rt", "cons").error == (
        "Event queue not created yet"
    )
    # A forced drop unregisters the consumers first.
    assert both.value("select {s}.create_queue(%s)", "rt") == 1
    assert both.value("select {s}.register_consumer(%s, %s)", "rt", "cons") == 1
    assert both.value("select {s}.drop_queue(%s, true)", "rt") == 1


def test_core_walkthrough(both: Both) -> None:
    """pgq_core.sql: ticks, batches, finish, inserts, custom batches, all fields of events."""
    _eager_queue(both, "myqueue")
    assert both.value("select {s}.register_consumer(%s, %s)", "myqueue", "consumer") == 1

    assert both.value("select {s}.next_batch(%s, %s)", "myqueue", "consumer") is None
    assert both.value("select {s}.ticker()") == 1
    assert both.value("select {s}.next_batch(%s, %s)", "myqueue", "consumer") == 1
    assert both.value("select {s}.next_batch(%s, %s)", "myqueue", "consumer") == 1  # idempotent

    info = both.row("select * from {s}.get_batch_info(%s)", 1)
    assert info[:2] == ("myqueue", "consumer")
    assert info[4:6] == (1, 2)  # prev_tick_id, tick_id
    queue_info = both.row("select * from {s}.get_queue_info(%s)", "myqueue")
    assert queue_info[1:4] == (3, 0, timedelta(hours=2))
    assert queue_info[-1] == 2  # last_tick_id
    consumer_info = both.row("select * from {s}.get_consumer_info(%s, %s)", "myqueue", "consumer")
    assert consumer_info[4:7] == (1, 1, 2)  # last_tick, current_batch, next_tick

    assert both.value("select {s}.finish_batch(%s)", 1) == 1
    second = both("select {s}.finish_batch(%s)", 1)
    assert second.value == 0
    assert second.warnings == ("finish_batch: batch 1 not found",)

    # An empty batch reads only the current table and returns nothing.
    assert both.value("select {s}.ticker()") == 1
    assert both.value("select {s}.next_batch(%s, %s)", "myqueue", "consumer") == 2
    tables = both("select * from {s}.batch_event_tables(%s)", 2)
    assert tables.rows == (("event[myqueue]_0",),)
    assert both("select * from {s}.get_batch_events(%s)", 2).rows == ()
    assert both.value("select {s}.finish_batch(%s)", 2) == 1

    assert both.value("select {s}.insert_event(%s, %s, %s)", "myqueue", "r1", "data") == 1
    assert (
        both.value(
            "select {s}.insert_event(%s, %s, %s, %s, %s, %s, %s)",
            "myqueue",
            "r2",
            "data",
            "extra1",
            "extra2",
            "extra3",
            "extra4",
        )
        == 2
    )
    assert both.value("select {s}.insert_event(%s, %s, %s)", "myqueue", "r3", "data") == 3
    assert both.value("select {s}.current_event_table(%s)", "myqueue") == "event[myqueue]_0"

    assert both.value("select {s}.ticker()") == 1
    custom = both.row(
        "select * from {s}.next_batch_custom(%s, %s, '1 hour', 10000, '10 minutes')",
        "myqueue",
        "consumer",
    )
    assert custom == NULL_BATCH_ROW
    batch = both.value("select {s}.next_batch(%s, %s)", "myqueue", "consumer")
    assert batch == 3  # the all-NULL next_batch_custom used no batch id
    events = both("select * from {s}.get_batch_events(%s)", batch).rows
    assert [(e[0], e[3], e[4], e[5], *e[6:]) for e in events] == [
        (1, None, "r1", "data", None, None, None, None),
        (2, None, "r2", "data", "extra1", "extra2", "extra3", "extra4"),
        (3, None, "r3", "data", None, None, None, None),
    ]
    assert both.value("select {s}.finish_batch(%s)", batch) == 1


def test_force_tick_jumps_the_event_sequence(both: Both) -> None:
    assert both.value("select {s}.create_queue(%s)", "ft") == 1  # default thresholds
    for expected in (1, 2, 3, 4):
        assert both.value("select {s}.insert_event(%s, 'x', 'y')", "ft") == expected
    assert both.value("select {s}.ticker(%s)", "ft") is None  # 4 new events, lag < 3 s
    assert both.value("select {s}.force_tick(%s)", "ft") == 1  # the latest tick, no tick made
    # One value consumed, then 2 * ticker_max_count + 1000 skipped: 5 + 2000 + 1.
    assert both.value("select {s}.insert_event(%s, 'x', 'y')", "ft") == 2006
    assert both.value("select {s}.ticker(%s)", "ft") == 2
    assert both.value("select {s}.force_tick(%s)", "ft") == 2


def test_seq_getval_setval_never_go_backwards(both: Both) -> None:
    assert both.value("select {s}.create_queue(%s)", "sq") == 1
    names = {
        engine: both.session.execute(
            f"select queue_event_seq from {engine}.queue where queue_name = 'sq'"
        )[0]
        for engine in ENGINES
    }
    getval, setval = "select {s}.seq_getval(%s)", "select {s}.seq_setval(%s, %s)"
    for expected in (1, 2, 3):
        assert both.value("select {s}.insert_event(%s, 'x', 'y')", "sq") == expected
    assert both.value(getval, "seq", per_engine=names) == 3
    with_value = {engine: (*name, 1) for engine, name in names.items()}
    assert both.value(setval, "seq", 1, per_engine=with_value) == 3  # not backwards
    with_value = {engine: (*name, 5000) for engine, name in names.items()}
    assert both.value(setval, "seq", 5000, per_engine=with_value) == 5000
    assert both.value(getval, "seq", per_engine=names) == 5000
    assert both.value("select {s}.insert_event(%s, 'x', 'y')", "sq") == 5001
    assert both("select {s}.seq_getval(null)").rows == ((None,),)  # strict


QUOTE_FQNAME_CASES = {
    "tbl": "public.tbl",
    "sch.tbl": "sch.tbl",
    "Sch.Tbl": '"Sch"."Tbl"',
    "a.b.c": 'a."b.c"',
    "with space.x": '"with space".x',
    'q"uote': 'public."q""uote"',
    "": 'public.""',
    ".x": '"".x',
    "select": 'public."select"',
    None: None,
}


def test_quote_fqname(both: Both) -> None:
    for name, quoted in QUOTE_FQNAME_CASES.items():
        assert both.value("select {s}.quote_fqname(%s)", name) == quoted, name


def test_next_batch_custom_thresholds(both: Both) -> None:
    """min_count / min_interval / min_lag pick the same end tick (or none) in both engines."""
    _eager_queue(both, "nbc")
    assert both.value("select {s}.register_consumer(%s, %s)", "nbc", "c") == 1
    for count in (1, 2, 4, 8, 16):
        for _ in range(count):
            both.value("select {s}.insert_event(%s, 'x', 'y')", "nbc")
        assert both.value("select {s}.ticker(%s)", "nbc") is not None
    cases = [
        (None, None, None),
        (None, 0, None),
        (None, 1, None),
        (None, 3, None),
        (None, 5, None),
        (None, 12, None),
        (None, 31, None),
        (None, 32, None),
        (None, 1000, None),
        (None, None, "0"),
        (None, None, "1 microsecond"),
        (None, None, "1 hour"),
        (None, 7, "1 hour"),
        ("0", None, None),
        ("1 hour", None, None),
        ("1 hour", 3, None),
        ("0", 3, "0"),
    ]
    for min_lag, min_count, min_interval in cases:
        both(
            "select * from {s}.next_batch_custom(%s, %s, %s::interval, %s::integer, %s::interval)",
            "nbc",
            "c",
            min_lag,
            min_count,
            min_interval,
            rollback=True,
        )
    # Opened for real, the batch is then returned unchanged whatever the thresholds.
    first = both.row("select * from {s}.next_batch_custom(%s, %s, null, 5, null)", "nbc", "c")
    again = both.row(
        "select * from {s}.next_batch_custom(%s, %s, '1 hour', 100000, '1 day')", "nbc", "c"
    )
    assert first == again and first[0] is not None


def test_register_consumer_at_earlier_tick(both: Both) -> None:
    """A late consumer moved back to an earlier tick sees the events it missed."""
    _eager_queue(both, "late")
    for n in range(3):
        both.value("select {s}.insert_event(%s, 'x', %s)", "late", f"before-{n}")
        both.value("select {s}.ticker(%s)", "late")  # ticks 2, 3, 4
    assert both.value("select {s}.register_consumer(%s, %s)", "late", "c") == 1  # at tick 4
    assert both.value("select {s}.next_batch(%s, %s)", "late", "c") is None
    assert both("select {s}.register_consumer_at(%s, %s, %s)", "late", "c", 99).error == (
        "cannot reposition, tick not found: 99"
    )
    assert both.value("select {s}.register_consumer_at(%s, %s, %s)", "late", "c", 2) == 0
    batch = both.value("select {s}.next_batch(%s, %s)", "late", "c")
    events = both("select * from {s}.get_batch_events(%s)", batch).rows
    assert [e[5] for e in events] == ["before-1"]
    # Repositioning drops the open batch; the next one starts from the new position.
    assert both.value("select {s}.register_consumer_at(%s, %s, %s)", "late", "c", 1) == 0
    assert both("select {s}.finish_batch(%s)", batch).value == 0
    batch = both.value("select {s}.next_batch(%s, %s)", "late", "c")
    assert [e[5] for e in both("select * from {s}.get_batch_events(%s)", batch).rows] == [
        "before-0"
    ]
    # A new consumer registered at an earlier tick.
    assert both.value("select {s}.register_consumer_at(%s, %s, %s)", "late", "d", 3) == 1
    batch = both.value("select {s}.next_batch(%s, %s)", "late", "d")
    assert [e[5] for e in both("select * from {s}.get_batch_events(%s)", batch).rows] == [
        "before-2"
    ]


def test_open_transactions_savepoints_and_rollbacks(
    sessions: Callable[[int], list[Session]],
) -> None:
    """Batches are cut by snapshots: open, aborted and savepointed transactions."""
    control, p1, p2, p3 = sessions(3)
    both = Both(control)
    _eager_queue(both, "tx")
    assert both.value("select {s}.register_consumer(%s, %s)", "tx", "c") == 1
    insert = "select {s}.insert_event(%s, 'x', %s)"

    p1.begin()
    both(insert, "tx", "p1-a", on=p1)  # id 1, stays open across two ticks
    p2.begin()
    both(insert, "tx", "p2-a", on=p2)  # id 2
    p2.savepoint("s1")
    both(insert, "tx", "p2-rolled-back", on=p2)  # id 3
    p2.rollback_to("s1")
    p2.savepoint("s2")
    both(insert, "tx", "p2-released", on=p2)  # id 4
    p2.release("s2")
    p2.commit()
    p3.begin()
    both(insert, "tx", "p3-aborted", on=p3)  # id 5
    both(insert, "tx", "autocommit")  # id 6
    assert both.value("select {s}.ticker(%s)", "tx") == 2
    p3.rollback()

    batch = both.value("select {s}.next_batch(%s, %s)", "tx", "c")
    assert [e[5] for e in both("select * from {s}.get_batch_events(%s)", batch).rows] == [
        "p2-a",
        "p2-released",
        "autocommit",
    ]
    assert both.value("select {s}.finish_batch(%s)", batch) == 1

    both(insert, "tx", "p1-b", on=p1)  # id 7, still p1's transaction
    assert both.value("select {s}.ticker(%s)", "tx") == 3
    batch = both.value("select {s}.next_batch(%s, %s)", "tx", "c")
    assert both("select * from {s}.get_batch_events(%s)", batch).rows == ()
    assert both.value("select {s}.finish_batch(%s)", batch) == 1

    p1.commit()  # commits ids 1 and 7, after ids 2..6 were delivered
    assert both.value("select {s}.ticker(%s)", "tx") == 4
    batch = both.value("select {s}.next_batch(%s, %s)", "tx", "c")
    events = both("select * from {s}.get_batch_events(%s)", batch).rows
    assert [(e[0], e[5]) for e in events] == [(1, "p1-a"), (7, "p1-b")]
    assert both.value("select {s}.finish_batch(%s)", batch) == 1


def test_retry_round_trip(both: Both) -> None:
    """event_retry / batch_retry / maint_retry_events: same ids, retry counts, owner only."""
    _eager_queue(both, "rq")
    for consumer in ("a", "b"):
        assert both.value("select {s}.register_consumer(%s, %s)", "rq", consumer) == 1
    for n in range(3):
        both.value("select {s}.insert_event(%s, 'x', %s)", "rq", f"e{n}")
    both.value("select {s}.ticker(%s)", "rq")
    batch_a = both.value("select {s}.next_batch(%s, %s)", "rq", "a")
    assert len(both("select * from {s}.get_batch_events(%s)", batch_a).rows) == 3
    assert both.value("select {s}.event_retry(%s, %s::bigint, 0)", batch_a, 2) == 1
    assert both.value("select {s}.event_retry(%s, %s::bigint, 0)", batch_a, 2) == 0
    assert both("select {s}.event_retry(%s, %s::bigint, 0)", batch_a, 99).error == (
        "event not found"
    )
    assert both.value("select {s}.batch_retry(%s, 0)", batch_a) == 2
    assert both.value("select {s}.finish_batch(%s)", batch_a) == 1
    assert both.value("select {s}.maint_retry_events()") == 3
    assert both.value("select {s}.maint_retry_events()") == 0
    both.value("select {s}.ticker(%s)", "rq")

    batch_a = both.value("select {s}.next_batch(%s, %s)", "rq", "a")
    events = both("select * from {s}.get_batch_events(%s)", batch_a).rows
    assert [(e[0], e[3], e[5]) for e in events] == [(1, 1, "e0"), (2, 1, "e1"), (3, 1, "e2")]
    # Consumer b gets the originals, never a's retry copies.
    batch_b = both.value("select {s}.next_batch(%s, %s)", "rq", "b")
    assert both.value("select {s}.finish_batch(%s)", batch_b) == 1
    both.value("select {s}.ticker(%s)", "rq")
    batch_b = both.value("select {s}.next_batch(%s, %s)", "rq", "b")
    assert both("select * from {s}.get_batch_events(%s)", batch_b).rows == ()


def test_external_ticker(both: Both) -> None:
    """ticker(q, tick_id, time, event_seq) on a queue with an external tick source."""
    _eager_queue(both, "ext")
    assert both.value("select {s}.register_consumer(%s, %s)", "ext", "c") == 1
    assert both.value("select {s}.set_queue_config(%s, 'external_ticker', 'true')", "ext") == 1
    assert both("select {s}.ticker(%s)", "ext").error == "This queue has external tick source."
    assert both.value("select {s}.ticker()") == 0  # skipped
    assert both.value("select {s}.insert_event(%s, 'x', 'first')", "ext") == 1
    assert both.value("select {s}.force_tick(%s)", "ext") == 1  # ignored silently
    tick = "select {s}.ticker(%s, %s::bigint, '2020-01-01 00:00:00+00', %s::bigint)"
    assert both.value(tick, "ext", 5, 100) == 5
    assert both.value("select {s}.insert_event(%s, 'x', 'second')", "ext") == 101
    batch = both.value("select {s}.next_batch(%s, %s)", "ext", "c")
    info = both.row("select * from {s}.next_batch_info(%s, %s)", "ext", "c")
    assert info[:3] == (batch, 5, 1)
    assert [e[5] for e in both("select * from {s}.get_batch_events(%s)", batch).rows] == ["first"]
    assert both.value("select {s}.finish_batch(%s)", batch) == 1
    assert both.value(tick, "ext", 6, 101) == 6
    batch = both.value("select {s}.next_batch(%s, %s)", "ext", "c")
    assert [e[5] for e in both("select * from {s}.get_batch_events(%s)", batch).rows] == ["second"]
    # Back to the local ticker: tick ids continue after the external ones.
    assert both.value("select {s}.set_queue_config(%s, 'external_ticker', 'false')", "ext") == 1
    assert both.value("select {s}.ticker(%s)", "ext") == 7


def test_allowed_deviations_are_still_what_the_list_says(both: Both) -> None:
    """Each intended deviation shows up exactly as documented (remove stale entries)."""
    both.value("select {s}.create_queue(%s)", "dev")
    both("select {s}.force_tick(%s)", "no_such_queue")
    both("select {s}.create_queue(%s)", "")
    both("select {s}.register_consumer(%s, %s)", "dev", "")
    both("select {s}.register_consumer_at(%s, %s, 1)", "dev", "")
    both("select {s}.insert_event(%s, 'x', 'y')", "no_such_queue")
    both("select * from {s}.batch_event_tables(%s)", 424242)
    external_tick = "select {s}.ticker(%s, %s::bigint, now(), %s::bigint)"
    both(external_tick, "dev", 5, 1)  # not an external-ticker queue
    both.value("select {s}.set_queue_config(%s, 'external_ticker', 'true')", "dev")
    assert both.value(external_tick, "dev", 5, 10) == 5
    both("select {s}.force_tick(%s)", "dev")  # PgQ returns the last tick; pgque raises
    both(external_tick, "dev", 4, 10)  # PgQ accepts a tick id going backwards (last)
    seen = set(both.differ.deviations_seen)
    assert seen == {deviation.key for deviation in ALLOWED_DEVIATIONS}


def test_ev_per_sec_window(both: Both) -> None:
    strict = Both(both.session, Differ(allowed=ALLOWED_DEVIATIONS))
    _eager_queue(strict, "rate")
    for n in range(1, 23):
        for _ in range(n):
            strict("select {s}.insert_event(%s, 'x', 'y')", "rate")
        strict("select {s}.ticker(%s)", "rate")
    strict("select * from {s}.get_queue_info(%s)", "rate")  # ev_per_sec over 21 ticks


def _batch_with_duplicated_event(both: Both) -> int:
    """A batch holding event 1 twice: the original and the consumer's own retry copy.

    The consumer retries event 1, the copy comes back, then the consumer is moved back
    to tick 1 and takes one batch over ticks 1..3 (next_batch_custom with min_count 1).
    """
    _eager_queue(both, "dup")
    assert both.value("select {s}.register_consumer(%s, %s)", "dup", "c") == 1
    assert both.value("select {s}.insert_event(%s, 'x', 'e1')", "dup") == 1
    assert both.value("select {s}.ticker(%s)", "dup") == 2
    batch = both.value("select {s}.next_batch(%s, %s)", "dup", "c")
    assert both.value("select {s}.event_retry(%s, 1::bigint, 0)", batch) == 1
    assert both.value("select {s}.finish_batch(%s)", batch) == 1
    assert both.value("select {s}.maint_retry_events()") == 1
    assert both.value("select {s}.ticker(%s)", "dup") == 3
    assert both.value("select {s}.register_consumer_at(%s, %s, 1)", "dup", "c") == 0
    batch = both.row("select * from {s}.next_batch_custom(%s, %s, null, 1, null)", "dup", "c")[0]
    events = both("select * from {s}.get_batch_events(%s)", batch).rows
    assert [(e[0], e[3]) for e in events] == [(1, None), (1, 1)]
    return int(batch)


def test_event_retry_of_duplicated_event_queues_one_copy(both: Both) -> None:
    batch = _batch_with_duplicated_event(both)
    both("select {s}.event_retry(%s, 1::bigint, 0)", batch)
    assert "event_retry-duplicated-ev_id" in both.differ.deviations_seen


def test_batch_retry_of_duplicated_event_queues_one_copy(both: Both) -> None:
    batch = _batch_with_duplicated_event(both)
    both("select {s}.batch_retry(%s, 0)", batch)
    assert "batch_retry-duplicated-ev_id" in both.differ.deviations_seen
