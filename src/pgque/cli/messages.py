"""``send`` a message, ``tail`` a queue through a throwaway consumer."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import uuid

import click
from rich.text import Text

from pgque.cli._command import command, json_option, settings
from pgque.cli._errors import CliError, ExitCode
from pgque.cli._output import emit_json, err, out
from pgque.cli._session import require_queue, session
from pgque.cli._types import Duration
from pgque.client import PgqueClient
from pgque.consumer import Consumer
from pgque.errors import PgqueError
from pgque.message import Message
from pgque.serializers import RAW_TEXT

__all__ = ["COMMANDS"]


@command("send")
@click.argument("queue")
@click.argument("payload")
@click.option("-t", "--type", "type_", default="default", show_default=True, help="Message type.")
@click.option("--text", is_flag=True, help="Send PAYLOAD as verbatim text, not JSON.")
@click.option("-k", "--key", default=None, help="Partition key (ev_extra1), for ordered slots.")
@json_option
def send_cmd(
    queue: str, payload: str, type_: str, text: bool, key: str | None, as_json: bool
) -> None:
    """Send PAYLOAD (JSON, or '-' for stdin) to QUEUE; prints the event id.

    \b
    pgque send orders '{"id": 42}' --type order.created
    """
    if payload == "-":
        payload = sys.stdin.read()
    if not text:
        try:
            json.loads(payload)
        except ValueError:
            raise CliError(
                f"PAYLOAD is not JSON ({payload[:40]!r}): quote JSON strings ('\"hi\"')"
                " or pass --text to send it verbatim",
                ExitCode.USAGE,
            ) from None
    with session() as client:
        if text:
            client.serializer = RAW_TEXT
        client._no_consumers.may_read(False)  # said below in the CLI's words
        extras = (key, None, None, None) if key is not None else None
        event_id = client.send(queue, payload, type=type_, extras=extras)
        consumers = _consumer_count(client, queue)
    if as_json:
        emit_json({"queue": queue, "event_id": event_id, "type": type_, "consumers": consumers})
        return
    out().print(f"sent event {event_id} to queue {queue!r}")
    if consumers == 0:
        err().print(
            f"note: queue {queue!r} has no consumers, so no consumer will receive this"
            " event unless one subscribes before the queue's next tick"
        )


def _consumer_count(client: PgqueClient, queue: str) -> int | None:
    """How many consumers the queue has (None when this role may not read it)."""
    try:
        stats = client.queue_stats(queue)
    except PgqueError:
        return None
    return stats[0].consumers if stats else None


def _tail_name() -> str:
    host = socket.gethostname().split(".")[0][:20] or "host"
    return f"pgque_tail_{host}_{os.getpid()}_{uuid.uuid4().hex[:6]}"


@command("tail")
@click.argument("queue")
@click.option("-n", "--count", type=click.IntRange(1), default=None,
              help="Stop after N messages.")  # fmt: skip
@click.option("--timeout", type=Duration(), default=None,
              help="Stop after this long (e.g. 30s).")  # fmt: skip
@click.option(
    "--ticker/--no-ticker",
    default=None,
    help="Run an in-process ticker [default: only when no pg_cron/pg_timetable job is set].",
)
@json_option
def tail_cmd(
    queue: str, count: int | None, timeout: float | None, ticker: bool | None, as_json: bool
) -> None:
    """Print QUEUE's new messages as they arrive, until Ctrl-C.

    Subscribes a throwaway consumer (pgque_tail_<host>_<pid>_<id>) at the
    queue's latest tick, so it sees every message no tick has covered yet
    and all later ones, independently of the other consumers; it is
    unsubscribed on exit (Ctrl-C, SIGTERM, --count, --timeout).
    With --json each message is one line of JSON.
    """
    name = _tail_name()
    with session() as client:
        require_queue(client, queue)
        client.subscribe(queue, name)
    try:
        consumer = Consumer(
            settings().dsn or "",
            queue=queue,
            name=name,
            poll_interval=1.0,
            ticker="auto" if ticker is None else ticker,
        )
        seen = 0
        console = out()
        if not as_json:
            print(f"tailing queue {queue!r} as consumer {name} (Ctrl-C to stop)", file=sys.stderr)

        @consumer.on("*")
        def show(msg: Message) -> None:
            nonlocal seen
            if count is not None and seen >= count:
                return  # the rest of the last batch: acked with it, not shown
            if as_json:
                emit_json(_message_json(msg), lines=True)
            else:
                stamp = msg.created_at.strftime("%H:%M:%S.%f")[:-3] if msg.created_at else "-"
                retry = f" (retry {msg.retry_count})" if msg.retry_count else ""
                console.print(
                    Text.assemble(
                        f"{stamp} #{msg.msg_id} ",
                        (str(msg.type), "bold"),
                        f"{retry} ",
                        str(msg.payload),
                    ),
                    soft_wrap=True,
                )
                sys.stdout.flush()
            seen += 1
            if count is not None and seen >= count:
                consumer.stop()

        timer = threading.Timer(timeout, consumer.stop) if timeout is not None else None
        if timer is not None:
            timer.daemon = True
            timer.start()
        try:
            consumer.start()  # SIGINT / SIGTERM stop it on the main thread
        finally:
            if timer is not None:
                timer.cancel()
    finally:
        with session() as client:
            client.unsubscribe(queue, name)


def _message_json(msg: Message) -> dict[str, object]:
    try:
        payload: object = msg.json()
    except ValueError:
        payload = msg.payload
    return {
        "msg_id": msg.msg_id,
        "batch_id": msg.batch_id,
        "type": msg.type,
        "payload": payload,
        "retry_count": msg.retry_count,
        "created_at": msg.created_at,
        "extra1": msg.extra1,
        "extra2": msg.extra2,
        "extra3": msg.extra3,
        "extra4": msg.extra4,
    }


COMMANDS = [send_cmd, tail_cmd]
