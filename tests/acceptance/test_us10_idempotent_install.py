"""US-10: idempotent install and upgrade.

Setup: pgque installed, with queues, events (ticked and not, unconsumed),
consumers at different positions, an open batch, a pending retry, a delayed
message, a dead letter, changed queue and installation settings, a paused
queue, a completed rotation and tick history.
Action: run the install again: ``pgque.install(conn)`` twice, then
``psql -f src/pgque/sql/pgque.sql``.
Verify: no errors; every pgque table (rows), sequence (value), relation
(grants, storage options) and function (signature, grants) is exactly as
before; the open batch, retry, delayed message and dead letter still work;
every consumer gets every event exactly once; a send/ticker/receive/ack
cycle works.
Teardown: drop the queues.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import psycopg
import pytest
from acceptance_helpers import (
    Conn,
    Message,
    ack,
    batch_of,
    consume_all,
    drop_story_queue,
    has_function,
    maint,
    nack,
    queue_id,
    receive,
    story_queue,
    subscribe,
    tick,
)

import pgque
from _db import PgServer
from _engine import one, rows

PGQUE_SQL = Path(__file__).resolve().parents[2] / "src" / "pgque" / "sql" / "pgque.sql"

Snapshot = dict[str, Any]


def snapshot(conn: Conn) -> Snapshot:
    """Everything an install could disturb, as comparable values."""
    snap: Snapshot = {}
    relations = rows(
        conn,
        "select c.relname, c.relkind::text, c.relacl::text, c.reloptions::text"
        " from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace"
        " where n.nspname = 'pgque' and c.relkind in ('r', 'p', 'S', 'v', 'i')"
        " order by c.relname",
    )
    snap["relations"] = relations
    for name, kind, _acl, _options in relations:
        if kind in ("r", "p"):
            snap[f"rows {name}"] = one(
                conn, f'select array_agg(t::text order by t::text) from pgque."{name}" t'
            )
        elif kind == "S":
            snap[f"sequence {name}"] = one(
                conn, "select pg_sequence_last_value(%s::regclass)", f'pgque."{name}"'
            )
    snap["functions"] = rows(
        conn,
        "select p.oid::regprocedure::text, p.proacl::text, p.prosecdef, p.proconfig::text"
        " from pg_catalog.pg_proc p join pg_catalog.pg_namespace n on n.oid = p.pronamespace"
        " where n.nspname = 'pgque' order by 1",
    )
    snap["types"] = rows(
        conn,
        "select t.typname from pg_catalog.pg_type t"
        " join pg_catalog.pg_namespace n on n.oid = t.typnamespace"
        " where n.nspname = 'pgque' order by 1",
    )
    return snap


def assert_same(before: Snapshot, after: Snapshot, step: str) -> None:
    assert after.keys() == before.keys(), f"{step}: objects changed"
    changed = [key for key in before if before[key] != after[key]]
    assert not changed, f"{step} changed: " + "; ".join(
        f"{key}: {before[key]!r} -> {after[key]!r}" for key in changed
    )


class World:
    """The state US-10 builds before re-installing, and what it expects after."""

    def __init__(self, conn: Conn) -> None:
        self.conn = conn
        self.orders: list[int] = []  # every event of queue "orders"
        self.got: dict[str, list[int]] = {"billing": [], "shipping": [], "audit": []}
        self.open_batch: list[Message] = []
        self.retried: int = 0
        self.dead: int = 0

    def send_orders(self, n: int) -> None:
        for _ in range(n):
            k = len(self.orders)
            self.orders.append(one(self.conn, "select pgque.send('orders', 'o', %s)", f"#{k}"))

    def build(self) -> None:
        conn = self.conn
        story_queue(conn, "orders")
        subscribe(conn, "orders", "billing", "shipping", "audit")
        story_queue(conn, "jobs", max_retries=0)
        subscribe(conn, "jobs", "worker")
        story_queue(conn, "paused")
        subscribe(conn, "paused", "idle")

        # Settings changed from their defaults.
        one(conn, "select pgque.set_queue_config('orders', 'ticker_max_count', '77')")
        one(conn, "select pgque.set_queue_config('orders', 'max_retries', '4')")
        one(conn, "select pgque.set_queue_config('jobs', 'event_ttl', '1 day')")
        if has_function(conn, "pgque.set_tick_period_ms(integer)"):
            one(conn, "select pgque.set_tick_period_ms(50)")
        else:
            conn.execute("update pgque.config set tick_period_ms = 50")

        # Tick history; billing consumes the first round.
        self.send_orders(3)
        tick(conn, "orders")
        self.got["billing"] += [m.msg_id for m in consume_all(conn, "orders", "billing")]
        # Second round: billing retries one event for later, shipping leaves its batch open.
        self.send_orders(3)
        tick(conn, "orders")
        batch = receive(conn, "orders", "billing")
        self.got["billing"] += [m.msg_id for m in batch]
        self.retried = batch[1].msg_id
        nack(conn, batch[1], "1 hour", "later")
        ack(conn, batch_of(batch))
        shipping = receive(conn, "orders", "shipping")
        self.got["shipping"] += [m.msg_id for m in shipping]
        ack(conn, batch_of(shipping))
        self.open_batch = receive(conn, "orders", "shipping")
        assert self.open_batch, "shipping should have a second batch to leave open"
        # Events not ticked yet; a message for later.
        self.send_orders(2)
        one(conn, "select pgque.send_at('orders', 'later', 'tomorrow', now() + interval '1 day')")

        # A dead letter (max_retries 0: the first nack gives up), a rotation of "jobs".
        one(conn, "select pgque.send('jobs', 'job', 'fails')")
        tick(conn, "jobs")
        (job,) = receive(conn, "jobs", "worker")
        self.dead = job.msg_id
        nack(conn, job, "0 seconds", "broken input")
        ack(conn, job.batch_id)
        one(conn, "select pgque.pause_queue('paused')")
        maint(conn)
        maint(conn)

        # Preconditions: the state is as rich as intended.
        counts = conn.execute(
            "select (select count(*) from pgque.retry_queue),"
            " (select count(*) from pgque.delayed_events),"
            " (select count(*) from pgque.dead_letter),"
            " (select count(*) from pgque.subscription where sub_batch is not null),"
            " (select queue_cur_table from pgque.queue where queue_name = 'jobs'),"
            " (select queue_ticker_paused from pgque.queue where queue_name = 'paused'),"
            " (select count(*) from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue"
            "   where q.queue_name = 'orders')"
        ).fetchone()
        assert counts == (1, 1, 1, 1, 1, True, 3), counts

    def check_after(self) -> None:
        """Everything left pending before the re-install still works, exactly once."""
        conn = self.conn
        # The open batch: the same batch and messages come back.
        assert receive(conn, "orders", "shipping") == self.open_batch
        self.got["shipping"] += [m.msg_id for m in self.open_batch]
        ack(conn, batch_of(self.open_batch))

        # The retry and the delayed message become due; maint moves both.
        conn.execute("update pgque.retry_queue set ev_retry_after = now() - interval '1 second'")
        conn.execute("update pgque.delayed_events set de_deliver_at = now() - interval '1 second'")
        assert maint(conn) == 2
        tick(conn, "orders")
        events = f"pgque.event_{queue_id(conn, 'orders')}"
        delayed = one(conn, f"select max(ev_id) from {events} where ev_type = 'later'")
        assert delayed is not None
        self.orders.append(delayed)
        retries: list[Message] = []
        for consumer in self.got:
            for msg in consume_all(conn, "orders", consumer):
                if msg.retry_count is not None:
                    retries.append(msg)
                else:
                    self.got[consumer].append(msg.msg_id)
        assert [(m.msg_id, m.retry_count) for m in retries] == [(self.retried, 1)]
        for consumer, ids in self.got.items():
            assert sorted(ids) == sorted(self.orders), f"{consumer}: {ids} vs {self.orders}"
            assert len(set(ids)) == len(ids), f"{consumer} got duplicates: {ids}"

        # The dead letter is still there and replays.
        (dl_id, ev_id, reason) = conn.execute(
            "select dl_id, ev_id, dl_reason from pgque.dlq_inspect('jobs')"
        ).fetchone() or (None, None, None)
        assert (ev_id, reason) == (self.dead, "broken input")
        new_id = one(conn, "select pgque.dlq_replay(%s)", dl_id)
        tick(conn, "jobs")
        (job,) = receive(conn, "jobs", "worker")
        assert (job.msg_id, job.payload, job.retry_count) == (new_id, "fails", None)
        ack(conn, job.batch_id)

        # The paused queue is still paused until resumed.
        with pytest.raises(psycopg.errors.RaiseException) as paused:
            one(conn, "select pgque.ticker('paused')")
        assert paused.value.diag.message_detail == "pgque:ticker_paused"
        one(conn, "select pgque.resume_queue('paused')")
        tick(conn, "paused")

        # A full cycle with a new consumer.
        subscribe(conn, "orders", "fresh")
        msg_id = one(conn, "select pgque.send('orders', 'after', '{\"ok\": true}')")
        tick(conn, "orders")
        (msg,) = receive(conn, "orders", "fresh")
        assert (msg.msg_id, msg.type, msg.payload) == (msg_id, "after", '{"ok": true}')
        ack(conn, msg.batch_id)
        assert receive(conn, "orders", "fresh") == []


def psql_install(pg_server: PgServer, dsn: str) -> None:
    result = subprocess.run(
        [pg_server.psql(), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(PGQUE_SQL), "-d", dsn],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "ERROR" not in result.stderr, result.stderr


def test_us10_reinstall_keeps_everything(conn: Conn, db: str, pg_server: PgServer) -> None:
    world = World(conn)
    world.build()
    before = snapshot(conn)

    assert pgque.install(conn) == pgque.__version__
    assert_same(before, snapshot(conn), "first pgque.install")
    assert pgque.install(conn) == pgque.__version__
    assert_same(before, snapshot(conn), "second pgque.install")
    psql_install(pg_server, db)
    assert_same(before, snapshot(conn), "psql -f pgque.sql")
    assert one(conn, "select pgque.version()") == pgque.__version__

    world.check_after()

    for queue in ("orders", "jobs", "paused"):
        drop_story_queue(conn, queue)
