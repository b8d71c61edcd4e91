"""Seeded random schedules, run on PgQ and pgque side by side, must agree step by step.

A few fixed seeds run in CI. More from the environment:

* ``PGQUE_DIFF_SEEDS=200``: seeds 1..200 (instead of the CI seeds);
* ``PGQUE_DIFF_SEED=1234``: only that seed (to reproduce a failure);
* ``PGQUE_DIFF_STEPS=600``: random steps per schedule (default 1000; a mismatch report
  names the step count it ran with, reproduce with the same value);
* ``PGQUE_DIFF_DISABLE=rotate_step1,event_retry``: operation kinds to leave out (see
  ``pgqdiff_schedule``), e.g. to narrow a mismatch down. Kinds whose pgque function does
  not exist are left out automatically, and listed in the ``-s`` output.

A schedule depends only on the seed, the step count and the enabled kinds; what the
ticker decides also depends on wall-clock time (``now()`` against the queue's
thresholds), which is identical for both engines within a run but not between runs, so
a reproduction replays the same operations with possibly different tick decisions.

Example: ``PGQUE_TEST_PG=15 PGQUE_DIFF_SEED=1234 python -m pytest tests/differential -q``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import pytest
from pgqdiff_harness import Session
from pgqdiff_runner import ScheduleRunner, available_kinds
from pgqdiff_schedule import ALL_KINDS, CONTROL, generate

pytestmark = pytest.mark.pgq

CI_SEEDS = (1, 2, 3, 4, 5, 6)
DEFAULT_STEPS = 1000
PRODUCERS = 3


def _seeds() -> list[int]:
    if os.environ.get("PGQUE_DIFF_SEED"):
        return [int(os.environ["PGQUE_DIFF_SEED"])]
    if os.environ.get("PGQUE_DIFF_SEEDS"):
        return list(range(1, int(os.environ["PGQUE_DIFF_SEEDS"]) + 1))
    return list(CI_SEEDS)


def _steps() -> int:
    return int(os.environ.get("PGQUE_DIFF_STEPS") or DEFAULT_STEPS)


def _disabled_by_environment() -> frozenset[str]:
    kinds = {kind.strip() for kind in os.environ.get("PGQUE_DIFF_DISABLE", "").split(",")}
    kinds.discard("")
    unknown = kinds - ALL_KINDS
    assert not unknown, f"PGQUE_DIFF_DISABLE: unknown kinds {sorted(unknown)}"
    return frozenset(kinds)


@pytest.mark.parametrize("seed", _seeds(), ids=lambda seed: f"seed={seed}")
def test_random_schedule(seed: int, sessions: Callable[[int], list[Session]]) -> None:
    opened = sessions(PRODUCERS)
    steps = _steps()
    switched_off = _disabled_by_environment()
    enabled = available_kinds(opened[CONTROL].conn, ALL_KINDS) - switched_off
    ops = generate(seed, steps, enabled)
    disable = f" PGQUE_DIFF_DISABLE={','.join(sorted(switched_off))}" if switched_off else ""
    label = (
        f"seed={seed} steps={steps}; reproduce: PGQUE_TEST_PG=15 PGQUE_DIFF_SEED={seed}"
        f" PGQUE_DIFF_STEPS={steps}{disable} python -m pytest tests/differential -q -k random"
    )
    runner = ScheduleRunner(opened, label=label)
    started = time.monotonic()
    runner.run(ops)
    elapsed = time.monotonic() - started
    disabled = sorted(ALL_KINDS - enabled)
    print(
        f"\nseed {seed}: {len(ops)} ops, {runner.differ.comparisons} comparisons,"
        f" {elapsed:.1f} s; {dict(runner.stats)};"
        f" accepted deviations {dict(runner.differ.deviations_seen)}; disabled kinds {disabled}"
    )
    # A schedule that delivered nothing compared nothing interesting.
    if {"insert", "next_batch", "get_batch_events"} <= enabled:
        assert runner.stats["events delivered"] > 0, f"seed {seed}: no events were delivered"
