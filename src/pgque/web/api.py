"""The JSON API (``/api/...``), ``/healthz`` and ``/metrics``.

The pages show the same dicts the GET endpoints send. POSTs need
``Content-Type: application/json`` (a cross-site form cannot send it
without a preflight, which the console never allows), writes allowed at
start, and a database role that may run the function behind them.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from pgque.web import data, metrics, reads, writes
from pgque.web.console import Console, Handler, HttpError, guarded, http_error
from pgque.web.formatting import jsonable
from pgque.web.routes import QueueHandler

__all__ = ["healthz", "metrics_text", "not_found", "queue_handlers", "queues"]

_DEFAULT_LIMIT = 50


def _json(value: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(jsonable(value), status_code=status)


def queues(console: Console) -> Handler:
    """``GET /api/queues``: the overview (queues, health, ticker)."""

    async def handle(request: Request) -> Response:
        async with console.client() as client:
            return _json(await data.overview(client, console.settings.lag_warning))

    return handle


def queue_handlers(console: Console) -> dict[str, QueueHandler]:
    """The API's handlers of :data:`~pgque.web.routes.QUEUE_ROUTES`:
    ``/api/queues/<name>[/events[/<id>]|/dead-letters[/replay|/purge]|/pause|/resume]``."""

    async def queue_detail(request: Request, queue: str, _: str) -> Response:
        async with console.client() as client:
            return _json(await data.queue_detail(client, queue, console.settings.lag_warning))

    async def events(request: Request, queue: str, _: str) -> Response:
        params = request.query_params
        limit = data.checked_limit(params.get("limit"), _DEFAULT_LIMIT, queue)
        async with console.client() as client:
            found = await data.recent_events(client, queue, limit, params.get("type"))
        return _json({"queue": queue, "events": found})

    async def event(request: Request, queue: str, ev_id: str) -> Response:
        number = data.event_id(ev_id, queue)
        async with console.client() as client:
            return _json({"queue": queue, **await data.event(client, queue, number)})

    async def dead_letters(request: Request, queue: str, _: str) -> Response:
        limit = data.checked_limit(request.query_params.get("limit"), _DEFAULT_LIMIT, queue)
        async with console.client() as client:
            letters = await data.dead_letters(client, queue, limit)
        return _json({"queue": queue, "dead_letters": letters})

    def write(action: str) -> QueueHandler:
        async def handle(request: Request, queue: str, _: str) -> Response:
            return await _post(console, request, queue, action)

        return handle

    return {
        "queue": queue_detail, "events": events, "event": event, "dead_letters": dead_letters,
        **{action: write(action) for action in ("pause", "resume", "replay", "purge")},
    }  # fmt: skip


def not_found(method: str, tail: str, queue: str) -> HttpError:
    """The API's 404 for a queue URL no route serves."""
    return HttpError(404, f"no endpoint {method} {tail!r} for queue {queue!r}")


async def _body(request: Request, queue: str) -> dict[str, Any]:
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise HttpError(
            415, "POST with Content-Type: application/json (and a JSON object body, may be {})"
        )
    raw = await request.body()
    try:
        body = json.loads(raw) if raw.strip() else {}
    except ValueError as exc:
        raise HttpError(400, f"the body is not JSON ({exc}) (queue {queue!r})") from None
    except RecursionError:
        raise HttpError(
            400, f"the body's JSON is nested too deeply: send a flat object (queue {queue!r})"
        ) from None
    if not isinstance(body, dict):
        raise HttpError(400, f"the body must be a JSON object, got {raw[:80]!r} (queue {queue!r})")
    return body


async def _post(console: Console, request: Request, queue: str, action: str) -> Response:
    body = await _body(request, queue)
    ids: list[int] = []
    if action == "replay":
        if body.get("all") is True:
            action = "replay-all"
        else:
            ids = writes.int_ids(body.get("ids"), queue)
    async with console.client() as client:
        refusal = await writes.may(client, console.settings.allow_writes, action)
        if refusal is not None:
            raise HttpError(403, refusal)
        outcome = await writes.run_action(client, queue, action, ids, body.get("older_than", "30d"))
    return _json(outcome)


def healthz(console: Console) -> Handler:
    """``GET /healthz``: ``{"status": ok|warning|critical, ...}``, 503 when critical
    or when the database cannot be read."""

    async def handle(request: Request) -> Response:
        try:
            async with console.client() as client:
                body, status = metrics.health_verdict(await client.queue_health())
        except Exception as exc:  # an unreadable database is the critical case
            error = http_error(exc)
            return JSONResponse({"status": "critical", "error": error.message}, status_code=503)
        return JSONResponse(body, status_code=status)

    return handle


def metrics_text(console: Console) -> Handler:
    """``GET /metrics``: ``pgque.otel_metrics()`` and the health checks, Prometheus text."""

    async def handle(request: Request) -> Response:
        async with console.client() as client:
            text = metrics.exposition(
                await client.metric_samples(), await client.queue_health(),
                await reads.ticker_lease(client),
            )  # fmt: skip
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4; charset=utf-8")

    return guarded(console, handle, as_json=True)
