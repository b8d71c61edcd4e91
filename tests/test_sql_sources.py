"""Static checks on the SQL sources: PostgreSQL 14 compatibility and the version stamp."""

from __future__ import annotations

import re
from pathlib import Path

import pgque

SQL_DIR = Path(__file__).resolve().parent.parent / "src" / "pgque" / "sql"

# Syntax and functions newer than PostgreSQL 14. Only 15 and 18 run here, so
# 14 holds by construction: none of these may appear in the install sources.
NEWER_THAN_14 = {
    r"\bmerge\s+into\b": "MERGE (15)",
    r"\bnulls\s+not\s+distinct\b": "NULLS NOT DISTINCT (15)",
    r"\bpg_input_is_valid\b": "pg_input_is_valid (16)",
    r"\bpg_input_error_info\b": "pg_input_error_info (16)",
    r"\bsecurity_invoker\b": "security_invoker views (15)",
    r"\bany_value\b": "ANY_VALUE (16)",
    r"\bjson_(arrayagg|objectagg|scalar|serialize|exists|query|value|table)\b": "SQL/JSON (16+)",
    r"\bis\s+(not\s+)?json\b": "IS JSON (16)",
    r"\bsystem_user\b": "SYSTEM_USER (16)",
    r"\bpg_stat_io\b": "pg_stat_io (16)",
}


def sources() -> list[Path]:
    return sorted(p for p in SQL_DIR.rglob("*.sql") if p.name != "pgque.sql")


def strip_comments(text: str) -> str:
    return re.sub(r"--[^\n]*", "", text)


def test_sources_use_nothing_newer_than_postgresql_14() -> None:
    found = [
        f"{path.relative_to(SQL_DIR)}: {what}"
        for path in sources()
        for pattern, what in NEWER_THAN_14.items()
        if re.search(pattern, strip_comments(path.read_text()), re.IGNORECASE)
    ]
    assert found == []


def test_checker_catches_a_newer_construct() -> None:
    text = "insert into t select 1; merge into t using s on true when matched then do nothing;"
    assert any(re.search(p, text, re.IGNORECASE) for p in NEWER_THAN_14)


def test_sql_version_matches_package_version() -> None:
    util = (SQL_DIR / "functions" / "util.sql").read_text()
    match = re.search(r"select '([^']+)'::text", util)
    assert match is not None
    assert match.group(1) == pgque.__version__


def top_level(text: str) -> str:
    """The SQL outside routine bodies and DO blocks (dollar-quoted) and comments."""
    text = re.sub(r"(\$[a-z_]*\$).*?\1", "", text, flags=re.DOTALL)
    return strip_comments(text)


def test_each_routine_name_lives_in_one_file() -> None:
    files: dict[str, set[str]] = {}
    for path in sources():
        for name in re.findall(
            r"create\s+or\s+replace\s+(?:function|procedure)\s+pgque\.(\w+)\s*\(",
            path.read_text(),
            re.IGNORECASE,
        ):
            files.setdefault(name, set()).add(str(path.relative_to(SQL_DIR)))
    assert {name: where for name, where in files.items() if len(where) > 1} == {}
    assert len(files) > 150  # the scan finds the routines


def test_tables_views_and_grants_only_under_structure() -> None:
    statement = re.compile(
        r"^\s*(create\s+(?:unlogged\s+)?table|create\s+(?:unique\s+)?index|"
        r"create\s+(?:or\s+replace\s+)?view|create\s+sequence|create\s+type|grant|revoke)\b",
        re.IGNORECASE | re.MULTILINE,
    )
    found = [
        f"{path.relative_to(SQL_DIR)}: {match.group(1)}"
        for path in sorted((SQL_DIR / "functions").glob("*.sql"))
        for match in statement.finditer(top_level(path.read_text()))
    ]
    assert found == []
    assert statement.search(top_level((SQL_DIR / "structure" / "grants.sql").read_text()))
