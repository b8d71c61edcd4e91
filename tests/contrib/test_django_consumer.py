"""pgque.contrib.django.consumer: handlers on Django's connection, in the batch's transaction."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from django.core import mail
from django.db import transaction
from pgque_testapp.models import Handled

from pgque import Message, PgqueClient
from pgque.contrib.django import DjangoConsumer, consumer, send
from pgque.errors import PgqueInvalidArgument

Conn = psycopg.Connection[Any]


def tick(conn: Conn) -> None:
    conn.execute("select pgque.force_tick('orders')")
    conn.execute("select pgque.ticker('orders')")


def make(conn: Conn, name: str) -> DjangoConsumer:
    conn.execute("select pgque.subscribe('orders', %s)", (name,))
    return DjangoConsumer("orders", name, retry_after=0)


def test_handler_writes_commit_with_the_ack(django_db: str, conn: Conn) -> None:
    c = make(conn, "orm")

    @c.on("order.created")
    def record(msg: Message) -> None:
        Handled.objects.create(order_item=msg.json()["item"])
        transaction.on_commit(lambda: mail.send_mail("ok", "body", "a@x", ["b@x"]))
        # the batch is still open: nothing committed yet
        assert conn.execute("select count(*) from pgque_testapp_handled").fetchone() == (0,)
        assert mail.outbox == []

    send("orders", {"item": "a"}, type="order.created")
    send("orders", {"item": "b"}, type="order.created")
    tick(conn)
    mail.outbox = []
    assert c.poll() == 2
    assert sorted(Handled.objects.values_list("order_item", flat=True)) == ["a", "b"]
    assert len(mail.outbox) == 2  # on_commit ran after the ack
    stats = {s.consumer_name: s for s in PgqueClient(conn).consumer_stats("orders")}
    assert stats["orm"].pending_events == 0


def test_a_failing_handler_rolls_back_its_writes_and_is_retried(django_db: str, conn: Conn) -> None:
    c = make(conn, "flaky")
    calls: list[str] = []

    @c.on("*")
    def handle(msg: Message) -> None:
        item = msg.json()["item"]
        calls.append(item)
        Handled.objects.create(order_item=item)
        if item == "bad" and calls.count("bad") == 1:
            raise RuntimeError("first try fails")

    send("orders", {"item": "good"})
    send("orders", {"item": "bad"})
    tick(conn)
    assert c.poll() == 2
    assert list(Handled.objects.values_list("order_item", flat=True)) == ["good"]
    # the nacked message comes back (retry_after=0) once the retry queue is moved
    conn.execute("select pgque.maint_retry_events()")
    tick(conn)
    assert c.poll() == 1
    assert sorted(Handled.objects.values_list("order_item", flat=True)) == ["bad", "good"]
    assert calls == ["good", "bad", "bad"]


def test_nested_atomic_in_a_handler_is_a_savepoint(django_db: str, conn: Conn) -> None:
    c = make(conn, "nested")

    @c.on("*")
    def handle(msg: Message) -> None:
        Handled.objects.create(order_item="outer")
        with pytest.raises(ZeroDivisionError), transaction.atomic():
            Handled.objects.create(order_item="inner")
            _ = 1 / 0

    send("orders", {"item": "x"})
    tick(conn)
    assert c.poll() == 1
    assert list(Handled.objects.values_list("order_item", flat=True)) == ["outer"]


def test_handlers_off_the_batch_connection_are_refused(django_db: str, conn: Conn) -> None:
    c = make(conn, "refused")
    with pytest.raises(PgqueInvalidArgument, match="transactional=False"):
        c.on("x", transactional=False)
    with pytest.raises(PgqueInvalidArgument, match="timeout"):
        c.on("x", timeout=1.0)


def test_consumer_declarations_are_registered_once(django_db: str) -> None:
    first = consumer("orders", "registered")
    assert consumer("orders", "registered") is first
    assert consumer("orders", "other") is not first


def test_a_batch_handler_writes_with_the_ack_and_a_failing_one_rolls_back(
    django_db: str, conn: Conn
) -> None:
    c = make(conn, "bulk")
    calls: list[list[str]] = []

    @c.on_batch("*")
    def load(msgs: list[Message]) -> None:
        items = [m.json()["item"] for m in msgs]
        calls.append(items)
        Handled.objects.bulk_create([Handled(order_item=i) for i in items])
        if len(calls) == 1:
            raise RuntimeError("first call fails")

    send("orders", {"item": "a"})
    send("orders", {"item": "b"})
    tick(conn)
    assert c.poll() == 2
    assert Handled.objects.count() == 0  # the failing call's writes rolled back
    conn.execute("select pgque.maint_retry_events()")  # both nacked, retry_after=0
    tick(conn)
    assert c.poll() == 2
    assert sorted(Handled.objects.values_list("order_item", flat=True)) == ["a", "b"]
    assert calls == [["a", "b"], ["a", "b"]]
    with pytest.raises(PgqueInvalidArgument, match="transactional=False"):
        c.on_batch("y", transactional=False)
