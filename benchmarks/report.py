"""``python -m benchmarks report RESULTS.json``: writes ``docs/performance.md`` and its charts.

The page is generated, never edited by hand: the machine and settings, the
targets (met or missed), then one section per case with a table per
workload (median and min-max over the runs, the ratio to the workload's
first row, the command that reproduces it) and one chart per case. The
causes of missed targets come from ``benchmarks/findings.md``, written by
whoever investigated them, and are copied in verbatim.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from itertools import groupby
from pathlib import Path
from typing import Any

from .core import CASES, Row
from .render import cell, marks, number
from .targets import evaluate

FINDINGS = Path(__file__).with_name("findings.md")


def _ratio(row: dict[str, Any], base: dict[str, Any]) -> str:
    """The row's median divided by the first row's ("-" when that is 0)."""
    return f"{row['median'] / base['median']:.2f}x" if base["median"] else "-"


def _save_svg(fig: Any, path: Path) -> None:
    """Write ``fig`` as SVG, the same bytes for the same figures (no date, fixed ids),
    so that a regenerated page changes only the charts whose figures changed."""
    import matplotlib

    with matplotlib.rc_context({"svg.hashsalt": "pgque"}):
        fig.savefig(path, format="svg", metadata={"Date": None})


def _chart(case: str, rows: list[dict[str, Any]], path: Path) -> bool:
    """A horizontal bar per row: its median relative to its workload's first row."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels, values, lows, highs, colors = [], [], [], [], []
    for workload, group in groupby(rows, key=lambda r: r["workload"]):
        members = list(group)
        base = members[0]
        if len(members) < 2 or not base["median"]:
            continue
        for row in members:
            scale = 1 / base["median"]
            med = row["median"] * scale
            lo, hi = min(row["values"]) * scale, max(row["values"]) * scale
            if not row["higher_is_better"]:
                med, lo, hi = 1 / med if med else 0, 1 / hi if hi else 0, 1 / lo if lo else 0
            labels.append(f"{workload}\n{row['target']}")
            values.append(med)
            colors.append("#3f51b5" if row["target"].startswith("pgque") else "#9e9e9e")
            lows.append(max(med - lo, 0))
            highs.append(max(hi - med, 0))
    if not labels:
        return False
    height = max(2.5, 0.42 * len(labels) + 1)
    fig, ax = plt.subplots(figsize=(9, height))
    y = list(range(len(labels)))[::-1]
    ax.barh(y, values, xerr=[lows, highs], color=colors, ecolor="#555", capsize=2)
    ax.axvline(1.0, color="#999", linewidth=0.8)
    ax.set_yticks(y, labels, fontsize=6.5)
    ax.set_xlabel("relative to the workload's first row (higher is better; bars: min-max)")
    ax.set_title(f"{case} (pgque in blue)")
    fig.tight_layout()
    _save_svg(fig, path)
    plt.close(fig)
    return True


def _curves(case: str, rows: list[dict[str, Any]], path: Path) -> bool:
    """For rows sized in ``extra["size"]`` (the scale case): per operation, each
    target's median against the size, both axes logarithmic."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines: dict[str, dict[str, list[tuple[float, float]]]] = {}
    units: dict[str, str] = {}
    for row in rows:
        sizes = row["extra"].get("size")
        if not sizes:
            return False
        operation = row["workload"].rsplit(" at ", 1)[0]
        units[operation] = row["unit"]
        lines.setdefault(operation, {}).setdefault(row["target"], []).append(
            (sizes[0], max(row["median"], 1e-3)))  # fmt: skip
    if not lines:
        return False
    columns = 2
    count = (len(lines) + columns - 1) // columns
    fig, axes = plt.subplots(count, columns, figsize=(10, 2.8 * count), squeeze=False)
    for ax, (operation, targets) in zip(axes.flat, lines.items(), strict=False):
        for name, points in targets.items():
            points.sort()
            color = "#3f51b5" if name.startswith("pgque") else "#9e9e9e"
            xs, ys = [x for x, _ in points], [y for _, y in points]
            ax.plot(xs, ys, marker="o", color=color, label=name)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(operation, fontsize=7.5)
        ax.set_ylabel(units[operation], fontsize=7)
        ax.tick_params(labelsize=6.5)
        ax.legend(fontsize=6.5)
    for ax in list(axes.flat)[len(lines) :]:
        ax.axis("off")
    fig.suptitle(f"{case}: cost against size (pgque in blue; log-log)", fontsize=9)
    fig.tight_layout()
    _save_svg(fig, path)
    plt.close(fig)
    return True


def _growth_tables(rows: list[dict[str, Any]]) -> Iterable[str]:
    """For rows sized in ``extra["size"]``: per dimension, one table of each
    operation's median (and target) against the size. Nothing for other rows."""
    if not rows or any(not r["extra"].get("size") for r in rows):
        return
    table: dict[str, dict[tuple[str, str], dict[float, dict[str, Any]]]] = {}
    for row in rows:
        operation, _, at = row["workload"].rpartition(" at ")
        dimension = at.split(" ", 1)[1]
        cells = table.setdefault(dimension, {}).setdefault((operation, row["target"]), {})
        cells[row["extra"]["size"][0]] = row
    for dimension, lines in table.items():
        sizes = sorted({size for cells in lines.values() for size in cells})
        yield from ["", f"### By {dimension}", ""]
        yield ("| operation | engine | unit | "
               + " | ".join(f"{size:,.0f}" for size in sizes) + " |")  # fmt: skip
        yield "|---|---|---|" + "---:|" * len(sizes)
        for (operation, engine), cells in lines.items():
            unit = next(iter(cells.values()))["unit"]
            values = [number(cells[size]["median"]) if size in cells else "" for size in sizes]
            yield f"| {operation} | {engine} | {unit} | " + " | ".join(values) + " |"


