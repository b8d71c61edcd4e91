"""Upgrade from an earlier release: install the current file over pgque 0.0.1.

``pgque-0.0.1.sql`` (next to this file) is pgque as built from the commit
tagged ``v0.0.1``; its header says how it was made. The test installs it into
an empty database, fills it through its own API (queues, consumers at
different positions, ticked and unticked events, an open batch, a pending
retry, a delayed message, a dead letter, changed settings, a rotation), then
installs the current pgque over it with ``pgque.install``. ``version()``
changes; every row of every earlier table (in its earlier columns), every
sequence value and the event tables' storage options survive; then each
consumer consumes to the end, getting every event exactly once, and a fresh
send/ticker/receive/ack cycle works.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, NamedTuple

import psycopg

import pgque
from _db import PgServer
from _engine import one, rows

FIXTURE = Path(__file__).resolve().with_name("pgque-0.0.1.sql")
OLD_VERSION = "0.0.1"
EAGER = json.dumps(
    {
        "ticker_max_lag": "1 microsecond",
        "ticker_idle_period": "1 microsecond",
        "rotation_period": "1 microsecond",
    }
)

Conn = psycopg.Connection[Any]


class Message(NamedTuple):
    """One row of ``pgque.receive()``."""

    msg_id: int
    batch_id: int
    type: str
    payload: str
    retry_count: int | None
    created_at: Any
    extra1: str | None
    extra2: str | None
    extra3: str | None
    extra4: str | None


def tick(conn: Conn, queue: str) -> int:
    one(conn, "select pgque.force_next_tick(%s)", queue)
    tick_id = one(conn, "select pgque.ticker(%s)", queue)
    assert tick_id is not None, f"{queue} did not tick"
    return int(tick_id)


def receive(conn: Conn, queue: str, consumer: str) -> list[Message]:
    found = rows(conn, "select * from pgque.receive(%s, %s, 1000)", queue, consumer)
    return [Message(*r) for r in found]


def ack(conn: Conn, messages: list[Message]) -> None:
    (batch_id,) = {m.batch_id for m in messages}
    assert one(conn, "select pgque.ack(%s)", batch_id) == 1


def nack(conn: Conn, msg: Message, retry_after: str, reason: str) -> None:
    result = one(
        conn,
        "select pgque.nack(%s, row(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)::pgque.message,"
        " %s::interval, %s)",
        msg.batch_id, *msg, retry_after, reason,
    )  # fmt: skip
    assert result == 1


def consume_all(conn: Conn, queue: str, consumer: str) -> list[Message]:
    got: list[Message] = []
    for _ in range(100):
        batch = receive(conn, queue, consumer)
        if not batch:
            return got
        got.extend(batch)
        ack(conn, batch)
    raise AssertionError(f"{consumer} still receiving after 100 batches")


def install_fixture(pg_server: PgServer, dsn: str) -> None:
    """Install pgque 0.0.1 with psql, as a user of that release did."""
    result = subprocess.run(
        [pg_server.psql(), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(FIXTURE), "-d", dsn],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "ERROR" not in result.stderr, result.stderr


def snapshot(conn: Conn) -> dict[str, Any]:
    """Rows of every pgque table (by the columns it has now), sequences, storage options."""
    snap: dict[str, Any] = {}
    tables = rows(
        conn,
        "select c.oid, c.relname, c.reloptions::text,"
        "  array_agg(quote_ident(a.attname) order by a.attnum)"
        " from pg_catalog.pg_class c"
        " join pg_catalog.pg_namespace n on n.oid = c.relnamespace"
        " join pg_catalog.pg_attribute a on a.attrelid = c.oid and a.attnum > 0"
        "  and not a.attisdropped"
        " where n.nspname = 'pgque' and c.relkind in ('r', 'p')"
        " group by c.oid, c.relname, c.reloptions order by c.relname",
    )
    for _oid, name, options, columns in tables:
        cols = ", ".join(columns)
        snap[f"columns {name}"] = columns
        snap[f"options {name}"] = options
        snap[f"rows {name}"] = one(
            conn,
            f"select array_agg(r::text order by r::text)"
            f' from (select {cols} from pgque."{name}") r',
        )
    for (name,) in rows(
        conn,
        "select c.relname from pg_catalog.pg_class c"
        " join pg_catalog.pg_namespace n on n.oid = c.relnamespace"
        " where n.nspname = 'pgque' and c.relkind = 'S' order by 1",
    ):
        snap[f"sequence {name}"] = one(
            conn, "select pg_sequence_last_value(%s::regclass)", f'pgque."{name}"'
        )
    return snap


def same_columns(old: dict[str, Any], conn: Conn) -> dict[str, Any]:
    """Snapshot now, reading each earlier table by its earlier columns only."""
    snap: dict[str, Any] = {}
    for key, value in old.items():
        kind, name = key.split(" ", 1)
        if kind == "columns":
            snap[key] = value
            cols = ", ".join(value)
            snap[f"rows {name}"] = one(
                conn,
                f"select array_agg(r::text order by r::text)"
                f' from (select {cols} from pgque."{name}") r',
            )
        elif kind == "options":
            snap[key] = one(
                conn,
                "select reloptions::text from pg_catalog.pg_class where oid = %s::regclass",
                f'pgque."{name}"',
            )
        elif kind == "sequence":
            snap[key] = one(conn, "select pg_sequence_last_value(%s::regclass)", f'pgque."{name}"')
    return snap


# The shape of the installed schema, leaving out each queue's own tables and
# sequences (event_<id>...), which only the upgraded database has.
NOT_A_QUEUE = "!~ '^_?event_[0-9]'"
SHAPE_QUERIES = {
    "functions": (
        "select p.oid::regprocedure::text, pg_catalog.pg_get_function_result(p.oid),"
        " p.proacl::text, p.prosecdef, p.proconfig::text, p.provolatile, p.proisstrict,"
        # The insert routers follow the queues there are: the tops branch to
        # the middle routers, which exist (like the leaves and the batch
        # readers) for the queues.
        " case when p.proname !~ '^_route_(event|batch)$' then md5(p.prosrc) end"
        " from pg_catalog.pg_proc p where p.pronamespace = 'pgque'::regnamespace"
        " and p.proname !~ '^(_route_(event|batch)_[ml]|_read_l)[0-9]+$'"
    ),
    "columns": (
        "select c.relname, c.relkind::text, c.relacl::text, c.reloptions::text, a.attname,"
        " pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull,"
        " pg_catalog.pg_get_expr(d.adbin, d.adrelid)"
        " from pg_catalog.pg_class c"
        " left join pg_catalog.pg_attribute a on a.attrelid = c.oid and a.attnum > 0"
        "  and not a.attisdropped"
        " left join pg_catalog.pg_attrdef d on d.adrelid = c.oid and d.adnum = a.attnum"
        f" where c.relnamespace = 'pgque'::regnamespace and c.relname {NOT_A_QUEUE}"
    ),
    "constraints": (
        "select c.relname, k.conname, pg_catalog.pg_get_constraintdef(k.oid)"
        " from pg_catalog.pg_constraint k join pg_catalog.pg_class c on c.oid = k.conrelid"
        f" where k.connamespace = 'pgque'::regnamespace and c.relname {NOT_A_QUEUE}"
    ),
    "indexes": (
        "select c.relname, pg_catalog.pg_get_indexdef(c.oid) from pg_catalog.pg_index i"
        " join pg_catalog.pg_class c on c.oid = i.indexrelid"
        f" where c.relnamespace = 'pgque'::regnamespace and c.relname {NOT_A_QUEUE}"
    ),
    "types": (
        "select t.typname, t.typtype::text from pg_catalog.pg_type t"
        f" where t.typnamespace = 'pgque'::regnamespace and t.typname {NOT_A_QUEUE}"
    ),
    "schema": "select nspacl::text, 0 from pg_catalog.pg_namespace where nspname = 'pgque'",
}


def schema_shape(conn: Conn) -> dict[str, list[tuple[Any, ...]]]:
    """Functions, tables, columns, constraints, indexes, types and grants of schema pgque."""
    return {name: sorted(map(tuple, rows(conn, q)), key=repr) for name, q in SHAPE_QUERIES.items()}


class OldWorld:
    """State built with pgque 0.0.1's API; what each consumer must still get."""

    def __init__(self, conn: Conn) -> None:
        self.conn = conn
        self.orders: list[int] = []
        self.got: dict[str, list[int]] = {"billing": [], "shipping": [], "audit": []}
        self.open_batch: list[Message] = []
        self.retried = 0
        self.dead = 0

    def build(self) -> None:
        conn = self.conn
        for queue, extra in (("orders", {}), ("jobs", {"max_retries": 0})):
            options = json.dumps({**json.loads(EAGER), **extra})
            assert one(conn, "select pgque.create_queue(%s, %s::jsonb)", queue, options) == 1
        for queue, consumer in (
            ("orders", "billing"), ("orders", "shipping"), ("orders", "audit"), ("jobs", "worker"),
        ):  # fmt: skip
            assert one(conn, "select pgque.subscribe(%s, %s)", queue, consumer) == 1
        one(conn, "select pgque.set_queue_config('orders', 'ticker_max_count', '77')")
        one(conn, "select pgque.set_queue_config('jobs', 'event_ttl', '1 day')")
        conn.execute("update pgque.config set tick_period_ms = 50")

        # Round 1, consumed by billing.
        for n in range(3):
            self.orders.append(one(conn, "select pgque.send('orders', 'o', %s)", f"#{n}"))
        tick(conn, "orders")
        self.got["billing"] += [m.msg_id for m in consume_all(conn, "orders", "billing")]
        # Round 2 (send_batch): billing retries one for later; shipping leaves it open.
        self.orders += one(conn, "select pgque.send_batch('orders', 'o', array['#3', '#4', '#5'])")
        tick(conn, "orders")
        batch = receive(conn, "orders", "billing")
        self.got["billing"] += [m.msg_id for m in batch]
        self.retried = batch[1].msg_id
        nack(conn, batch[1], "1 hour", "later")
        ack(conn, batch)
        first = receive(conn, "orders", "shipping")
        self.got["shipping"] += [m.msg_id for m in first]
        ack(conn, first)
        self.open_batch = receive(conn, "orders", "shipping")
        assert self.open_batch
        # Unticked events and a message for tomorrow.
        for n in (6, 7):
            self.orders.append(one(conn, "select pgque.send('orders', 'o', %s)", f"#{n}"))
        one(conn, "select pgque.send_at('orders', 'later', 'tomorrow', now() + interval '1 day')")

        # A dead letter: max_retries 0, so the first nack gives up.
        one(conn, "select pgque.send('jobs', 'job', 'fails')")
        tick(conn, "jobs")
        (job,) = receive(conn, "jobs", "worker")
        self.dead = job.msg_id
        nack(conn, job, "0 seconds", "broken input")
        ack(conn, [job])
        # A rotation of "jobs" (two maintenance rounds).
        one(conn, "select pgque.maint()")
        one(conn, "select pgque.maint()")

        state = conn.execute(
            "select (select count(*) from pgque.retry_queue),"
            " (select count(*) from pgque.delayed_events),"
            " (select count(*) from pgque.dead_letter),"
            " (select count(*) from pgque.subscription where sub_batch is not null),"
            " (select queue_cur_table from pgque.queue where queue_name = 'jobs')"
        ).fetchone()
        assert state == (1, 1, 1, 1, 1), state

    def consume_to_the_end(self) -> None:
        conn = self.conn
        assert receive(conn, "orders", "shipping") == self.open_batch
        self.got["shipping"] += [m.msg_id for m in self.open_batch]
        ack(conn, self.open_batch)

        conn.execute("update pgque.retry_queue set ev_retry_after = now() - interval '1 second'")
        conn.execute("update pgque.delayed_events set de_deliver_at = now() - interval '1 second'")
        assert one(conn, "select pgque.maint()") == 2
        tick(conn, "orders")
        events = one(conn, "select queue_data_pfx from pgque.queue where queue_name = 'orders'")
        delayed = rows(conn, f"select ev_id from {events} where ev_type = 'later'")
        assert len(delayed) == 1
        self.orders.append(delayed[0][0])
        retries: list[tuple[int, int | None]] = []
        for consumer in self.got:
            for msg in consume_all(conn, "orders", consumer):
                if msg.retry_count is None:
                    self.got[consumer].append(msg.msg_id)
                else:
                    retries.append((msg.msg_id, msg.retry_count))
        assert retries == [(self.retried, 1)]
        for consumer, ids in self.got.items():
            assert sorted(ids) == sorted(self.orders), consumer
            assert len(set(ids)) == len(ids), f"{consumer} got duplicates: {ids}"

        dead = conn.execute(
            "select dl_id, ev_id, dl_reason, ev_data from pgque.dlq_inspect('jobs')"
        ).fetchall()
        assert [d[1:] for d in dead] == [(self.dead, "broken input", "fails")]
        new_id = one(conn, "select pgque.dlq_replay(%s)", dead[0][0])
        tick(conn, "jobs")
        (job,) = receive(conn, "jobs", "worker")
        assert (job.msg_id, job.payload, job.retry_count) == (new_id, "fails", None)
        ack(conn, [job])


