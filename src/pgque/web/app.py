"""The console's application: its routes, the connection pool's lifespan, request logging.

The URLs below a queue come from one table (:mod:`pgque.web.routes`) that
the pages and the JSON API share; :mod:`pgque.web.console` holds what both
use (the running console, errors as pages or JSON).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator
from importlib import resources

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pgque.web import api, pages, routes
from pgque.web.console import Console, Handler, HttpError, guarded, log
from pgque.web.security import ConsoleSettings, Guard

__all__ = ["Console", "HttpError", "RequestLog", "create_app"]


async def _css(request: Request) -> Response:
    text = (resources.files("pgque.web") / "templates" / "console.css").read_text("utf-8")
    return Response(text, media_type="text/css")


class RequestLog:
    """ASGI middleware: each request at debug level on logger ``pgque.web`` (method,
    path, status, milliseconds); the query string is left out."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, then log it (status 500 if it raised)."""
        if scope["type"] != "http" or not log.isEnabledFor(logging.DEBUG):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            raw = scope.get("raw_path") or scope.get("path", "").encode()
            path = raw.decode("latin-1").split("?", 1)[0]
            elapsed = (time.perf_counter() - started) * 1000
            log.debug("%s %s %d %.1f ms", scope.get("method"), path, status, elapsed)


def create_app(settings: ConsoleSettings) -> Starlette:
    """The console as an ASGI application (see ``docs/web.md``).

    Its lifespan opens and closes the connection pool; a database that is
    down at start is reported on each page until it is back.
    """
    console = Console(settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await console.pool.open(wait=False)
        try:
            yield
        finally:
            await console.pool.close()

    def html(handler: Handler) -> Handler:
        return guarded(console, handler, as_json=False)

    def js(handler: Handler) -> Handler:
        return guarded(console, handler, as_json=True)

    api_queues = routes.dispatch("/api/queues", api.queue_handlers(console), api.not_found)
    page_queues = routes.dispatch("/queues", pages.queue_handlers(console), pages.not_found)
    table = [
        Route("/", html(pages.overview_page(console))),
        Route("/static/console.css", _css),
        Route("/healthz", api.healthz(console)),
        Route("/metrics", api.metrics_text(console)),
        Route("/api/queues", js(api.queues(console))),
        Route("/api/queues/{rest:path}", js(api_queues), methods=["GET", "POST"]),
        Route("/queues/{rest:path}", html(page_queues), methods=["GET", "POST"]),
    ]  # fmt: skip
    app = Starlette(
        routes=table, lifespan=lifespan,
        middleware=[Middleware(RequestLog), Middleware(Guard, settings=settings)],
    )  # fmt: skip
    app.state.console = console
    return app
