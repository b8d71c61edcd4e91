"""A periodic job: ``@consumer.every`` runs a report at every minute.

The decorator registers the handler for the type and upserts the schedule
(``pgque.schedule``) when the consumer starts; whatever ticks the queue (here
the consumer's in-process ticker) sends each occurrence once, however many
workers run it. The example waits for the next minute (up to 60 s), handles
that occurrence, and shows that starting again keeps the schedule's next run.
"""

from __future__ import annotations

import os
import sys

import psycopg

import pgque

DSN = sys.argv[1] if len(sys.argv) > 1 else os.environ["PGQUE_DSN"]

with psycopg.connect(DSN, autocommit=True) as conn:
    pgque.install(conn)
    conn.execute("select pgque.create_queue('reports')")
    conn.execute("select pgque.subscribe('reports', 'reporter')")


def make_consumer(handled: list[pgque.Message]) -> pgque.Consumer:
    consumer = pgque.Consumer(DSN, queue="reports", name="reporter", poll_interval=0.5)

    @consumer.every("* * * * *", type="report.sales", payload={"report": "sales"})
    def sales_report(msg: pgque.Message) -> None:
        # extra2: the schedule's name; extra3: the occurrence, in UTC.
        print(f"{msg.json()['report']} report for {msg.extra3} (schedule {msg.extra2})")
        handled.append(msg)
        consumer.stop()

    return consumer


with pgque.connect(DSN, autocommit=True) as client:
    print("waiting for the next minute (up to 60 s) ...")
    handled: list[pgque.Message] = []
    make_consumer(handled).start()
    [schedule] = client.schedules("reports")
    print(f"last run {schedule.last_run:%H:%M}, next run {schedule.next_run:%H:%M}")

    # A restart declares the schedule again: the next run stays, nothing is sent twice.
    with psycopg.connect(DSN, autocommit=True) as conn:
        make_consumer(handled).prepare(conn)  # what start() does first on connecting
    assert client.schedules("reports")[0].next_run == schedule.next_run
    assert len(handled) == 1 and handled[0].extra3 is not None
    print("one report per minute, and a restart kept the next run")
