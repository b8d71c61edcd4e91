"""The console's guards on a real database: read-only by default, the role's
privileges, basic auth, CSRF tokens, JSON content type, hosts, escaping."""

from __future__ import annotations

import re
from typing import Any

from web_helpers import MakeConsole, seed_queue

HOSTILE = "<script>alert(1)</script>"


def _form_token(html: str) -> str:
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert match, "no CSRF token in the form"
    return match.group(1)


def test_read_only_by_default(make_console: MakeConsole, conn: Any) -> None:
    seed_queue(conn, "orders", dead=1)
    console = make_console()
    page = console.get("/queues/orders/dead-letters").text
    assert "Replay" not in page and "Purge" not in page
    assert "Pause" not in console.get("/queues/orders").text
    refused = console.post("/api/queues/orders/pause", json={})
    assert refused.status_code == 403 and "--allow-writes" in refused.json()["error"]
    confirm = console.get("/queues/orders/confirm?action=pause")
    assert confirm.status_code == 403
    assert console.get("/api/queues/orders").json()["queue"]["ticker_paused"] is False


def test_a_reader_role_gets_no_write_buttons(
    reader_dsn: str, make_console: MakeConsole, conn: Any
) -> None:
    seed_queue(conn, "orders", dead=1)
    console = make_console(dsn=reader_dsn, allow_writes=True)
    assert "boom 0" in console.get("/queues/orders/dead-letters").text
    assert "Replay" not in console.get("/queues/orders/dead-letters").text
    assert "Pause" not in console.get("/queues/orders").text
    refused = console.post("/api/queues/orders/dead-letters/replay", json={"all": True})
    assert refused.status_code == 403
    assert "pgque.dlq_replay_all()" in refused.json()["error"]
    assert conn.execute("select count(*) from pgque.dead_letter").fetchone()[0] == 1


def test_basic_auth_guards_every_request(make_console: MakeConsole, conn: Any) -> None:
    seed_queue(conn, "orders")
    console = make_console(user="ops", password="s3cret", allow_writes=True)
    for path in ("/", "/api/queues", "/healthz", "/metrics", "/queues/orders"):
        response = console.get(path)
        assert response.status_code == 401, path
        assert response.headers["www-authenticate"].startswith("Basic")
    assert console.get("/", auth=("ops", "wrong")).status_code == 401
    assert console.post("/api/queues/orders/pause", json={}).status_code == 401
    assert console.get("/api/queues", auth=("ops", "s3cret")).status_code == 200
    paused = console.post("/api/queues/orders/pause", json={}, auth=("ops", "s3cret"))
    assert paused.status_code == 200 and paused.json()["paused"] is True


def test_forms_need_the_csrf_token_of_their_cookie(make_console: MakeConsole, conn: Any) -> None:
    seed_queue(conn, "orders", dead=1)
    console = make_console(allow_writes=True)
    confirm = console.get("/queues/orders/confirm?action=replay-all")
    assert confirm.status_code == 200
    token = _form_token(confirm.text)
    forged = console.post("/queues/orders/dead-letters/replay", data={"all": "1", "csrf": "0" * 64})
    assert forged.status_code == 403 and "CSRF" in forged.text
    cross_site = console.post(
        "/queues/orders/dead-letters/replay",
        data={"all": "1", "csrf": token},
        headers={"origin": "http://evil.example"},
    )
    assert cross_site.status_code == 403
    assert conn.execute("select count(*) from pgque.dead_letter").fetchone()[0] == 1
    done = console.post(
        "/queues/orders/dead-letters/replay",
        data={"all": "1", "csrf": token},
        follow_redirects=False,
    )
    assert done.status_code == 303
    shown = console.get(done.headers["location"])
    assert "Replayed 1 dead letter as new events." in shown.text
    assert conn.execute("select count(*) from pgque.dead_letter").fetchone()[0] == 0


def test_json_writes_need_a_json_content_type(make_console: MakeConsole, conn: Any) -> None:
    seed_queue(conn, "orders")
    console = make_console(allow_writes=True)
    simple = console.post(
        "/api/queues/orders/pause",
        content=b"{}",
        headers={"content-type": "text/plain"},
    )
    assert simple.status_code == 415
    form = console.post("/api/queues/orders/pause", data={"x": "1"})
    assert form.status_code == 415
    assert console.get("/api/queues/orders").json()["queue"]["ticker_paused"] is False


def test_loopback_console_answers_loopback_host_names_only(
    make_console: MakeConsole, conn: Any
) -> None:
    console = make_console(allowed_hosts=["127.0.0.1", "localhost"])
    assert console.get("/healthz", headers={"host": "127.0.0.1:8765"}).status_code == 200
    rebound = console.get("/healthz", headers={"host": "attacker.example"})
    assert rebound.status_code == 400


def test_security_headers_forbid_scripts_and_framing(make_console: MakeConsole) -> None:
    response = make_console().get("/")
    csp = response.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script" not in csp
    assert response.headers["x-frame-options"] == "DENY"
    assert "pgque_csrf=" in response.headers["set-cookie"]
    assert "SameSite=Strict" in response.headers["set-cookie"]


def test_hostile_names_and_payloads_are_escaped(make_console: MakeConsole, conn: Any) -> None:
    client = seed_queue(conn, HOSTILE, consumer="<img src=x onerror=alert(2)>", dead=1)
    client.send(HOSTILE, {"html": "</pre><script>alert(3)</script>"}, type="<i>t</i>")
    conn.execute("select pgque.force_tick(%s)", (HOSTILE,))
    console = make_console(allow_writes=True)
    pages = [
        console.get("/").text,
        console.get("/queues/%3Cscript%3Ealert(1)%3C%2Fscript%3E").text,
        console.get("/queues/%3Cscript%3Ealert(1)%3C%2Fscript%3E/dead-letters").text,
        console.get("/queues/%3Cscript%3Ealert(1)%3C%2Fscript%3E/confirm?action=pause").text,
    ]
    for html in pages:
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
        assert "<script" not in html
        assert "<img" not in html and "<i>" not in html
    assert "&lt;img src=x onerror=alert(2)&gt;" in pages[1]
    detail = console.get("/api/queues/%3Cscript%3Ealert(1)%3C%2Fscript%3E").json()
    assert detail["queue"]["queue_name"] == HOSTILE
