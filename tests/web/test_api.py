"""The JSON API, /healthz and /metrics against a real database (Starlette's TestClient)."""

from __future__ import annotations

from typing import Any

import psycopg
from web_helpers import MakeConsole, seed_queue, tick

from pgque.web import api, pages, routes


def test_queues_lists_every_queue_with_its_figures(make_console: MakeConsole, conn: Any) -> None:
    seed_queue(conn, "orders", events=3, dead=2)
    seed_queue(conn, "mail", events=0)
    body = make_console().get("/api/queues").json()
    by_name = {q["queue_name"]: q for q in body["queues"]}
    assert set(by_name) == {"orders", "mail"}
    assert by_name["orders"]["depth"] >= 3
    assert by_name["orders"]["dlq_count"] == 2
    assert by_name["orders"]["consumers"] == 1
    assert by_name["orders"]["ticker_paused"] is False
    assert by_name["orders"]["health"] == "warning"  # dlq_health warns about dead letters
    assert isinstance(by_name["orders"]["throughput"], list)
    assert body["status"] == "warning"
    assert {c["name"] for c in body["system_checks"]} == {"pg_cron_ticker", "pg_cron_maint"}


def test_queue_detail_has_consumers_with_position_and_charts(
    make_console: MakeConsole, conn: Any
) -> None:
    seed_queue(conn, "orders", events=4)
    body = make_console().get("/api/queues/orders").json()
    assert body["queue"]["queue_name"] == "orders"
    [consumer] = body["consumers"]
    assert consumer["consumer_name"] == "worker"
    assert consumer["position"] is not None and consumer["pending_events"] >= 4
    assert body["throughput"] and body["error_rate"]
    assert sum(b["events"] for b in body["throughput"]) >= 4


def test_queue_detail_shows_coop_members_and_partition_slots(
    make_console: MakeConsole, conn: Any
) -> None:
    client = seed_queue(conn, "jobs", events=2)
    client.subscribe_subconsumer("jobs", "pool", "w1")
    conn.execute("select pgque.subscribe_slot('jobs', 'parts', 0, 2)")
    conn.execute("select pgque.claim_slot('jobs', 'parts', 0, 'worker-a', interval '1 minute')")
    body = make_console().get("/api/queues/jobs").json()
    assert [(m["consumer_name"], m["subconsumer_name"]) for m in body["subconsumers"]] == [
        ("pool", "w1")
    ]
    slots = {s["slot"]: s for s in body["partition_slots"]}
    assert slots[0]["lease_owner"] == "worker-a" and slots[0]["n"] == 2


def test_events_newest_first_with_type_filter_and_limit(
    make_console: MakeConsole, conn: Any
) -> None:
    seed_queue(conn, "orders", events=5, dead=1)
    console = make_console()
    events = console.get("/api/queues/orders/events?limit=3").json()["events"]
    assert len(events) == 3
    ids = [e["ev_id"] for e in events]
    assert ids == sorted(ids, reverse=True)
    failed = console.get("/api/queues/orders/events?type=order.failed").json()["events"]
    assert [e["ev_type"] for e in failed] == ["order.failed"]


def test_bad_limit_and_unknown_queue_are_clear_errors(make_console: MakeConsole, conn: Any) -> None:
    seed_queue(conn, "orders")
    console = make_console()
    bad = console.get("/api/queues/orders/events?limit=abc")
    assert bad.status_code == 400
    assert "limit" in bad.json()["error"] and "orders" in bad.json()["error"]
    missing = console.get("/api/queues/nosuch")
    assert missing.status_code == 404 and "nosuch" in missing.json()["error"]
    assert console.get("/api/queues/nosuch/dead-letters").status_code == 404


def test_dead_letters_replay_by_ids_and_all(make_console: MakeConsole, conn: Any) -> None:
    seed_queue(conn, "orders", events=0, dead=3)
    seed_queue(conn, "other", events=0, dead=1)
    console = make_console(allow_writes=True)
    letters = console.get("/api/queues/orders/dead-letters").json()["dead_letters"]
    assert len(letters) == 3 and {d["dl_reason"] for d in letters} == {"boom 0", "boom 1", "boom 2"}
    foreign = console.get("/api/queues/other/dead-letters").json()["dead_letters"][0]["dl_id"]
    first = letters[0]["dl_id"]
    done = console.post("/api/queues/orders/dead-letters/replay", json={"ids": [first, foreign]})
    assert done.status_code == 200, done.text
    assert done.json()["replayed"] == 1 and done.json()["not_found"] == [foreign]
    assert len(done.json()["new_event_ids"]) == 1
    rest = console.post("/api/queues/orders/dead-letters/replay", json={"all": True}).json()
    assert rest["replayed"] == 2 and rest["failed"] == 0
    assert console.get("/api/queues/orders/dead-letters").json()["dead_letters"] == []
    assert len(console.get("/api/queues/other/dead-letters").json()["dead_letters"]) == 1