def test_upgrade_from_0_0_1_keeps_everything(
    pg_server: PgServer, empty_db: str, db: str, connect_to: Any
) -> None:
    assert f"select '{OLD_VERSION}'::text" in FIXTURE.read_text(encoding="utf-8")
    install_fixture(pg_server, empty_db)
    conn: Conn = connect_to(empty_db)
    assert pgque.installed_version(conn) == OLD_VERSION

    world = OldWorld(conn)
    world.build()
    before = snapshot(conn)

    assert pgque.install(conn) == pgque.__version__
    assert one(conn, "select pgque.version()") == pgque.__version__ != OLD_VERSION
    after = same_columns(before, conn)
    changed = [k for k in before if before[k] != after[k]]
    assert not changed, "; ".join(f"{k}: {before[k]!r} -> {after[k]!r}" for k in changed)
    assert one(conn, "select pgque.upgrade_schema()") == 0  # nothing left to upgrade
    # The upgraded schema is the one a fresh install (the db fixture) has.
    fresh, upgraded = schema_shape(connect_to(db)), schema_shape(conn)
    for part, expected in fresh.items():
        missing = [r for r in expected if r not in upgraded[part]]
        extra = [r for r in upgraded[part] if r not in expected]
        assert not missing and not extra, f"{part}: missing {missing}, left over {extra}"

    world.consume_to_the_end()

    # A fresh cycle on the upgraded install, with a new queue and consumer.
    assert one(conn, "select pgque.create_queue('fresh', %s::jsonb)", EAGER) == 1
    assert one(conn, "select pgque.subscribe('fresh', 'new')") == 1
    assert one(conn, "select pgque.subscribe('orders', 'new')") == 1
    for queue in ("fresh", "orders"):
        msg_id = one(conn, "select pgque.send(%s, 'x', 'after upgrade')", queue)
        tick(conn, queue)
        (msg,) = receive(conn, queue, "new")
        assert (msg.msg_id, msg.payload) == (msg_id, "after upgrade")
        ack(conn, [msg])
        assert receive(conn, queue, "new") == []
    # Installing once more changes nothing.
    again = snapshot(conn)
    assert pgque.install(conn) == pgque.__version__
    assert snapshot(conn) == again
