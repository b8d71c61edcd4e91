"""Batch handlers: a whole batch written with one statement, committed with its ack.

``@consumer.on_batch(type, transactional=True, model=...)`` calls the
function once per batch with the list of that type's messages and the
batch's connection: the rows it writes commit in the transaction that
acks the batch (a crash rolls both back, and the batch comes again), so
each reading is loaded exactly once. ``model=`` validates every payload
first: ``msg.data`` is a ``Reading``; a payload that does not fit goes to
the dead letter queue at once and the function never sees it.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

import psycopg

import pgque

DSN = sys.argv[1] if len(sys.argv) > 1 else os.environ["PGQUE_DSN"]


@dataclass
class Reading:
    sensor: str
    value: float


with psycopg.connect(DSN, autocommit=True) as conn:
    pgque.install(conn)
    conn.execute("create table if not exists readings (ev_id bigint primary key, sensor text,"
                 " value float8)")  # fmt: skip
    conn.execute("truncate readings")
    conn.execute("select pgque.create_queue('readings')")
    conn.execute("select pgque.subscribe('readings', 'loader')")

with pgque.connect(DSN, autocommit=True) as client:
    for i in range(100):
        client.send("readings", {"sensor": f"s{i % 4}", "value": i / 10}, type="reading")
    client.send("readings", {"sensor": "s9"}, type="reading")  # no value: does not validate

consumer = pgque.Consumer(DSN, queue="readings", name="loader", ticker=False)
calls: list[int] = []


@consumer.on_batch("reading", transactional=True, model=Reading)
def load(msgs: list[pgque.Message[Reading]], conn: psycopg.Connection[Any]) -> None:
    with conn.cursor() as cur:
        cur.executemany(
            "insert into readings (ev_id, sensor, value) values (%s, %s, %s)",
            [(msg.msg_id, msg.data.sensor, msg.data.value) for msg in msgs],
        )
    calls.append(len(msgs))


with psycopg.connect(DSN, autocommit=True) as conn:
    # No ticker runs in this script: tick by hand, then drive the consumer ourselves.
    conn.execute("select pgque.force_next_tick('readings')")
    conn.execute("select pgque.ticker('readings')")
    while consumer.poll(conn):
        pass
    loaded = conn.execute("select count(*) from readings").fetchone()
    (reason,) = conn.execute("select dl_reason from pgque.dead_letter").fetchone() or (None,)

print(f"loaded {loaded and loaded[0]} readings in {len(calls)} call(s); dead letter: {reason}")
assert loaded == (100,) and calls == [100]
assert reason == "payload does not validate as Reading: missing keys ['value'] for Reading"
