#!/usr/bin/env python3
"""Build src/pgque/sql/pgque.sql, the single install file, from the SQL sources.

The manifest ``src/pgque/sql/install.sql`` lists the source files with psql
``\\ir path.sql`` lines (nested manifests allowed). This tool inlines them in
order, each behind a ``-- file: <path>`` marker, so that the Python installer
and ``psql -f pgque.sql`` run the very same text. Any other psql
meta-command (a line starting with a backslash) is refused: the server would
not understand it.

Usage::

    python tools/build_sql.py            # write src/pgque/sql/pgque.sql
    python tools/build_sql.py --check    # exit 1 if the committed file is stale
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SQL_DIR = ROOT / "src" / "pgque" / "sql"
MANIFEST = SQL_DIR / "install.sql"
OUTPUT = SQL_DIR / "pgque.sql"
VERSION_FILE = ROOT / "src" / "pgque" / "_version.py"
REGENERATE = "python tools/build_sql.py"

_INCLUDE = re.compile(r"^\\ir\s+(?:'(?P<quoted>[^']+)'|(?P<bare>\S+))\s*$")
_VERSION = re.compile(r"""^__version__\s*=\s*["']([^"']+)["']""", re.MULTILINE)


class BuildError(Exception):
    """The sources cannot be built into one file; the message says where and why."""


def read_version(version_file: Path = VERSION_FILE) -> str:
    """Return ``__version__`` from ``_version.py`` without importing the package."""
    match = _VERSION.search(version_file.read_text(encoding="utf-8"))
    if match is None:
        raise BuildError(f'{version_file}: no __version__ = "..." line')
    return match.group(1)


def _read_source(path: Path) -> list[str]:
    """Read a source file as lines with normalized line endings and no trailing blanks."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BuildError(f"{path}: not valid UTF-8 ({exc})") from exc
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def _display(path: Path, base: Path) -> str:
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return path.as_posix()


def build(manifest: Path = MANIFEST, version: str | None = None) -> str:
    """Inline ``manifest`` and the files it includes; return the install script text.

    Paths in ``-- file:`` markers are relative to the manifest's directory,
    which every included file must be inside of.

    Raises:
        BuildError: A meta-command other than ``\\ir``, a missing file, a file
            outside the manifest's directory, or a file included twice.
    """
    manifest = manifest.resolve()
    base = manifest.parent
    version = read_version() if version is None else version
    out: list[str] = [
        f"-- pgque {version}: install script. GENERATED FILE, DO NOT EDIT.",
        f"-- Built from {_display(manifest, ROOT)} and the files it includes;",
        f"-- regenerate with: {REGENERATE}",
        "-- Safe to run again: installs or upgrades in one transaction.",
    ]
    seen: set[Path] = set()

    def inline(path: Path, stack: tuple[Path, ...]) -> None:
        seen.add(path)
        name = _display(path, base)
        out.extend(("", f"-- file: {name}"))
        continued = False
        for number, line in enumerate(_read_source(path), start=1):
            where = f"{name}:{number}"
            if not line.lstrip().startswith("\\"):
                if continued and line.strip():
                    out.extend(("", f"-- file: {name} (continued)"))
                    continued = False
                out.append(line)
                continue
            match = _INCLUDE.match(line.strip())
            if match is None:
                raise BuildError(
                    f"{where}: psql meta-command {line.strip()!r} is not allowed;"
                    " the sources may only use '\\ir relative/path.sql'"
                )
            target = (path.parent / (match["quoted"] or match["bare"])).resolve()
            if target in stack or target == path:
                raise BuildError(f"{where}: {_display(target, base)} includes itself")
            if target in seen:
                raise BuildError(f"{where}: {_display(target, base)} is included twice")
            if not target.is_relative_to(base):
                raise BuildError(f"{where}: {target} is outside {base}")
            if not target.is_file():
                raise BuildError(f"{where}: included file {_display(target, base)} not found")
            inline(target, (*stack, path))
            continued = True

    inline(manifest, ())
    return "\n".join(out).rstrip("\n") + "\n"


def _diff_summary(old: str, new: str, path: Path) -> str:
    diff = list(
        difflib.unified_diff(
            old.splitlines(), new.splitlines(), f"{path} (committed)", f"{path} (fresh build)", n=1
        )
    )
    added = sum(1 for d in diff if d.startswith("+") and not d.startswith("+++"))
    removed = sum(1 for d in diff if d.startswith("-") and not d.startswith("---"))
    shown = diff[:60]
    more = [f"... ({len(diff) - len(shown)} more diff lines)"] if len(diff) > len(shown) else []
    return "\n".join([f"{added} line(s) added, {removed} removed:", *shown, *more])


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 if OUTPUT is out of date")
    parser.add_argument("--manifest", type=Path, default=MANIFEST, help="default: %(default)s")
    parser.add_argument("--output", type=Path, default=OUTPUT, help="default: %(default)s")
    args = parser.parse_args(argv)
    try:
        text = build(args.manifest)
    except (BuildError, OSError) as exc:
        print(f"build_sql: error: {exc}", file=sys.stderr)
        return 2
    output: Path = args.output
    if args.check:
        old = output.read_text(encoding="utf-8") if output.is_file() else ""
        if old == text:
            print(f"build_sql: {output} is up to date")
            return 0
        print(f"build_sql: {output} is out of date; run: {REGENERATE}", file=sys.stderr)
        print(_diff_summary(old, text, output), file=sys.stderr)
        return 1
    if not output.is_file() or output.read_text(encoding="utf-8") != text:
        output.write_text(text, encoding="utf-8", newline="\n")
        print(f"build_sql: wrote {output}")
    else:
        print(f"build_sql: {output} unchanged")
    return 0


if __name__ == "__main__":
    sys.exit(main())
