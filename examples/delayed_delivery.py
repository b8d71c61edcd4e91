"""Delayed delivery: a message that becomes visible at a given time.

``pgque.send_at`` holds the message until its time; the ticker (here the
consumer's in-process one) moves it into the queue then.
"""

from __future__ import annotations

import json
import os
import sys
import time

import psycopg

import pgque

DSN = sys.argv[1] if len(sys.argv) > 1 else os.environ["PGQUE_DSN"]
DELAY = 2.0

with psycopg.connect(DSN, autocommit=True) as conn:
    pgque.install(conn)
    conn.execute("select pgque.create_queue('reminders')")
    conn.execute("select pgque.subscribe('reminders', 'notifier')")
    sent = time.monotonic()
    conn.execute(
        "select pgque.send_at('reminders', 'reminder', %s::jsonb,"
        " now() + make_interval(secs => %s))",
        (json.dumps({"text": "your trial ends tomorrow"}), DELAY),
    )
    conn.execute(
        "select pgque.send('reminders', 'reminder', %s::jsonb)", (json.dumps({"text": "welcome"}),)
    )

consumer = pgque.Consumer(DSN, queue="reminders", name="notifier", poll_interval=0.5)
arrivals: list[tuple[str, float]] = []


@consumer.on("reminder")
def remind(msg: pgque.Message) -> None:
    waited = time.monotonic() - sent
    arrivals.append((msg.json()["text"], waited))
    print(f"after {waited:.1f} s: {msg.json()['text']}")
    if len(arrivals) == 2:
        consumer.stop()


consumer.start()
(first, _), (second, waited) = arrivals
assert first == "welcome" and second == "your trial ends tomorrow"
assert waited >= DELAY
