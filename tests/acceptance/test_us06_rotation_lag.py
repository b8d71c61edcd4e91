"""US-6: table rotation under consumer lag.

Setup: queue "stream" (rotation whenever allowed), consumers "fast" and "slow".
Action: rounds of send -> ticker() -> consume -> maint() -> maint() (a rotation
completes over two maint() calls). First both consume and the tables rotate
every round; then "slow" stops consuming while "fast" goes on.
Verify: while "slow" lags, rotation is blocked (the current table stays, no
table holding its events is truncated, all its events are still there),
queue_health() flags "slow" (where installed), and "fast" keeps receiving
each round's events. Once "slow" catches up and acks, rotation resumes. Each
consumer gets every event exactly once.
Teardown: drop the queue.
"""

from __future__ import annotations

from acceptance_helpers import (
    Conn,
    consume_all,
    drop_story_queue,
    has_function,
    maint,
    queue_id,
    story_queue,
    subscribe,
    tick,
)

from _engine import one, rows

ROUND_SIZE = 4


class Stream:
    """The story's queue with what was sent and what each consumer got."""

    def __init__(self, conn: Conn) -> None:
        self.conn = conn
        story_queue(conn, "stream")
        subscribe(conn, "stream", "fast", "slow")
        self.qid = queue_id(conn, "stream")
        self.sent: list[int] = []
        self.got: dict[str, list[int]] = {"fast": [], "slow": []}

    def send_round(self) -> list[int]:
        """Send one round of events (one transaction) and tick."""
        n = len(self.sent)
        payloads = [f"event {n + i}" for i in range(ROUND_SIZE)]
        ids = list(one(self.conn, "select pgque.send_batch('stream', 'e', %s::text[])", payloads))
        self.sent.extend(ids)
        tick(self.conn, "stream")
        return ids

    def consume(self, consumer: str) -> list[int]:
        ids = [m.msg_id for m in consume_all(self.conn, "stream", consumer)]
        self.got[consumer].extend(ids)
        return ids

    def rotation(self) -> tuple[int, str, str | None]:
        """(current table, step 1 txid, step 2 txid)."""
        row = self.conn.execute(
            "select queue_cur_table, queue_switch_step1::text, queue_switch_step2::text"
            " from pgque.queue where queue_id = %s",
            (self.qid,),
        ).fetchone()
        assert row is not None
        return row[0], row[1], row[2]

    def maint_twice(self) -> tuple[int, str, str | None]:
        """Two maintenance rounds: a rotation started by the first is completed by the second."""
        maint(self.conn)
        maint(self.conn)
        state = self.rotation()
        assert state[2] is not None, "step 2 still pending after two maint() calls"
        return state

    def stored(self, ids: list[int]) -> int:
        """How many of these events are still in the queue's event tables."""
        return int(
            one(
                self.conn,
                f"select count(*) from pgque.event_{self.qid} where ev_id = any(%s)",
                ids,
            )
        )

    def position_xmin_vs_step2(self, consumer: str) -> bool:
        """True when the consumer's position is past the last rotation's step 2."""
        return bool(
            one(
                self.conn,
                "select pg_snapshot_xmin(t.tick_snapshot) > q.queue_switch_step2"
                " from pgque.get_consumer_info('stream', %s) c"
                " join pgque.queue q on q.queue_name = c.queue_name"
                " join pgque.tick t on t.tick_queue = q.queue_id and t.tick_id = c.last_tick",
                consumer,
            )
        )

    def health(self) -> dict[str, str]:
        found = rows(
            self.conn,
            "select check_name, status from pgque.queue_health()"
            " where queue_name = 'stream' and check_name like 'consumer_lag:%'",
        )
        return {str(name): str(status) for name, status in found}


def test_us06_slow_consumer_blocks_rotation_until_it_catches_up(conn: Conn) -> None:
    s = Stream(conn)
    tables_seen = {s.rotation()[0]}

    # Warm-up: both consume, the tables rotate every round.
    for _ in range(2):
        before = s.rotation()
        ids = s.send_round()
        assert s.consume("fast") == ids
        assert s.consume("slow") == ids
        after = s.maint_twice()
        assert after[0] == (before[0] + 1) % 3, f"no rotation while nobody lags: {before} {after}"
        tables_seen.add(after[0])

    # "slow" stops consuming; "fast" goes on.
    stuck = s.rotation()
    lagging: list[int] = []
    for _ in range(4):
        ids = s.send_round()
        lagging.extend(ids)
        assert s.consume("fast") == ids, "fast consumer held up by the slow one"
        state = s.maint_twice()
        assert state == stuck, f"rotated while slow lags: {stuck} -> {state}"
        # Blocked by the slow consumer alone: the fast one is past step 2.
        assert s.position_xmin_vs_step2("fast")
        assert not s.position_xmin_vs_step2("slow")
        assert s.stored(lagging) == len(lagging), "events of the slow consumer were removed"
    info = conn.execute(
        "select consumer_name, pending_events from pgque.get_consumer_info('stream')"
        " order by consumer_name"
    ).fetchall()
    assert info[0][0] == "fast" and info[0][1] == 0
    assert info[1][0] == "slow" and info[1][1] > 0
    if has_function(conn, "pgque.queue_health()"):
        health = s.health()
        assert health["consumer_lag:fast"] == "ok", health
        assert health["consumer_lag:slow"] in ("warning", "critical"), health

    # "slow" catches up: exactly the events it missed, in order.
    assert s.consume("slow") == lagging
    assert s.position_xmin_vs_step2("slow")
    if has_function(conn, "pgque.queue_health()"):
        assert set(s.health().values()) == {"ok"}

    # Rotation resumes, and keeps going round after round.
    state = s.maint_twice()
    assert state[0] == (stuck[0] + 1) % 3, f"rotation did not resume: {stuck} -> {state}"
    tables_seen.add(state[0])
    for _ in range(3):
        before = s.rotation()
        ids = s.send_round()
        assert s.consume("fast") == ids
        assert s.consume("slow") == ids
        after = s.maint_twice()
        assert after[0] == (before[0] + 1) % 3, f"no rotation after catching up: {after}"
        tables_seen.add(after[0])
    assert tables_seen == {0, 1, 2}

    # Nothing lost, nothing twice, for either consumer.
    assert s.got["fast"] == s.sent
    assert s.got["slow"] == s.sent
    assert len(set(s.sent)) == len(s.sent)
    # And the tables really were recycled: the oldest events are gone.
    assert s.stored(s.sent) < len(s.sent)

    drop_story_queue(conn, "stream")
