"""Ordering keys: per-key order with parallel workers (partition keys and slots).

``pgque.send(queue, type, payload, partition_key)`` stores the key; consumer
``shipper`` is split into N slots (subscriptions ``shipper#k/N``), and every
key hashes to one slot. A worker leases a slot (``claim_slot``) and reads
only its keys (``receive_partitioned``), in order; other workers run the
other slots in parallel.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import defaultdict

import psycopg

import pgque

DSN = sys.argv[1] if len(sys.argv) > 1 else os.environ["PGQUE_DSN"]
SLOTS = 2
CUSTOMERS = ("alice", "bob", "carol", "dave")
STEPS = ("created", "paid", "packed", "shipped")

with psycopg.connect(DSN, autocommit=True) as conn:
    pgque.install(conn)
    conn.execute("select pgque.create_queue('shipments')")
    for slot in range(SLOTS):
        conn.execute("select pgque.subscribe_slot('shipments', 'shipper', %s, %s)", (slot, SLOTS))

# Interleaved events of four customers; each customer's must stay in order.
with psycopg.connect(DSN, autocommit=True) as conn:
    for step in STEPS:
        for customer in CUSTOMERS:
            conn.execute(
                "select pgque.send('shipments', 'order.step', %s::jsonb, %s)",
                (json.dumps({"customer": customer, "step": step}), customer),
            )

ticker = pgque.Ticker(DSN).start()  # no pg_cron here: tick in-process
seen: dict[str, list[str]] = defaultdict(list)
slot_of: dict[str, int] = {}
lock = threading.Lock()
done = threading.Event()


def work(slot: int) -> None:
    worker = f"worker-{slot}"
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute("select pgque.claim_slot('shipments', 'shipper', %s, %s)", (slot, worker))
        while not done.is_set():
            with conn.transaction():
                rows = conn.execute(
                    "select payload from pgque.receive_partitioned("
                    "'shipments', 'shipper', %s, %s, %s)",
                    (slot, SLOTS, worker),
                ).fetchall()
                for (payload,) in rows:
                    event = json.loads(payload)
                    with lock:
                        seen[event["customer"]].append(event["step"])
                        slot_of[event["customer"]] = slot
                conn.execute(
                    "select pgque.ack_partitioned('shipments', 'shipper', %s, %s, %s)",
                    (slot, SLOTS, worker),
                )
            with lock:
                if sum(map(len, seen.values())) == len(CUSTOMERS) * len(STEPS):
                    done.set()
            time.sleep(0.05)
        conn.execute("select pgque.release_slot('shipments', 'shipper', %s, %s)", (slot, worker))


workers = [threading.Thread(target=work, args=(slot,)) for slot in range(SLOTS)]
for thread in workers:
    thread.start()
done.wait(timeout=60)
done.set()
for thread in workers:
    thread.join()
ticker.stop()

for customer in CUSTOMERS:
    print(f"{customer:6} slot {slot_of[customer]}: {' -> '.join(seen[customer])}")
assert all(seen[c] == list(STEPS) for c in CUSTOMERS)
