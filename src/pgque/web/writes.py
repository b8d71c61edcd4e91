"""The console's writes, shared by the pages' forms and the JSON API: who may run
them, and running them.

A write runs only when the console was started with writes allowed and the
database role may execute the function behind it
(:meth:`~pgque.AsyncPgqueClient.write_privileges`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pgque.async_client import AsyncPgqueClient
from pgque.errors import PgqueInvalidArgument, PgqueQueueNotFound
from pgque.records import WritePrivileges
from pgque.web import data
from pgque.web.formatting import duration_seconds

__all__ = ["ACTIONS", "MAX_IDS", "Action", "int_ids", "may", "offered", "run_action"]

#: Most dead letters one request replays by id (more: page them, or replay all).
MAX_IDS = 1000
_MAX_ID = 2**63 - 1


@dataclass(frozen=True)
class Action:
    """A write: its name, the privilege it needs and the functions behind it."""

    name: str
    privilege: str
    functions: str


ACTIONS = {
    "pause": Action("pause", "pause_resume", "pgque.pause_queue()"),
    "resume": Action("resume", "pause_resume", "pgque.resume_queue()"),
    "replay": Action("replay", "replay", "pgque.dlq_replay()"),
    "replay-all": Action("replay-all", "replay", "pgque.dlq_replay_all()"),
    "purge": Action("purge", "purge", "pgque.dlq_purge()"),
}


def offered(allow_writes: bool, privileges: WritePrivileges) -> dict[str, bool]:
    """Which actions the pages show buttons for."""
    return {
        name: allow_writes and bool(getattr(privileges, action.privilege))
        for name, action in ACTIONS.items()
    }


async def may(client: AsyncPgqueClient, allow_writes: bool, action_name: str) -> str | None:
    """Why ``action_name`` may not run (a message), or None when it may."""
    action = ACTIONS.get(action_name)
    if action is None:
        return f"unknown action {action_name!r}: one of {', '.join(ACTIONS)}"
    if not allow_writes:
        return "this console is read-only: start it with `pgque web --allow-writes`"
    if not getattr(await client.write_privileges(), action.privilege):
        return (
            f"the database role may not run {action.functions}: connect as a role that may"
            " (pgque_admin pauses and purges, pgque_writer replays)"
        )
    return None


def int_ids(values: Any, queue: str, field: str = "ids") -> list[int]:
    """Dead-letter ids from a form or a JSON body: 1 to :data:`MAX_IDS` whole numbers
    from 1 to 2^63-1 (JSON integers or digit strings); a clear error, naming
    ``field``, for anything else."""
    if not isinstance(values, list) or not values:
        raise PgqueInvalidArgument(
            f"{field}: give the dead letters to replay as a non-empty list of ids (queue {queue!r})"
        )
    if len(values) > MAX_IDS:
        raise PgqueInvalidArgument(
            f"{field}: at most {MAX_IDS} dead letters per request, got {len(values)}: replay"
            f" them in pages of {MAX_IDS}, or replay all (queue {queue!r})"
        )
    ids = []
    for value in values:
        number = None
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
            number = int(value.strip())
        if number is None or not 1 <= number <= _MAX_ID:
            shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "..."
            raise PgqueInvalidArgument(
                f"{field}: dead-letter ids are whole numbers from 1 to 2^63-1, got {shown}"
                f" (queue {queue!r})"
            )
        ids.append(number)
    return ids


async def run_action(
    client: AsyncPgqueClient, queue: str, action: str, ids: list[int], older_than: Any
) -> dict[str, Any]:
    """Run a write (already allowed) on ``queue``; what it did, as JSON-ready figures."""
    if not await client.queue_stats(queue):
        raise PgqueQueueNotFound(f"no queue named {queue!r}: the overview lists the queues")
    if action == "pause":
        await client.pause_queue(queue)
        return {"queue": queue, "paused": True}
    if action == "resume":
        await client.resume_queue(queue)
        return {"queue": queue, "paused": False}
    if action == "replay":
        return {"queue": queue, **(await data.replay_ids(client, queue, ids)).as_json()}
    if action == "replay-all":
        result = data.ReplayOutcome.of_all(await client.dlq_replay_all(queue))
        return {"queue": queue, **result.as_json()}
    seconds = duration_seconds(older_than, "older_than")
    return {"queue": queue, "purged": await client.dlq_purge(queue, seconds),
            "older_than_seconds": seconds}  # fmt: skip
