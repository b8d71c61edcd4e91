"""Draining a preloaded backlog: pgque receive + ack, PgQ's batch calls, SKIP LOCKED."""

from __future__ import annotations

from .. import skip_locked
from ..core import Context, case, timed_rate
from ..fixtures import PAYLOAD_100, connect, eager_queue, preload
from ..targets import target

WORKLOAD = "drain a backlog of 100 B events, {per_batch} per batch"

target(
    goal="drain, 1000 per batch: pgque receive+ack on par with PgQ (>= 0.95x)",
    workload=WORKLOAD.format(per_batch=1000),
    subject="pgque receive+ack",
    baseline="pgq next_batch+get_batch_events+finish_batch",
    at_least=0.95,
)
target(
    goal="drain, 1000 per batch: pgque receive+ack >= 5x SKIP LOCKED read+delete",
    workload=WORKLOAD.format(per_batch=1000),
    subject="pgque receive+ack",
    baseline="skip-locked read+delete",
    at_least=5.0,
)


@case("drain", "drain a preloaded backlog, 100 and 1000 per batch (PostgreSQL 15)")
def drain(ctx: Context) -> None:
    dsn = ctx.clusters.database("bench_drain", pgq=True)
    backlog = ctx.size(100_000, 10_000)
    conn = connect(dsn)
    skip_locked.create(conn)
    for schema in ("pgque", "pgq"):
        eager_queue(conn, schema, "drain_q")
    state = {"consumer": ""}

    def load(per_batch: int, target_name: str) -> None:
        if target_name.startswith("skip-locked"):
            conn.execute("truncate skq")
            conn.execute(
                "insert into skq (message) select %s from generate_series(1, %s)",
                (PAYLOAD_100, backlog),
            )
            conn.execute("vacuum analyze skq")
            return
        schema = target_name.split()[0]
        consumer = f"c{len(state)}"
        state[consumer] = consumer
        state["consumer"] = consumer
        conn.execute(f"select {schema}.register_consumer('drain_q', %s)", (consumer,))
        preload(conn, schema, "drain_q", backlog, per_batch)

    def pgque_drain(per_batch: int) -> int:
        got = 0
        while True:
            with conn.transaction():
                rows = conn.execute(
                    "select batch_id from pgque.receive('drain_q', %s, %s)",
                    (state["consumer"], per_batch),
                ).fetchall()
                if not rows:
                    return got
                got += len(rows)
                conn.execute("select pgque.ack(%s)", (rows[0][0],))

    def pgq_drain() -> int:
        got = 0
        while True:
            with conn.transaction():
                batch = conn.execute(
                    "select pgq.next_batch('drain_q', %s)", (state["consumer"],)
                ).fetchone()
                if batch is None or batch[0] is None:
                    return got
                got += len(conn.execute(
                    "select * from pgq.get_batch_events(%s)", (batch[0],)).fetchall())  # fmt: skip
                conn.execute("select pgq.finish_batch(%s)", (batch[0],))

    def skip_locked_drain(per_batch: int) -> int:
        got = 0
        while True:
            with conn.transaction():
                rows = skip_locked.read(conn, per_batch)
                if not rows:
                    return got
                got += len(rows)
                skip_locked.delete(conn, [r[0] for r in rows])

    for per_batch in (100, 1000):
        series = ctx.interleave(
            {
                "pgque receive+ack": lambda n=per_batch: timed_rate(lambda: pgque_drain(n)),
                "pgq next_batch+get_batch_events+finish_batch": lambda: timed_rate(pgq_drain),
                "skip-locked read+delete":
                    lambda n=per_batch: timed_rate(lambda: skip_locked_drain(n)),
            },
            before=lambda name, n=per_batch: load(n, name),
        )  # fmt: skip
        ctx.record(
            WORKLOAD.format(per_batch=per_batch),
            series,
            "msg/s",
            notes={t: f"backlog {backlog:,}" for t in series},
        )
    conn.close()
