"""pgque.install / uninstall / installed_version against a real server."""

from __future__ import annotations

import functools
import subprocess
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.pq import TransactionStatus

import pgque
from _db import PgServer, sql_rows, unique_name
from pgque import installer
from pgque._cluster import TempCluster

PGQUE_SQL = Path(__file__).resolve().parent.parent / "src" / "pgque" / "sql" / "pgque.sql"
ROLES = ["pgque_admin", "pgque_reader", "pgque_writer"]
ConnectTo = Callable[..., psycopg.Connection[Any]]


def has_schema(conn: psycopg.Connection[Any]) -> bool:
    return bool(sql_rows(conn, "select 1 from pg_namespace where nspname = 'pgque'"))


def roles(conn: psycopg.Connection[Any]) -> list[str]:
    rows = sql_rows(conn, "select rolname from pg_roles where rolname = any(%s) order by 1", ROLES)
    return [name for (name,) in rows]


def test_install_returns_the_version(empty_db: str, connect_to: ConnectTo) -> None:
    conn = connect_to(empty_db)
    assert pgque.installed_version(conn) is None

    assert pgque.install(conn) == pgque.__version__

    assert pgque.installed_version(conn) == pgque.__version__
    assert has_schema(conn)
    assert roles(conn) == ROLES
    assert conn.autocommit is True
    assert conn.info.transaction_status == TransactionStatus.IDLE


def test_installed_version_is_none_without_version_function(
    empty_db: str, connect_to: ConnectTo
) -> None:
    conn = connect_to(empty_db)
    conn.execute("create schema pgque")  # a schema alone is no install
    assert pgque.installed_version(conn) is None
    assert conn.info.transaction_status == TransactionStatus.IDLE


def test_install_twice_is_fine(db: str, connect_to: ConnectTo) -> None:
    conn = connect_to(db)  # ``db`` has pgque already
    assert pgque.install(conn) == pgque.__version__
    assert pgque.install(conn) == pgque.__version__
    assert pgque.installed_version(connect_to(db)) == pgque.__version__


def test_install_restores_autocommit_off(empty_db: str, connect_to: ConnectTo) -> None:
    conn = connect_to(empty_db, autocommit=False)

    assert pgque.install(conn) == pgque.__version__

    assert conn.autocommit is False
    assert conn.info.transaction_status == TransactionStatus.IDLE
    assert pgque.installed_version(connect_to(empty_db)) == pgque.__version__


def test_uninstall_drops_schema_and_keeps_roles(db: str, connect_to: ConnectTo) -> None:
    conn = connect_to(db)
    assert pgque.installed_version(conn) == pgque.__version__

    pgque.uninstall(conn)

    assert not has_schema(conn)
    assert pgque.installed_version(conn) is None
    assert roles(conn) == ROLES
    pgque.uninstall(conn)  # idempotent
    assert pgque.install(conn) == pgque.__version__


@pytest.mark.parametrize("failed", [False, True], ids=["intrans", "inerror"])
def test_install_refuses_a_connection_inside_a_transaction(
    empty_db: str, connect_to: ConnectTo, failed: bool
) -> None:
    conn = connect_to(empty_db, autocommit=False)
    conn.execute("select 1")
    if failed:
        with pytest.raises(psycopg.errors.DivisionByZero):
            conn.execute("select 1/0")
    status = conn.info.transaction_status

    with pytest.raises(pgque.PgqueInstallError, match="transaction"):
        pgque.install(conn)
    with pytest.raises(pgque.PgqueInstallError, match="transaction"):
        pgque.uninstall(conn)

    assert conn.info.transaction_status == status  # left as it was
    conn.rollback()
    assert pgque.installed_version(conn) is None


@pytest.mark.parametrize("autocommit", [True, False])
def test_failed_install_changes_nothing(
    empty_db: str, connect_to: ConnectTo, monkeypatch: pytest.MonkeyPatch, autocommit: bool
) -> None:
    text = installer.sql_text()
    head, sep, tail = text.rpartition("\ncommit;")
    assert sep, "pgque.sql should end its transaction with a commit"
    broken = f"{head}\nselect pgque_no_such_function();{sep}{tail}"
    monkeypatch.setattr(installer, "sql_text", lambda: broken)
    conn = connect_to(empty_db, autocommit=autocommit)

    with pytest.raises(pgque.PgqueInstallError, match="pgque_no_such_function") as info:
        pgque.install(conn)

    assert isinstance(info.value.__cause__, psycopg.errors.UndefinedFunction)
    assert conn.autocommit is autocommit
    assert conn.info.transaction_status == TransactionStatus.IDLE
    assert sql_rows(conn, "select 42") == [(42,)]  # still usable
    assert not has_schema(conn)
    assert pgque.installed_version(conn) is None


def test_closed_connection_is_a_connection_error(empty_db: str) -> None:
    conn = psycopg.connect(empty_db)
    conn.close()
    with pytest.raises(pgque.PgqueConnectionError, match="closed"):
        pgque.install(conn)


