"""migrate installs and upgrades pgque, declares queues; zero refuses to lose events;
the system checks."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import psycopg
import pytest
from _django_db import received
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.test.utils import override_settings

from _db import PgServer
from pgque import PgqueClient, installed_version
from pgque._version import __version__
from pgque.contrib.django.checks import check_pgque
from pgque.errors import PgqueOperationRefused

Conn = psycopg.Connection[Any]
OLDEST = Path(__file__).resolve().parents[1] / "upgrade" / "pgque-0.0.1.sql"
DECLARED = {"QUEUES": {"orders": {"consumers": ["mailer", "audit"], "options": {}}, "misc": {}}}


def migrate(*args: str) -> None:
    call_command("migrate", "pgque", *args, verbosity=0)


def install_oldest(pg_server: PgServer, dsn: str) -> None:
    """pgque 0.0.1, installed with psql as its users did."""
    result = subprocess.run(
        [pg_server.psql(), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(OLDEST), "-d", dsn],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr


def check_ids() -> list[str]:
    return [m.id for m in check_pgque(databases=["default"])]


def test_migrate_installs_and_declares_queues_idempotently(
    django_empty_db: str, connect_to: Any
) -> None:
    conn = connect_to(django_empty_db)
    assert "pgque.W001" in check_ids()
    with override_settings(PGQUE=DECLARED):
        migrate()
        migrate()  # again: post_migrate runs again, changes nothing
    assert installed_version(conn) == __version__
    client = PgqueClient(conn)
    assert sorted(s.queue_name for s in client.queue_stats()) == ["misc", "orders"]
    assert sorted(s.consumer_name for s in client.consumer_stats("orders")) == ["audit", "mailer"]
    assert check_ids() == []


def test_a_declared_queue_with_a_bad_option_names_the_setting(django_empty_db: str) -> None:
    bad = {"QUEUES": {"orders": {"options": {"no_such_option": 1}}}}
    with override_settings(PGQUE=bad), pytest.raises(ImproperlyConfigured) as err:
        migrate()
    assert "settings.PGQUE['QUEUES']['orders']" in str(err.value)


def test_migrate_upgrades_the_oldest_release_and_keeps_pending_events(
    django_empty_db: str, pg_server: PgServer, connect_to: Any
) -> None:
    install_oldest(pg_server, django_empty_db)
    conn = connect_to(django_empty_db)
    assert installed_version(conn) == "0.0.1"
    conn.execute("select pgque.create_queue('orders')")
    conn.execute("select pgque.subscribe('orders', 'watch')")
    for n in range(3):
        conn.execute("select pgque.send('orders', 'o', %s)", (f'{{"id": "#{n}"}}',))
    assert "pgque.W002" in check_ids()
    migrate()
    assert installed_version(conn) == __version__
    assert [m["id"] for m in received(conn)] == ["#0", "#1", "#2"]


def test_migrating_to_zero_refuses_while_events_are_pending(
    django_empty_db: str, connect_to: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    migrate()
    conn = connect_to(django_empty_db)
    conn.execute("select pgque.create_queue('orders')")
    conn.execute("select pgque.subscribe('orders', 'watch')")
    conn.execute("select pgque.send('orders', 'o', '{\"id\": 1}')")  # not even ticked yet
    refused = r"'orders' has events for 'watch'.*ALLOW_UNINSTALL"
    with pytest.raises(PgqueOperationRefused, match=refused):
        migrate("zero")
    assert installed_version(conn) == __version__  # nothing lost
    monkeypatch.setenv("PGQUE_ALLOW_UNINSTALL_WITH_EVENTS", "1")
    migrate("zero")
    assert installed_version(conn) is None
    monkeypatch.delenv("PGQUE_ALLOW_UNINSTALL_WITH_EVENTS")
    migrate()  # and back
    assert installed_version(conn) == __version__


def test_migrating_to_zero_without_pending_events_uninstalls(
    django_empty_db: str, connect_to: Any
) -> None:
    with override_settings(PGQUE=DECLARED):
        migrate()
    migrate("zero")
    assert installed_version(connect_to(django_empty_db)) is None


def test_checks_error_on_unusable_databases_and_settings(django_empty_db: str) -> None:
    with override_settings(PGQUE={"DATABASES": ["lite"]}):
        [message] = check_pgque()
    assert message.id == "pgque.E001" and "sqlite3" in message.msg
    with override_settings(PGQUE={"DATABASES": ["missing"]}):
        [message] = check_pgque()
    assert message.id == "pgque.E001" and "'missing'" in message.msg
    with override_settings(PGQUE={"QUEUES": ["orders"]}):
        [message] = check_pgque()
    assert message.id == "pgque.E002" and 'PGQUE["QUEUES"]' in message.msg
    with override_settings(PGQUE={"DATABSES": []}):
        [message] = check_pgque()
    assert message.id == "pgque.E002" and "DATABSES" in message.msg


def test_migrate_skips_databases_pgque_does_not_manage(django_empty_db: str) -> None:
    call_command("migrate", "pgque", database="lite", verbosity=0)  # sqlite: not listed
    with (
        override_settings(PGQUE={"DATABASES": ["lite"]}),
        pytest.raises(ImproperlyConfigured, match=r"DATABASES\['lite'\].*sqlite3"),
    ):
        call_command("migrate", "pgque", "zero", database="lite", verbosity=0)