def _table(rows: list[dict[str, Any]]) -> Iterable[str]:
    extras = sorted({k for r in rows for k in r["extra"]})
    head = ["target", "median (min-max)", "unit", "÷ first row", *extras, "notes"]
    yield "| " + " | ".join(head) + " |"
    yield "|---|" + "---:|" * (3 + len(extras)) + "---|"
    base = rows[0]
    for row in rows:
        note = "; ".join(x for x in (row["note"], marks(row)) if x)
        cells = [row["target"], cell(row["values"]), row["unit"], _ratio(row, base)]
        cells += [cell(row["extra"][k]) if k in row["extra"] else "" for k in extras]
        yield "| " + " | ".join([*cells, note]) + " |"


def render(doc: dict[str, Any], charts_dir: Path, link_prefix: str) -> str:
    """The Markdown page for ``doc`` (charts written into ``charts_dir``)."""
    m = doc["machine"]
    sync = m.get("fdatasync") or {}
    out = [
        "# Performance",
        "",
        "<!-- Generated by `python -m benchmarks report`; do not edit by hand. -->",
        "",
        f"Figures from one run of `{doc['command']}` on {doc['started']} "
        f"({doc['minutes']} minutes): {doc['runs']} runs per target, targets interleaved "
        "(the order alternates from run to run), medians with min-max. Only ratios "
        "within this run mean anything: the same machine measured on another day "
        "gives other absolute numbers.",
        "",
        f"**Machine**: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB, "
        f"Linux {m['kernel']}, Python {m['python']}; the disk's `fdatasync`: "
        f"{number(sync.get('ops_per_s', float('nan')))} ops/s "
        f"({number(sync.get('usecs_per_op', float('nan')))} µs) by `pg_test_fsync`. "
        "Client and servers share the machine. A run where processes outside the "
        'benchmark took more than a quarter of a core was run again ("re-run"), '
        'and marked "disturbed" if it was disturbed again.',
        "",
        "**Servers** (throwaway clusters the suite starts; sessions set "
        "`synchronous_commit` as each row says, `off` unless marked `sync on`):",
        "",
        "| setting | " + " | ".join(f"PostgreSQL {v}" for v in doc["settings"]) + " |",
        "|---|" + "---|" * len(doc["settings"]),
    ]
    names = sorted({n for s in doc["settings"].values() for n in s})
    for name in names:
        out.append(f"| {name} | " + " | ".join(
            f"`{s.get(name, '')}`" for s in doc["settings"].values()) + " |")  # fmt: skip
    out += ["", "## Targets", "", "| goal | figure | result |", "|---|---:|---|"]
    # Evaluated again from the rows, so the page follows targets.py as it is now.
    verdicts = evaluate([Row(**{k: v for k, v in r.items() if k != "median"})
                         for r in doc["rows"]])  # fmt: skip
    for v in verdicts:
        out.append(f"| {v['goal']} | {v['figure']} | {'met' if v['met'] else '**missed**'} |")
    if FINDINGS.exists():
        out += ["", FINDINGS.read_text().strip()]
    rows = doc["rows"]
    charts_dir.mkdir(parents=True, exist_ok=True)
    for case, group in groupby(rows, key=lambda r: r["case"]):
        members = list(group)
        description = CASES[case][1] if case in CASES else ""
        out += [
            "",
            f"## {case}",
            "",
            f"{description[:1].upper()}{description[1:]}.",
            f"{doc['durations'].get(case, 0):.0f} s. Reproduce: `{members[0]['command']}`",
        ]
        growth = list(_growth_tables(members))
        if growth:
            out += growth
        else:
            for workload, wrows in groupby(members, key=lambda r: r["workload"]):
                out += ["", f"### {workload}", "", *_table(list(wrows))]
        chart = charts_dir / f"{case}.svg"
        if _curves(case, members, chart) or _chart(case, members, chart):
            out += ["", f"![{case}]({link_prefix}{chart.name})"]
    out += ["", "## How to run", "",
            "```sh", "pip install '.[bench]'", "python -m benchmarks run --json results.json",
            "python -m benchmarks report results.json", "```", "",
            "See `benchmarks/README.md` for the cases and their rules."]  # fmt: skip
    return "\n".join(out) + "\n"


def write_report(results: Path, out: Path) -> int:
    """Write ``out`` (and its charts beside it) from ``results``; 0, or 1 for incomplete data."""
    doc = json.loads(results.read_text())
    if not doc.get("complete"):
        print(f"{results} is incomplete (errors: {'; '.join(doc.get('errors', []))});"
              " not writing a report from it")  # fmt: skip
        return 1
    charts = out.parent / "performance"
    out.write_text(render(doc, charts, "performance/"))
    print(f"wrote {out} and charts in {charts}")
    return 0
