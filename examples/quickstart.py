"""Quickstart: send a few messages and handle them with a decorated consumer.

No pg_cron needed: the consumer runs pgque's ticker in-process.

    pgque dev                      # in another terminal: a throwaway PostgreSQL
    export PGQUE_DSN=...           # the DSN it prints
    python examples/quickstart.py
"""

from __future__ import annotations

import os
import sys

import psycopg

import pgque

DSN = sys.argv[1] if len(sys.argv) > 1 else os.environ["PGQUE_DSN"]

with psycopg.connect(DSN, autocommit=True) as conn:
    pgque.install(conn)  # idempotent: upgrades in place, keeps data
    conn.execute("select pgque.create_queue('orders')")

with pgque.connect(DSN) as client:
    client.subscribe("orders", "mailer")  # sees what is sent from now on
    for order_id in (1, 2, 3):
        client.send("orders", {"order_id": order_id}, type="order.created")
    client.conn.commit()  # the messages exist once the transaction commits

consumer = pgque.Consumer(DSN, queue="orders", name="mailer")
handled: list[int] = []


@consumer.on("order.created")
def send_confirmation(msg: pgque.Message) -> None:
    order = msg.json()
    print(f"confirmation mail for order {order['order_id']} (message {msg.msg_id})")
    handled.append(order["order_id"])
    if len(handled) == 3:
        consumer.stop()


consumer.start()  # returns after stop(), or on Ctrl-C / SIGTERM
print(f"handled orders {sorted(handled)}")
