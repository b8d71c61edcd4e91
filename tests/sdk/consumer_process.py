"""A consumer process for the process-level tests:
``python consumer_process.py DSN LOG SLEEP KIND [SHUTDOWN_TIMEOUT]``.

Handles queue ``q`` as consumer ``c`` with a :class:`pgque.Consumer` (KIND
``sync``) or a :class:`pgque.AsyncConsumer` (``async``); appends ``start
<id>`` and ``done <id>`` lines to LOG around each handler call, which sleeps
SLEEP seconds. Stops on SIGTERM/SIGINT (the consumer's own signal handling).
"""

from __future__ import annotations

import asyncio
import sys
import time

import pgque


def log_line(path: str, line: str) -> None:
    with open(path, "a") as log:
        log.write(f"{line}\n")


def main() -> None:
    dsn, log_path, sleep, kind = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
    options = {
        "queue": "q",
        "name": "c",
        "poll_interval": 0.2,
        "ticker": False,
        "shutdown_timeout": float(sys.argv[5]) if len(sys.argv) > 5 else 30,
    }
    if kind == "async":
        aconsumer = pgque.AsyncConsumer(dsn, **options)  # type: ignore[arg-type]

        @aconsumer.on("*")
        async def ahandle(msg: pgque.Message) -> None:
            log_line(log_path, f"start {msg.msg_id}")
            await asyncio.sleep(sleep)
            log_line(log_path, f"done {msg.msg_id}")

        asyncio.run(aconsumer.start())
        return

    consumer = pgque.Consumer(dsn, **options)  # type: ignore[arg-type]

    @consumer.on("*")
    def handle(msg: pgque.Message) -> None:
        log_line(log_path, f"start {msg.msg_id}")
        time.sleep(sleep)
        log_line(log_path, f"done {msg.msg_id}")

    consumer.start()


if __name__ == "__main__":
    main()