def psql(server: PgServer, dsn: str, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [server.psql(), "-X", "-q", "-v", "ON_ERROR_STOP=1", *args, "-d", dsn]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def test_psql_loads_the_same_file_twice(
    pg_server: PgServer, empty_db: str, connect_to: ConnectTo
) -> None:
    for _ in range(2):
        result = psql(pg_server, empty_db, "-f", str(PGQUE_SQL))
        assert result.returncode == 0, result.stderr
        assert "ERROR" not in result.stderr, result.stderr
    assert pgque.installed_version(connect_to(empty_db)) == pgque.__version__


def run_together(*jobs: Callable[[], object]) -> list[object]:
    """Run the jobs in threads released at the same moment; return their results."""
    barrier = threading.Barrier(len(jobs), timeout=30)

    def start(job: Callable[[], object]) -> object:
        barrier.wait()
        return job()

    with ThreadPoolExecutor(len(jobs)) as pool:
        futures = [pool.submit(start, job) for job in jobs]
        return [future.result(timeout=120) for future in futures]


@pytest.mark.concurrency
def test_concurrent_installs_into_one_database(empty_db: str, connect_to: ConnectTo) -> None:
    first, second = connect_to(empty_db), connect_to(empty_db)

    results = run_together(lambda: pgque.install(first), lambda: pgque.install(second))

    assert results == [pgque.__version__, pgque.__version__]
    assert pgque.installed_version(connect_to(empty_db)) == pgque.__version__


@pytest.fixture
def fresh_cluster(pg_server: PgServer) -> Iterator[TempCluster]:
    """A new cluster of the session's version: cluster-wide roles do not exist there yet."""
    if pg_server.bin_dir is not None:
        cluster = TempCluster(bin_dir=pg_server.bin_dir)
    else:  # PGQUE_TEST_DSN: the server's roles exist already; use local binaries
        cluster = TempCluster(pg_server.version)
    with cluster:
        yield cluster


@pytest.mark.concurrency
@pytest.mark.slow
def test_concurrent_installs_into_two_databases_create_roles_once(
    fresh_cluster: TempCluster, connect_to: ConnectTo
) -> None:
    admin = connect_to(fresh_cluster.dsn())
    names = [unique_name("pgque_race") for _ in range(2)]
    for name in names:
        admin.execute(f"create database {name}")
    conns = [connect_to(fresh_cluster.dsn(name)) for name in names]

    for _ in range(3):  # each round starts without the roles
        assert roles(admin) == []
        results = run_together(*(functools.partial(pgque.install, c) for c in conns))

        assert results == [pgque.__version__] * 2
        assert roles(admin) == ROLES
        for conn in conns:
            pgque.uninstall(conn)
            conn.execute(f"drop owned by {', '.join(ROLES)}")
        admin.execute(f"drop role {', '.join(ROLES)}")


@pytest.mark.concurrency
@pytest.mark.slow
def test_installs_beside_queue_ddl_never_deadlock(db: str, connect_to: ConnectTo) -> None:
    """Queue DDL and the install both rewrite the routers; each takes the same
    coordination row first, so whichever starts first, the other waits for it."""
    stop = threading.Event()
    errors: list[BaseException] = []
    done = [0]

    def churn(worker: int) -> None:
        conn = connect_to(db)
        i = 0
        while not stop.is_set():
            name = f"ddl_{worker}_{i}"
            try:
                conn.execute("select pgque.create_queue(%s)", (name,))
                conn.execute("select pgque.drop_queue(%s)", (name,))
                done[0] += 1
            except psycopg.Error as exc:
                errors.append(exc)
                return
            i += 1

    workers = [threading.Thread(target=churn, args=(w,)) for w in range(3)]
    for worker in workers:
        worker.start()
    try:
        installer_conn = connect_to(db)
        for _ in range(4):
            assert pgque.install(installer_conn) == pgque.__version__
    finally:
        stop.set()
        for worker in workers:
            worker.join(60)
    assert errors == []
    assert done[0] > 0


def test_every_routine_body_is_valid_after_an_install(db: str, connect_to: ConnectTo) -> None:
    """Every routine's body passes its language's validator (a body that calls a routine
    defined further down the install is checked only when it runs)."""
    conn = connect_to(db)
    conn.execute("set search_path = pgque, pg_catalog, pg_temp")
    routines = sql_rows(
        conn,
        "select p.oid, p.oid::regprocedure::text, l.lanname from pg_proc p"
        " join pg_language l on l.oid = p.prolang"
        " where p.pronamespace = 'pgque'::regnamespace and l.lanname in ('sql', 'plpgsql')",
    )
    failed = []
    for oid, name, language in routines:
        validator = "fmgr_sql_validator" if language == "sql" else "plpgsql_validator"
        try:
            conn.execute(f"select pg_catalog.{validator}(%s)", [oid])
        except psycopg.Error as error:
            failed.append(f"{name}: {error}")
    assert len(routines) > 150  # the query finds the routines
    assert failed == []


def test_the_body_check_finds_a_broken_body(db: str, connect_to: ConnectTo) -> None:
    conn = connect_to(db)
    conn.execute("set check_function_bodies = off")
    conn.execute("create function pgque.broken() returns int language sql as $$ select nope() $$")
    oid = sql_rows(conn, "select 'pgque.broken()'::regprocedure::oid")[0][0]
    conn.execute("set check_function_bodies = on")
    with pytest.raises(psycopg.errors.UndefinedFunction):
        conn.execute("select pg_catalog.fmgr_sql_validator(%s)", [oid])
