#!/usr/bin/env python3
"""Generate the sync twins of pgque's asyncio modules from their one source.

The SDK is written once, for asyncio; each sync module is generated from its
async source (psycopg 3 does the same with its ``tools/async_to_sync.py``).
The rewrite is guided by the source's syntax tree but edits its text, so
comments, ``# fmt: skip`` blocks and layout survive:

* ``async def``, ``async with``, ``async for`` lose ``async``; ``await x``
  becomes ``x``; ``Awaitable[T]`` becomes ``T``.
* Names: ``AsyncX`` becomes ``X`` (``AsyncConnection``, ``AsyncConnectionPool``,
  ``AsyncIterator``, ``AsyncPgqueClient``...) and the names in :data:`NAMES`
  are renamed (``async_client`` to ``client``, ``_acompat`` to ``_compat``,
  ``__aenter__`` to ``__enter__``...). ``pgque._acompat`` and
  ``pgque._compat`` offer the same names for asyncio and for threads.
* Code that must differ is marked in the source: ``if ASYNC:`` ... ``else:``
  ... keeps only the ``else`` branch (``if not ASYNC:`` only its body, ``a if
  ASYNC else b`` only ``b``). ``ASYNC`` is ``True`` in ``pgque._acompat``;
  mypy treats it as always true (``always_true`` in pyproject.toml), so the
  async module is checked without its sync branches and the generated one
  without the async branches.
* Strings and comments go through :data:`PROSE` (the few phrases that
  differ), lose ``await``/``async`` before code, and get the same renames.

Each generated file starts with a header naming its source and this command,
and is passed through ``ruff check --fix`` (unused imports, import order) and
``ruff format``.

Usage::

    python tools/async_to_sync.py            # rewrite every generated module
    python tools/async_to_sync.py --check    # exit 1, naming them, if one is stale
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import io
import re
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMAND = "python tools/async_to_sync.py"

#: The async source of every generated module, and the module generated from it.
PAIRS: dict[str, str] = {
    "src/pgque/async_client.py": "src/pgque/client.py",
    "src/pgque/async_producer.py": "src/pgque/producer.py",
    "src/pgque/async_consumer.py": "src/pgque/consumer.py",
    "src/pgque/async_multi_consumer.py": "src/pgque/multi_consumer.py",
    "src/pgque/_consumer/async_settle.py": "src/pgque/_consumer/settle.py",
    "src/pgque/_consumer/async_runner.py": "src/pgque/_consumer/runner.py",
    "src/pgque/_consumer/async_slots.py": "src/pgque/_consumer/slots.py",
    "src/pgque/_consumer/async_batch.py": "src/pgque/_consumer/batch.py",
    "src/pgque/_async_executor.py": "src/pgque/_executor.py",
    "src/pgque/_async_send.py": "src/pgque/_send.py",
    "src/pgque/_consumer/async_handlers.py": "src/pgque/_consumer/handlers.py",
    "src/pgque/_consumer/async_sources.py": "src/pgque/_consumer/sources.py",
}

#: Names renamed besides the ``AsyncX`` -> ``X`` rule.
NAMES: dict[str, str] = {
    "ASYNC": "ASYNC",  # removed with the branches it guards
    "_acompat": "_compat",
    "async_batch": "batch",
    "_async_executor": "_executor",
    "_async_send": "_send",
    "async_runner": "runner",
    "async_settle": "settle",
    "async_slots": "slots",
    "async_handlers": "handlers",
    "async_sources": "sources",
    "async_client": "client",
    "async_consumer": "consumer",
    "async_multi_consumer": "multi_consumer",
    "async_producer": "producer",
    "asynccontextmanager": "contextmanager",
    "connect_async": "connect",
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
}

#: Phrases of strings and comments that differ, in the async source's words
#: (applied first); every entry must be used by some source.
PROSE: list[tuple[str, str]] = [
    ("opened on the first send or ``async with``", "opened now"),
    ("The first send opens it otherwise.", "The constructor calls it."),
    ("an async connection", "a connection"),
    ("The function (a coroutine function) is called", "The function is called"),
    ("tasks", "threads"),
]

_ASYNC_NAME = re.compile(r"Async([A-Z]\w*)")
_WORD = re.compile(r"\b[A-Za-z_]\w*\b")
_CODE_KEYWORDS = re.compile(r"\bawait\s+|\basync\s+(?=(?:def|with|for)\b)")


class GenerateError(Exception):
    """The source cannot be turned into its sync twin; the message says where and why."""


def rename(name: str) -> str:
    """The sync name of an identifier of the async source."""
    if name in NAMES:
        return NAMES[name]
    match = _ASYNC_NAME.fullmatch(name)
    return match.group(1) if match else name


_prose_used: set[str] = set()


def convert_text(text: str) -> str:
    """A string's or comment's sync wording: :data:`PROSE`, no await/async, renamed names."""
    for async_phrase, sync_phrase in PROSE:
        if async_phrase in text:
            _prose_used.add(async_phrase)
            text = text.replace(async_phrase, sync_phrase)
    text = _CODE_KEYWORDS.sub("", text)
    return _WORD.sub(lambda m: rename(m.group(0)), text)


# -- the syntax tree's part: branches and Awaitable ------------------------------------


def _is_async_flag(node: ast.expr) -> bool | None:
    """True for ``ASYNC``, False for ``not ASYNC``, None for anything else."""
    if isinstance(node, ast.Name) and node.id == "ASYNC":
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return False if _is_async_flag(node.operand) is True else None
    return None


def _char_col(line: str, byte_col: int) -> int:
    return len(line.encode("utf-8")[:byte_col].decode("utf-8"))


class _Source:
    """Source text addressed by the syntax tree's (line, byte column) positions."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = [line + "\n" for line in text.split("\n")]
        self.lines[-1] = self.lines[-1][:-1]
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, lineno: int, byte_col: int) -> int:
        return self.starts[lineno - 1] + _char_col(self.lines[lineno - 1], byte_col)

    def span(self, node: ast.AST) -> tuple[int, int]:
        start = self.offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]
        end = self.offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
        return start, end


