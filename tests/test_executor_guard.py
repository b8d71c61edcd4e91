"""The executor is the one seam to the database (docs/development.md, "The executor").

Every statement of the package runs through ``pgque/_async_executor.py`` (and
its generated twin ``_executor.py``), which maps driver errors in one place.
This test reads the package's source and fails on a call of ``execute``,
``executemany`` or ``copy`` anywhere else, and on any module but
``errors.py`` reading the error table ``_BY_CODE``. The few exceptions are
listed here with their reason; the list may shrink, never grow silently.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "pgque"
EXECUTOR = {"_async_executor.py", "_executor.py"}
CALLS = {"execute", "executemany", "copy"}

#: Modules that may run statements themselves, and why.
ALLOWED: dict[str, str] = {
    # The install script and the version probe run where pgque may not exist
    # yet; the installer maps failures to PgqueInstallError itself.
    "installer.py": "the install script",
    # ADBC's cursor (another driver, Arrow's binary COPY); mapped by
    # spark/_adbc.py through pgque.errors.from_error_fields.
    "spark/_read.py": "ADBC",
}


def offenders() -> list[str]:
    """``module:line call`` for every execute/copy call outside the executor and the list."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC).as_posix()
        if relative in EXECUTOR or relative in ALLOWED:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), relative)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in CALLS
            ):
                found.append(f"{relative}:{node.lineno} .{node.func.attr}()")
            if (
                isinstance(node, ast.Name | ast.alias)
                and "_BY_CODE"
                in (
                    getattr(node, "id", None),
                    getattr(node, "name", None),
                )
                and relative != "errors.py"
            ):
                found.append(f"{relative}:{getattr(node, 'lineno', 0)} _BY_CODE")
    return found


def test_no_module_runs_statements_but_the_executor() -> None:
    assert offenders() == []


def test_every_allowed_module_still_needs_it() -> None:
    for relative in ALLOWED:
        text = (SRC / relative).read_text(encoding="utf-8")
        assert any(f".{call}(" in text for call in CALLS), f"{relative} no longer needs ALLOWED"
