"""The one table of a queue's URLs, shared by the pages (``/queues/<name>/...``) and
the JSON API (``/api/queues/<name>/...``).

Each route is a method, a path below the queue and a name; the pages and the
API each map names to their handlers (a surface without a handler for a name
answers 404, as for a path not in the table). ``{id}`` at the end of a path
takes the rest of it, checked by the handler.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from pgque.web.console import Handler, HttpError, queue_route

__all__ = ["QUEUE_ROUTES", "QueueHandler", "QueueRoute", "dispatch", "match"]

#: A handler of one queue route: the request, the queue's name, the ``{id}`` ("" without).
QueueHandler = Callable[[Request, str, str], Awaitable[Response]]


@dataclass(frozen=True)
class QueueRoute:
    """One URL of a queue: its method, its path below the queue, and its name."""

    method: str
    path: str
    name: str

    def matches(self, method: str, tail: str) -> str | None:
        """The ``{id}`` of ``tail`` ("" for a path without one) when this route
        takes ``method`` and ``tail``; None otherwise."""
        if method != self.method:
            return None
        if self.path.endswith("{id}"):
            prefix = self.path.removesuffix("{id}")
            rest = tail.removeprefix(prefix)
            return rest if tail.startswith(prefix) and rest else None
        return "" if tail == self.path else None


#: Every URL below a queue, for pages and API alike.
QUEUE_ROUTES = (
    QueueRoute("GET", "", "queue"),
    QueueRoute("GET", "events", "events"),
    QueueRoute("GET", "events/{id}", "event"),
    QueueRoute("GET", "dead-letters", "dead_letters"),
    QueueRoute("GET", "confirm", "confirm"),
    QueueRoute("POST", "pause", "pause"),
    QueueRoute("POST", "resume", "resume"),
    QueueRoute("POST", "dead-letters/replay", "replay"),
    QueueRoute("POST", "dead-letters/purge", "purge"),
)


def match(method: str, tail: str) -> tuple[QueueRoute, str] | None:
    """The route of ``method`` and ``tail`` and its ``{id}``, or None."""
    for route in QUEUE_ROUTES:
        found = route.matches(method, tail)
        if found is not None:
            return route, found
    return None


def dispatch(
    prefix: str,
    handlers: Mapping[str, QueueHandler],
    not_found: Callable[[str, str, str], HttpError],
) -> Handler:
    """A handler of every URL under ``prefix``: the queue's name and the rest of the
    path looked up in :data:`QUEUE_ROUTES`; ``not_found(method, tail, queue)``
    is raised for a path the table (or ``handlers``) lacks."""
    unknown = set(handlers) - {r.name for r in QUEUE_ROUTES}
    assert not unknown, f"handlers for routes not in QUEUE_ROUTES: {sorted(unknown)}"

    async def handle(request: Request) -> Response:
        queue, tail = queue_route(request, prefix)
        found = match(request.method, tail)
        handler = None if found is None else handlers.get(found[0].name)
        if found is None or handler is None:
            raise not_found(request.method, tail, queue)
        return await handler(request, queue, found[1])

    return handle