def _replace_branch(source: _Source, node: ast.If, keep_body: bool, where: str) -> str:
    """The text with the ``if ASYNC`` statement ``node`` replaced by its sync branch."""
    lines = source.lines
    indent = len(lines[node.lineno - 1]) - len(lines[node.lineno - 1].lstrip())
    end = node.end_lineno or node.lineno
    if keep_body:  # if not ASYNC: <sync> [else: <async>]
        first = node.lineno + 1
        last = (_else_line(lines, node, indent, where) - 1) if node.orelse else end
    elif node.orelse:  # if ASYNC: <async> else: <sync>
        first = _else_line(lines, node, indent, where) + 1
        last = end
    else:  # if ASYNC: <async> -- nothing on the sync side
        first, last = 1, 0
    kept = lines[first - 1 : last]
    body_lines = [line for line in kept if line.strip()]
    if body_lines:
        deeper = min(len(line) - len(line.lstrip()) for line in body_lines) - indent
        kept = [line[deeper:] if line.strip() else line for line in kept]
    return "".join(lines[: node.lineno - 1] + kept + lines[end:])


def _else_line(lines: list[str], node: ast.If, indent: int, where: str) -> int:
    """The line number of the ``else:`` of ``node`` (an ``elif`` is refused)."""
    for number in range(node.orelse[0].lineno - 1, node.body[-1].end_lineno or 0, -1):
        text = lines[number - 1]
        stripped = text.strip()
        if len(text) - len(text.lstrip()) != indent:
            continue
        if re.fullmatch(r"else\s*:\s*(#.*)?", stripped):
            return number
    raise GenerateError(f"{where}:{node.lineno}: `if ASYNC:` needs a plain else (no elif)")


def _first_marked(tree: ast.AST) -> ast.AST | None:
    """The first ``if ASYNC`` statement or expression, in source order (outermost first)."""
    found: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.IfExp)) and _is_async_flag(node.test) is not None:
            found.append(node)
    if not found:
        return None
    return min(found, key=lambda n: (n.lineno, n.col_offset))  # type: ignore[attr-defined]


def drop_async_branches(text: str, where: str) -> str:
    """Keep only the sync side of every ``if ASYNC`` statement and expression."""
    while True:
        tree = ast.parse(text, where)
        node = _first_marked(tree)
        if node is None:
            return text
        source = _Source(text)
        flag = _is_async_flag(node.test)  # type: ignore[attr-defined]
        if isinstance(node, ast.IfExp):
            kept = node.orelse if flag else node.body
            start, end = source.span(node)
            segment = ast.get_source_segment(text, kept)
            text = text[:start] + f"({segment})" + text[end:]
        else:
            assert isinstance(node, ast.If)
            text = _replace_branch(source, node, keep_body=flag is False, where=where)


def unwrap_awaitables(text: str, where: str) -> str:
    """``Awaitable[T]`` -> ``T`` everywhere."""
    while True:
        tree = ast.parse(text, where)
        found = [
            n for n in ast.walk(tree)
            if isinstance(n, ast.Subscript)
            and ((isinstance(n.value, ast.Name) and n.value.id == "Awaitable")
                 or (isinstance(n.value, ast.Attribute) and n.value.attr == "Awaitable"))
        ]  # fmt: skip
        if not found:
            return text
        node = found[0]
        source = _Source(text)
        start, end = source.span(node)
        segment = ast.get_source_segment(text, node.slice)
        text = text[:start] + str(segment) + text[end:]


