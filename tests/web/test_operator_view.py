"""The operator's view in a real browser (Debian's Chromium through Playwright) and
on the wire: who ticks, badges with their reasons, bounded pages with a page per
event, retry copies marked, find by id, refresh without reload, durations in
words and confirmations in plain English."""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from psycopg.conninfo import make_conninfo
from web_helpers import ServeConsole, seed_queue, tick

from _wait import wait_for
from pgque import PgqueClient, Ticker


@pytest.fixture
def sdk_ticker(db: str, conn: Any) -> Iterator[Ticker]:
    """An SDK Ticker named ``order-service`` that leads ticking."""
    ticker = Ticker(make_conninfo(db, application_name="order-service")).start()
    try:
        wait_for(
            lambda: conn.execute("select active from pgque.ticker_leader()").fetchone()[0],
            timeout=20, what="the Ticker taking the ticker lease",
        )  # fmt: skip
        yield ticker
    finally:
        ticker.stop()


def _leader_pid(conn: Any) -> int:
    return int(conn.execute("select pid from pgque.ticker_leader()").fetchone()[0])


def test_the_ticker_panel_says_who_ticks(
    serve_console: ServeConsole, conn: Any, page: Any, sdk_ticker: Ticker
) -> None:
    seed_queue(conn, "orders")
    console = serve_console()
    page.goto(console.url)
    panel = page.locator("#ticking")
    pid = _leader_pid(conn)
    who = page.locator("#who-ticks").inner_text()
    assert "order-service" in who and f"pid {pid}" in who, who
    assert "a ticker client" in page.locator("#leader-kind").inner_text()
    assert page.locator("#leader-app").inner_text() == "order-service"
    assert page.locator("#leader-pid").inner_text() == str(pid)
    assert page.locator("#leader-addr").inner_text() == "a local socket"
    lease = page.locator("#leader-lease").inner_text()
    assert re.fullmatch(r"renewed .+ ago, expires in .+", lease), lease
    assert re.fullmatch(r"last tick [\d.]+ (ms|s) ago \(queue orders\)",
                        page.locator("#last-tick").inner_text())  # fmt: skip
    assert page.locator("#ticking-status").inner_text() == "ok"
    text = panel.inner_text()
    # No "stopped"/"not scheduled" while a Ticker ticks, and the system checks are
    # named by what they judge, not as pg_cron rows on a server without pg_cron.
    assert "stopped" not in text and "not scheduled" not in text
    assert "pg_cron_ticker" not in text and "pg_cron_maint" not in text
    labels = page.locator("tr.system-check th").all_inner_texts()
    assert labels == ["Ticking", "Maintenance"]
    assert "order-service" in page.locator('tr[data-check="pg_cron_ticker"] td').inner_text()
    sdk_ticker.stop()
    wait_for(lambda: not conn.execute("select active from pgque.ticker_leader()").fetchone()[0],
             timeout=20, what="the lease given up")  # fmt: skip
    page.goto(console.url)
    assert "resigned" in page.locator("#leader-kind").inner_text()
    problems = page.locator("#problems").inner_text()
    assert "Nothing ticks" in problems and "pgque ticker" in problems
    assert page.locator("#ticking-status").inner_text() == "warning"


def test_metrics_name_the_leader(
    serve_console: ServeConsole, conn: Any, sdk_ticker: Ticker
) -> None:
    console = serve_console()
    text = urllib.request.urlopen(console.url + "metrics", timeout=30).read().decode()
    pid = _leader_pid(conn)
    assert "pgque_ticker_leader_active 1" in text
    assert (
        f'pgque_ticker_leader_info{{application_name="order-service",client_addr="",pid="{pid}"}} 1'
        in text
    )
    since = re.search(r"^pgque_ticker_leader_since_seconds (\S+)$", text, re.MULTILINE)
    assert since and float(since.group(1)) >= 0
    assert re.search(r"^pgque_ticker_lease_renewed_age_seconds \S+$", text, re.MULTILINE)


def test_badges_say_why_and_lag_is_judged_against_a_shown_threshold(
    serve_console: ServeConsole, conn: Any, page: Any
) -> None:
    seed_queue(conn, "orders", events=3, dead=1)
    console = serve_console(lag_warning=0.001)
    page.goto(console.url)
    health = page.locator('tr[data-queue="orders"] td.health')
    assert health.locator(".badge").inner_text() == "warning"
    reasons = health.locator(".why").all_inner_texts()
    assert any(r.startswith("dead letters: 1 dead letter") for r in reasons), reasons
    assert any(r.startswith("consumer worker: ") and "behind: more than 1 ms" in r
               for r in reasons), reasons  # fmt: skip
    page.click('tr[data-queue="orders"] a.queue-link')
    row = page.locator('#consumers tr[data-consumer="worker"]')
    assert row.locator(".badge").inner_text() == "warning"
    assert re.search(r"^\d+ events pending, .+ behind: more than 1 ms$",
                     row.locator(".why").inner_text())  # fmt: skip
    threshold = page.locator("#lag-threshold").inner_text()
    assert "warning past 1 ms behind" in threshold
    assert "critical past the rotation period (2 h)" in threshold
    assert page.locator("#health-reasons").count() == 1


