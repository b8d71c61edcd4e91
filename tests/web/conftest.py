"""Fixtures of the console tests: the console as an in-process app (Starlette's
TestClient) or served on a loopback port, on the test's real database, and
Debian's Chromium driven by Playwright."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient
from web_helpers import MakeConsole, ServeConsole

from pgque.web import ConsoleSettings, RunningConsole, create_app, start_in_thread

CHROMIUM_HINT = (
    "the browser tests need Debian's Chromium: apt-get install -y chromium"
    " (bash .ci/run installs it), or set PGQUE_CHROMIUM to a Chromium binary"
)


@pytest.fixture
def make_console(db: str) -> Iterator[MakeConsole]:
    """``make_console(**settings)``: a TestClient of a console on ``db`` (lifespan run)."""
    opened: list[TestClient] = []

    def make(**settings: Any) -> TestClient:
        settings.setdefault("dsn", db)
        client = TestClient(create_app(ConsoleSettings(**settings)))
        client.__enter__()
        opened.append(client)
        return client

    yield make
    for client in opened:
        client.__exit__(None, None, None)


@pytest.fixture
def serve_console(db: str) -> Iterator[ServeConsole]:
    """``serve_console(**settings)``: a console served on 127.0.0.1, an ephemeral port."""
    running: list[RunningConsole] = []

    def serve(**settings: Any) -> RunningConsole:
        settings.setdefault("dsn", db)
        console = start_in_thread(ConsoleSettings(**settings))
        running.append(console)
        return console

    yield serve
    for console in running:
        console.stop()


def chromium_path() -> str:
    """The Chromium binary; fails (never skips) with the install line when there is none."""
    path = os.environ.get("PGQUE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not os.path.exists(path):
        pytest.fail(f"no Chromium at {path}: {CHROMIUM_HINT}", pytrace=False)
    return path


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """A headless Chromium (Debian's, through Playwright) for the session."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is missing: pip install -e '.[test]'", pytrace=False)
    path = chromium_path()
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=path, headless=True, args=["--no-sandbox"]
        )
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh browser page (own cookies); dialogs are recorded in ``page.dialogs``."""
    context = browser.new_context()
    page = context.new_page()
    page.dialogs = []
    page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))
    page.set_default_timeout(15000)
    try:
        yield page
    finally:
        context.close()


@pytest.fixture
def reader_dsn(db: str, conn: Any) -> Iterator[str]:
    """The DSN of a fresh LOGIN role that is only a ``pgque_reader``."""
    import uuid

    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    role = f"web_reader_{uuid.uuid4().hex[:8]}"
    conn.execute(sql.SQL("create role {} login").format(sql.Identifier(role)))
    conn.execute(sql.SQL("grant pgque_reader to {}").format(sql.Identifier(role)))
    try:
        yield make_conninfo(db, user=role)
    finally:
        conn.execute(
            "select pg_terminate_backend(pid) from pg_stat_activity where usename = %s", (role,)
        )
        conn.execute(sql.SQL("drop owned by {}").format(sql.Identifier(role)))
        conn.execute(sql.SQL("drop role {}").format(sql.Identifier(role)))
