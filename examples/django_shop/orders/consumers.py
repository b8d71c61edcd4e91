"""The mailer: found by ``manage.py pgque_worker`` (every app's consumers.py is)."""

from __future__ import annotations

from django.core.mail import send_mail
from django.db import transaction

from orders.models import Order
from pgque import Message
from pgque.contrib.django import consumer

mailer = consumer("orders", "mailer")


@mailer.on("order.created")
def confirm(msg: Message) -> None:
    """Mark the order confirmed and mail the customer once the batch commits."""
    order = Order.objects.get(pk=msg.json()["order_id"])
    order.confirmed = True
    order.save(update_fields=["confirmed"])  # commits with the batch's ack
    transaction.on_commit(
        lambda: send_mail(
            f"Order {order.pk} confirmed",
            f"Your {order.item} is on its way.",
            None,
            [order.email],
        )
    )
