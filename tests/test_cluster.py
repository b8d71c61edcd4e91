"""pgque._cluster.TempCluster: a throwaway server that starts fast and leaves nothing behind."""

from __future__ import annotations

import os
import pwd
import time
from pathlib import Path

import psycopg
import pytest

from _db import PgServer, sql_rows
from pgque._cluster import OS_USER, ClusterError, TempCluster, find_bin_dir


@pytest.fixture(scope="module")
def bin_dir(pg_server: PgServer) -> Path:
    """Binaries of the session's server version (local ones under PGQUE_TEST_DSN)."""
    return pg_server.bin_dir or find_bin_dir(pg_server.version)


def test_start_settings_tcp_and_cleanup(bin_dir: Path) -> None:
    cluster = TempCluster(bin_dir=bin_dir, settings={"cluster_name": "it's pgque"}, tcp=True)
    started = time.monotonic()
    with cluster:
        elapsed = time.monotonic() - started
        base = cluster.base_dir
        assert base is not None and base.is_dir()
        with psycopg.connect(cluster.dsn(), autocommit=True) as conn:
            settings = dict(
                sql_rows(
                    conn,
                    "select name, setting from pg_settings where name = any(%s)",
                    ["fsync", "synchronous_commit", "full_page_writes", "max_connections",
                     "listen_addresses", "cluster_name", "server_version_num"],
                )
            )  # fmt: skip
        assert settings["fsync"] == settings["full_page_writes"] == "off"
        assert settings["synchronous_commit"] == "off"
        assert settings["max_connections"] == "200"
        assert settings["listen_addresses"] == "127.0.0.1"
        assert settings["cluster_name"] == "it's pgque"
        assert int(settings["server_version_num"]) // 10000 == cluster.version
        with psycopg.connect(cluster.dsn("template1", tcp=True)) as conn:
            assert sql_rows(conn, "select current_database()") == [("template1",)]
        assert elapsed < 5, f"startup took {elapsed:.1f}s"
    assert not cluster.running
    assert not base.exists()
    cluster.stop()  # idempotent


def test_socket_only_and_server_user(bin_dir: Path) -> None:
    with TempCluster(bin_dir=bin_dir) as cluster:
        with pytest.raises(ClusterError, match="tcp=True"):
            cluster.dsn(tcp=True)
        with psycopg.connect(cluster.dsn(), autocommit=True) as conn:
            assert sql_rows(conn, "select current_setting('listen_addresses')") == [("",)]
        pid = int((cluster.data_dir / "postmaster.pid").read_text().split()[0])
        uid = Path(f"/proc/{pid}").stat().st_uid
        expected = pwd.getpwnam(OS_USER).pw_uid if os.geteuid() == 0 else os.geteuid()
        assert uid == expected  # PostgreSQL never runs as root


def test_missing_version_says_what_to_install() -> None:
    with pytest.raises(ClusterError, match=r"apt-get install postgresql-9\b"):
        find_bin_dir(9)
