"""The HTML pages: overview, queue, dead letters, and the confirmation step of each write.

Write buttons lead (GET) to a confirmation page; only its form POSTs, with
a CSRF token, and the result is shown on the page the write returns to.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from pgque.web import charts, data, reads, writes
from pgque.web.console import Console, Handler, HttpError
from pgque.web.formatting import age, duration_seconds, queue_path
from pgque.web.routes import QUEUE_ROUTES, QueueHandler
from pgque.web.security import CSRF_COOKIE, valid_csrf

__all__ = ["not_found", "overview_page", "queue_handlers"]

_DLQ_LIMIT = 100
_EVENTS_LIMIT = 50


def overview_page(console: Console) -> Handler:
    """``GET /``: every queue, the ticker's health, the health checks that are not ok."""

    async def handle(request: Request) -> Response:
        async with console.client() as client:
            view = await data.overview(client, console.settings.lag_warning)
        for row in view["queues"]:
            row["spark"] = charts.sparkline([float(v) for v in row["throughput"]])
        return console.page(request, "overview.html", **view, **_refresh(console, request))

    return handle


def queue_handlers(console: Console) -> dict[str, QueueHandler]:
    """The pages' handlers of :data:`~pgque.web.routes.QUEUE_ROUTES`:
    ``/queues/<name>[/dead-letters|/confirm|/events[/<id>]|/<write>]``."""

    async def queue_page(request: Request, queue: str, _: str) -> Response:
        return await _queue_page(console, request, queue)

    async def dead_letters(request: Request, queue: str, _: str) -> Response:
        return await _dead_letters_page(console, request, queue)

    async def confirm(request: Request, queue: str, _: str) -> Response:
        return await _confirm_page(console, request, queue)

    async def find_event(request: Request, queue: str, _: str) -> Response:
        ev_id = data.event_id(request.query_params.get("id"), queue)
        return RedirectResponse(queue_path(queue, "events", str(ev_id)), 303)

    async def event(request: Request, queue: str, ev_id: str) -> Response:
        return await _event_page(console, request, queue, data.event_id(ev_id, queue))

    def write(action: str) -> QueueHandler:
        async def handle(request: Request, queue: str, _: str) -> Response:
            return await _write(console, request, queue, action)

        return handle

    return {
        "queue": queue_page, "dead_letters": dead_letters, "confirm": confirm,
        "events": find_event, "event": event,
        **{action: write(action) for action in ("pause", "resume", "replay", "purge")},
    }  # fmt: skip


def not_found(method: str, tail: str, queue: str) -> HttpError:
    """The pages' 404 for a queue URL no page serves."""
    return HttpError(404, f"no page {tail!r} for queue {queue!r}")


async def _queue_page(console: Console, request: Request, queue: str) -> Response:
    params = request.query_params
    limit = data.checked_limit(params.get("limit"), _EVENTS_LIMIT, queue)
    event_type = params.get("type") or None
    async with console.client() as client:
        view = await data.queue_detail(client, queue, console.settings.lag_warning)
        events = await reads.preview_events(client, queue, limit, event_type)
        offered = writes.offered(console.settings.allow_writes, await client.write_privileges())
    starts = [b["bucket_start"] for b in view["throughput"]]
    throughput_chart = charts.bar_chart(
        "Events sent per 2 minutes, last hour", starts,
        [charts.Series("events", "bar-events", [float(b["events"]) for b in view["throughput"]])],
        unit="events",
    )  # fmt: skip
    errors_chart = charts.bar_chart(
        "Retries and dead letters per 2 minutes, last hour",
        [b["bucket_start"] for b in view["error_rate"]],
        [charts.Series("retries", "bar-retries", [float(b["retries"]) for b in view["error_rate"]]),
         charts.Series("dead letters", "bar-dead",
                       [float(b["dead_letters"]) for b in view["error_rate"]])],
        unit="",
    )  # fmt: skip
    return console.page(
        request, "queue.html", name=queue, events=events, event_type=event_type or "",
        limit=limit, offered=offered, throughput_chart=throughput_chart,
        errors_chart=errors_chart, result=_result(request), **view, **_refresh(console, request),
    )  # fmt: skip


