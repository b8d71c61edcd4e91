"""Hostile and careless clients of a console served on a real socket: credentials
half given from Python, bodies too large, connections that never finish,
ids and bodies that are not what they claim, and unexpected errors."""

from __future__ import annotations

import json
import logging
import socket
import time
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

import pytest
from web_helpers import ServeConsole, seed_queue

from _wait import wait_for
from pgque.errors import PgqueInvalidArgument
from pgque.web import ConsoleSettings, start_in_thread


def _request(
    url: str, method: str = "GET", body: bytes | None = None, **headers: str
) -> tuple[int, str]:
    request = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _post_json(url: str, body: Any) -> tuple[int, str]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return _request(url, "POST", raw, **{"Content-Type": "application/json"})


def _connect(url: str) -> socket.socket:
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=30)
    return sock


def _closed_by_server(sock: socket.socket) -> bool:
    """True once the server closed the connection (EOF or reset)."""
    sock.settimeout(0.05)
    try:
        return sock.recv(65536) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


@pytest.mark.parametrize(
    ("user", "password"),
    [("admin", None), ("admin", ""), (None, "secret"), ("", "secret")],
)
def test_python_api_refuses_half_given_credentials(
    db: str, user: str | None, password: str | None
) -> None:
    with pytest.raises(PgqueInvalidArgument, match="user and a non-empty password"):
        start_in_thread(ConsoleSettings(db, allow_writes=True, user=user, password=password))


def test_a_body_over_the_bound_is_refused_before_it_is_read(
    serve_console: ServeConsole, conn: Any
) -> None:
    seed_queue(conn, "orders", dead=1)
    console = serve_console(allow_writes=True, max_body_bytes=4096)
    sock = _connect(console.url)
    try:
        # Announce 200 MiB and send only the headers: the answer comes at once.
        sock.sendall(
            b"POST /api/queues/orders/dead-letters/replay HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: 209715200\r\n\r\n"
        )
        sock.settimeout(30)
        answer = sock.recv(65536).decode()
    finally:
        sock.close()
    assert answer.startswith("HTTP/1.1 413"), answer
    assert "4096 bytes" in answer
    chunked = _connect(console.url)
    try:
        chunked.sendall(
            b"POST /api/queues/orders/pause HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            + b"%x\r\n%s\r\n"
            % (5000, b" " * 5000)
        )
        chunked.settimeout(30)
        answer = chunked.recv(65536).decode()
    finally:
        chunked.close()
    assert answer.startswith("HTTP/1.1 413"), answer
    assert conn.execute("select queue_ticker_paused from pgque.queue").fetchone()[0] is False


def test_idle_and_slow_connections_are_closed(serve_console: ServeConsole) -> None:
    console = serve_console(request_timeout=1.0)
    silent = _connect(console.url)
    slow = _connect(console.url)
    try:
        started = time.monotonic()
        slow.sendall(b"GET /healthz HTTP/1.1\r\n")

        def slow_closed() -> bool:
            # One header byte every 0.1 s never finishes the request: the deadline
            # counts from the connection, not from the last byte.
            try:
                slow.sendall(b"X")
            except OSError:
                return True
            return _closed_by_server(slow)

        wait_for(slow_closed, timeout=20, what="the server closing a dripping connection")
        wait_for(lambda: _closed_by_server(silent), timeout=20,
                 what="the server closing a silent connection")  # fmt: skip
        assert time.monotonic() - started >= 0.9
    finally:
        silent.close()
        slow.close()
    status, body = _request(console.url + "healthz")
    assert status == 200, body


def test_ids_that_are_not_ids_are_400_naming_the_field(
    serve_console: ServeConsole, conn: Any
) -> None:
    seed_queue(conn, "orders", dead=1)
    console = serve_console(allow_writes=True)
    url = console.url + "api/queues/orders/dead-letters/replay"
    for ids in ([100000000000000000000], [1.5], [2.0], ["x"], [True], [-3], [0], "7"):
        status, body = _post_json(url, {"ids": ids})
        assert status == 400, (ids, body)
        assert json.loads(body)["error"].startswith("ids:"), body
    status, body = _post_json(url, {"ids": list(range(1, 1002))})
    assert status == 400 and "at most 1000" in json.loads(body)["error"]
    status, body = _request(
        console.url + "queues/orders/confirm?action=replay&id=99999999999999999999"
    )
    assert status == 400 and "id:" in body
    assert conn.execute("select count(*) from pgque.dead_letter").fetchone()[0] == 1


def test_deep_nesting_and_bad_percent_encoding_are_400(
    serve_console: ServeConsole, conn: Any
) -> None:
    seed_queue(conn, "orders")
    console = serve_console(allow_writes=True)
    deep = b'{"ids": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    status, body = _post_json(console.url + "api/queues/orders/dead-letters/replay", deep)
    assert status == 400 and "nested too deeply" in body, body[:200]
    status, body = _request(console.url + "api/queues/%ff%fe")
    assert status == 400 and "percent-encoded UTF-8" in json.loads(body)["error"]
    status, body = _request(console.url + "queues/%ff%fe/dead-letters")
    assert status == 400 and "percent-encoded UTF-8" in body


def test_an_unexpected_error_is_a_generic_500_and_a_logged_traceback(
    serve_console: ServeConsole, conn: Any, caplog: pytest.LogCaptureFixture
) -> None:
    seed_queue(conn, "orders")
    console = serve_console()
    # A payload the database gives back as a type the console never expects:
    # break one view the page reads, as a bug would.
    conn.execute("alter table pgque.queue rename column queue_cur_table to queue_cur_table_x")
    try:
        with caplog.at_level(logging.ERROR, logger="pgque.web"):
            status, body = _request(console.url + "api/queues")
            page_status, page = _request(console.url)
            queue_status, queue_page = _request(console.url + "queues/orders")
    finally:
        conn.execute("alter table pgque.queue rename column queue_cur_table_x to queue_cur_table")
    assert status == 500, body
    assert json.loads(body) == {"error": "internal error: the console's log has the details"}
    assert "queue_cur_table" not in body
    # The pages the same: a generic error page, the traceback in the log.
    for got, html in ((page_status, page), (queue_status, queue_page)):
        assert got == 500, html
        assert "internal error: the console&#39;s log has the details" in html, html
        assert "queue_cur_table" not in html and "Traceback" not in html
    logged = [r for r in caplog.records if r.name == "pgque.web"]
    assert len(logged) == 3 and all(r.exc_info is not None for r in logged)


def test_requests_are_logged_at_debug(
    serve_console: ServeConsole, conn: Any, caplog: pytest.LogCaptureFixture
) -> None:
    seed_queue(conn, "orders")
    console = serve_console()
    with caplog.at_level(logging.DEBUG, logger="pgque.web"):
        assert _request(console.url + "api/queues/orders?limit=5")[0] == 200
        assert _request(console.url + "queues/nosuch/dead-letters")[0] == 404
    lines = [r.getMessage() for r in caplog.records
             if r.name == "pgque.web" and r.levelno == logging.DEBUG]  # fmt: skip
    assert len(lines) == 2, lines
    assert lines[0].startswith("GET /api/queues/orders 200 ") and lines[0].endswith(" ms")
    assert lines[1].startswith("GET /queues/nosuch/dead-letters 404 "), lines
