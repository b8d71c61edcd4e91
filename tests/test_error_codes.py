"""Every ``pgque:<code>`` the SQL raises has one documented class in ``pgque.errors``.

The codes are read from the SQL sources (the DETAIL of each RAISE), the
table from ``pgque.errors``, the documentation from docs/python-api.md and
docs/sql-api.md: a code without a class, a class's code that the SQL never
raises, or an undocumented one fails here. Each code then goes through
``from_database_error`` as a real server error, and a few real calls show
that the SQL raises what the table says.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

import pgque
from pgque import errors
from pgque.errors import _BY_CODE, from_database_error

ROOT = Path(__file__).resolve().parent.parent
SQL_DIRS = (ROOT / "src/pgque/sql/functions", ROOT / "src/pgque/sql/structure")
PYTHON_API = ROOT / "docs/python-api.md"
SQL_API = ROOT / "docs/sql-api.md"

Conn = psycopg.Connection[Any]


def sql_codes() -> set[str]:
    """Every ``pgque:<code>`` written in the SQL sources."""
    return {
        code
        for folder in SQL_DIRS
        for path in folder.glob("*.sql")
        for code in re.findall(r"pgque:([a-z_]+)", path.read_text(encoding="utf-8"))
    }


def section(path: Path, heading: str) -> str:
    """The text of a markdown section, up to the next heading of its level or above."""
    text = path.read_text(encoding="utf-8")
    level = heading.split(" ", 1)[0]
    start = text.index(f"\n{heading}\n")
    rest = text[start + len(heading) + 2 :]
    ends = [m.start() for m in re.finditer(rf"^#{{1,{len(level)}}} ", rest, re.MULTILINE)]
    return rest[: ends[0]] if ends else rest


def test_the_sql_raises_codes() -> None:
    assert len(sql_codes()) > 30  # the scan finds them where they are


def test_every_code_the_sql_raises_has_a_class() -> None:
    missing = sql_codes() - set(_BY_CODE)
    assert not missing, f"codes without a class in pgque.errors._BY_CODE: {sorted(missing)}"


def test_every_code_of_a_class_is_raised_by_the_sql() -> None:
    stale = set(_BY_CODE) - sql_codes()
    assert not stale, f"codes in pgque.errors._BY_CODE that no SQL raises: {sorted(stale)}"


def test_every_class_has_a_place() -> None:
    classes = {getattr(errors, name) for name in errors.__all__} - {from_database_error}
    # Raised by the Python side only, not for a SQL code.
    python_only = {
        pgque.ConsumerGaveUp,
        pgque.PgqueError,
        pgque.PgqueConnectionError,
        pgque.PgquePoolerError,
        pgque.PgqueNotInstalledError,
        pgque.PgqueInstallError,
    }
    assert classes - python_only == set(_BY_CODE.values())
    for cls in classes:
        assert getattr(pgque, cls.__name__) is cls


def test_python_api_documents_each_class_with_its_codes() -> None:
    text = section(PYTHON_API, "## Errors")
    documented: dict[str, str] = {}
    for row in re.findall(r"^\| `(Pgque\w+)` \| ([^|]+) \|", text, re.MULTILINE):
        for code in re.findall(r"`([a-z_]+)`", row[1]):
            assert code not in documented, f"{code} documented twice"
            documented[code] = row[0]
    assert documented == {code: cls.__name__ for code, cls in _BY_CODE.items()}
    tree = text[text.index("```text") : text.index("```", text.index("```text") + 7)]
    for name in errors.__all__:
        if name != "from_database_error":
            assert re.search(rf"\b{name}\b", tree), f"{name} missing from the class tree"


def test_sql_api_documents_every_code() -> None:
    text = section(SQL_API, "### Errors")
    documented = set(re.findall(r"`pgque:([a-z_]+)`", text))
    assert documented == set(_BY_CODE)


def database_error(conn: Conn, message: str, detail: str | None = None) -> psycopg.Error:
    """A real server error raised by PL/pgSQL, as the SQL functions raise theirs."""
    query = sql.SQL("do $$ begin raise exception {} using detail = {}; end $$").format(
        sql.Literal(message), sql.Literal(detail or "")
    )
    with pytest.raises(psycopg.Error) as caught:
        conn.execute(query)
    return caught.value


@pytest.mark.parametrize("code", sorted(_BY_CODE))
def test_each_code_maps_to_its_class(conn: Conn, code: str) -> None:
    exc = database_error(conn, f"something about {code}", f"pgque:{code}")
    error = from_database_error(exc)
    assert type(error) is _BY_CODE[code]
    assert (error.code, error.sqlstate, str(error)) == (code, "P0001", f"something about {code}")


def test_an_unknown_code_is_a_plain_error(conn: Conn) -> None:
    error = from_database_error(database_error(conn, "from the future", "pgque:not_yet_invented"))
    assert type(error) is pgque.PgqueError
    assert error.code == "not_yet_invented"


@pytest.mark.parametrize(
    ("message", "cls"),
    [
        ("queue not found: q", pgque.PgqueQueueNotFound),
        ("Not subscriber to queue: q/c", pgque.PgqueConsumerNotFound),
        ("consumer not registered", pgque.PgqueConsumerNotFound),
        ("batch not found: 7", pgque.PgqueBatchNotFound),
        ("Cannot find data for batch 7", pgque.PgqueBatchNotFound),
        ("something else", pgque.PgqueError),
    ],
)
def test_upstream_texts_without_a_code(conn: Conn, message: str, cls: type) -> None:
    error = from_database_error(database_error(conn, message))
    assert type(error) is cls
    assert error.code is None


def raised(conn: Conn, query: str, *params: Any) -> pgque.PgqueError:
    with pytest.raises(psycopg.Error) as caught:
        conn.execute(query, params)
    return from_database_error(caught.value)


def test_real_errors_of_the_sql(conn: Conn) -> None:
    conn.execute("select pgque.create_queue('q')")
    conn.execute("select pgque.subscribe('q', 'c')")

    conn.execute("select pgque.pause_queue('q')")
    error = raised(conn, "select pgque.ticker('q')")
    assert isinstance(error, pgque.PgqueTickRefused) and error.code == "ticker_paused"
    assert isinstance(error, pgque.PgqueOperationRefused)
    conn.execute("select pgque.resume_queue('q')")

    conn.execute("select pgque.set_queue_config('q', 'disable_insert', 'true')")
    error = raised(conn, "select pgque.send('q', 'x')")
    assert isinstance(error, pgque.PgqueInsertDisallowed)
    conn.execute("select pgque.set_queue_config('q', 'disable_insert', 'false')")

    conn.execute("select pgque.register_subconsumer('q', 'group', 'one')")
    error = raised(conn, "select * from pgque.receive('q', 'group')")
    assert isinstance(error, pgque.PgqueWrongConsumerKind)

    conn.execute("select pgque.subscribe_slot('q', 'p', 0, 1)")
    conn.execute("select pgque.claim_slot('q', 'p', 0, 'w1')")
    error = raised(conn, "select * from pgque.receive_partitioned('q', 'p', 0, 1, 'w2')")
    assert isinstance(error, pgque.PgqueFenced) and error.code == "fenced"

    conn.execute("select pgque.send('q', 'left behind')")
    error = raised(conn, "select pgque.assert_empty('q')")
    assert isinstance(error, pgque.PgqueAssertionFailed)

    # Damaged bookkeeping (only the owner can do this): a position at no tick.
    conn.execute(
        "update pgque.subscription set sub_last_tick = 999999"
        " where sub_consumer = (select co_id from pgque.consumer where co_name = 'c')"
    )
    error = raised(conn, "select pgque.next_batch('q', 'c')")
    assert isinstance(error, pgque.PgqueCorruption)
    assert not isinstance(error, pgque.PgqueOperationRefused)