# -- the tokens' part: keywords, names, strings, comments -----------------------------


def convert_tokens(text: str) -> str:
    """Drop ``async``/``await``, rename names, convert strings and comments."""
    source = _Source(text)
    out: list[str] = []
    pos = 0
    skip_space = False
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.ENDMARKER:
            break
        start = source.starts[tok.start[0] - 1] + tok.start[1]
        end = source.starts[tok.end[0] - 1] + tok.end[1]
        between = text[pos:start]
        if not (skip_space and between.strip(" ") == ""):
            out.append(between)
        skip_space = False
        string = tok.string
        if tok.type == tokenize.NAME and string in ("async", "await"):
            string = ""
            skip_space = True
        elif tok.type == tokenize.NAME:
            string = rename(string)
        elif (
            tok.type in (tokenize.STRING, tokenize.COMMENT)
            or tokenize.tok_name.get(tok.type) == "FSTRING_MIDDLE"
        ):
            string = convert_text(string)
        out.append(string)
        pos = end
    out.append(text[pos:])
    return "".join(out)


# -- putting it together ---------------------------------------------------------------


def header(source: str) -> str:
    """The first lines of a generated module."""
    return (
        f"# Generated by tools/async_to_sync.py from {source}: do not edit.\n"
        f"# Change the source, then run `{COMMAND}`.\n"
    )


def _ruff_command() -> list[str]:
    """How to run ruff: this Python's, else the one on PATH, else the clone's .venv's."""
    if importlib.util.find_spec("ruff") is not None:
        return [sys.executable, "-m", "ruff"]
    for found in (shutil.which("ruff"), ROOT / ".venv" / "bin" / "ruff"):
        if found is not None and Path(found).is_file():
            return [str(found)]
    raise GenerateError("ruff is needed to format the generated modules: pip install -e '.[dev]'")


def _ruff(args: list[str], text: str, target: str) -> str:
    command = [*_ruff_command(), *args, "--stdin-filename", target, "-"]
    done = subprocess.run(
        command, input=text, capture_output=True, text=True, cwd=ROOT, check=False
    )
    if done.returncode != 0:
        raise GenerateError(f"{target}: `ruff {' '.join(args)}` failed:\n{done.stderr}")
    return done.stdout


def generate(source_text: str, source: str, target: str) -> str:
    """The sync module generated from the async source's text."""
    text = drop_async_branches(source_text, source)
    text = unwrap_awaitables(text, source)
    text = convert_tokens(text)
    text = header(source) + text
    try:
        ast.parse(text, target)
    except SyntaxError as exc:
        raise GenerateError(f"{target} (from {source}) would not parse: {exc}") from None
    text = _ruff(["check", "--fix", "--exit-zero", "--quiet"], text, target)
    return _ruff(["format", "--quiet"], text, target)


def orphans() -> list[str]:
    """Modules under src/ that carry the generated header but are no pair's target (a
    source renamed or removed without its generated twin)."""
    first = header("").split(" from ", 1)[0]
    targets = set(PAIRS.values())
    found = []
    for path in sorted((ROOT / "src").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        with path.open(encoding="utf-8") as module:
            if module.readline().startswith(first) and relative not in targets:
                found.append(relative)
    return found


def run(check: bool, only: list[str]) -> int:
    """Generate (or check) the pairs; the exit status."""
    left = orphans()
    if left:
        print("generated modules whose source is gone (delete them, or add the pair to PAIRS):",
              *left, sep="\n  ")  # fmt: skip
        return 1
    stale: list[str] = []
    _prose_used.clear()
    for source, target in PAIRS.items():
        if only and source not in only and target not in only:
            continue
        wanted = generate((ROOT / source).read_text(encoding="utf-8"), source, target)
        path = ROOT / target
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == wanted:
            continue
        if check:
            stale.append(f"{target} (from {source})")
        else:
            path.write_text(wanted, encoding="utf-8")
            print(f"wrote {target}")
    unused = [phrase for phrase, _ in PROSE if phrase not in _prose_used]
    if unused and not only:
        raise GenerateError(f"PROSE phrases no source uses (remove them): {unused}")
    if stale:
        print("stale generated modules, run `" + COMMAND + "`:", *stale, sep="\n  ")
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a module is stale")
    parser.add_argument("files", nargs="*", help="only these sources or targets")
    args = parser.parse_args(argv)
    try:
        return run(args.check, [str(Path(f)) for f in args.files])
    except GenerateError as exc:
        print(f"async_to_sync: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
