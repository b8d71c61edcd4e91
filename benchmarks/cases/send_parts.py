"""Where a single send's server time goes: each step of the insert path alone.

A DO loop on the server calls each step many times in one transaction, so
neither the client nor the commit is in the figures: what is left is the
CPU each step costs, beside PgQ's C ``insert_event`` measured the same way.
The second workload runs the same steps each in a transaction of its own (a
procedure commits after every call), as pgbench's single sends do: PL/pgSQL
prepares every simple expression a function evaluates again in each
transaction, so a step's cost per transaction is well above its cost in a
loop, and that difference is most of the gap to PgQ's C.
"""

from __future__ import annotations

import time

from ..core import Context, case
from ..fixtures import connect

WORKLOAD = "one step of the insert path, per call on the server (DO loop, no commit)"
TX_WORKLOAD = (
    "one step of the insert path, each call its own transaction on the server"
    " (a procedure commits after every call)"
)
CALLS = 50_000
TX_CALLS = 20_000

# The loop body of each row. The queue 'parts' is the database's only one
# (id 1), so its tables are pgque.event_1_<n> and its leaf router is l0.
STEPS = {
    "pgq.insert_event (PgQ's C)": "perform pgq.insert_event('parts', 't', 'x');",
    "pgque.send": "perform pgque.send('parts', 't', 'x'::text);",
    "pgque._insert_event (no definer wrapper)": (
        "perform pgque._insert_event('parts', null, now(), null, null, 't', 'x',"
        " null, null, null, null);"
    ),
    "queue row lookup and nextval": (
        "select q.queue_id, q.queue_cur_table, q.queue_disable_insert,"
        " nextval(q.queue_event_seq::regclass) into r from pgque.queue q"
        " where q.queue_name = 'parts';"
    ),
    "router: top, middle and leaf, with the INSERT": (
        "v := pgque._route_event(1, 0, 1, now(), null, null, 't', 'x', null, null, null, null);"
    ),
    "router: the leaf alone, with the INSERT": (
        "v := pgque._route_event_l0(1, 0, 1, now(), null, null, 't', 'x', null, null, null, null);"
    ),
    "the static INSERT alone": (
        "insert into pgque.event_1_0 (ev_id, ev_time, ev_type, ev_data)"
        " values (1, now(), 't', 'x');"
    ),
}


@case(
    "send.parts",
    "the server time of each step of a single send, beside PgQ's C insert_event (PostgreSQL 15)",
)
def send_parts(ctx: Context) -> None:
    dsn = ctx.clusters.database("bench_send_parts", pgq=True)
    conn = connect(dsn)
    conn.execute("select pgque.create_queue('parts'), pgq.create_queue('parts')")
    calls = ctx.size(CALLS, 5_000)

    def measure(body: str) -> float:
        conn.execute("begin")
        try:
            start = time.perf_counter()
            conn.execute(
                "do $$ declare r record; v integer; begin"
                f" for i in 1..{calls} loop {body} end loop; end $$"
            )
            return (time.perf_counter() - start) / calls * 1e6
        finally:
            conn.execute("rollback")

    series = ctx.interleave({name: lambda b=body: measure(b) for name, body in STEPS.items()})
    ctx.record(WORKLOAD, series, "µs", higher_is_better=False)

    tx_calls = ctx.size(TX_CALLS, 2_000)
    procedures = {}
    for n, (name, body) in enumerate(STEPS.items()):
        procedures[name] = f"public.bench_step_{n}"
        conn.execute(
            f"create procedure {procedures[name]}(n integer) language plpgsql as $$"
            f" declare r record; v integer; begin for i in 1..n loop {body} commit; end loop;"
            " end $$"
        )

    def per_transaction(procedure: str) -> float:
        start = time.perf_counter()
        conn.execute(f"call {procedure}({tx_calls})")
        return (time.perf_counter() - start) / tx_calls * 1e6

    series = ctx.interleave(
        {name: lambda p=p: per_transaction(p) for name, p in procedures.items()}
    )
    ctx.record(TX_WORKLOAD, series, "µs", higher_is_better=False)
    conn.close()
