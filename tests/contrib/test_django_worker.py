"""manage.py pgque_worker (a subprocess): processes, drains on SIGTERM, exits 0;
manage.py pgque runs the CLI on a Django database."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command

from _wait import wait_for
from pgque.contrib.django import DjangoConsumer, send
from pgque.contrib.django.worker import select

HERE = Path(__file__).resolve().parent
Conn = psycopg.Connection[Any]


def worker(dsn: str, folder: Path, *args: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "pgque_testapp.settings",
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        "PGQUE_TEST_APP_DSN": dsn,
        "PGQUE_TEST_DIR": str(folder),
        "PYTHONUNBUFFERED": "1",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "django", "pgque_worker", *args],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def handled(conn: Conn) -> list[str]:
    rows = conn.execute("select order_item from pgque_testapp_handled order by id").fetchall()
    return [r[0] for r in rows]


def test_worker_processes_drains_on_sigterm_and_exits_0(
    django_db: str, conn: Conn, tmp_path: Path
) -> None:
    conn.execute("select pgque.subscribe('orders', 'worker')")
    for item in ("a", "b"):
        send("orders", {"item": item}, type="order.created")
    proc = worker(django_db, tmp_path)
    try:
        wait_for(lambda: handled(conn) == ["a", "b"], 60, "the worker handled a and b")
        send("orders", {"item": "slow"}, type="order.created")
        wait_for((tmp_path / "slow-started").exists, 60, "the slow handler started")
        proc.send_signal(signal.SIGTERM)
        assert handled(conn) == ["a", "b"]  # the slow batch is still open
        (tmp_path / "release").touch()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "consuming orders/worker" in out and "pgque worker: stopped" in out, out
    assert handled(conn) == ["a", "b", "slow"]  # the batch finished and committed
    assert (tmp_path / "handled").read_text().split() == ["a", "b", "slow"]


def test_worker_with_no_matching_consumer_says_what_is_declared(
    django_db: str, tmp_path: Path
) -> None:
    proc = worker(django_db, tmp_path, "--queue", "nope")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert "no pgque consumer matches" in err and "orders/worker (default)" in err


def test_manage_py_pgque_runs_the_cli_on_the_database(
    django_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        call_command("pgque", "queues", "--json")
    assert done.value.code == 0
    assert '"orders"' in capsys.readouterr().out
    with pytest.raises(CommandError, match=r"'nowhere' is not in settings\.DATABASES"):
        call_command("pgque", "--database", "nowhere", "status")


def test_worker_selection_filters_and_refuses_mixed_databases(django_db: str) -> None:
    a = DjangoConsumer("orders", "a")
    b = DjangoConsumer("orders", "b")
    c = DjangoConsumer("other", "a")
    assert select([a, b, c]) == [a, b, c]
    assert select([a, b, c], queues=["orders"], names=["a"]) == [a]
    assert select([a, b, c], names=["a"]) == [a, c]
    with pytest.raises(ImproperlyConfigured, match=r"orders/a \(default\)"):
        select([a, b, c], using="elsewhere")
    c.using = "replica"  # as if declared on another alias
    with pytest.raises(ImproperlyConfigured, match="one worker per database"):
        select([a, c])
