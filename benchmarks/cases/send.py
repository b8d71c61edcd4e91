"""Sending: one event per transaction (pgbench and Python), and batched sends."""

from __future__ import annotations

import time
from typing import Any

from psycopg.conninfo import make_conninfo

import pgque

from .. import skip_locked
from ..core import Context, case, timed_rate
from ..fixtures import PAYLOAD_2K, PAYLOAD_100, connect
from ..pgbench import pgbench_tps, server_file
from ..targets import target

PAYLOADS = {"100 B": PAYLOAD_100, "2 KiB": PAYLOAD_2K}
CLIENTS = (1, 2, 4, 8)
SINGLE = "single event per transaction (pgbench), {size}, {clients} client(s), sync {sync}"
PYTHON = "single event per transaction from Python, 100 B, sync {sync}"
BATCHED = "batched send, {per_tx} x 100 B per transaction"
PGQ_SINGLE = "pgq.insert_event"
SDK_SEND = "pgque Producer.send"
PGQ_PY = "pgq.insert_event from Python"
CLIENT_BATCH = "pgque PgqueClient.send_batch (jsonb[])"

for _size in PAYLOADS:
    for _clients in CLIENTS:
        for _sync in ("off", "on"):
            target(goal=f"single event, {_size}, {_clients} client(s), sync {_sync}: "
                        "pgque.send on par with PgQ"
                        + (" (ranges overlap)" if _sync == "on" else ""),
                   workload=SINGLE.format(size=_size, clients=_clients, sync=_sync),
                   subject="pgque.send", baseline=PGQ_SINGLE, at_least=0.95,
                   overlap=_sync == "on")  # fmt: skip
for _sync in ("off", "on"):
    target(goal=f"single event from Python, sync {_sync}: SDK send on par with PgQ"
                + (" (ranges overlap)" if _sync == "on" else ""),
           workload=PYTHON.format(sync=_sync), subject=SDK_SEND, baseline=PGQ_PY,
           at_least=0.95, overlap=_sync == "on")  # fmt: skip
for _subject in ("pgque send_batch text[]", "pgque Producer.send_batch"):
    _w = BATCHED.format(per_tx=1000)
    target(
        goal=f"1000 x 100 B: {_subject} >= 3x PgQ insert_event per row",
        workload=_w,
        subject=_subject,
        baseline="pgq insert_event per row",
        at_least=3.0,
    )
    target(
        goal=f"1000 x 100 B: {_subject} >= 1.5x SKIP LOCKED batched INSERT",
        workload=_w,
        subject=_subject,
        baseline="skip-locked batched INSERT",
        at_least=1.5,
    )
    target(
        goal=f"1000 x 100 B: {_subject} >= 10% of server-side COPY of the same rows",
        workload=_w,
        subject=_subject,
        baseline="COPY FROM file (plain table)",
        at_least=0.1,
    )
# Issue 37's ingest targets ("ingest at COPY speed"), beside the older ones above.
for _subject, _at_least in (("pgque send_batch text[]", 1.0), ("pgque Producer.send_batch", 0.8)):
    target(
        goal=f"1000 x 100 B: {_subject} >= {_at_least:g}x SKIP LOCKED batched INSERT",
        workload=BATCHED.format(per_tx=1000),
        subject=_subject,
        baseline="skip-locked batched INSERT",
        at_least=_at_least,
    )
target(
    goal="1000 x 100 B: PgqueClient.send_batch (jsonb contract) on par with Producer.send_batch",
    workload=BATCHED.format(per_tx=1000),
    subject=CLIENT_BATCH,
    baseline="pgque Producer.send_batch",
    at_least=0.95,
)


def _with_options(dsn: str, sync: bool) -> str:
    return make_conninfo(dsn, options=f"-c synchronous_commit={'on' if sync else 'off'}")


