"""The shop end to end on PostgreSQL: view -> queue -> consumer -> mail."""

from __future__ import annotations

from django.core import mail
from django.db import connection
from django.test import TransactionTestCase

from orders.consumers import mailer
from orders.models import Order
from pgque import PgqueClient


def tick() -> None:
    """Make the committed events visible to consumers (a worker's ticker does this)."""
    client = PgqueClient(connection.connection)
    client.force_tick("orders")
    client.ticker("orders")


class ShopTests(TransactionTestCase):
    # Batches see committed transactions only: each test commits for real.

    def test_an_order_is_confirmed_by_mail(self) -> None:
        response = self.client.post("/orders/", {"item": "lamp", "email": "ann@example.com"})
        self.assertEqual(response.status_code, 201)
        tick()
        self.assertEqual(mailer.poll(), 1)
        order = Order.objects.get()
        self.assertTrue(order.confirmed)
        self.assertEqual(len(mail.outbox), 1)
        self.assertEqual(mail.outbox[0].to, ["ann@example.com"])
        self.assertIn("lamp", mail.outbox[0].body)
        print("mailed:", mail.outbox[0].subject)

    def test_a_failed_order_sends_nothing(self) -> None:
        response = self.client.post("/orders/", {"item": "unicorn", "email": "bo@example.com"})
        self.assertEqual(response.status_code, 409)
        tick()
        self.assertIsNone(mailer.poll())
        self.assertFalse(Order.objects.exists())
        self.assertEqual(mail.outbox, [])

    def test_bad_input_is_refused(self) -> None:
        response = self.client.post("/orders/", {"item": "lamp"})
        self.assertEqual(response.status_code, 400)
        self.assertFalse(Order.objects.exists())
