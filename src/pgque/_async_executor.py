"""The one seam between pgque's Python code and the database.

Every statement the package sends runs here, by its name in
``pgque/sql/queries.sql``, and every driver error it raises is mapped here,
once, to pgque's errors (:func:`pgque.errors.from_database_error`, chained
with ``raise ... from``, so the psycopg error stays the ``__cause__``)::

    row = await fetch_one(conn, "queue_exists", (queue,))
    await execute(conn, "listen", identifiers=(channel,))

A name whose statement holds ``{}`` placeholders is a template: each
``identifiers`` entry fills one, quoted by :class:`psycopg.sql.Identifier`
(a tuple is a qualified name). ``prepare`` and ``binary`` pass through to
psycopg (``prepare=False`` for a statement that must never be prepared, as
behind a transaction-mode pooler); :class:`Options` declares the three once.
Rows are tuples, or dicts by column name from :func:`fetch_dicts` (the web
console's reads). :func:`execute_text` runs text that is
not a named statement (the install script, a batch opener's one-round-trip
string built from named statements), with the same mapping.

This module is the async source; ``pgque/_executor.py`` is generated from it
by ``tools/async_to_sync.py``. ``tests/test_executor_guard.py`` checks that no
other module of the package executes statements itself.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypedDict

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from pgque._queries import LiteralString, query
from pgque.errors import from_database_error

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "Identifier",
    "Options",
    "execute",
    "execute_text",
    "fetch_all",
    "fetch_dicts",
    "fetch_one",
    "fetch_value",
    "mapped_errors",
    "statement",
]

#: One identifier of a template: a name, or the parts of a qualified name.
Identifier = str | tuple[str, ...]
Params = Sequence[Any] | dict[str, Any] | None
#: SQL text psycopg runs: a named statement's, or one composed with psycopg.sql.
Query = LiteralString | bytes | sql.SQL | sql.Composed


@contextmanager
def mapped_errors() -> Iterator[None]:
    """Raise pgque's error for any driver error inside (the one place they are mapped)."""
    try:
        yield
    except psycopg.Error as exc:
        raise from_database_error(exc) from exc


def statement(name: str, identifiers: Sequence[Identifier] = ()) -> Query:
    """The named statement of queries.sql, its ``{}`` filled with quoted ``identifiers``
    (the text itself when it has none: nothing to compose on a hot path)."""
    if not identifiers:
        return query(name)
    return sql.SQL(query(name)).format(
        *(sql.Identifier(*i) if isinstance(i, tuple) else sql.Identifier(i) for i in identifiers)
    )


class Options(TypedDict, total=False):
    """How a named statement runs (every function here takes them as keywords)."""

    #: Fill the statement's ``{}`` placeholders, one each, quoted.
    identifiers: Sequence[Identifier]
    #: psycopg's ``prepare`` (``False``: never prepared); unset, psycopg decides.
    prepare: bool | None
    #: Results in binary format.
    binary: bool


def _driver_options(options: Options) -> dict[str, Any]:
    """The psycopg options of ``options``, only those given: a connection someone
    wrapped may take no more than the statement and its parameters."""
    given: dict[str, Any] = {}
    if options.get("prepare") is not None:
        given["prepare"] = options["prepare"]
    if options.get("binary"):
        given["binary"] = True
    return given


async def execute(
    conn: psycopg.AsyncConnection[Any], name: str, params: Params = None, **options: Unpack[Options]
) -> psycopg.AsyncCursor[Any]:
    """Run the named statement on ``conn``; its cursor, to fetch from."""
    text = statement(name, options.get("identifiers", ()))
    with mapped_errors():
        return await conn.execute(text, params, **_driver_options(options))


async def execute_text(
    conn: psycopg.AsyncConnection[Any], text: Query, *, prepare: bool | None = None
) -> psycopg.AsyncCursor[Any]:
    """Run SQL text that is not one named statement (see the module's docstring)."""
    with mapped_errors():
        if prepare is None:
            return await conn.execute(text)
        return await conn.execute(text, prepare=prepare)


async def fetch_one(
    conn: psycopg.AsyncConnection[Any], name: str, params: Params = None, **options: Unpack[Options]
) -> tuple[Any, ...] | None:
    """The first row of the named statement (None without rows)."""
    cur = await execute(conn, name, params, **options)
    with mapped_errors():
        row: tuple[Any, ...] | None = await cur.fetchone()
    return row


async def fetch_all(
    conn: psycopg.AsyncConnection[Any], name: str, params: Params = None, **options: Unpack[Options]
) -> list[tuple[Any, ...]]:
    """Every row of the named statement."""
    cur = await execute(conn, name, params, **options)
    with mapped_errors():
        return list(await cur.fetchall())


async def fetch_dicts(
    conn: psycopg.AsyncConnection[Any], name: str, params: Params = None, **options: Unpack[Options]
) -> list[dict[str, Any]]:
    """Every row of the named statement, as a dict by column name."""
    text = statement(name, options.get("identifiers", ()))
    with mapped_errors():
        async with conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(text, params, **_driver_options(options))
            return list(await cur.fetchall())


async def fetch_value(
    conn: psycopg.AsyncConnection[Any], name: str, params: Params = None, **options: Unpack[Options]
) -> Any:
    """The first column of the named statement's first row (None without rows)."""
    row = await fetch_one(conn, name, params, **options)
    return None if row is None else row[0]
