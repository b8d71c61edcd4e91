"""The console in a real browser: Playwright drives Debian's Chromium against a
console served on a loopback port, on the test's database."""

from __future__ import annotations

from typing import Any

from web_helpers import ServeConsole, seed_queue, tick

from pgque import PgqueClient

HOSTILE = "<script>alert(1)</script>"


def test_overview_lists_the_queues_with_their_depth(
    serve_console: ServeConsole, conn: Any, page: Any
) -> None:
    seed_queue(conn, "orders", events=4)
    seed_queue(conn, "mail", events=1)
    depths = {s.queue_name: s.depth for s in PgqueClient(conn).queue_stats()}
    console = serve_console()
    page.goto(console.url)
    for name in ("orders", "mail"):
        row = page.locator(f'tr[data-queue="{name}"]')
        assert row.locator("a.queue-link").inner_text() == name
        assert row.locator("td.depth").inner_text() == str(depths[name])
    assert depths["orders"] >= 4


def test_a_click_into_a_queue_shows_consumers_and_recent_events(
    serve_console: ServeConsole, conn: Any, page: Any
) -> None:
    seed_queue(conn, "orders", consumer="mailer", events=2)
    console = serve_console()
    page.goto(console.url)
    page.get_by_role("link", name="orders", exact=True).first.click()
    page.wait_for_url("**/queues/orders")
    assert page.locator("#consumers tbody tr td").first.inner_text() == "mailer"
    events = page.locator("#events tbody tr")
    assert events.count() == 2
    assert "order.created" in events.first.inner_text()
    assert '"order_id": 1' in events.first.locator("code.preview").inner_text()
    page.fill("input[name=type]", "nothing.like.this")
    page.click("form.filter button")
    assert page.locator("#events").count() == 0
    assert page.locator("#schedules").count() == 0  # none yet


def test_the_queue_page_shows_its_schedules_next_and_last_run(
    serve_console: ServeConsole, conn: Any, page: Any
) -> None:
    client = seed_queue(conn, "reports", events=0)
    client.schedule("reports", "nightly", "0 2 * * *", {}, type="report.run",
                    time_zone="Europe/Paris")  # fmt: skip
    client.schedule("reports", "<b>hourly</b>", "@hourly", {})
    conn.execute(
        "update pgque.schedule set sc_next_run = now() - interval '1 minute'"
        " where sc_name = 'nightly'"
    )
    conn.execute("select pgque.ticker()")
    [event] = [e for e in client.recent_events("reports") if e.ev_extra2 == "nightly"]
    page.goto(serve_console().url + "queues/reports")
    rows = page.locator("#schedules tbody tr")
    assert rows.count() == 2
    nightly = page.locator('#schedules tr[data-schedule="nightly"]')
    cells = nightly.locator("td").all_inner_texts()
    assert cells[:4] == ["nightly", "0 2 * * *", "Europe/Paris", "report.run"]
    assert cells[4] and cells[5] != "never" and cells[6] == str(event.ev_id)
    hourly = page.locator("#schedules tbody tr").first.locator("td").all_inner_texts()
    assert hourly[0] == "<b>hourly</b>" and hourly[3] == "default" and hourly[5] == "never"
    nightly.locator("a.event-link").click()
    page.wait_for_url(f"**/queues/reports/events/{event.ev_id}")


def test_dead_letters_replayed_from_the_page_reach_the_consumer(
    serve_console: ServeConsole, conn: Any, page: Any
) -> None:
    client = seed_queue(conn, "orders", events=0, dead=2)
    letters = client.dlq_inspect("orders")
    chosen = next(d for d in letters if d.dl_reason == "boom 1")
    console = serve_console(allow_writes=True)
    page.goto(console.url + "queues/orders/dead-letters")
    page.check(f'input[name=id][value="{chosen.dl_id}"]')
    page.click("#replay-selected")
    assert page.locator("h1").inner_text() == "Replay 1 dead letter of queue orders?"
    assert page.locator("p.explain").inner_text() == (
        "1 dead letter of queue orders will be sent again as new events and removed from the"
        " dead letters."
    )
    assert f"Id {chosen.dl_id}." in page.locator("main").inner_text()
    page.click("#confirm")
    assert page.locator("p.result").inner_text() == "Replayed 1 dead letter as new events."
    assert page.locator("#dl-total").inner_text() == "1"
    tick(conn, "orders")
    received = client.receive("orders", "worker", 100)
    assert [m.json() for m in received] == [{"bad": 1}]


def test_a_reader_only_console_has_no_write_buttons(
    reader_dsn: str, serve_console: ServeConsole, conn: Any, page: Any
) -> None:
    seed_queue(conn, "orders", dead=2)
    console = serve_console(dsn=reader_dsn, allow_writes=True)
    for path in ("", "queues/orders", "queues/orders/dead-letters"):
        page.goto(console.url + path)
        assert page.locator("h1").count() == 1
        assert page.locator(".write").count() == 0, path
    assert page.locator("#dead-letters tbody tr").count() == 2


def test_unauthenticated_writes_are_refused(
    serve_console: ServeConsole, conn: Any, page: Any, browser: Any
) -> None:
    seed_queue(conn, "orders", dead=1)
    console = serve_console(allow_writes=True, user="ops", password="s3cret")
    assert page.request.get(console.url).status == 401
    refused = page.request.post(
        console.url + "api/queues/orders/dead-letters/replay",
        data='{"all": true}',
        headers={"content-type": "application/json"},
    )
    assert refused.status == 401
    form = page.request.post(
        console.url + "queues/orders/dead-letters/replay", form={"all": "1", "csrf": "x"}
    )
    assert form.status == 401
    assert conn.execute("select count(*) from pgque.dead_letter").fetchone()[0] == 1
    context = browser.new_context(http_credentials={"username": "ops", "password": "s3cret"})
    try:
        signed_in = context.new_page()
        assert signed_in.goto(console.url + "queues/orders/dead-letters").status == 200
        assert signed_in.locator("#replay-all").count() == 1
    finally:
        context.close()


def test_a_hostile_queue_name_renders_as_text(
    serve_console: ServeConsole, conn: Any, page: Any
) -> None:
    seed_queue(conn, HOSTILE, events=1, dead=1)
    console = serve_console(allow_writes=True)
    page.goto(console.url)
    link = page.locator("a.queue-link")
    assert link.inner_text() == HOSTILE
    link.click()
    assert HOSTILE in page.locator("h1").inner_text()
    page.goto(console.url + "queues/%3Cscript%3Ealert(1)%3C%2Fscript%3E/dead-letters")
    assert HOSTILE in page.locator("h1").inner_text()
    assert page.locator("script").count() == 0
    assert page.dialogs == []
