"""Queue administration: create, drop, pause, resume, and the dead letter queue."""

from __future__ import annotations

import datetime as dt
import json
import shlex
import unicodedata

import click

from pgque._executor import fetch_all, fetch_one
from pgque.cli._command import command, json_option
from pgque.cli._errors import CliError, ExitCode
from pgque.cli._output import emit_json, format_seconds, out, plural
from pgque.cli._session import require_queue, session
from pgque.cli._types import Duration, KeyValue
from pgque.client import PgqueClient
from pgque.errors import PgqueInvalidArgument, PgqueOperationRefused

__all__ = ["COMMANDS"]


@command("create-queue")
@click.argument("name")
@click.option(
    "-o",
    "--option",
    "options",
    type=KeyValue(),
    multiple=True,
    help="A queue setting, KEY=VALUE (repeatable): max_retries, ticker_max_count,"
    " ticker_max_lag, ticker_idle_period, rotation_period, ticker_paused, ...",
)
@click.option(
    "-c",
    "--consumer",
    "consumers",
    metavar="NAME",
    multiple=True,
    help="Subscribe this consumer too (repeatable), in the same transaction. Events sent"
    " before any consumer subscribes are received by nobody.",
)
@json_option
def create_queue_cmd(
    name: str, options: tuple[tuple[str, str], ...], consumers: tuple[str, ...], as_json: bool
) -> None:
    """Create queue NAME (pgque.create_queue); an existing one gets the options applied.

    The queue, its options and its --consumer subscriptions are one
    transaction: a bad option or consumer name creates nothing.
    """
    settings = dict(options)
    for consumer in consumers:
        check_consumer_name(consumer)
    subscribed: dict[str, bool] = {}
    with session() as client:
        queue_done = False
        try:
            with client.conn.transaction():
                created = bool(client.create_queue(name, settings))
                queue_done = True
                for consumer in consumers:
                    subscribed[consumer] = bool(client.subscribe(name, consumer))
        except PgqueInvalidArgument as exc:
            if queue_done or not settings or str(exc).startswith("queue name"):
                raise  # a name, said as it is: nothing was created
            raise _option_error(client, name, settings, exc) from exc
    if as_json:
        emit_json(
            {"queue": name, "created": created, "options": settings}
            | ({"subscribed": subscribed} if consumers else {})
        )
        return
    console = out()
    if created:
        console.print(f"created queue {name!r}")
    else:
        console.print(f"queue {name!r} exists" + ("; options applied" if settings else ""))
    for consumer, new in subscribed.items():
        console.print(_subscribed_text(name, consumer, new))


def check_consumer_name(name: str) -> None:
    """Refuse a consumer name that tables and log lines cannot show as one line: control
    characters, spaces at either end (the SQL refuses the same in queue names)."""
    shown = json.dumps(name, ensure_ascii=False)
    if any(unicodedata.category(ch) == "Cc" for ch in name):
        raise PgqueInvalidArgument(
            f"consumer name {shown} must not contain control characters (newline, tab, ...)"
        )
    if name != name.strip():
        raise PgqueInvalidArgument(f"consumer name {shown} must not begin or end with a space")


def _subscribed_text(queue: str, consumer: str, new: bool) -> str:
    if new:
        return f"subscribed consumer {consumer!r} to queue {queue!r}"
    return f"consumer {consumer!r} was subscribed to queue {queue!r} already"


@command("subscribe")
@click.argument("queue")
@click.argument("consumer")
@json_option
def subscribe_cmd(queue: str, consumer: str, as_json: bool) -> None:
    """Subscribe CONSUMER to QUEUE (pgque.subscribe): it receives the events that no
    tick has covered yet and every later one.

    Run it before sending: an event sent while a queue has no consumer is
    received by nobody. Harmless when CONSUMER is subscribed already.
    """
    check_consumer_name(consumer)
    with session() as client:
        require_queue(client, queue)
        new = bool(client.subscribe(queue, consumer))
    if as_json:
        emit_json({"queue": queue, "consumer": consumer, "subscribed": new})
        return
    text = _subscribed_text(queue, consumer, new)
    out().print(text + (": it receives the events sent from now on" if new else ""))


@command("unsubscribe")
@click.argument("queue")
@click.argument("consumer")
@json_option
def unsubscribe_cmd(queue: str, consumer: str, as_json: bool) -> None:
    """Unsubscribe CONSUMER from QUEUE (pgque.unsubscribe): the events it has not
    finished are dropped for it (other consumers keep theirs).

    Harmless when CONSUMER is not subscribed.
    """
    with session() as client:
        require_queue(client, queue)
        removed = bool(client.unsubscribe(queue, consumer))
    if as_json:
        emit_json({"queue": queue, "consumer": consumer, "unsubscribed": removed})
    elif removed:
        out().print(
            f"unsubscribed consumer {consumer!r} from queue {queue!r}:"
            " the events it had not finished are dropped for it"
        )
    else:
        out().print(f"consumer {consumer!r} was not subscribed to queue {queue!r}: nothing done")


def _option_names(client: PgqueClient) -> list[str]:
    """The queue settings ``set_queue_config`` of the installed pgque knows."""
    row = fetch_one(client.conn, "queue_option_names")
    return list(row[0] or []) if row else []


