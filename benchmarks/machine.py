"""What the suite needs on the machine, and what it records about it.

:func:`ensure_requirements` installs what is missing: Debian's PostgreSQL 15
with PgQ 3.5 and the JDBC driver (apt), and the ``bench`` extra's Python
packages (pip). :func:`describe` records the machine: CPU, memory, kernel,
Python, the disk's ``fdatasync`` cost measured with ``pg_test_fsync``.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import psutil

from .core import BenchmarkError

DEBIAN_PACKAGES = (
    "postgresql-15", "postgresql-15-pgq3", "libpostgresql-jdbc-java", "openjdk-17-jre-headless",
)  # fmt: skip
"""Debian packages the suite needs (PgQ lives in PostgreSQL 15; JDBC for Spark's baseline)."""

JDBC_JAR = Path("/usr/share/java/postgresql.jar")
PG15_BIN = Path("/usr/lib/postgresql/15/bin")


def _missing_debian() -> list[str]:
    missing = []
    for package in DEBIAN_PACKAGES:
        status = subprocess.run(
            ["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True
        )
        if "install ok installed" not in status.stdout:
            missing.append(package)
    return missing


def ensure_requirements(*, spark: bool) -> None:
    """Install missing Debian packages, or fail naming them."""
    missing = _missing_debian()
    if not spark:
        missing = [p for p in missing if p not in ("libpostgresql-jdbc-java",
                                                   "openjdk-17-jre-headless")]  # fmt: skip
    if missing:
        if shutil.which("apt-get") is None:
            raise BenchmarkError(f"missing Debian packages {', '.join(missing)} and no apt-get")
        sudo = [] if os.geteuid() == 0 else ["sudo"]
        print(f"installing Debian packages: {' '.join(missing)}", file=sys.stderr)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for command in (
            ["apt-get", "update", "-q"],
            ["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing],
        ):
            done = subprocess.run([*sudo, *command], env=env)  # fmt: skip
            if done.returncode != 0:
                raise BenchmarkError(
                    f"could not install Debian packages {', '.join(missing)}: "
                    f"{' '.join(command)} exited {done.returncode}"
                )


def fdatasync_cost(directory: Path) -> dict[str, float]:
    """The disk's ``fdatasync`` rate under ``directory``, from ``pg_test_fsync``."""
    with tempfile.TemporaryDirectory(dir=directory, prefix="pgque-fsync-") as probe:
        out = subprocess.run(
            [str(PG15_BIN / "pg_test_fsync"), "-s", "1", "-f", f"{probe}/probe"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    match = re.search(r"fdatasync\s+([\d.,]+) ops/sec\s+([\d.,]+) usecs/op", out.stdout)
    if match is None:
        return {}
    return {
        "ops_per_s": float(match.group(1).replace(",", "")),
        "usecs_per_op": float(match.group(2).replace(",", "")),
    }


def describe(data_dir: Path) -> dict[str, Any]:
    """The machine the figures come from."""
    model = ""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        found = re.search(r"model name\s*:\s*(.+)", cpuinfo.read_text())
        model = found.group(1).strip() if found else ""
    return {
        "cpu": model or platform.processor(),
        "cores": psutil.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "load_average": list(os.getloadavg()),
        "fdatasync": fdatasync_cost(data_dir),
    }
