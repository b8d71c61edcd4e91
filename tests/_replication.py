"""A primary with a synchronous streaming standby, both throwaway servers, for failover tests.

:class:`ReplicatedPair` starts a :class:`~pgque._cluster.TempCluster` as the
primary (``synchronous_commit = on``, the standby named in
``synchronous_standby_names``: a commit returns once the standby has the WAL)
and a :class:`Standby` made from its base backup (``pg_basebackup``,
``standby.signal``, ``primary_conninfo``), run like every test server as an
unprivileged OS user, listening only on a Unix socket in a directory of its
own. :meth:`ReplicatedPair.kill_primary` sends SIGKILL to the primary's
postmaster (``kill -9``), :meth:`ReplicatedPair.promote` runs ``pg_ctl
promote``; :meth:`ReplicatedPair.dsn` is a libpq multi-host connection string
that finds whichever of the two takes writes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from types import TracebackType

import psycopg
from psycopg.conninfo import make_conninfo

from pgque._cluster import SOCKET_PORT, ClusterError, TempCluster

STANDBY_NAME = "standby"


class Standby(TempCluster):
    """A hot standby streaming from ``primary`` (running), from a base backup of it.

    Its settings are the primary's, but for ``primary_conninfo``, an empty
    ``synchronous_standby_names`` (once promoted it waits for no standby) and
    a short ``wal_retrieve_retry_interval``.
    """

    def __init__(self, primary: TempCluster, *, name: str = STANDBY_NAME) -> None:
        """Configure the standby of a running ``primary``; :meth:`start` makes it."""
        conninfo = make_conninfo(
            host=str(primary.socket_dir), port=primary.port, user="postgres", application_name=name
        )
        # wal_retrieve_retry_interval: a promote request that comes as the walreceiver
        # dies (the primary killed) waited out its 5 s default (1 run in 4, PG 18).
        settings = {**primary.settings, "synchronous_standby_names": "",
                    "primary_conninfo": conninfo, "hot_standby": "on",
                    "wal_retrieve_retry_interval": "50ms"}  # fmt: skip
        super().__init__(bin_dir=primary.bin_dir, settings=settings)
        self.primary = primary

    def _make_data_dir(self) -> None:
        source = make_conninfo(host=str(self.primary.socket_dir), port=self.primary.port,
                               user="postgres")  # fmt: skip
        self._run("pg_basebackup", "-d", source, "-D", str(self.data_dir), "-X", "stream",
                  "-c", "fast", "--no-sync")  # fmt: skip
        signal_file = self.data_dir / "standby.signal"
        signal_file.touch()
        if self._as_user is not None:
            os.chown(signal_file, *self._as_user)

    def promote(self) -> None:
        """``pg_ctl promote``, waiting until the server takes writes."""
        self._run("pg_ctl", "promote", "-w")


class ReplicatedPair:
    """A primary and its synchronous standby (see the module's docstring).

    Args:
        version: The PostgreSQL major version of both.
    """

    def __init__(self, version: int) -> None:
        """Configure the pair; nothing runs before ``with`` or :meth:`start`."""
        self.primary = TempCluster(version, settings={
            "synchronous_commit": "on", "synchronous_standby_names": STANDBY_NAME,
        })  # fmt: skip
        self.standby: Standby | None = None
        self._killed: list[int] = []

    def start(self) -> ReplicatedPair:
        """Start the primary, then the standby, and wait until it streams synchronously."""
        self.primary.start()
        self.standby = Standby(self.primary).start()  # type: ignore[assignment]
        state = "select sync_state from pg_stat_replication where application_name = %s"
        with psycopg.connect(self.primary.dsn(), autocommit=True) as conn:
            deadline = time.monotonic() + 30
            while (row := conn.execute(state, (STANDBY_NAME,)).fetchone()) != ("sync",):
                if time.monotonic() > deadline:
                    raise ClusterError(f"the standby does not stream synchronously: {row}")
                time.sleep(0.05)
        return self

    def dsn(self, dbname: str = "postgres", **params: object) -> str:
        """A multi-host connection string: primary first, standby second, read-write only."""
        assert self.standby is not None
        hosts = f"{self.primary.socket_dir},{self.standby.socket_dir}"
        return make_conninfo(host=hosts, port=f"{SOCKET_PORT},{SOCKET_PORT}", user="postgres",
                             dbname=dbname, target_session_attrs="read-write",
                             **params)  # fmt: skip

    def kill_primary(self) -> None:
        """SIGKILL the primary's postmaster (``kill -9``); its backends exit on their own
        when they notice (waited for in :meth:`stop`)."""
        pid = int((self.primary.data_dir / "postmaster.pid").read_text().split()[0])
        self._killed = [pid, *_children(pid)]
        os.kill(pid, signal.SIGKILL)

    def promote(self) -> None:
        """Promote the standby (``pg_ctl promote``, waiting for it to take writes)."""
        assert self.standby is not None
        self.standby.promote()

    def stop(self) -> None:
        """Stop both servers (after a kill, once its processes are gone) and delete them."""
        try:
            if self.standby is not None:
                self.standby.stop()
        finally:
            if self._killed:
                _wait_gone(self._killed)
                with contextlib.suppress(OSError):
                    (self.primary.data_dir / "postmaster.pid").unlink()  # pg_ctl: nothing to stop
            self.primary.stop()

    def __enter__(self) -> ReplicatedPair:
        """Start both."""
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:  # fmt: skip
        """Stop both."""
        self.stop()


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (the postmaster's backends and workers)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                stat = (entry / "stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _wait_gone(pids: list[int], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while any(_alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            raise ClusterError(f"processes of the killed primary still run: {pids}")
        time.sleep(0.05)
