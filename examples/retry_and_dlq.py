"""Retries and the dead letter queue.

A handler that raises gets its message retried after ``retry_after``
seconds; past the queue's ``max_retries`` the message lands in the dead
letter queue, where it can be inspected, replayed or purged
(``pgque replay-dlq``, ``pgque purge-dlq``).
"""

from __future__ import annotations

import os
import sys
import threading
import time

import psycopg

import pgque

DSN = sys.argv[1] if len(sys.argv) > 1 else os.environ["PGQUE_DSN"]

with psycopg.connect(DSN, autocommit=True) as conn:
    pgque.install(conn)
    conn.execute("select pgque.create_queue('payments', '{\"max_retries\": 2}'::jsonb)")
    conn.execute("select pgque.subscribe('payments', 'charger')")

attempts: dict[str, int] = {}
consumer = pgque.Consumer(DSN, queue="payments", name="charger", retry_after=0, poll_interval=0.5)


@consumer.on("charge")
def charge(msg: pgque.Message) -> None:
    payment = msg.json()["payment"]
    attempts[payment] = attempts.get(payment, 0) + 1
    print(f"{payment}: attempt {attempts[payment]} (retry_count {msg.retry_count})")
    if payment == "flaky" and attempts[payment] == 1:
        raise ConnectionError("card network timeout")  # succeeds on the retry
    if payment == "poison":
        raise ValueError("card number is invalid")  # fails every time


with pgque.connect(DSN, autocommit=True) as client:
    for payment in ("ok", "flaky", "poison"):
        client.send("payments", {"payment": payment}, type="charge")

# Stop once the poison message is dead: 1 delivery + max_retries (2) retries.
with psycopg.connect(DSN, autocommit=True) as conn:

    def dead_letters() -> list[tuple[object, ...]]:
        return conn.execute(
            "select dl_id, dl_reason, ev_data from pgque.dlq_inspect('payments')"
        ).fetchall()

    watcher = threading.Thread(target=consumer.start)
    watcher.start()
    deadline = time.monotonic() + 60
    while not dead_letters() and time.monotonic() < deadline:
        time.sleep(0.2)
    consumer.stop()
    watcher.join()
    for dl_id, reason, data in dead_letters():
        print(f"dead letter {dl_id}: {data} ({reason})")
    print(f"attempts: {attempts}")
    assert attempts == {"ok": 1, "flaky": 2, "poison": 3}
    # Replay it (after fixing the cause) or purge it:
    purged = conn.execute("select pgque.dlq_purge('payments', '0 seconds')").fetchone()
    print(f"purged {purged[0] if purged else 0} dead letter(s)")
