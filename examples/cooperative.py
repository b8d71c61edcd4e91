"""Cooperative consumers: several workers share one consumer's stream.

Each message is handled once by the group ``resizer``; the members
(``subconsumer=``) take whole batches in turn, so adding workers adds
throughput. A member that dies has its batch taken over after
``dead_interval``.
"""

from __future__ import annotations

import os
import sys
import threading
from collections import Counter

import psycopg

import pgque

DSN = sys.argv[1] if len(sys.argv) > 1 else os.environ["PGQUE_DSN"]
MEMBERS = ("w1", "w2", "w3")
COUNT = 60

with psycopg.connect(DSN, autocommit=True) as conn:
    pgque.install(conn)
    conn.execute("select pgque.create_queue('images')")
    conn.execute("select pgque.set_queue_config('images', 'ticker_max_count', '5')")
    for member in MEMBERS:
        conn.execute("select pgque.subscribe_subconsumer('images', 'resizer', %s)", (member,))

handled: Counter[int] = Counter()
by_member: Counter[str] = Counter()
lock = threading.Lock()
everything = threading.Event()
members = []
for member in MEMBERS:
    consumer = pgque.Consumer(
        DSN, queue="images", name="resizer", subconsumer=member,
        dead_interval="30 seconds", poll_interval=0.5,
    )  # fmt: skip

    def resize(msg: pgque.Message, member: str = member) -> None:
        with lock:
            handled[msg.json()["image"]] += 1
            by_member[member] += 1
            if len(handled) == COUNT:
                everything.set()

    consumer.on("image.uploaded")(resize)
    members.append(consumer)

threads = [threading.Thread(target=c.start) for c in members]
for thread in threads:
    thread.start()
with pgque.connect(DSN, autocommit=True) as client:
    for image in range(COUNT):
        client.send("images", {"image": image}, type="image.uploaded")
everything.wait(timeout=60)
for consumer in members:
    consumer.stop()
for thread in threads:
    thread.join()

print(f"{len(handled)} images, each handled {set(handled.values())} time(s)")
print("per member:", dict(sorted(by_member.items())))
assert len(handled) == COUNT and set(handled.values()) == {1}