def _option_error(
    client: PgqueClient, queue: str, settings: dict[str, str], exc: PgqueInvalidArgument
) -> CliError:
    """A bad -o option said with the queue, the option and what to write instead."""
    names = _option_names(client)
    unknown = [key for key in settings if key not in names]
    if unknown:
        return CliError(
            f"unknown queue option {unknown[0]!r} (queue {queue!r}): the options are"
            f" {', '.join(names)}; nothing was created or changed",
            ExitCode.USAGE,
        )
    given = ", ".join(f"{key}={value}" for key, value in settings.items())
    return CliError(
        f"invalid option value for queue {queue!r} ({given}): {str(exc).splitlines()[0]};"
        " nothing was created or changed",
        ExitCode.USAGE,
    )


@command("drop-queue")
@click.argument("queue")
@click.option("--force", is_flag=True, help="Unsubscribe its consumers first.")
@json_option
def drop_queue_cmd(queue: str, force: bool, as_json: bool) -> None:
    """Drop QUEUE with its events and dead letters (--force if it has consumers)."""
    with session() as client:
        try:
            client.drop_queue(queue, force=force)
        except PgqueOperationRefused as exc:
            names = [c.consumer_name for c in client.consumer_stats(queue)]
            if exc.code != "consumers_attached" or not names:
                raise
            q = shlex.quote(queue)
            noun = "consumers" if len(names) > 1 else "consumer"
            raise CliError(
                f"queue {queue!r} has {noun} {', '.join(names)}:"
                f" unsubscribe them first (`pgque unsubscribe {q} {shlex.quote(names[0])}`),"
                " or run again with --force (which unsubscribes them)",
                ExitCode.REFUSED,
            ) from exc
    if as_json:
        emit_json({"queue": queue, "dropped": True})
    else:
        out().print(f"dropped queue {queue!r}")


@command("pause")
@click.argument("queue")
@json_option
def pause_cmd(queue: str, as_json: bool) -> None:
    """Stop ticking QUEUE: sends still work, consumers get nothing new until resume."""
    with session() as client:
        client.pause_queue(queue)
    if as_json:
        emit_json({"queue": queue, "paused": True})
    else:
        out().print(f"paused queue {queue!r}")


@command("resume")
@click.argument("queue")
@json_option
def resume_cmd(queue: str, as_json: bool) -> None:
    """Resume ticking a paused QUEUE."""
    with session() as client:
        client.resume_queue(queue)
    if as_json:
        emit_json({"queue": queue, "paused": False})
    else:
        out().print(f"resumed queue {queue!r}")


@command("replay-dlq")
@click.argument("queue")
@click.option(
    "--limit", type=click.IntRange(1), default=None, help="Replay only the N oldest dead letters."
)
@json_option
def replay_dlq_cmd(queue: str, limit: int | None, as_json: bool) -> None:
    """Send QUEUE's dead letters again as new events (oldest first) and remove them."""
    first_error: str | None = None
    events: dict[int, int] = {}  # dead letter id -> new event id, when replayed one by one
    with session() as client:
        require_queue(client, queue)
        if limit is None:
            result = client.dlq_replay_all(queue)
            replayed, failed, first_error = result.replayed, result.failed, result.first_error
        else:
            conn = client.conn
            ids = [r[0] for r in fetch_all(conn, "dlq_oldest_ids", (queue, limit))]
            with conn.transaction():
                for dl_id in ids:
                    events[dl_id] = client.dlq_replay(dl_id)
            replayed, failed = len(ids), 0
    if as_json:
        emit_json(
            {"queue": queue, "replayed": replayed, "failed": failed, "first_error": first_error}
            | ({"events": [{"dl_id": k, "ev_id": v} for k, v in events.items()]} if events else {})
        )
        return
    console = out()
    if replayed == 0 and failed == 0:
        console.print(f"queue {queue!r} has no dead letters: nothing replayed")
        return
    for dl_id, ev_id in events.items():
        console.print(f"dead letter {dl_id} sent again as event {ev_id}")
    console.print(
        f"replayed {plural(replayed, 'dead letter')} of queue {queue!r} as new events"
        " (every consumer of the queue receives them)"
    )
    if failed:
        console.print(f"{failed} failed and stay dead letters; the first: {first_error}")


def _age_text(age: dt.timedelta) -> str:
    """An age as it would be written on the command line: ``30d``, ``12h``, ``90s``."""
    secs = age.total_seconds()
    for unit, size in (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size and secs % size == 0:
            return f"{secs // size:.0f}{unit}"
    return format_seconds(age)


@command("purge-dlq")
@click.argument("queue")
@click.option(
    "--older-than",
    type=Duration(),
    default=None,
    help="Delete only dead letters older than this (e.g. 7d) [default: 30d].",
)
@json_option
def purge_dlq_cmd(queue: str, older_than: float | None, as_json: bool) -> None:
    """Delete QUEUE's dead letters older than --older-than (pgque.dlq_purge)."""
    age = dt.timedelta(days=30) if older_than is None else dt.timedelta(seconds=older_than)
    with session() as client:
        require_queue(client, queue)
        purged = client.dlq_purge(queue, age)
    if as_json:
        emit_json({"queue": queue, "purged": purged, "older_than_seconds": age.total_seconds()})
        return
    older = f"older than {_age_text(age)}" if age else "of any age"
    if purged == 0:
        out().print(f"queue {queue!r} has no dead letters {older}: nothing purged")
    else:
        out().print(f"purged {plural(purged, 'dead letter')} {older} from queue {queue!r}")


COMMANDS = [
    create_queue_cmd,
    subscribe_cmd,
    unsubscribe_cmd,
    drop_queue_cmd,
    pause_cmd,
    resume_cmd,
    replay_dlq_cmd,
    purge_dlq_cmd,
]
