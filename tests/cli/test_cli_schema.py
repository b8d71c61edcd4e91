"""``pgque install``, ``upgrade``, ``uninstall`` against real databases."""

from __future__ import annotations

from typing import Any

import psycopg
from cli_helpers import invoke, one_error_line

import pgque
from pgque.cli import ExitCode


def installed(dsn: str) -> str | None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return pgque.installed_version(conn)


def test_install_into_an_empty_database(empty_db: str) -> None:
    run = invoke("install", "--json", dsn=empty_db)
    assert run.code == ExitCode.OK, run.stderr
    shape: dict[str, Any] = run.json()
    assert set(shape) == {"action", "database", "version", "previous"}
    assert shape["action"] == "install"
    assert shape["previous"] is None
    assert shape["version"] == installed(empty_db) == pgque.__version__

    again = invoke("install", dsn=empty_db)
    assert again.code == ExitCode.OK
    assert f"was {pgque.__version__}; data kept" in again.stdout


def test_upgrade_needs_an_install(empty_db: str, db: str) -> None:
    refused = invoke("upgrade", dsn=empty_db)
    assert refused.code == ExitCode.NOT_INSTALLED
    assert "pgque install" in one_error_line(refused)

    run = invoke("upgrade", "--json", dsn=db)
    assert run.code == ExitCode.OK, run.stderr
    assert run.json() == {
        "action": "upgrade",
        "database": run.json()["database"],
        "version": pgque.__version__,
        "previous": pgque.__version__,
    }
    assert "is current" in invoke("upgrade", dsn=db).stdout


def test_uninstall_needs_force(db: str) -> None:
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("select pgque.create_queue('kept')")
    refused = invoke("uninstall", dsn=db)
    assert refused.code == ExitCode.USAGE
    assert "--force" in one_error_line(refused)
    assert installed(db) == pgque.__version__

    run = invoke("uninstall", "--force", "--json", dsn=db)
    assert run.code == ExitCode.OK, run.stderr
    assert run.json()["action"] == "uninstall"
    assert installed(db) is None
    with psycopg.connect(db, autocommit=True) as conn:
        roles = conn.execute(
            "select count(*) from pg_roles where rolname like 'pgque\\_%'"
        ).fetchone()
    assert roles is not None and roles[0] == 3  # the roles stay

    missing = invoke("uninstall", "--force", dsn=db)
    assert missing.code == ExitCode.NOT_INSTALLED
    one_error_line(missing)
