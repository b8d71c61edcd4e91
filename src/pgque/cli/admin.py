"""Queue administration: create, drop, pause, resume, and the dead letter queue."""

from __future__ import annotations

import datetime as dt

import click

from pgque._queries import query
from pgque.cli._command import command, json_option
from pgque.cli._output import emit_json, out
from pgque.cli._session import require_queue, session
from pgque.cli._types import Duration, KeyValue

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
@json_option
def create_queue_cmd(name: str, options: tuple[tuple[str, str], ...], as_json: bool) -> None:
    """Create queue NAME (pgque.create_queue); an existing one gets the options applied.

    The queue and its options are one transaction: a bad option creates nothing.
    """
    settings = dict(options)
    with session() as client:
        created = bool(client.create_queue(name, settings))
    if as_json:
        emit_json({"queue": name, "created": created, "options": settings})
        return
    if created:
        out().print(f"created queue {name!r}")
    else:
        out().print(f"queue {name!r} exists" + ("; options applied" if settings else ""))


@command("drop-queue")
@click.argument("queue")
@click.option("--force", is_flag=True, help="Unsubscribe its consumers first.")
@json_option
def drop_queue_cmd(queue: str, force: bool, as_json: bool) -> None:
    """Drop QUEUE with its events and dead letters (--force if it has consumers)."""
    with session() as client:
        client.drop_queue(queue, force=force)
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
    with session() as client:
        require_queue(client, queue)
        if limit is None:
            result = client.dlq_replay_all(queue)
            replayed, failed, first_error = result.replayed, result.failed, result.first_error
        else:
            conn = client.conn
            ids = [r[0] for r in conn.execute(query("dlq_oldest_ids"), (queue, limit)).fetchall()]
            with conn.transaction():
                for dl_id in ids:
                    client.dlq_replay(dl_id)
            replayed, failed = len(ids), 0
    if as_json:
        emit_json(
            {"queue": queue, "replayed": replayed, "failed": failed, "first_error": first_error}
        )
        return
    out().print(f"replayed {replayed} dead letters of queue {queue!r}")
    if failed:
        out().print(f"{failed} failed; the first: {first_error}")


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
    with session() as client:
        require_queue(client, queue)
        if older_than is None:
            purged = client.dlq_purge(queue)
        else:
            purged = client.dlq_purge(queue, dt.timedelta(seconds=older_than))
    if as_json:
        emit_json({"queue": queue, "purged": purged})
    else:
        out().print(f"purged {purged} dead letters of queue {queue!r}")


COMMANDS = [
    create_queue_cmd,
    drop_queue_cmd,
    pause_cmd,
    resume_cmd,
    replay_dlq_cmd,
    purge_dlq_cmd,
]
