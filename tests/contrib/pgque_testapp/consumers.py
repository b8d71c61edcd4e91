"""The consumers ``manage.py pgque_worker`` finds in this app (autodiscovered).

``PGQUE_TEST_DIR`` (set by the worker test) is where the handler reports
progress: it appends each item to ``handled``, and for the item ``slow``
writes ``slow-started`` and waits for the test to create ``release``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from pgque import Message
from pgque.contrib.django import consumer
from pgque_testapp.models import Handled

worker = consumer("orders", "worker", poll_interval=0.2)


@worker.on("order.created")
def record(msg: Message) -> None:
    """Write a row per order, in the batch's transaction."""
    item = msg.json()["item"]
    Handled.objects.create(order_item=item)
    folder = Path(os.environ.get("PGQUE_TEST_DIR", "."))
    if item == "slow":
        (folder / "slow-started").touch()
        deadline = time.monotonic() + 60
        while not (folder / "release").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
    with (folder / "handled").open("a", encoding="utf-8") as out:
        out.write(item + "\n")
