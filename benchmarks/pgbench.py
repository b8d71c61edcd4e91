"""Runs Debian's ``pgbench`` with a one-statement script; transactions per second."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

from psycopg.conninfo import conninfo_to_dict

from .core import BenchmarkError
from .machine import PG15_BIN


def pgbench_tps(dsn: str, statement: str, *, clients: int, seconds: float, sync: bool) -> float:
    """Run ``statement`` as each transaction from ``clients`` clients; the measured tps.

    ``sync`` sets the sessions' ``synchronous_commit`` (through ``PGOPTIONS``).
    """
    params = conninfo_to_dict(dsn)
    with tempfile.NamedTemporaryFile("w", suffix=".sql", prefix="pgque-bench-") as script:
        script.write(statement.rstrip(";") + ";\n")
        script.flush()
        env = {**os.environ, "PGOPTIONS": f"-c synchronous_commit={'on' if sync else 'off'}"}
        done = subprocess.run(
            [str(PG15_BIN / "pgbench"), "-n", "-c", str(clients), "-j", str(clients),
             "-T", str(max(1, round(seconds))), "-f", script.name,
             "-h", str(params["host"]), "-p", str(params.get("port", 5432)),
             "-U", str(params["user"]), str(params["dbname"])],
            capture_output=True, text=True, env=env, timeout=seconds + 120,
        )  # fmt: skip
    found = re.search(r"tps = ([\d.]+) \(without initial connection time\)", done.stdout)
    if done.returncode != 0 or found is None:
        raise BenchmarkError(f"pgbench failed ({statement!r}): {done.stderr.strip()[-500:]}")
    return float(found.group(1))


def server_file(directory: Path, name: str, lines: list[str]) -> Path:
    """Write ``lines`` to a file the server's OS user can read (for server-side COPY)."""
    path = directory / name
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o644)
    return path
