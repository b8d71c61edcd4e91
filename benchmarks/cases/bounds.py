"""The box's bounds: what this machine's PostgreSQL 15 does without any queue."""

from __future__ import annotations

import time

from ..core import Context, case
from ..fixtures import PAYLOAD_100, connect
from ..pgbench import pgbench_tps, server_file

COPY_ROWS = 1_000_000


@case("bounds", "the box: pgbench single-row INSERT, server-side COPY of 1M rows")
def bounds(ctx: Context) -> None:
    server = ctx.clusters.server(15)
    dsn = ctx.clusters.database("bench_bounds", pgque_schema=False)
    conn = connect(dsn)
    conn.execute("create table plain (id bigint generated always as identity, message text)")
    seconds = ctx.size(3, 1)
    statement = f"insert into plain (message) values ('{PAYLOAD_100}')"
    for sync in (False, True):
        series = ctx.interleave({
            f"pgbench INSERT, {clients} client(s)":
                lambda c=clients, s=sync: pgbench_tps(dsn, statement, clients=c,
                                                      seconds=seconds, sync=s)
            for clients in (1, 8)
        })  # fmt: skip
        ctx.record(f"single-row INSERT per transaction, 100 B, sync {'on' if sync else 'off'}",
                   series, "rows/s")  # fmt: skip
    rows = ctx.size(COPY_ROWS, 100_000)
    source = server_file(server.base_dir, "copy-1m.txt", [PAYLOAD_100] * rows)

    def copy() -> float:
        conn.execute("truncate plain")
        start = time.perf_counter()
        conn.execute(f"copy plain (message) from '{source}'")
        return rows / (time.perf_counter() - start)

    ctx.record("server-side COPY of 100 B rows", ctx.interleave({"COPY FROM file": copy}),
               "rows/s", notes={"COPY FROM file": f"{rows:,} rows, one statement"})  # fmt: skip
    source.unlink()
    conn.close()
