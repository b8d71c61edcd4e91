"""The issue's speed targets as ratios (or bounds) over rows of the same run.

Each :class:`Target` names a subject row and either a baseline row with the
ratio to reach, or an absolute bound. "On par" is at least 0.95x. Rows bound
by commit latency (``synchronous_commit`` on) pass when the subject's
min-max range reaches the baseline's (``overlap``).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from .core import Row


@dataclass(frozen=True)
class Target:
    """One goal: ``subject`` against ``baseline`` (same workload unless given) or a bound."""

    goal: str
    workload: str
    subject: str
    baseline: str = ""
    at_least: float = 0.0
    at_most: float = 0.0
    metric: str = "value"
    baseline_workload: str = ""
    overlap: bool = False


TARGETS: list[Target] = []
"""Filled by the cases' modules with :func:`target`."""


def target(**kwargs: Any) -> None:
    """Declare a target (see :class:`Target`)."""
    TARGETS.append(Target(**kwargs))


def _values(row: Row, metric: str) -> list[float]:
    return row.values if metric == "value" else row.extra[metric]


def _divide(a: float, b: float) -> float:
    """``a / b``, where a zero ``b`` (a count of dead tuples, say) gives 1 for a zero
    ``a`` (equal) and infinity otherwise."""
    if b == 0:
        return 1.0 if a == 0 else math.inf
    return a / b


def evaluate(rows: list[Row]) -> list[dict[str, Any]]:
    """Every target whose rows were measured, with its figure and pass/miss."""
    index = {(r.workload, r.target): r for r in rows}
    out = []
    for t in TARGETS:
        subject = index.get((t.workload, t.subject))
        if subject is None:
            continue
        values = _values(subject, t.metric)
        verdict: dict[str, Any] = {"goal": t.goal, "workload": t.workload,
                                   "subject": t.subject, "command": subject.command}  # fmt: skip
        if t.baseline:
            base = index.get((t.baseline_workload or t.workload, t.baseline))
            if base is None:
                continue
            base_values = _values(base, t.metric)
            natural = _divide(statistics.median(values), statistics.median(base_values))
            # For lower-is-better rows the goal is on the inverse (at_least 1/1.5 reads
            # "at most 1.5x the baseline"); the figure shown is always subject / baseline.
            ratio = natural if subject.higher_is_better else _divide(1.0, natural)
            met = ratio >= t.at_least
            if t.overlap and not met:
                met = (max(values) >= min(base_values) if subject.higher_is_better
                       else min(values) <= max(base_values))  # fmt: skip
            verdict.update(baseline=t.baseline, figure=f"{natural:.2f}x", met=met)
        else:
            median = statistics.median(values)
            met = median <= t.at_most
            verdict.update(figure=f"{median:.3g} {subject.unit}", met=met)
        out.append(verdict)
    return out


def print_targets(verdicts: list[dict[str, Any]]) -> None:
    """Print each evaluated target: met or MISSED, with its figure."""
    if not verdicts:
        return
    print("\nTargets (ratios of medians in this run):")
    for v in verdicts:
        state = "met   " if v["met"] else "MISSED"
        print(f"  {state} {v['figure']:>10}  {v['goal']}")
