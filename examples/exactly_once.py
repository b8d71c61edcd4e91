"""Transactional exactly-once: the effect and the ack commit together.

Producer side: the order row and its event are one transaction (an
outbox without a relay); a rolled-back order sends nothing.

Consumer side: the batch is received, its effects written and the batch
acked in one transaction. A crash in the middle rolls all of it back, the
batch comes again, and every effect still happens exactly once.
"""

from __future__ import annotations

import os
import sys

import psycopg

import pgque

DSN = sys.argv[1] if len(sys.argv) > 1 else os.environ["PGQUE_DSN"]

with psycopg.connect(DSN, autocommit=True) as conn:
    pgque.install(conn)
    conn.execute("create table if not exists orders (id int primary key, total numeric)")
    conn.execute("create table if not exists invoices (order_id int primary key, total numeric)")
    conn.execute("truncate orders, invoices")
    conn.execute("select pgque.create_queue('order_events')")
    conn.execute("select pgque.subscribe('order_events', 'invoicer')")

# -- produce: data and event in one transaction ---------------------------------------
with pgque.connect(DSN, autocommit=True) as client:
    for order_id, total in ((1, 10), (2, 25), (3, -5)):
        with client.conn.transaction():  # BEGIN ... COMMIT
            client.conn.execute("insert into orders values (%s, %s)", (order_id, total))
            client.send("order_events", {"order_id": order_id}, type="order.placed")
            if total < 0:
                raise psycopg.Rollback()  # invalid: neither the order nor its event exists

# -- consume: effect + ack in one transaction, with a crash on the first try --------
crash_once = True
with pgque.connect(DSN, autocommit=True) as client:
    conn = client.conn
    while True:
        # No ticker runs in this script: tick by hand (each call its own transaction).
        conn.execute("select pgque.force_next_tick('order_events')")
        conn.execute("select pgque.ticker('order_events')")
        try:
            with conn.transaction():
                messages = client.receive("order_events", "invoicer")
                if not messages:
                    break
                for msg in messages:
                    conn.execute(
                        "insert into invoices select id, total from orders where id = %s",
                        (msg.json()["order_id"],),
                    )
                    if crash_once:
                        crash_once = False
                        raise RuntimeError("worker crashed after the first invoice")
                client.ack(messages[0].batch_id)
        except RuntimeError as exc:
            print(f"{exc}: rolled back, the batch comes again")

    invoices = conn.execute("select order_id, total from invoices order by 1").fetchall()
print(f"invoices: {[(o, int(t)) for o, t in invoices]}")
assert [o for o, _ in invoices] == [1, 2]  # each once; order 3 never existed
