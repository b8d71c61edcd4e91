#!/usr/bin/env python3
"""Write the consumers' options from their one declaration, ``ConsumerOptions``.

``pgque._consumer.options.ConsumerOptions`` declares every option of a consumer:
its name, type, default, check and description (the field's ``metadata["doc"]``).
This tool writes what repeats them, each between ``generated`` markers:

* the keyword arguments of ``AsyncConsumer.__init__`` (``src/pgque/async_consumer.py``),
* their ``Args`` entries in the class docstring (every entry after ``dsn``),
* the attributes of ``ConsumerSettings`` (``src/pgque/_consumer/options.py``).

``tools/async_to_sync.py`` then carries the first two into the sync ``Consumer``.

Usage::

    python tools/consumer_options.py            # rewrite them
    python tools/consumer_options.py --check    # exit 1, naming the file, if one is stale
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
import textwrap
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
CONSUMER = ROOT / "src" / "pgque" / "async_consumer.py"
OPTIONS = ROOT / "src" / "pgque" / "_consumer" / "options.py"
BEGIN = "# -- generated from ConsumerOptions by tools/consumer_options.py: do not edit --"
END = "# -- end of generated --"
#: The docstring's ``Args`` entries of the options run from this one to the docstring's end.
FIRST_ENTRY = "        queue: "


class Option(NamedTuple):
    """One field of ``ConsumerOptions`` as written in its source."""

    name: str
    type: str
    default: str | None  # the expression, None without a default
    doc: str


def declaration() -> list[Option]:
    """The fields of ``ConsumerOptions``, read from its source (not imported: the package
    does not import while the constructor's arguments are being written)."""
    tree = ast.parse(OPTIONS.read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ConsumerOptions")
    options = []
    for node in cls.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        call = node.value
        keywords = {k.arg: k.value for k in call.keywords} if isinstance(call, ast.Call) else {}
        meta = keywords.get("metadata")
        if not (isinstance(meta, ast.Call) and meta.args):
            raise SystemExit(
                f"ConsumerOptions.{node.target.id}: declare it as"
                ' field(..., metadata=_doc("what it does"))'
            )
        default = keywords.get("default")
        options.append(
            Option(
                name=node.target.id,
                type=ast.unparse(node.annotation),
                default=None if default is None else _expression(default),
                doc=ast.literal_eval(meta.args[0]),
            )
        )
    return options


def _expression(node: ast.expr) -> str:
    """A default as ruff formats it (strings in double quotes)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and '"' not in node.value:
        return f'"{node.value}"'
    return ast.unparse(node)


def parameters(fields: list[Option]) -> list[str]:
    """The keyword arguments of the constructor, one line each."""
    return [
        f"        {f.name}: {f.type}" + ("," if f.default is None else f" = {f.default},")
        for f in fields
    ]


def attributes(fields: list[Option]) -> list[str]:
    """The attributes of ``ConsumerSettings``, one line each."""
    return [f"    {f.name} = Option[{f.type}]()" for f in fields]


def args_entries(fields: list[Option]) -> list[str]:
    """The docstring's ``Args`` entries of the options (Google style, wrapped)."""
    lines: list[str] = []
    for f in fields:
        lines += textwrap.wrap(
            f"{f.name}: {f.doc}",
            width=92,
            initial_indent=" " * 8,
            subsequent_indent=" " * 12,
            break_on_hyphens=False,
        )
    return lines


def _between_markers(text: str, lines: list[str], where: Path) -> str:
    """``text`` with the lines between :data:`BEGIN` and :data:`END` replaced."""
    pattern = re.compile(rf"(?m)^( *){re.escape(BEGIN)}\n.*?^ *{re.escape(END)}\n", re.S)
    match = pattern.search(text)
    if match is None:
        raise SystemExit(f"{where}: no {BEGIN!r} ... {END!r} block")
    indent = match.group(1)
    block = f"{indent}{BEGIN}\n" + "".join(f"{line}\n" for line in lines) + f"{indent}{END}\n"
    return text[: match.start()] + block + text[match.end() :]


def _docstring_args(text: str, lines: list[str], where: Path) -> str:
    """``text`` with the class docstring's entries from ``queue`` on replaced."""
    start = text.find(f"\n{FIRST_ENTRY}")
    end = text.find('\n    """\n', start)
    if start < 0 or end < 0:
        raise SystemExit(f"{where}: no Args entry {FIRST_ENTRY.strip()!r} in the class docstring")
    return text[: start + 1] + "\n".join(lines) + text[end:]


def render() -> dict[Path, str]:
    """Every file the tool writes, with its new text."""
    fields = declaration()
    consumer = CONSUMER.read_text()
    consumer = _between_markers(consumer, parameters(fields), CONSUMER)
    consumer = _docstring_args(consumer, args_entries(fields), CONSUMER)
    options = _between_markers(OPTIONS.read_text(), attributes(fields), OPTIONS)
    return {CONSUMER: consumer, OPTIONS: options}


def main(argv: list[str] | None = None) -> int:
    """Rewrite the files, or with ``--check`` name the stale ones (exit 1)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a file is stale")
    check = parser.parse_args(argv).check
    stale = [path for path, text in render().items() if path.read_text() != text]
    if check:
        for path in stale:
            print(f"{path.relative_to(ROOT)} is stale: run python tools/consumer_options.py")
        return 1 if stale else 0
    for path, text in render().items():
        if path in stale:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
