"""pgque.contrib.django.send*: on Django's connection, inside its open transaction."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import django
import psycopg
import pytest
from _django_db import point_default_at, received
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, connections, transaction
from django.db.transaction import TransactionManagementError
from pgque_testapp.models import Order

from pgque.contrib.django import send, send_at, send_batch
from pgque.errors import PgqueInvalidArgument, PgqueQueueNotFound

Conn = psycopg.Connection[Any]


class Boom(Exception):
    """Raised by a test inside an atomic block."""


def test_autocommit_sends_at_once(django_db: str, conn: Conn) -> None:
    event_id = send("orders", {"item": "book"}, type="order.created")
    assert event_id > 0
    assert received(conn) == [{"item": "book"}]


def test_commit_makes_the_order_and_the_event_visible(django_db: str, conn: Conn) -> None:
    with transaction.atomic():
        Order.objects.create(item="lamp")
        send("orders", {"item": "lamp"}, type="order.created")
        # not visible outside the transaction yet
        assert conn.execute("select count(*) from pgque_testapp_order").fetchone() == (0,)
    assert received(conn) == [{"item": "lamp"}]
    assert list(Order.objects.values_list("item", flat=True)) == ["lamp"]


def test_an_exception_inside_atomic_leaves_no_event_and_no_order(
    django_db: str, conn: Conn
) -> None:
    with pytest.raises(Boom), transaction.atomic():
        Order.objects.create(item="ghost")
        send("orders", {"item": "ghost"})
        raise Boom
    assert received(conn) == []
    assert not Order.objects.exists()


def test_a_rolled_back_savepoint_drops_only_its_events(django_db: str, conn: Conn) -> None:
    with transaction.atomic():
        Order.objects.create(item="kept")
        send("orders", {"item": "kept"})
        with pytest.raises(Boom), transaction.atomic():
            Order.objects.create(item="dropped")
            send_batch("orders", [{"item": "dropped"}, {"item": "dropped too"}])
            raise Boom
        send("orders", {"item": "after"})
    assert received(conn) == [{"item": "kept"}, {"item": "after"}]
    assert sorted(Order.objects.values_list("item", flat=True)) == ["kept"]


def test_send_batch_and_send_at_join_the_transaction(django_db: str, conn: Conn) -> None:
    with transaction.atomic():
        ids = send_batch("orders", [{"n": 1}, {"n": 2}], types=["a", None], type="b")
        delayed = send_at("orders", {"n": 3}, delay=timedelta(0))
    assert len(ids) == 2 and delayed > 0
    assert received(conn)[:2] == [{"n": 1}, {"n": 2}]


def test_an_undeclared_queue_names_the_setting_and_breaks_the_atomic_block(
    django_db: str, conn: Conn
) -> None:
    with transaction.atomic():
        Order.objects.create(item="x")
        with pytest.raises(PgqueQueueNotFound) as err:
            send("nope", {"item": "x"})
        assert "settings.PGQUE['QUEUES']" in str(err.value)
        assert "'nope'" in str(err.value)
        # Django knows the transaction is broken, as after a failed ORM query
        with pytest.raises(TransactionManagementError):
            Order.objects.count()
        transaction.set_rollback(True)
    assert not Order.objects.exists()
    assert received(conn) == []


def test_bad_arguments_raise_before_any_statement(django_db: str, conn: Conn) -> None:
    with transaction.atomic():
        Order.objects.create(item="y")
        with pytest.raises(PgqueInvalidArgument):
            send("orders", {"item": "y"}, type="")
        Order.objects.create(item="z")  # the transaction is intact
    assert Order.objects.count() == 2


def test_an_unknown_alias_names_the_setting(django_db: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=r"'nowhere' is not in settings.DATABASES"):
        send("orders", {}, using="nowhere")


def test_a_non_postgresql_alias_is_refused(django_db: str, conn: Conn) -> None:
    with pytest.raises(ImproperlyConfigured, match=r"DATABASES\['lite'\].*sqlite3.*PostgreSQL"):
        send("orders", {"item": "x"}, using="lite")
    assert received(conn) == []


def test_prepare_threshold_none_and_pooled_connections_work(django_db: str, conn: Conn) -> None:
    options: dict[str, Any] = {"prepare_threshold": None}
    if django.VERSION >= (5, 1):  # Django's own psycopg pool
        options["pool"] = {"min_size": 1, "max_size": 2}
    point_default_at(django_db)
    connections.settings["default"]["OPTIONS"].update(options)
    try:
        for n in range(3):  # more sends than statements a prepared statement needs
            with transaction.atomic():
                send("orders", {"n": n})
                send_batch("orders", [{"n": n}])
        assert connection.connection.prepare_threshold is None
    finally:
        connections.close_all()
        if "pool" in options:
            connection.close_pool()
        connections.settings["default"]["OPTIONS"].pop("pool", None)
    assert received(conn) == [{"n": n} for n in range(3) for _ in (1, 2)]
