"""US-5: batch processing under load.

Setup: queue "ingest", consumer "etl".
Action: 10,000 events in one transaction, ticker(), receive('ingest', 'etl', 10000).
Verify: all 10,000 in one batch; ack succeeds; the consumer has nothing pending
(get_consumer_info, an empty receive, and queue_stats().depth = 0 where
queue_stats is installed); the event tables have no dead tuples, because events
are never updated or deleted (n_tup_upd = n_tup_del = n_dead_tup = 0).
Teardown: drop the queue.
"""

from __future__ import annotations

import json

from acceptance_helpers import (
    Conn,
    ack,
    batch_of,
    drop_story_queue,
    has_function,
    queue_id,
    receive,
    story_queue,
    subscribe,
    tick,
)

from _engine import one, rows

N = 10_000


def event_table_stats(conn: Conn, qid: int) -> dict[str, tuple[int, int, int, int]]:
    """relname -> (n_tup_ins, n_tup_upd, n_tup_del, n_dead_tup) for the queue's event tables."""
    return {
        r[0]: r[1:]
        for r in rows(
            conn,
            "select relname, n_tup_ins, n_tup_upd, n_tup_del, n_dead_tup"
            " from pg_catalog.pg_stat_user_tables"
            " where schemaname = 'pgque' and relname ~ ('^event_' || %s || '(_[0-9]+)?$')",
            qid,
        )
    }


def test_us05_ten_thousand_events_in_one_batch(conn: Conn) -> None:
    story_queue(conn, "ingest")
    subscribe(conn, "ingest", "etl")
    qid = queue_id(conn, "ingest")

    with conn.transaction():
        txid = one(conn, "select pg_current_xact_id()::text")
        ids = [
            r[0]
            for r in rows(
                conn,
                "select pgque.send('ingest', 'row', jsonb_build_object('n', g))"
                " from generate_series(1, %s) g order by g",
                N,
            )
        ]
    assert len(set(ids)) == N
    # One transaction: every event carries its txid.
    assert rows(
        conn, f"select distinct ev_txid::text from pgque.event_{qid}"
    ) == [(txid,)]  # fmt: skip

    tick(conn, "ingest")
    messages = receive(conn, "ingest", "etl", N)

    assert len(messages) == N
    batch_id = batch_of(messages)
    assert [m.msg_id for m in messages] == sorted(ids)
    assert sorted(json.loads(m.payload)["n"] for m in messages) == list(range(1, N + 1))
    assert {m.type for m in messages} == {"row"}
    assert one(conn, "select count(*) from pgque.get_batch_events(%s)", batch_id) == N

    ack(conn, batch_id)

    info = conn.execute(
        "select current_batch, pending_events, last_tick = ("
        "  select max(tick_id) from pgque.tick where tick_queue = %s)"
        " from pgque.get_consumer_info('ingest', 'etl')",
        (qid,),
    ).fetchone()
    assert info == (None, 0, True)
    assert receive(conn, "ingest", "etl", N) == []
    if has_function(conn, "pgque.queue_stats()"):
        assert one(conn, "select depth from pgque.queue_stats() where queue_name = 'ingest'") == 0
    # A tick after the ack: still nothing.
    tick(conn, "ingest")
    assert receive(conn, "ingest", "etl", N) == []

    # No dead tuples: events are never updated or deleted. Flush this backend's
    # statistics (it did all the work) before reading them.
    one(conn, "select pg_stat_force_next_flush()")
    stats = event_table_stats(conn, qid)
    assert len(stats) == 4, f"expected the parent and three child tables: {sorted(stats)}"
    assert sum(s[0] for s in stats.values()) == N, f"statistics not flushed yet: {stats}"
    for table, (_ins, upd, dele, dead) in stats.items():
        assert (upd, dele, dead) == (0, 0, 0), f"{table}: updated/deleted/dead tuples {stats}"

    drop_story_queue(conn, "ingest")
