"""tools/build_sql.py: pgque.sql is the faithful, up-to-date inlining of the sources."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import pgque
from pgque import installer

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "build_sql.py"
PGQUE_SQL = ROOT / "src" / "pgque" / "sql" / "pgque.sql"


def _load_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_sql", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


build_sql = _load_tool()


def run_tool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(TOOL), *map(str, args)], capture_output=True, text=True, check=False
    )


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode())
    return path


def test_committed_file_equals_fresh_build() -> None:
    committed, fresh = PGQUE_SQL.read_text(encoding="utf-8"), build_sql.build()
    if committed != fresh:
        summary = build_sql._diff_summary(committed, fresh, PGQUE_SQL)
        pytest.fail(f"pgque.sql is stale; run: python tools/build_sql.py\n{summary}")
    result = run_tool("--check")
    assert result.returncode == 0, result.stderr


def test_packaged_sql_is_the_built_file() -> None:
    assert installer.sql_text() == PGQUE_SQL.read_text(encoding="utf-8")


def test_output_has_no_meta_commands_and_names_the_version() -> None:
    text = PGQUE_SQL.read_text(encoding="utf-8")
    offending = [line for line in text.splitlines() if line.lstrip().startswith("\\")]
    assert offending == []
    assert f"pgque {pgque.__version__}" in text.splitlines()[0]
    assert "python tools/build_sql.py" in text
    assert text.endswith(";\n") and not text.endswith("\n\n")
    assert "-- file: install.sql" in text


def test_nested_includes_are_inlined_in_order(tmp_path: Path) -> None:
    write(tmp_path / "a.sql", "select 1;\r\n\r\n\r\n")
    write(tmp_path / "sub" / "b.sql", "-- b\n\\ir c.sql\nselect 2;\n")
    write(tmp_path / "sub" / "c.sql", "select 3;")
    manifest = write(tmp_path / "install.sql", "-- top\n\\ir a.sql\n\\ir 'sub/b.sql'\n")
    output = tmp_path / "out.sql"

    result = run_tool("--manifest", manifest, "--output", output)

    assert result.returncode == 0, result.stderr
    body = output.read_bytes().decode()
    assert "\r" not in body and body.endswith("select 2;\n") and not body.endswith("\n\n")
    lines = body.splitlines()
    markers = [line for line in lines if line.startswith("-- file: ")]
    assert markers == [
        "-- file: install.sql",
        "-- file: a.sql",
        "-- file: sub/b.sql",
        "-- file: sub/c.sql",
        "-- file: sub/b.sql (continued)",
    ]
    assert [line for line in lines if line.startswith("select")] == [
        "select 1;",
        "select 3;",
        "select 2;",
    ]
    assert not any(line.startswith("\\") for line in lines)
    # Deterministic: a second build changes nothing.
    assert run_tool("--manifest", manifest, "--output", output, "--check").returncode == 0


@pytest.mark.parametrize(
    "line",
    ["\\set ON_ERROR_STOP 1", "\\i other.sql", "  \\connect postgres", "\\echo hi", "\\gset"],
)
def test_other_meta_commands_are_refused(tmp_path: Path, line: str) -> None:
    write(tmp_path / "ok.sql", "select 1;\n")
    write(tmp_path / "bad.sql", f"-- comment\nselect 1;\n{line}\n")
    manifest = write(tmp_path / "install.sql", "\\ir ok.sql\n\\ir bad.sql\n")
    output = tmp_path / "out.sql"

    result = run_tool("--manifest", manifest, "--output", output)

    assert result.returncode != 0
    assert "bad.sql:3" in result.stderr
    assert line.strip() in result.stderr
    assert not output.exists()


@pytest.mark.parametrize(
    ("files", "message"),
    [
        (
            {"install.sql": "\\ir missing.sql\n"},
            "install.sql:1: included file missing.sql not found",
        ),
        (
            {"install.sql": "\\ir a.sql\n", "a.sql": "\\ir a.sql\n"},
            "a.sql:1: a.sql includes itself",
        ),
        (
            {"install.sql": "\\ir a.sql\n\\ir a.sql\n", "a.sql": ""},
            "install.sql:2: a.sql is included twice",
        ),
        ({"install.sql": "\\ir ../x.sql\n"}, "is outside"),
    ],
)
def test_bad_includes_are_refused(tmp_path: Path, files: dict[str, str], message: str) -> None:
    for name, text in files.items():
        write(tmp_path / "sql" / name, text)
    write(tmp_path / "x.sql", "select 1;\n")

    result = run_tool("--manifest", tmp_path / "sql" / "install.sql", "--output", tmp_path / "o")

    assert result.returncode != 0
    assert message in result.stderr


def test_check_reports_a_stale_file(tmp_path: Path) -> None:
    manifest = write(tmp_path / "install.sql", "\\ir a.sql\n")
    write(tmp_path / "a.sql", "select 1;\n")
    output = tmp_path / "out.sql"
    assert run_tool("--manifest", manifest, "--output", output).returncode == 0
    write(tmp_path / "a.sql", "select 2;\n")

    result = run_tool("--manifest", manifest, "--output", output, "--check")

    assert result.returncode == 1
    assert "out of date" in result.stderr
    assert "-select 1;" in result.stderr and "+select 2;" in result.stderr
    assert "select 1;" in output.read_text()  # --check never writes