def test_a_big_payload_is_previewed_and_whole_on_its_event_page(
    serve_console: ServeConsole, conn: Any, page: Any
) -> None:
    client = seed_queue(conn, "orders", events=1)
    big = client.send("orders", {"blob": "x" * 3_000_000}, type="order.big")
    tick(conn, "orders")
    console = serve_console()
    response = page.goto(console.url + "queues/orders")
    assert len(response.body()) < 100_000
    row = page.locator(f'#events tr[data-ev="{big}"]')
    preview = row.locator("code.preview").inner_text()
    assert preview.startswith('{"blob": "xxx') and preview.endswith(" …") and len(preview) < 250
    assert "(3.0 MB)" in row.inner_text()
    row.locator("a.event-link").click()
    page.wait_for_url(f"**/queues/orders/events/{big}")
    assert page.locator("h1").inner_text() == f"Event {big} of orders"
    assert page.locator("#event-type").inner_text() == "order.big"
    assert page.locator("#payload-cut").inner_text() == "The first 1.0 MB of 3.0 MB."
    assert len(page.locator("#payload").inner_text()) > 1_000_000


def test_retry_copies_are_marked_and_an_event_page_tells_its_history(
    serve_console: ServeConsole, conn: Any, page: Any
) -> None:
    client = seed_queue(conn, "orders", events=0)
    client.set_queue_config("orders", "max_retries", 1)
    ev_id = client.send("orders", {"n": 1}, type="order.flaky")
    tick(conn, "orders")
    [msg] = client.receive("orders", "worker", 10)
    client.nack(msg.batch_id, msg, retry_after=0, reason="gateway timeout")
    client.ack(msg.batch_id)
    conn.execute("select pgque.maint_retry_events()")
    tick(conn, "orders")
    console = serve_console(allow_writes=True)
    page.goto(console.url + "queues/orders")
    rows = page.locator(f'#events tr[data-ev="{ev_id}"]')
    assert rows.count() == 2
    assert rows.locator(".tag.retry").all_inner_texts() == ["retry 1 copy"]
    assert page.locator("#events tr.retry-copy").count() == 1
    [again] = client.receive("orders", "worker", 10)
    client.nack(again.batch_id, again, retry_after=0, reason="gateway timeout again")
    client.ack(again.batch_id)
    page.fill("#find input[name=id]", str(ev_id))
    page.click("#find-event")
    page.wait_for_url(f"**/queues/orders/events/{ev_id}")
    history = page.locator("#history tbody tr")
    whats = [history.nth(i).locator("td").first.inner_text() for i in range(history.count())]
    assert whats == ["sent", "retry 1: put back as a copy", "dead-lettered"], whats
    dead = page.locator("#history tr.dead-letter")
    assert "worker" in dead.inner_text() and "gateway timeout again" in dead.inner_text()
    assert dead.locator("a.write").inner_text() == "Replay"
    page.goto(console.url + "queues/orders/events/99999999")
    assert "no event 99999999 in queue 'orders'" in page.locator("p.error").inner_text()
    page.goto(console.url + "queues/orders/events?id=1.5")
    assert "event id: give a whole number" in page.locator("p.error").inner_text()


def test_the_overview_refreshes_without_a_reload(
    serve_console: ServeConsole, conn: Any, page: Any
) -> None:
    seed_queue(conn, "orders")
    console = serve_console(refresh_seconds=1)
    page.goto(console.url)
    assert page.locator('tr[data-queue="mail"]').count() == 0
    assert page.locator("script").count() == 0
    PgqueClient(conn).create_queue("mail")
    page.locator('tr[data-queue="mail"]').wait_for(timeout=15000)
    page.click("#refreshing a")
    assert page.url.endswith("?refresh=0")
    assert page.locator('meta[http-equiv="refresh"]').count() == 0
    assert "not refreshing" in page.locator("#refreshing").inner_text()


def test_durations_read_at_a_glance(serve_console: ServeConsole, conn: Any, page: Any) -> None:
    seed_queue(conn, "orders")
    console = serve_console()
    page.goto(console.url)
    rotation = page.locator('tr[data-queue="orders"] td').nth(5).inner_text()
    assert re.fullmatch(r"table 0, [\d.]+ (ms|s) of 2 h", rotation), rotation
    last_tick = page.locator('tr[data-queue="orders"] td.last-tick').inner_text()
    assert re.fullmatch(r"[\d.]+ (ms|s) ago #\d+", last_tick), last_tick
    page.goto(console.url + "queues/orders")
    assert re.fullmatch(r"last tick [\d.]+ (ms|s) ago \(tick \d+\)",
                        page.locator("#last-tick").inner_text())  # fmt: skip


def test_confirmations_in_plain_english(serve_console: ServeConsole, conn: Any, page: Any) -> None:
    seed_queue(conn, "orders", dead=3)
    console = serve_console(allow_writes=True)
    page.goto(console.url + "queues/orders/dead-letters")
    page.click("#replay-all")
    assert page.locator("h1").inner_text() == "Replay every dead letter of queue orders?"
    assert page.locator("p.explain").inner_text() == (
        "All 3 dead letters of queue orders will be sent again as new events, oldest first,"
        " and removed from the dead letters."
    )
    assert page.locator("#confirm").inner_text() == "Replay all 3 dead letters"
    page.goto(console.url + "queues/orders/confirm?action=purge&older_than=0")
    assert page.locator("p.explain").inner_text() == (
        "All 3 dead letters of queue orders will be deleted for good: they cannot be replayed"
        " afterwards."
    )
    page.goto(console.url + "queues/orders/confirm?action=pause")
    assert page.locator("#confirm").inner_text() == "Pause orders"
