"""docs/first-hour.md runs as written (issue 34): its ``console`` sessions and Python
blocks marked ``<!-- first-hour -->``, in order, against one fresh database.

A ``$ pgque ...`` line runs the real command; the lines under it are its stdout,
where ``...`` stands for any text in a line, and a line of ``...`` alone for any
number of lines. Runs of spaces count as one (table columns). Each command must
exit 0 with nothing on stderr. A Python block runs as a script with
``PGQUE_DSN`` set, and must exit 0.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from cli_helpers import run

PAGE = Path(__file__).resolve().parents[2] / "docs" / "first-hour.md"
_BLOCK = re.compile(r"^<!-- first-hour -->\n```(console|python)\n(.*?)^```", re.S | re.M)


def steps() -> list[tuple[str, str]]:
    return [(m[1], m[2]) for m in _BLOCK.finditer(PAGE.read_text(encoding="utf-8"))]


def sessions(text: str) -> list[tuple[str, list[str]]]:
    """A console block as (command, expected lines) pairs."""
    found: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            found.append((line[2:], []))
        else:
            found[-1][1].append(line)
    return found


def _squeeze(line: str) -> str:
    return " ".join(line.split())


def matches(expected: list[str], actual: str) -> bool:
    parts = []
    for line in expected:
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            pieces = [re.escape(p) for p in _squeeze(line).split("...")]
            parts.append(".*".join(pieces) + r"\n")
    text = "".join(_squeeze(line) + "\n" for line in actual.splitlines())
    return re.fullmatch("".join(parts), text, re.S) is not None


def test_the_first_hour_page_runs_as_written(empty_db: str, tmp_path: Path) -> None:
    # Installed as the reader of the page would (`pgque install`).
    assert run("install", dsn=empty_db).code == 0
    found = steps()
    assert [kind for kind, _ in found].count("python") == 2 and len(found) >= 6
    for i, (kind, text) in enumerate(found):
        if kind == "python":
            script = tmp_path / f"step{i}.py"
            script.write_text(text, encoding="utf-8")
            done = subprocess.run(
                [sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                env={**os.environ, "PGQUE_DSN": empty_db}, cwd=tmp_path,
            )  # fmt: skip
            assert done.returncode == 0, f"step {i}:\n{done.stdout}\n{done.stderr}"
            continue
        for command, expected in sessions(text):
            args = shlex.split(command)
            assert args[0] == "pgque", command
            done = run(*args[1:], dsn=empty_db)
            assert done.code == 0 and done.stderr == "", f"{command}\n{done.stderr}"
            assert matches(expected, done.stdout), (
                f"{command}\n--- page:\n" + "\n".join(expected) + f"\n--- actual:\n{done.stdout}"
            )
