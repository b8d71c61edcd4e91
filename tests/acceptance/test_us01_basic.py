"""US-1: basic produce/consume cycle.

Setup: install pgque, create queue "orders", subscribe consumer "app".
Action: send('orders', '{"id":1}'), ticker(), receive('orders', 'app', 10).
Verify: exactly one message, payload '{"id":1}', type 'default'; ack(batch_id)
succeeds; a following receive() returns nothing.
Teardown: drop the queue, uninstall.
"""

from __future__ import annotations

from acceptance_helpers import Conn, ack, receive, story_queue, subscribe, tick

import pgque
from _engine import one


def test_us01_send_receive_ack(conn: Conn) -> None:
    # Setup (the db fixture installed pgque from the generated pgque.sql).
    assert pgque.installed_version(conn) == pgque.__version__
    story_queue(conn, "orders")
    subscribe(conn, "orders", "app")

    # Action.
    msg_id = one(conn, "select pgque.send('orders', '{\"id\":1}')")
    assert isinstance(msg_id, int)
    assert receive(conn, "orders", "app", 10) == [], "delivered before a tick covered it"
    tick(conn, "orders")
    messages = receive(conn, "orders", "app", 10)

    # Verify.
    assert len(messages) == 1, messages
    (msg,) = messages
    assert msg.msg_id == msg_id
    assert msg.payload == '{"id":1}'  # the text overload keeps the bytes verbatim
    assert msg.type == "default"
    assert msg.retry_count is None
    assert (msg.extra1, msg.extra2, msg.extra3, msg.extra4) == (None, None, None, None)
    # Until ack, the same batch comes back.
    assert receive(conn, "orders", "app", 10) == messages
    ack(conn, msg.batch_id)
    assert receive(conn, "orders", "app", 10) == []
    # Nothing new arrives with a later tick either.
    tick(conn, "orders")
    assert receive(conn, "orders", "app", 10) == []
    info = conn.execute(
        "select current_batch, last_tick from pgque.get_consumer_info('orders', 'app')"
    ).fetchone()
    assert info is not None and info[0] is None

    # Teardown: drop the queue, then uninstall pgque.
    assert one(conn, "select pgque.unsubscribe('orders', 'app')") == 1
    assert one(conn, "select pgque.drop_queue('orders')") == 1
    assert one(conn, "select count(*) from pgque.queue") == 0
    pgque.uninstall(conn)
    assert pgque.installed_version(conn) is None
    assert one(conn, "select count(*) from pg_catalog.pg_namespace where nspname = 'pgque'") == 0
