"""The benchmark suite's own rules: targets as ratios, interleaving, refusing bad input.

These run no benchmark (CI's ``python -m benchmarks run --quick`` does); they
pin the arithmetic and the failure modes the report relies on.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.core import DISTURBED_CORES, Context, Row
from benchmarks.report import write_report
from benchmarks.targets import TARGETS, Target, evaluate

ROOT = Path(__file__).resolve().parents[2]


def row(target: str, values: list[float], *, higher: bool = True, workload: str = "w") -> Row:
    return Row(case="c", workload=workload, target=target, unit="x", values=values,
               higher_is_better=higher)  # fmt: skip


@pytest.fixture
def targets(monkeypatch: pytest.MonkeyPatch) -> list[Target]:
    declared: list[Target] = []
    monkeypatch.setattr("benchmarks.targets.TARGETS", declared)
    assert TARGETS is not declared  # the module's list is left alone
    return declared


def test_ratio_targets_on_medians(targets: list[Target]) -> None:
    targets.append(Target(goal="fast", workload="w", subject="a", baseline="b", at_least=3.0))
    rows = [row("a", [290, 310, 300]), row("b", [100, 90, 200])]
    (verdict,) = evaluate(rows)
    assert verdict["figure"] == "3.00x" and verdict["met"]
    rows[0].values = [250, 299, 310]
    assert not evaluate(rows)[0]["met"]


def test_lower_is_better_shows_the_plain_ratio(targets: list[Target]) -> None:
    # "at most 1.5x the baseline" is at_least=1/1.5 on the inverse.
    targets.append(Target(goal="few", workload="w", subject="a", baseline="b", at_least=1 / 1.5))
    rows = [row("a", [140], higher=False), row("b", [100], higher=False)]
    (verdict,) = evaluate(rows)
    assert verdict["figure"] == "1.40x" and verdict["met"]
    rows[0].values = [160]
    assert not evaluate(rows)[0]["met"]


def test_commit_bound_rows_pass_when_ranges_overlap(targets: list[Target]) -> None:
    targets.append(Target(goal="par", workload="w", subject="a", baseline="b", at_least=0.95,
                          overlap=True))  # fmt: skip
    rows = [row("a", [80, 85, 101]), row("b", [100, 104, 120])]
    assert evaluate(rows)[0]["met"]  # medians 0.82x, but a's best run reaches b's worst
    rows[0].values = [80, 85, 99]
    assert not evaluate(rows)[0]["met"]


def test_zero_medians_compare_without_dividing_by_zero(targets: list[Target]) -> None:
    # Counts (dead tuples) may be 0 on either side: fewer is better, none beats some.
    targets.append(Target(goal="few", workload="w", subject="a", baseline="b", at_least=1.0))
    rows = [row("a", [0], higher=False), row("b", [90], higher=False)]
    assert evaluate(rows)[0]["met"]
    rows[0].values, rows[1].values = [0], [0]
    assert evaluate(rows)[0]["met"]
    rows[0].values = [5]
    (verdict,) = evaluate(rows)
    assert verdict["figure"] == "infx" and not verdict["met"]


def test_bounds_and_unmeasured_targets(targets: list[Target]) -> None:
    targets.append(Target(goal="p50", workload="w", subject="a", at_most=5.0))
    targets.append(Target(goal="absent", workload="w", subject="missing", at_most=1.0))
    (verdict,) = evaluate([row("a", [4.0, 6.0, 4.5], higher=False)])
    assert verdict["goal"] == "p50" and verdict["met"]


class _Busy:
    """A CPU watch reporting other processes busy for the first ``busy`` measures."""

    def __init__(self, busy: int) -> None:
        self.busy = busy

    def start(self) -> None:
        return None

    def stop(self, mark: None) -> float:
        self.busy -= 1
        return DISTURBED_CORES * 2 if self.busy >= 0 else 0.0


def test_interleave_alternates_and_reruns_disturbed_measures() -> None:
    order: list[str] = []
    ctx = Context(quick=False, runs=2, clusters=None, case="c", watch=_Busy(1))  # type: ignore[arg-type]
    series = ctx.interleave({
        "a": lambda: order.append("a") or 1.0,  # type: ignore[func-returns-value]
        "b": lambda: order.append("b") or 2.0,  # type: ignore[func-returns-value]
    })  # fmt: skip
    assert order == ["a", "a", "b", "b", "a"]  # a re-run at once, then b a: the order flips
    assert series["a"].rerun == [0] and series["a"].disturbed == []
    assert series["a"].values == [1.0, 1.0] and series["b"].values == [2.0, 2.0]


def test_report_refuses_incomplete_results(tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"complete": False, "errors": ["spark: no Java"]}))
    out = tmp_path / "performance.md"
    assert write_report(results, out) == 1
    assert not out.exists()


def test_an_only_matching_nothing_fails_naming_the_cases() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "run", "--only", "no-such-case"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert "matches no case" in done.stderr and "held_xmin" in done.stderr
