"""The PL/pgSQL that pgque writes at run time, rendered and compared with files.

The insert routers and batch readers are functions pgque's SQL writes
(``insert_router.sql``, ``batch_reader.sql``). Their code exists only in a
database, so a change to a generator could not be reviewed as a diff. This
test renders them for a database with two queues (ids 1 and 2) and compares
each with its file under ``tests/engine/generated/`` (pg_regress style):
the leaf insert routers of both kinds, the middle router and the top router
of one kind, and the leaf batch reader. A generator change shows here as a
readable diff; when it is meant, rewrite the files with::

    PGQUE_REGENERATE_GOLDENS=1 python -m pytest tests/engine/test_generated_sql.py

and review them with ``git diff``.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

import psycopg
import pytest

from _engine import one

GENERATED = Path(__file__).resolve().parent / "generated"
FUNCTIONS = [
    "_route_event_l0",
    "_route_batch_l0",
    "_route_event_m0",
    "_route_event",
    "_read_l0",
]


def rendered(conn: psycopg.Connection[Any], name: str) -> str:
    """The function's whole definition, as PostgreSQL prints it."""
    text = one(conn, "select pg_get_functiondef(%s::regproc)", f"pgque.{name}")
    return str(text).rstrip() + "\n"


@pytest.mark.parametrize("name", FUNCTIONS)
def test_generated_functions_match_their_files(conn: psycopg.Connection[Any], name: str) -> None:
    for queue in ("orders", "invoices"):
        one(conn, "select pgque.create_queue(%s)", queue)
    assert one(conn, "select array_agg(queue_id order by queue_id) from pgque.queue") == [1, 2]
    got = rendered(conn, name)
    path = GENERATED / f"{name}.sql"
    if os.environ.get("PGQUE_REGENERATE_GOLDENS") == "1":
        path.write_text(got)
    assert path.exists(), f"{path} is missing: run with PGQUE_REGENERATE_GOLDENS=1"
    want = path.read_text()
    diff = "".join(
        difflib.unified_diff(
            want.splitlines(keepends=True),
            got.splitlines(keepends=True),
            f"{path.name} (expected)",
            f"{name} (rendered)",
        )
    )
    assert got == want, f"the generated {name} changed:\n{diff}"
