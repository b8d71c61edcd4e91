"""Plain-text rendering of rows, shared by the console output and the report."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import groupby
from typing import Any

from .core import Row


def number(value: float) -> str:
    """A figure with sensible precision: 1,234,567 / 12.3 / 0.123."""
    if abs(value) >= 100 or value == int(value):
        return f"{value:,.0f}"
    if abs(value) >= 1:
        return f"{value:.1f}"
    return f"{value:.3f}"


def cell(values: list[float]) -> str:
    """Median (min-max), or the single value of a one-run row."""
    ordered = sorted(values)
    median = ordered[len(ordered) // 2] if len(ordered) % 2 else \
        (ordered[len(ordered) // 2 - 1] + ordered[len(ordered) // 2]) / 2  # fmt: skip
    if len(values) == 1:
        return number(median)
    return f"{number(median)} ({number(ordered[0])}-{number(ordered[-1])})"


def marks(row: Row | dict[str, Any]) -> str:
    """Footnote marks: runs re-run because other processes took CPU, and still disturbed."""
    data = row if isinstance(row, dict) else row.to_json()
    out = []
    if data["rerun"]:
        out.append(f"re-run {len(data['rerun'])}x")
    if data["disturbed"]:
        out.append(f"disturbed {len(data['disturbed'])}x")
    return "; ".join(out)


def print_rows(rows: Iterable[Row]) -> None:
    """Print rows grouped by workload: target, median (min-max), unit, extras."""
    for workload, group in groupby(rows, key=lambda r: r.workload):
        print(f"  {workload}")
        for row in group:
            extras = "  ".join(f"{k} {cell(v)}" for k, v in row.extra.items())
            flags = marks(row)
            print(f"    {row.target:42} {cell(row.values):>30} {row.unit:8} {extras}"
                  + (f"  [{flags}]" if flags else ""))  # fmt: skip
