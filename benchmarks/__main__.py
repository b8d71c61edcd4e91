"""``python -m benchmarks run [--quick] [--only GLOB] [--json OUT]``, ``list``, ``report``.

``run`` measures the selected cases (all by default) and prints each case's
rows, the time it took and the targets; ``--json`` writes everything to a
file that ``report`` turns into ``docs/performance.md`` and its charts.
The suite's Python packages are installed first when missing.
"""

from __future__ import annotations

import sys

from .requirements import ensure_python_packages


def main() -> int:
    """Install what is missing, then hand over to :mod:`benchmarks.runner`."""
    error = ensure_python_packages()
    if error is not None:
        print(f"benchmarks: {error}", file=sys.stderr)
        return 2
    from .runner import main as run_main

    return run_main(sys.argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
