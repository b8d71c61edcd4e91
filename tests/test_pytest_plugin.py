"""pgque's pytest plugin (pgque.testing), run the way a user's suite runs it: in a subprocess.

The example suite in ``examples/pytest_plugin`` is run on this session's
server (through ``PGQUE_TEST_DSN``) and on a throwaway server the plugin
starts itself; without any server its tests must fail, never skip.
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from _db import PgServer

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "pytest_plugin"
EXAMPLE_TESTS = 5


def run_pytest(target: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Run pytest on ``target`` in a subprocess with the plugin on, as pip installs it."""
    registered = any(ep.value == "pgque.testing" for ep in entry_points(group="pytest11"))
    plugin = [] if registered else ["-p", "pgque.testing"]  # an editable install not refreshed
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("PGQUE_TEST_")}
    full_env.update(env)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin, *args,
         str(target)],
        cwd=target if target.is_dir() else target.parent,
        env=full_env, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip


def summary(result: subprocess.CompletedProcess[str]) -> str:
    return (result.stdout + result.stderr)[-3000:]


def plugin_databases(pg_server: PgServer) -> set[str]:
    """The test and template databases on the server (this session's own among them)."""
    found = pg_server.admin().execute(
        "select datname from pg_database where datname like 'pgque\\_test\\_%'"
        " or datname like 'pgque\\_template\\_%'"
    )
    return {r[0] for r in found.fetchall()}


def test_example_suite_on_an_existing_server(pg_server: PgServer) -> None:
    before = plugin_databases(pg_server)
    result = run_pytest(EXAMPLE, {"PGQUE_TEST_DSN": pg_server.admin_dsn})
    assert result.returncode == 0, summary(result)
    assert f"{EXAMPLE_TESTS} passed" in result.stdout
    # The plugin cleaned up after itself: no test or template database left behind.
    assert plugin_databases(pg_server) == before


@pytest.mark.slow
def test_example_suite_on_its_own_server() -> None:
    version = os.environ.get("PGQUE_TEST_PG") or "18"
    result = run_pytest(EXAMPLE, {"PGQUE_TEST_PG": version})
    assert result.returncode == 0, summary(result)
    assert f"{EXAMPLE_TESTS} passed" in result.stdout


def test_no_server_fails_and_never_skips() -> None:
    result = run_pytest(
        EXAMPLE, {"PGQUE_TEST_DSN": "host=127.0.0.1 port=1 connect_timeout=2"}, "-rA"
    )
    assert result.returncode == 1, summary(result)
    assert f"{EXAMPLE_TESTS} error" in result.stdout, summary(result)
    assert "skipped" not in result.stdout
    assert "no PostgreSQL server for the tests: cannot connect to PGQUE_TEST_DSN" in result.stdout


def test_the_plugin_is_inert_unless_used(tmp_path: Path) -> None:
    suite = tmp_path / "test_plain.py"
    suite.write_text(
        "import sys\n\n"
        "def test_plain():\n"
        "    assert 'pgque.testing' in sys.modules  # loaded, but starts nothing\n",
        encoding="utf-8",
    )
    # No server can be had, and none is asked for: the suite passes.
    result = run_pytest(
        suite, {"PGQUE_TEST_DSN": "host=127.0.0.1 port=1 connect_timeout=2"}, "--fixtures"
    )
    assert result.returncode == 0, summary(result)
    for name in ("pgque_db", "pgque_dsn", "pgque_conn", "pgque_client", "pgque_producer"):
        assert name in result.stdout
    result = run_pytest(suite, {"PGQUE_TEST_PG": "99"})
    assert result.returncode == 0, summary(result)
    assert "1 passed" in result.stdout
