"""What the pages and the JSON API share: the running console (settings, pool,
templates), errors as HTTP statuses, the queue name of a URL, and the guard
that answers every failure as an error page or JSON.

Queue names may hold any character, ``/`` included, so a queue's URLs carry
the name percent-encoded as one path segment
(:func:`~pgque.web.formatting.queue_path`) and are split on the raw path.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import unquote

import psycopg
from jinja2 import Environment, PackageLoader, select_autoescape
from psycopg_pool import AsyncConnectionPool, PoolTimeout
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from pgque.async_client import AsyncPgqueClient
from pgque.errors import (
    PgqueConnectionError,
    PgqueError,
    PgqueInvalidArgument,
    PgqueMessageNotFound,
    PgqueNotInstalledError,
    PgqueQueueNotFound,
)
from pgque.web import formatting
from pgque.web.security import CSRF_COOKIE, ConsoleSettings, RequestTooLarge, csrf_token

__all__ = ["Console", "Handler", "HttpError", "guarded", "http_error", "log", "queue_route"]

log = logging.getLogger("pgque.web")

Handler = Callable[[Request], Awaitable[Response]]


class HttpError(Exception):
    """A request the console refuses: its HTTP status and the message shown."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def http_error(error: Exception) -> HttpError:
    """The HTTP status and message of an error met while serving a request."""
    if isinstance(error, HttpError):
        return error
    if isinstance(error, RequestTooLarge):
        return HttpError(413, str(error))
    if isinstance(error, (PgqueQueueNotFound, PgqueMessageNotFound)):
        return HttpError(404, str(error))
    if isinstance(error, PgqueInvalidArgument):
        return HttpError(400, str(error))
    if isinstance(error, PgqueNotInstalledError):
        return HttpError(503, f"{error}: run `pgque install` on this database first")
    if isinstance(error, (PoolTimeout, PgqueConnectionError, psycopg.OperationalError)):
        return HttpError(503, f"cannot reach the database: {str(error).strip()}")
    if isinstance(error, PgqueError) and error.sqlstate == "42501":
        return HttpError(403, f"the database role may not do this: {error}")
    # A bug: the traceback goes to the log, the client learns nothing of the code.
    log.error("unexpected error while serving a request", exc_info=error)
    return HttpError(500, "internal error: the console's log has the details")


class Console:
    """One running console: its settings, connection pool and templates."""

    def __init__(self, settings: ConsoleSettings) -> None:
        self.settings = settings
        self.pool = AsyncConnectionPool(
            settings.dsn, min_size=1, max_size=4, timeout=10,
            kwargs={"autocommit": True}, open=False, name="pgque-web",
        )  # fmt: skip
        self.templates = Environment(
            loader=PackageLoader("pgque.web", "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.templates.filters.update(
            age=formatting.age, rate=formatting.rate, pretty=formatting.pretty_payload,
            preview=formatting.preview, size=formatting.size,
        )  # fmt: skip
        self.templates.globals.update(
            queue_path=formatting.queue_path, trace_id=formatting.trace_id
        )

    @contextlib.asynccontextmanager
    async def client(self) -> AsyncIterator[AsyncPgqueClient]:
        """A client on a pooled autocommit connection."""
        async with self.pool.connection() as conn:
            yield AsyncPgqueClient(conn)

    def csrf(self, request: Request) -> str:
        """The CSRF token for this browser's forms."""
        cookie = request.cookies.get(CSRF_COOKIE) or request.scope.get("state", {}).get(
            "csrf_cookie", ""
        )
        return csrf_token(self.settings.secret, cookie)

    def page(
        self, request: Request, template_name: str, http_status: int = 200, **context: Any
    ) -> Response:
        """A rendered template (autoescaped) with the console's common context."""
        template = self.templates.get_template(template_name)
        html = template.render(
            csrf=self.csrf(request), allow_writes=self.settings.allow_writes, **context
        )
        return HTMLResponse(html, status_code=http_status)


def queue_route(request: Request, prefix: str) -> tuple[str, str]:
    """The queue name and the rest of a queue URL (``prefix/<name>/<rest>``)."""
    raw = request.scope.get("raw_path") or request.url.path.encode()
    path = raw.decode("latin-1").split("?", 1)[0]
    rest = path[len(prefix) :].lstrip("/")
    name, _, tail = rest.partition("/")
    try:
        queue = unquote(name, errors="strict")
    except UnicodeDecodeError:
        raise HttpError(
            400, f"the queue name in the URL, {name!r}, is not percent-encoded UTF-8"
        ) from None
    if not queue:
        raise HttpError(404, "no queue named in the URL: the overview lists the queues")
    return queue, tail.strip("/")


def guarded(console: Console, handler: Handler, *, as_json: bool) -> Handler:
    """``handler`` with its errors answered as JSON ``{"error": ...}`` or as an error page."""

    async def run(request: Request) -> Response:
        try:
            return await handler(request)
        except Exception as exc:  # every failure is shown, none kills the server
            error = http_error(exc)
            if as_json:
                return JSONResponse({"error": error.message}, status_code=error.status)
            return console.page(
                request, "error.html", http_status=error.status, status_code=error.status,
                message=error.message,
            )  # fmt: skip

    return run
