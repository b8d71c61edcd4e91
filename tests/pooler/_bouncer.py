"""A real PgBouncer in transaction mode in front of the suite's PostgreSQL server.

:class:`Bouncer` starts Debian's ``/usr/sbin/pgbouncer`` (``apt-get install
pgbouncer``) in a temporary directory: ``pool_mode = transaction``,
``server_round_robin = 1`` (a client's next transaction goes to the next
server session, so whatever one session kept is missing in the next), a few
server sessions per database, a Unix socket only, and ``auth_type = trust``
for the roles the suite connects as. Under root it runs as the unprivileged
user that runs the test servers (:mod:`pgque._cluster`). Without pgbouncer
the tests that need it fail, saying what to install.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgque._cluster import _ensure_os_user

PGBOUNCER = "/usr/sbin/pgbouncer"
PORT = 6432
#: Server sessions per database and role: enough for round robin to show.
POOL_SIZE = 4


def _find() -> str:
    found = shutil.which("pgbouncer") or (PGBOUNCER if os.access(PGBOUNCER, os.X_OK) else None)
    if found is None:
        raise RuntimeError("pgbouncer not found: apt-get install pgbouncer")
    return found


class Bouncer:
    """PgBouncer (transaction mode) in front of the server ``admin_dsn`` reaches."""

    def __init__(self, admin_dsn: str) -> None:
        self.server = conninfo_to_dict(admin_dsn)
        self.dir = Path(tempfile.mkdtemp(prefix="pgque-bouncer-"))
        self.socket_dir = str(self.dir)
        self._proc: subprocess.Popen[bytes] | None = None
        self._user: tuple[int, int] | None = None

    def dsn(self, dsn: str) -> str:
        """``dsn`` (a database of the server) reached through the bouncer instead."""
        return make_conninfo(dsn, host=self.socket_dir, port=PORT, hostaddr=None, password=None)

    def start(self) -> Bouncer:
        """Write the configuration, start pgbouncer and wait until it takes connections."""
        binary = _find()
        server = self.server
        user = str(server.get("user") or "postgres")
        host = str(server.get("host") or "/var/run/postgresql")
        target = f"host={host} port={server.get('port') or 5432}"
        if server.get("password"):
            target += f" password={server['password']}"
        (self.dir / "users.txt").write_text(f'"{user}" ""\n', encoding="utf-8")
        log = self.dir / "pgbouncer.log"
        (self.dir / "pgbouncer.ini").write_text(
            "\n".join([
                "[databases]",
                f"* = {target}",
                "[pgbouncer]",
                "listen_addr =",
                f"listen_port = {PORT}",
                f"unix_socket_dir = {self.dir}",
                "auth_type = trust",
                f"auth_file = {self.dir / 'users.txt'}",
                "pool_mode = transaction",
                "server_round_robin = 1",
                f"default_pool_size = {POOL_SIZE}",
                "max_client_conn = 400",
                "ignore_startup_parameters = extra_float_digits,options",
                f"logfile = {log}",
                "",
            ]),
            encoding="utf-8",
        )  # fmt: skip
        if os.geteuid() == 0:  # pgbouncer refuses root, as PostgreSQL does
            self._user = _ensure_os_user()
            for path in (self.dir, *self.dir.iterdir()):
                os.chown(path, *self._user)
        uid, gid = self._user if self._user is not None else (None, None)
        self._proc = subprocess.Popen(
            [binary, str(self.dir / "pgbouncer.ini")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            cwd=self.dir, user=uid, group=gid, extra_groups=None if uid is None else [],
        )  # fmt: skip
        deadline = time.monotonic() + 15
        probe = self.dsn(make_conninfo(dbname=str(server.get("dbname") or "postgres"), user=user))
        while True:
            try:
                with psycopg.connect(probe, connect_timeout=2) as conn:
                    conn.execute("select 1")
                return self
            except psycopg.Error as exc:
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    text = log.read_text(errors="replace") if log.exists() else ""
                    self.stop()
                    raise RuntimeError(
                        f"pgbouncer did not start ({exc}); its log:\n{text}"
                    ) from exc
                time.sleep(0.05)

    def spread(self, dsn: str, sessions: int = 3) -> set[int]:
        """Have the bouncer open ``sessions`` server sessions for ``dsn``'s database (one
        transaction each, held together); their backend pids."""
        conns = [psycopg.connect(self.dsn(dsn)) for _ in range(sessions)]
        try:
            pids = set()
            for conn in conns:
                row = conn.execute("select pg_backend_pid()").fetchone()
                assert row is not None
                pids.add(int(row[0]))
            return pids
        finally:
            for conn in conns:  # ended before closing: the server sessions stay in the pool
                with contextlib.suppress(psycopg.Error):
                    conn.rollback()
                conn.close()

    def stop(self) -> None:
        """Stop pgbouncer and remove its directory."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


@contextlib.contextmanager
def running(admin_dsn: str) -> Iterator[Bouncer]:
    """A started :class:`Bouncer`, stopped at the end of the block."""
    bouncer = Bouncer(admin_dsn).start()
    try:
        yield bouncer
    finally:
        bouncer.stop()


def backend_pid(conn: psycopg.Connection[Any]) -> int:
    """The server session's pid behind ``conn`` for its next transaction."""
    row = conn.execute("select pg_backend_pid()").fetchone()
    assert row is not None
    return int(row[0])
