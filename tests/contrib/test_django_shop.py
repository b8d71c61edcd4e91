"""The Django example project's own tests, under Django's test runner, on the suite's server.

(``examples/sqlalchemy_outbox.py`` runs with the other examples, in ``tests/examples``.)
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

SHOP = Path(__file__).resolve().parents[2] / "examples" / "django_shop"


def manage(dsn: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PGQUE_DSN": dsn, "PYTHONUNBUFFERED": "1"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        capture_output=True, text=True, env=env, timeout=180, cwd=SHOP, check=False,
    )  # fmt: skip


def test_django_shop_tests_pass_under_djangos_runner(empty_db: str) -> None:
    proc = manage(empty_db, "test", "--noinput", "-v", "2")
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert "Ran 3 tests" in proc.stderr and "OK" in proc.stderr, proc.stderr
    assert re.search(r"mailed: Order \d+ confirmed", proc.stdout), proc.stdout


def test_django_shop_migrates_and_checks_clean(empty_db: str) -> None:
    proc = manage(empty_db, "migrate", "--noinput")
    assert proc.returncode == 0, proc.stderr
    proc = manage(empty_db, "check", "--fail-level", "WARNING")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = manage(empty_db, "pgque", "consumers", "--json")
    assert proc.returncode == 0, proc.stderr
    assert '"mailer"' in proc.stdout, proc.stdout
