"""The package's layers hold (docs/development.md, "Layers").

``lint-imports`` checks the contracts in pyproject.toml: no import cycle (type-only
imports included), the front ends in layers, the SDK importing no front end, the
core importing no producer or consumer. The SDK contract lists its modules by
name (import-linter's wildcards cannot say "every private module"), so this test
also fails when a new top-level module is in neither the SDK's list nor the front
ends: the contract cannot fall behind the package.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # import-linter depends on tomli there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "pgque"


def contracts() -> dict[str, dict[str, object]]:
    """The import-linter contracts of pyproject.toml, by name."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return {c["name"]: c for c in config["contracts"]}


def test_every_top_level_module_is_in_a_layer() -> None:
    sdk = next(c for name, c in contracts().items() if name.startswith("The SDK never"))
    listed = set(sdk["source_modules"])  # type: ignore[arg-type]
    front_ends = set(sdk["forbidden_modules"])  # type: ignore[arg-type]
    modules = {f"pgque.{p.stem}" for p in SRC.glob("*.py") if p.stem != "__init__"}
    modules |= {f"pgque.{p.parent.name}" for p in SRC.glob("*/__init__.py")}
    unplaced = sorted(modules - listed - front_ends)
    assert not unplaced, (
        f"modules in no layer: {unplaced}; add each to the SDK contract's source_modules"
        " in pyproject.toml, or to the front ends"
    )
    gone = sorted(m for m in listed - modules if m != "pgque")
    assert not gone, f"the SDK contract lists modules that do not exist: {gone}"


def test_lint_imports_keeps_every_contract() -> None:
    command = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert command, "lint-imports is missing: pip install -e '.[dev]' installs import-linter"
    result = subprocess.run(
        [command, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout
