"""The consumers ``manage.py pgque_worker`` finds in this app (autodiscovered)."""

from __future__ import annotations

import os

from pgque import Message
from pgque.contrib.django import consumer
from pgque_testapp.models import Handled

worker = consumer("orders", "worker", poll_interval=0.2)


@worker.on("order.created")
def record(msg: Message) -> None:
    """Write a row per order, in the batch's transaction."""
    Handled.objects.create(order_item=msg.json()["item"])
    marker = os.environ.get("PGQUE_TEST_HANDLED_FILE")
    if marker:
        with open(marker, "a", encoding="utf-8") as out:
            out.write(msg.json()["item"] + "\n")
