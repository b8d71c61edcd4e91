"""Fixtures for the attack tests: login roles with exactly one pgque role each.

The database (``db``) is installed by the test server's superuser, who is
then pgque's owner: the most dangerous case, since whatever runs as the
owner runs as a superuser.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

KINDS = ("reader", "writer", "admin", "nobody")

LoginAs = Callable[[str], psycopg.Connection[Any]]


@pytest.fixture
def logins(conn: psycopg.Connection[Any]) -> Iterator[dict[str, str]]:
    """Fresh LOGIN roles, one per kind: ``pgque_<kind>``'s member, or none for ``nobody``."""
    suffix = uuid.uuid4().hex[:8]
    made = {kind: f"sec_{kind}_{suffix}" for kind in KINDS}
    for kind, role in made.items():
        conn.execute(sql.SQL("create role {} login").format(sql.Identifier(role)))
        if kind != "nobody":
            conn.execute(
                sql.SQL("grant {} to {}").format(
                    sql.Identifier(f"pgque_{kind}"), sql.Identifier(role)
                )
            )
    try:
        yield made
    finally:
        conn.execute("reset role")
        conn.execute("reset search_path")
        for role in made.values():
            conn.execute(sql.SQL("drop owned by {} cascade").format(sql.Identifier(role)))
            conn.execute(sql.SQL("drop role {}").format(sql.Identifier(role)))


@pytest.fixture
def login_as(db: str, logins: dict[str, str], connect_to: Any) -> LoginAs:
    """``login_as(kind)``: an autocommit connection as that kind's login role."""

    def login_as(kind: str) -> psycopg.Connection[Any]:
        conn: psycopg.Connection[Any] = connect_to(make_conninfo(db, user=logins[kind]))
        return conn

    return login_as
