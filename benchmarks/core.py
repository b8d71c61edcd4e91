"""The suite's data model: measured rows, interleaved runs, disturbance checks.

A *case* (``send.batched``, ``drain``, ...) is a function taking a
:class:`Context` and recording :class:`Row` objects. :meth:`Context.interleave`
runs each target of a case ``runs`` times, alternating their order from run
to run, and watches the CPU that processes outside the benchmark take while
each measure runs: a run where others took more than
:data:`DISTURBED_CORES` is run once more and marked if it is disturbed again.
"""

from __future__ import annotations

import fnmatch
import os
import statistics
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import psutil

DISTURBED_CORES = 0.25
"""Other processes' CPU, in cores, above which a measure counts as disturbed."""

Measure = Callable[[], "float | dict[str, float]"]
"""One measure of one target: a value, or named values with the primary under ``value``."""


class BenchmarkError(Exception):
    """A benchmark could not run: names the case or row and the cause."""


@dataclass
class Row:
    """One target's figures in one workload, over all runs."""

    case: str
    workload: str
    target: str
    unit: str
    values: list[float]
    higher_is_better: bool = True
    extra: dict[str, list[float]] = field(default_factory=dict)
    other_cpu: list[float] = field(default_factory=list)
    rerun: list[int] = field(default_factory=list)
    disturbed: list[int] = field(default_factory=list)
    note: str = ""
    command: str = ""

    @property
    def median(self) -> float:
        """The median over the runs."""
        return statistics.median(self.values)

    def to_json(self) -> dict[str, Any]:
        """The row as JSON-ready data, with its median."""
        return {**asdict(self), "median": self.median}


@dataclass
class Series:
    """What :meth:`Context.interleave` collects for one target."""

    values: list[float] = field(default_factory=list)
    extra: dict[str, list[float]] = field(default_factory=dict)
    other_cpu: list[float] = field(default_factory=list)
    rerun: list[int] = field(default_factory=list)
    disturbed: list[int] = field(default_factory=list)


class CpuWatch:
    """CPU time (in cores) that processes outside the benchmark take while it runs.

    The benchmark's own processes are this process, its descendants (pgbench,
    Spark's JVM, worker processes) and the PostgreSQL servers, recognised by
    their OS user (``pgque_pg`` when running as root) or as descendants.
    """

    def __init__(self) -> None:
        self.me = os.getpid()
        self.server_users = {"pgque_pg"} if os.geteuid() == 0 else set()

    def _ours(self, proc: psutil.Process) -> bool:
        try:
            if proc.pid == self.me or proc.username() in self.server_users:
                return True
            return any(p.pid == self.me for p in proc.parents())
        except psutil.Error:
            return True

    def _others(self) -> dict[int, float]:
        times: dict[int, float] = {}
        for proc in psutil.process_iter():
            if self._ours(proc):
                continue
            try:
                t = proc.cpu_times()
                times[proc.pid] = t.user + t.system
            except psutil.Error:
                pass
        return times

    def start(self) -> tuple[float, dict[int, float]]:
        """A mark to pass to :meth:`stop`."""
        return time.perf_counter(), self._others()

    def stop(self, mark: tuple[float, dict[int, float]]) -> float:
        """Cores the other processes used since ``mark``."""
        started, before = mark
        after = self._others()
        used = sum(after[pid] - before[pid] for pid in after.keys() & before.keys())
        return used / max(time.perf_counter() - started, 1e-9)


@dataclass
class Context:
    """What a case gets: run count, sizes, clusters and the place to record rows."""

    quick: bool
    runs: int
    clusters: Any  # benchmarks.clusters.Clusters (kept loose to avoid an import cycle)
    case: str = ""
    rows: list[Row] = field(default_factory=list)
    watch: CpuWatch = field(default_factory=CpuWatch)

    def size(self, full: int, quick: int) -> int:
        """``quick`` in a ``--quick`` run, else ``full``."""
        return quick if self.quick else full

    @property
    def command(self) -> str:
        """The command that reproduces the current case."""
        quick = " --quick" if self.quick else ""
        return f"python -m benchmarks run{quick} --only '{self.case}'"

    def interleave(
        self,
        targets: Mapping[str, Measure],
        *,
        before: Callable[[str], None] | None = None,
        runs: int | None = None,
    ) -> dict[str, Series]:
        """Measure every target ``runs`` times, alternating the order each run.

        ``before(target)`` runs ahead of each measure, unwatched and untimed
        (preloading a backlog, for example).
        """
        names = list(targets)
        out = {name: Series() for name in names}
        for run in range(runs or self.runs):
            for name in names if run % 2 == 0 else reversed(names):
                series = out[name]
                result, cores = self._watched(targets[name], before, name)
                if cores > DISTURBED_CORES:
                    series.rerun.append(run)
                    result, cores = self._watched(targets[name], before, name)
                    if cores > DISTURBED_CORES:
                        series.disturbed.append(run)
                values = result if isinstance(result, dict) else {"value": result}
                series.values.append(values["value"])
                for key, value in values.items():
                    if key != "value":
                        series.extra.setdefault(key, []).append(value)
                series.other_cpu.append(cores)
        return out

    def _watched(
        self, measure: Measure, before: Callable[[str], None] | None, name: str
    ) -> tuple[float | dict[str, float], float]:
        if before is not None:
            before(name)
        mark = self.watch.start()
        try:
            result = measure()
        except Exception as exc:
            raise BenchmarkError(f"{self.case}: target {name!r} failed: {exc}") from exc
        return result, self.watch.stop(mark)

    def record(
        self,
        workload: str,
        series: dict[str, Series],
        unit: str,
        *,
        higher_is_better: bool = True,
        notes: dict[str, str] | None = None,
    ) -> None:
        """Turn interleaved series into rows of ``workload``."""
        for target, s in series.items():
            self.rows.append(
                Row(
                    case=self.case,
                    workload=workload,
                    target=target,
                    unit=unit,
                    values=s.values,
                    higher_is_better=higher_is_better,
                    extra=s.extra,
                    other_cpu=s.other_cpu,
                    rerun=s.rerun,
                    disturbed=s.disturbed,
                    note=(notes or {}).get(target, ""),
                    command=self.command,
                )
            )


def timed_rate(work: Callable[[], int]) -> float:
    """Run ``work`` (returning how many items it handled); items per second."""
    start = time.perf_counter()
    count = work()
    elapsed = time.perf_counter() - start
    if count <= 0:
        raise BenchmarkError("the measure handled no items")
    return count / elapsed


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


CaseFn = Callable[[Context], None]
CASES: dict[str, tuple[CaseFn, str]] = {}


def case(name: str, description: str) -> Callable[[CaseFn], CaseFn]:
    """Register a benchmark case under ``name`` (``group.case``)."""

    def register(fn: CaseFn) -> CaseFn:
        CASES[name] = (fn, description)
        return fn

    return register


def select(patterns: list[str] | None) -> Iterator[str]:
    """Case names matching any glob in ``patterns`` (all when none), in registry order."""
    for name in CASES:
        if not patterns or any(fnmatch.fnmatchcase(name, p) for p in patterns):
            yield name