async def _dead_letters_page(console: Console, request: Request, queue: str) -> Response:
    limit = data.checked_limit(request.query_params.get("limit"), _DLQ_LIMIT, queue)
    async with console.client() as client:
        if not await client.queue_stats(queue):
            raise HttpError(404, f"no queue named {queue!r}: the overview lists the queues")
        letters = await reads.preview_dead_letters(client, queue, limit)
        stats = (await client.queue_stats(queue))[0]
        offered = writes.offered(console.settings.allow_writes, await client.write_privileges())
    return console.page(
        request, "dead_letters.html", name=queue, letters=letters, limit=limit,
        total=stats.dlq_count, offered=offered, result=_result(request),
    )  # fmt: skip


async def _confirm_page(console: Console, request: Request, queue: str) -> Response:
    params = request.query_params
    action = params.get("action", "")
    ids = writes.int_ids(params.getlist("id"), queue, "id") if action == "replay" else []
    older_than = params.get("older_than", "30d") if action == "purge" else ""
    seconds = duration_seconds(older_than, "older_than") if action == "purge" else 0.0
    async with console.client() as client:
        refusal = await writes.may(client, console.settings.allow_writes, action)
        if refusal is not None:
            raise HttpError(403, refusal)
        stats = await client.queue_stats(queue)
    if not stats:
        raise HttpError(404, f"no queue named {queue!r}: the overview lists the queues")
    post_path = next(r.path for r in QUEUE_ROUTES if r.name == action.split("-")[0])
    words: dict[str, Any] = _plain_english(queue, action, len(ids), seconds, stats[0].dlq_count)
    return console.page(
        request, "confirm.html", name=queue, action=action, ids=ids, shown_ids=ids[:20],
        older_than=older_than, **words,
        post_to=queue_path(queue, post_path),
        back=queue_path(queue) if action in ("pause", "resume")
        else queue_path(queue, "dead-letters"),
    )  # fmt: skip


async def _event_page(console: Console, request: Request, queue: str, ev_id: int) -> Response:
    async with console.client() as client:
        event = await data.event(client, queue, ev_id)
        offered = writes.offered(console.settings.allow_writes, await client.write_privileges())
    return console.page(request, "event.html", name=queue, offered=offered, **event)


def _refresh(console: Console, request: Request) -> dict[str, Any]:
    """The page's own reload: every ``refresh_seconds`` (a meta refresh, no script),
    to the same address without a write's result; ``?refresh=0`` stops it."""
    dropped = ("done", "replayed", "failed", "purged", "not_found", "refresh")
    params = [(k, v) for k, v in request.query_params.multi_items() if k not in dropped]
    raw = request.scope.get("raw_path") or request.url.path.encode()
    here = raw.decode("latin-1").split("?", 1)[0]
    stopped = request.query_params.get("refresh") == "0" or not console.settings.refresh_seconds
    return {
        "refresh": 0 if stopped else console.settings.refresh_seconds,
        "refresh_url": f"{here}?{urlencode(params)}" if params else here,
        "refresh_stop_url": f"{here}?{urlencode([*params, ('refresh', '0')])}",
        "refresh_possible": bool(console.settings.refresh_seconds),
        "console_refresh": console.settings.refresh_seconds,
    }


