"""The documentation's runnable code and the CLI reference stay true.

A fenced ```python block preceded by the line ``<!-- runnable -->`` (in
``docs/*.md`` or ``README.md``) is run as a script against a fresh database
with pgque installed, its DSN in ``PGQUE_DSN``; it must exit 0. The marker is
an HTML comment, so readers do not see it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MARKER = "<!-- runnable -->"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def runnable_blocks() -> list[tuple[str, str]]:
    """(``file:line``, code) of every block marked runnable."""
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        for match in _BLOCK.finditer(text):
            before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            if before.strip() == MARKER:
                line = text.count("\n", 0, match.start()) + 2
                found.append((f"{path.relative_to(ROOT)}:{line}", match.group(1)))
    return found


BLOCKS = runnable_blocks()


def test_the_docs_have_runnable_blocks() -> None:
    where = {name.split(":")[0] for name, _ in BLOCKS}
    assert {"README.md", "docs/getting-started.md", "docs/python-api.md"} <= where


@pytest.mark.parametrize("code", [code for _, code in BLOCKS], ids=[n for n, _ in BLOCKS])
def test_runnable_block(code: str, db: str, tmp_path: Path) -> None:
    script = tmp_path / "block.py"
    script.write_text(code, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env={**os.environ, "PGQUE_DSN": db},
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"


def test_cli_reference_documents_every_command() -> None:
    from pgque.cli import cli

    reference = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    headings = re.findall(r"^### (.+)$", reference, re.MULTILINE)
    documented = {name.strip() for heading in headings for name in heading.split(",")}
    assert set(cli.commands) <= documented, set(cli.commands) - documented


def test_cli_reference_shows_a_captured_status() -> None:
    reference = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    capture = reference.split("$ pgque status\n", 1)[1].split("```", 1)[0]
    lines = capture.splitlines()
    assert lines[0].startswith("pgque ") and "PostgreSQL" in lines[0]
    for heading in ("System:", "Queues:", "Consumers:", "Health:"):
        assert any(line.startswith(heading) for line in lines), heading
