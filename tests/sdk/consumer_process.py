"""A consumer process for the process-level tests: ``python consumer_process.py DSN LOG SLEEP``.

Handles queue ``q`` as consumer ``c``; appends ``start <id>`` and ``done <id>``
lines to LOG around each handler call, which sleeps SLEEP seconds. Stops on
SIGTERM/SIGINT (the consumer's own signal handling).
"""

from __future__ import annotations

import sys
import time

import pgque


def main() -> None:
    dsn, log_path, sleep = sys.argv[1], sys.argv[2], float(sys.argv[3])
    consumer = pgque.Consumer(
        dsn,
        queue="q",
        name="c",
        poll_interval=0.2,
        ticker=False,
        shutdown_timeout=float(sys.argv[4]) if len(sys.argv) > 4 else 30,
    )

    @consumer.on("*")
    def handle(msg: pgque.Message) -> None:
        with open(log_path, "a") as log:
            log.write(f"start {msg.msg_id}\n")
        time.sleep(sleep)
        with open(log_path, "a") as log:
            log.write(f"done {msg.msg_id}\n")

    consumer.start()


if __name__ == "__main__":
    main()