def test_purge_pause_and_resume(make_console: MakeConsole, conn: Any) -> None:
    seed_queue(conn, "orders", events=0, dead=2)
    console = make_console(allow_writes=True)
    kept = console.post("/api/queues/orders/dead-letters/purge", json={"older_than": "1h"})
    assert kept.json()["purged"] == 0
    bad = console.post("/api/queues/orders/dead-letters/purge", json={"older_than": "soon"})
    assert bad.status_code == 400 and "older_than" in bad.json()["error"]
    assert (
        console.post("/api/queues/orders/dead-letters/purge", json={"older_than": 0}).json()[
            "purged"
        ]
        == 2
    )
    assert console.post("/api/queues/orders/pause", json={}).json() == {
        "queue": "orders",
        "paused": True,
    }
    assert console.get("/api/queues/orders").json()["queue"]["ticker_paused"] is True
    assert console.post("/api/queues/orders/resume", json={}).json()["paused"] is False


def test_healthz_follows_pgque_status(make_console: MakeConsole, conn: Any) -> None:
    console = make_console()
    ok = console.get("/healthz")
    assert ok.status_code == 200 and ok.json()["status"] == "ok"
    seed_queue(conn, "orders", events=0, dead=1)
    warning = console.get("/healthz")
    assert warning.status_code == 200 and warning.json()["status"] == "warning"
    assert warning.json()["failing"][0]["check"] == "dlq_health"
    # A consumer behind by more than the rotation period is critical: pgque status
    # exits 7, /healthz answers 503.
    conn.execute("select pgque.set_queue_config('orders', 'rotation_period', '1 microsecond')")
    conn.execute("select pgque.send('orders', 'late', '{}'::jsonb)")
    tick(conn, "orders")
    critical = console.get("/healthz")
    assert critical.status_code == 503 and critical.json()["status"] == "critical"


def test_healthz_is_critical_without_a_database(make_console: MakeConsole) -> None:
    console = make_console(dsn="host=127.0.0.1 port=1 dbname=none connect_timeout=1")
    down = console.get("/healthz")
    assert down.status_code == 503
    assert down.json()["status"] == "critical" and "database" in down.json()["error"]


def test_metrics_in_prometheus_text(make_console: MakeConsole, conn: Any) -> None:
    seed_queue(conn, 'odd"queue', events=2, dead=1)
    text = make_console().get("/metrics").text
    assert "# TYPE pgque_queue_depth gauge" in text
    assert 'pgque_dead_letters{queue="odd\\"queue"} 1' in text
    assert 'pgque_consumer_pending_events{consumer="worker",queue="odd\\"queue"}' in text
    assert 'pgque_health_status{check="dlq_health",queue="odd\\"queue"} 2' in text
    for line in text.splitlines():
        assert line.startswith("#") or line.startswith("pgque_"), line


def test_pages_render_from_the_same_data(make_console: MakeConsole, conn: Any) -> None:
    seed_queue(conn, "orders", events=2, dead=1)
    console = make_console()
    overview = console.get("/")
    assert overview.status_code == 200 and 'href="/queues/orders"' in overview.text
    page = console.get("/queues/orders")
    assert "order.created" in page.text and "&lt;b&gt;bold&lt;/b&gt;" in page.text
    assert "<svg" in page.text
    letters = console.get("/queues/orders/dead-letters")
    assert "boom 0" in letters.text
    assert console.get("/queues/nosuch").status_code == 404


def test_a_database_error_is_a_page_not_a_crash(make_console: MakeConsole, conn: Any) -> None:
    seed_queue(conn, "orders")
    console = make_console()
    conn.execute("select pgque.drop_queue('orders', true)")
    gone = console.get("/queues/orders")
    assert gone.status_code == 404 and "orders" in gone.text
    assert console.get("/").status_code == 200
    assert isinstance(conn, psycopg.Connection)


def test_pages_and_api_share_one_route_table(make_console: MakeConsole, conn: Any) -> None:
    console = make_console()
    app_console = console.app.state.console  # type: ignore[attr-defined]
    served = set(api.queue_handlers(app_console)) | set(pages.queue_handlers(app_console))
    assert served == {r.name for r in routes.QUEUE_ROUTES}
    seed_queue(conn, "orders")
    # A path outside the table, and one the API has no handler for: 404 on each surface.
    for path in ("/api/queues/orders/nosuch", "/api/queues/orders/confirm"):
        answer = console.get(path)
        assert answer.status_code == 404 and "no endpoint GET" in answer.json()["error"]
    for path in ("/queues/orders/nosuch", "/queues/orders/events/1/2/x"):
        assert console.get(path).status_code in (400, 404)
    assert console.post("/queues/orders/events").status_code == 404


def test_queue_detail_lists_the_queues_schedules(make_console: MakeConsole, conn: Any) -> None:
    client = seed_queue(conn, "reports", events=0)
    seed_queue(conn, "other", events=0).schedule("other", "elsewhere", "@daily", {})
    client.schedule("reports", "nightly", "0 2 * * *", {"kind": "sales"}, type="report.run",
                    time_zone="Europe/Paris")  # fmt: skip
    conn.execute("update pgque.schedule set sc_next_run = now() - interval '1 minute'")
    conn.execute("select pgque.ticker()")
    body = make_console().get("/api/queues/reports").json()
    [schedule] = body["schedules"]
    assert {k: schedule[k] for k in ("schedule_name", "cron", "time_zone", "type_name")} == {
        "schedule_name": "nightly", "cron": "0 2 * * *", "time_zone": "Europe/Paris",
        "type_name": "report.run",
    }  # fmt: skip
    assert schedule["next_run"] and schedule["last_run"] and schedule["last_event_id"]
