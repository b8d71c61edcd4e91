"""Fan-out: three consumers each receive every message of one queue.

Each consumer keeps its own position; a slow or failing one delays nobody else.
"""

from __future__ import annotations

import os
import sys
import threading
from collections import defaultdict

import psycopg

import pgque

DSN = sys.argv[1] if len(sys.argv) > 1 else os.environ["PGQUE_DSN"]
CONSUMERS = ("billing", "email", "analytics")
COUNT = 5

with psycopg.connect(DSN, autocommit=True) as conn:
    pgque.install(conn)
    conn.execute("select pgque.create_queue('signups')")
    for name in CONSUMERS:
        conn.execute("select pgque.subscribe('signups', %s)", (name,))

seen: dict[str, list[int]] = defaultdict(list)
lock = threading.Lock()
consumers = []
for name in CONSUMERS:
    consumer = pgque.Consumer(DSN, queue="signups", name=name, poll_interval=1)

    def handle(msg: pgque.Message, name: str = name, consumer: pgque.Consumer = consumer) -> None:
        with lock:
            seen[name].append(msg.json()["user"])
            if len(seen[name]) == COUNT:
                consumer.stop()

    consumer.on("user.signed_up")(handle)
    consumers.append(consumer)

threads = [threading.Thread(target=c.start) for c in consumers]
for thread in threads:
    thread.start()

with pgque.connect(DSN, autocommit=True) as client:
    for user in range(COUNT):
        client.send("signups", {"user": user}, type="user.signed_up")

for thread in threads:
    thread.join(timeout=60)
for name in CONSUMERS:
    print(f"{name:9} got users {sorted(seen[name])}")
assert all(sorted(seen[name]) == list(range(COUNT)) for name in CONSUMERS)