#: The confirmation page's question, what will happen and its button, by action
#: (any other: a purge); ``{queue}``, ``{chosen}`` (the dead letters chosen),
#: ``{every}`` (every dead letter) and ``{which}`` (what a purge deletes) are
#: filled in.
_CONFIRM_WORDS: dict[str, tuple[str, str, str]] = {
    "pause": (
        "Pause queue {queue}?",
        "Queue {queue} will be paused: sends still succeed, but its consumers get nothing"
        " new until it is resumed.",
        "Pause {queue}",
    ),
    "resume": (
        "Resume queue {queue}?",
        "Queue {queue} will be ticked again: its consumers get what was sent while it was paused.",
        "Resume {queue}",
    ),
    "replay": (
        "Replay {chosen} of queue {queue}?",
        "{chosen} of queue {queue} will be sent again as new events and removed from the"
        " dead letters.",
        "Replay {chosen}",
    ),
    "replay-all": (
        "Replay every dead letter of queue {queue}?",
        "All {every} of queue {queue} will be sent again as new events, oldest"
        " first, and removed from the dead letters.",
        "Replay all {every}",
    ),
    "purge": (
        "Purge dead letters of queue {queue}?",
        "{which} will be deleted for good: they cannot be replayed afterwards.",
        "Purge",
    ),
}


def _plain_english(
    queue: str, action: str, n_ids: int, seconds: float, total: int
) -> dict[str, str]:
    """The confirmation page's question, what will happen, and its button, in words."""
    every = _count(total, "dead letter")
    which = (
        f"All {every} of queue {queue}" if seconds == 0
        else f"The dead letters of queue {queue} older than {age(seconds)}"
    )  # fmt: skip
    chosen = _count(n_ids, "dead letter")
    headline, explain, button = _CONFIRM_WORDS.get(action, _CONFIRM_WORDS["purge"])
    fields = {"queue": queue, "chosen": chosen, "every": every, "which": which}
    return {
        "headline": headline.format(**fields),
        "explain": explain.format(**fields),
        "button": button.format(**fields),
    }


def _same_origin(request: Request) -> bool:
    origin = request.headers.get("origin")
    if origin is None:
        return True
    return origin == f"{request.url.scheme}://{request.headers.get('host', '')}"


async def _write(console: Console, request: Request, queue: str, action: str) -> Response:
    form = parse_qs((await request.body()).decode("utf-8", "replace"), keep_blank_values=True)
    token = (form.get("csrf") or [""])[0]
    if not _same_origin(request) or not valid_csrf(
        console.settings.secret, request.cookies.get(CSRF_COOKIE), token
    ):
        raise HttpError(
            403, "the form's CSRF token is missing or stale: reload the page and try again"
        )
    if action == "replay" and (form.get("all") or [""])[0] == "1":
        action = "replay-all"
    ids = writes.int_ids(form.get("id"), queue, "id") if action == "replay" else []
    async with console.client() as client:
        refusal = await writes.may(client, console.settings.allow_writes, action)
        if refusal is not None:
            raise HttpError(403, refusal)
        outcome = await writes.run_action(
            client, queue, action, ids, (form.get("older_than") or ["30d"])[0]
        )
    back = queue_path(queue) if action in ("pause", "resume") else queue_path(queue, "dead-letters")
    return RedirectResponse(f"{back}?{urlencode(_result_params(action, outcome))}", 303)


def _result_params(action: str, outcome: dict[str, Any]) -> dict[str, str]:
    params = {"done": action}
    for key in ("replayed", "failed", "purged"):
        if key in outcome:
            params[key] = str(int(outcome[key]))
    if outcome.get("not_found"):
        params["not_found"] = str(len(outcome["not_found"]))
    return params


def _count(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


def _result(request: Request) -> str | None:
    """The message for the write a page was redirected from (built from numbers only)."""
    params = request.query_params
    done = params.get("done")

    def number(key: str) -> int:
        try:
            return max(int(params.get(key, "0")), 0)
        except ValueError:
            return 0

    if done == "pause":
        return "Queue paused: sends still succeed, consumers get nothing new until it is resumed."
    if done == "resume":
        return "Queue resumed: ticking again."
    if done in ("replay", "replay-all"):
        text = f"Replayed {_count(number('replayed'), 'dead letter')} as new events"
        if number("failed"):
            text += f"; {number('failed')} failed"
        if number("not_found"):
            text += f"; {number('not_found')} not found (already replayed or purged?)"
        return text + "."
    if done == "purge":
        return f"Purged {_count(number('purged'), 'dead letter')}."
    return None