@case("send.single", "one event per transaction: pgbench 1-8 clients, and from Python")
def send_single(ctx: Context) -> None:
    dsn = ctx.clusters.database("bench_send_single", pgq=True)
    with connect(dsn) as conn:
        for schema in ("pgque", "pgq"):
            conn.execute(f"select {schema}.create_queue('single_q')")
    seconds = ctx.size(2, 1)
    clients = CLIENTS if not ctx.quick else (1, 4)
    for size, payload in PAYLOADS.items():
        statements = {
            "pgque.send": f"select pgque.send('single_q', 'bench', '{payload}'::text)",
            "pgque.insert_event": f"select pgque.insert_event('single_q', 'bench', '{payload}')",
            PGQ_SINGLE: f"select pgq.insert_event('single_q', 'bench', '{payload}')",
        }
        for n in clients:
            for sync in (False, True):
                series = ctx.interleave({
                    name: lambda s=statement, c=n, y=sync:
                        pgbench_tps(dsn, s, clients=c, seconds=seconds, sync=y)
                    for name, statement in statements.items()
                })  # fmt: skip
                ctx.record(SINGLE.format(size=size, clients=n, sync="on" if sync else "off"),
                           series, "events/s")  # fmt: skip
    count = ctx.size(3000, 300)
    body = {"pad": "x" * 89}  # 100 B of JSON
    for sync in (False, True):
        producer = pgque.Producer(_with_options(dsn, sync))
        conn = connect(dsn, sync=sync)

        def sdk_send(p: pgque.Producer = producer) -> int:
            for _ in range(count):
                p.send("single_q", body, type="bench")
            return count

        def pgq_send(c: Any = conn) -> int:
            for _ in range(count):
                c.execute("select pgq.insert_event('single_q', 'bench', %s)", (PAYLOAD_100,))
            return count

        series = ctx.interleave({SDK_SEND: lambda f=sdk_send: timed_rate(f),
                                 PGQ_PY: lambda f=pgq_send: timed_rate(f)})  # fmt: skip
        ctx.record(PYTHON.format(sync="on" if sync else "off"), series, "events/s",
                   notes={t: f"{count:,} sends, one client" for t in series})  # fmt: skip
        producer.close()
        conn.close()


@case("send.batched", "100 and 1000 events per transaction: SQL, SDK, PgQ, SKIP LOCKED, COPY")
def send_batched(ctx: Context) -> None:
    server = ctx.clusters.server(15)
    dsn = ctx.clusters.database("bench_send_batched", pgq=True)
    conn = connect(dsn)
    for schema in ("pgque", "pgq"):
        conn.execute(f"select {schema}.create_queue('batch_q')")
    skip_locked.create(conn)
    conn.execute("create table plain (id bigint generated always as identity, message text)")
    producer = pgque.Producer(_with_options(dsn, False))
    client_conn = connect(dsn)
    client = pgque.PgqueClient(client_conn)  # pgque-py's API: dicts stored as jsonb
    total = ctx.size(40_000, 4_000)
    body = {"pad": "x" * 89}
    for per_tx in (100, 1000):
        batches = total // per_tx
        texts = [PAYLOAD_100] * per_tx
        bodies = [body] * per_tx
        source = server_file(server.base_dir, f"copy-{per_tx}.txt", texts)

        def repeat(statement: str, params: tuple[Any, ...] = (), n: int = batches,
                   k: int = per_tx) -> int:  # fmt: skip
            for _ in range(n):
                conn.execute(statement, params)
            return n * k

        def sdk_batch(n: int = batches, b: list[Any] = bodies) -> int:
            for _ in range(n):
                producer.send_batch("batch_q", b, type="bench")
            return n * len(b)

        def client_batch(n: int = batches, b: list[Any] = bodies) -> int:
            for _ in range(n):
                client.send_batch("batch_q", "bench", b)
            return n * len(b)

        def copy(n: int = batches, path: str = str(source), k: int = per_tx) -> float:
            conn.execute("truncate plain")
            start = time.perf_counter()
            for _ in range(n):
                conn.execute(f"copy plain (message) from '{path}'")
            return n * k / (time.perf_counter() - start)

        series = ctx.interleave({
            "pgque send_batch text[]": lambda t=texts: timed_rate(lambda: repeat(
                "select pgque.send_batch('batch_q', 'bench', %b::text[])", (t,))),
            "pgque Producer.send_batch": lambda: timed_rate(sdk_batch),
            CLIENT_BATCH: lambda: timed_rate(client_batch),
            "pgq insert_event per row": lambda t=texts: timed_rate(lambda: repeat(
                "select count(pgq.insert_event('batch_q', 'bench', p)) from unnest(%b::text[]) p",
                (t,))),
            "skip-locked batched INSERT": lambda t=texts: timed_rate(lambda: repeat(
                "insert into skq (message) select unnest(%b::text[])", (t,))),
            "COPY FROM file (plain table)": copy,
        })  # fmt: skip
        ctx.record(BATCHED.format(per_tx=per_tx), series, "events/s",
                   notes={t: f"{batches} transactions, one client" for t in series})  # fmt: skip
        source.unlink()
    producer.close()
    client_conn.close()
    conn.close()
