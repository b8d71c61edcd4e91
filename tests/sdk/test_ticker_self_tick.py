"""The leader's rounds when a consumer of its process ticks its own queue: the queue is
left to the consumer while it does, taken back once it waits, and a round whose read
of the sequences is not due yet still runs the periodic jobs (it used to spin)."""

from __future__ import annotations

import time
from typing import Any

import psycopg

import pgque
from _engine import one
from pgque.ticker import _SELF_BUSY_FOR, _SELF_TICKED_FOR, _Schedule


def round_of(
    ticker: pgque.Ticker, conn: psycopg.Connection[Any], due: _Schedule, now: float
) -> tuple[bool, dict[str, int], set[str], dict[str, float]]:
    """One leader round at ``now``: what it returned, saw, left pending and watches."""
    seen: dict[str, int] = {}
    pending: set[str] = set()
    watch: dict[str, float] = {}
    quiet = ticker._lead_once(conn, due, seen, pending, now, watch)
    return quiet, seen, pending, watch


def test_a_queue_its_consumer_ticks_is_left_to_it_until_it_waits(
    db: str, conn: psycopg.Connection[Any], queue: str
) -> None:
    one(conn, "select pgque.send('q', '{}'::jsonb)")
    ticker = pgque.Ticker(db)
    ticker.note_self_tick("q")
    now = time.monotonic()
    due = _Schedule()
    quiet, seen, pending, watch = round_of(ticker, conn, due, now)
    # Left to the consumer: not ticked, not watched, not marked seen; the sequences
    # are read again a moment later, not at the next commit's wakeup.
    assert (quiet, seen, pending, watch) == (False, {}, set(), {})
    assert due.sequences >= now + _SELF_TICKED_FOR
    # The consumer's poll ended and it stopped ticking (it waits): the next round
    # takes the queue back.
    ticker.note_poll_done("q")
    # (Not before the next read of the sequences is due: a slow read, on a loaded
    # machine, spaces the next one out.)
    later = max(now + 2 * _SELF_TICKED_FOR, due.sequences)
    _, seen, _, watch = round_of(ticker, conn, due, later)
    assert "q" in seen and "q" in watch
    assert one(conn, "select count(*) from pgque.receive('q', 'c')") == 1


def test_a_queue_is_left_to_its_consumer_while_its_poll_works_on_a_batch(
    db: str, conn: psycopg.Connection[Any], queue: str
) -> None:
    """A tick while the consumer works through its batch would only cut its next batch
    smaller (batches of a few events each, a round trip per batch): the leader leaves
    the queue to it until its poll ends, for at most _SELF_BUSY_FOR."""
    one(conn, "select pgque.send('q', '{}'::jsonb)")
    ticker = pgque.Ticker(db)
    ticker.note_self_tick("q")  # the poll begins
    now = time.monotonic()
    busy = now + 2 * _SELF_TICKED_FOR  # past the tick's moment, inside the poll
    quiet, seen, pending, watch = round_of(ticker, conn, _Schedule(), busy)
    assert (quiet, seen, pending, watch) == (False, {}, set(), {})
    # A poll that takes too long: other consumers of the queue get their ticks.
    _, seen, _, _ = round_of(ticker, conn, _Schedule(), now + _SELF_BUSY_FOR + 0.01)
    assert "q" in seen
    ticker.note_poll_done("q")
    assert not ticker._left_to_consumer("q", busy)


def test_a_round_between_reads_of_the_sequences_runs_the_periodic_jobs(
    db: str, conn: psycopg.Connection[Any], queue: str
) -> None:
    ticker = pgque.Ticker(db)
    now = time.monotonic()
    due = _Schedule(sequences=now + 10, ticker=0.0, period_check=0.0)
    quiet, seen, _, _ = round_of(ticker, conn, due, now)
    assert quiet is False and seen == {}  # no read of the sequences yet
    # pgque.ticker() and the period's read ran: the leader's next wait is not in the past.
    assert due.ticker > now and due.period_check > now
