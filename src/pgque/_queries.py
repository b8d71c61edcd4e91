"""The client's SQL statements, read once from ``pgque/sql/queries.sql``."""

from __future__ import annotations

import re
import sys
from functools import cache
from importlib import resources
from typing import cast

if sys.version_info >= (3, 11):
    from typing import LiteralString
else:  # pragma: no cover - Python 3.10
    LiteralString = str

_BLOCK_START = re.compile(r"^-- name: (\w+)\s*$")


@cache
def _load() -> dict[str, str]:
    text = (resources.files("pgque") / "sql" / "queries.sql").read_text(encoding="utf-8")
    queries: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        match = _BLOCK_START.match(line)
        if match:
            current = queries.setdefault(match.group(1), [])
        elif current is not None and line.strip() and not line.startswith("--"):
            current.append(line)
    return {name: "\n".join(lines) for name, lines in queries.items()}


def query(name: str) -> LiteralString:
    """The statement named ``name`` in queries.sql (a plain ``str`` with ``%s`` placeholders)."""
    # The file is part of the package, not user input: it is as literal as code.
    return cast("LiteralString", _load()[name])  # type: ignore[redundant-cast, unused-ignore]
