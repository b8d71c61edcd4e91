"""Importing an optional part without its extra says which extra to install (issue 34,
item 8), as ``pgque.spark`` does: never a bare ``ModuleNotFoundError``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def hide(tmp_path: Path, *packages: str) -> dict[str, str]:
    """An environment in which importing ``packages`` fails as if they were not installed."""
    for name in packages:
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(
            f"raise ModuleNotFoundError(\"No module named '{name}'\", name={name!r})\n"
        )
    return os.environ | {"PYTHONPATH": str(tmp_path)}


@pytest.mark.parametrize(
    ("module", "hidden", "extra"),
    [
        ("pgque.web", ("starlette",), "web"),
        ("pgque.web", ("jinja2",), "web"),
        ("pgque.web", ("uvicorn",), "web"),
        ("pgque.sqlalchemy", ("sqlalchemy",), "sqlalchemy"),
        ("pgque.spark", ("pyspark",), "spark"),
    ],
)
def test_a_missing_extra_is_named(
    tmp_path: Path, module: str, hidden: tuple[str, ...], extra: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", f"import {module}"],
        capture_output=True, text=True, env=hide(tmp_path, *hidden), timeout=120,
    )  # fmt: skip
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: "), done.stderr
    assert f"pip install '.[{extra}]'" in last, last
    assert hidden[0] in last, last
