"""The suite's command line: ``run``, ``list`` and ``report`` (see ``__main__``).

``run`` measures the selected cases (all by default) and prints each case's
rows, the time it took and the targets; ``--json`` writes everything to a
file that ``report`` turns into ``docs/performance.md`` and its charts.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import cases  # noqa: F401  (registers the cases)
from .clusters import Clusters
from .core import CASES, BenchmarkError, Context, select
from .machine import describe, ensure_requirements
from .render import print_rows
from .targets import evaluate, print_targets


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description="pgque's benchmark suite"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="measure and print (and write JSON)")
    run.add_argument(
        "--quick",
        action="store_true",
        help="small sizes, one run each: proves the suite works, not the targets",
    )
    run.add_argument(
        "--only",
        action="append",
        metavar="GLOB",
        help="cases to run, by glob (repeatable); see 'list'",
    )
    run.add_argument("--json", type=Path, metavar="OUT", help="write the results here")
    run.add_argument("--runs", type=int, default=3, help="runs per target (full run; default 3)")
    sub.add_parser("list", help="the cases and what each measures")
    report = sub.add_parser("report", help="write docs/performance.md from a JSON result")
    report.add_argument("json", type=Path)
    report.add_argument("--out", type=Path, default=Path("docs/performance.md"))
    return parser  # fmt: skip


def run(args: argparse.Namespace, argv: list[str]) -> int:
    names = list(select(args.only))
    if not names:
        print(f"--only {' '.join(args.only)} matches no case; the cases are: "
              f"{', '.join(CASES)}", file=sys.stderr)  # fmt: skip
        return 2
    started = datetime.now(timezone.utc)
    suite_start = time.perf_counter()
    try:
        ensure_requirements(spark=any(n.startswith("spark") for n in names))
    except BenchmarkError as exc:
        print(f"benchmarks: {exc}", file=sys.stderr)
        return 2
    runs = 1 if args.quick else args.runs
    errors: list[str] = []
    durations: dict[str, float] = {}
    ctx_rows = []
    with Clusters() as clusters:
        for name in names:
            ctx = Context(quick=args.quick, runs=runs, clusters=clusters, case=name)
            print(f"\n==> {name}: {CASES[name][1]}", flush=True)
            t0 = time.perf_counter()
            try:
                CASES[name][0](ctx)
            except Exception as exc:  # a case failing must not hide the others' results
                cause = str(exc) if isinstance(exc, BenchmarkError) else repr(exc)
                errors.append(f"{name}: {cause}")
                print(f"<== {name}: FAILED: {cause}", file=sys.stderr)
                traceback.print_exc()
            durations[name] = time.perf_counter() - t0
            print_rows(ctx.rows)
            print(f"<== {name}: {durations[name]:.0f} s", flush=True)
            ctx_rows.extend(ctx.rows)
        machine = describe(clusters.server(15).socket_dir)
        settings = clusters.settings()
    verdicts = evaluate(ctx_rows)
    print_targets(verdicts)
    total = time.perf_counter() - suite_start
    print("\nTime per case: " + ", ".join(f"{n} {s:.0f} s" for n, s in durations.items())
          + f"; total {total / 60:.1f} min")  # fmt: skip
    if args.json:
        document: dict[str, Any] = {
            "complete": not errors,
            "errors": errors,
            "command": "python -m benchmarks " + shlex.join(argv),
            "started": started.isoformat(timespec="seconds"),
            "minutes": round(total / 60, 1),
            "quick": args.quick,
            "runs": runs,
            "machine": machine,
            "settings": settings,
            "durations": durations,
            "rows": [r.to_json() for r in ctx_rows],
            "targets": verdicts,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(document, indent=1) + "\n")
        print(f"results: {args.json}" + ("" if not errors else " (INCOMPLETE: see errors)"))
    if errors:
        print("\nFAILED cases:\n  " + "\n  ".join(errors), file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _parser().parse_args(argv)
    if args.command == "list":
        for name, (_, description) in CASES.items():
            print(f"{name:22} {description}")
        return 0
    if args.command == "report":
        from .report import write_report

        return write_report(args.json, args.out)
    return run(args, argv)
