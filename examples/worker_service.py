"""A consumer run as a service by ``pgque worker``, stopped by SIGTERM as a supervisor does.

This file is two things. Imported, it is an application module: the
consumer and its handler, at module level, with the DSN from ``PGQUE_DSN``;
a service runs it with

    cd examples && pgque worker worker_service:consumer --concurrency 2

(systemd, a container: docs/operations.md, "Running consumers as a service").
Run as a script, it shows that: it sends three welcome emails, starts that
command as a child process, reads what the handler prints, then sends the
worker SIGTERM, as ``systemctl stop`` or ``docker stop`` would; the worker
finishes the batch in progress and exits 0.

    pgque dev                      # in another terminal: a throwaway PostgreSQL
    export PGQUE_DSN=...           # the DSN it prints
    python examples/worker_service.py
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pgque

# -- the application module: what `pgque worker worker_service:consumer` imports --------

consumer = pgque.Consumer(os.environ.get("PGQUE_DSN", ""), queue="emails", name="sender")


@consumer.on("email.welcome")
def send_welcome(msg: pgque.Message) -> None:
    print(f"welcome email to {msg.json()['to']}", flush=True)  # a real one would send it


# -- the demonstration --------------------------------------------------------------------


def main(dsn: str) -> None:
    with pgque.connect(dsn, autocommit=True) as client:
        pgque.install(client.conn)
        client.create_queue("emails")
        client.subscribe("emails", "sender")
        for to in ("ada@example.com", "alan@example.com", "grace@example.com"):
            client.send("emails", {"to": to}, type="email.welcome")

    # `pgque -d DSN worker ...`: the module reads the DSN from PGQUE_DSN, which -d sets.
    worker = subprocess.Popen(
        [sys.executable, "-m", "pgque.cli", "-d", dsn, "worker", "worker_service:consumer",
         "--concurrency", "2"],
        cwd=Path(__file__).parent, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    watchdog = threading.Timer(120, worker.kill)  # never hang: a broken worker is killed
    watchdog.start()
    assert worker.stdout is not None
    emails = []
    while len(emails) < 3 and (line := worker.stdout.readline()):
        print(f"worker printed: {line.strip()}")
        emails.append(line)
    worker.send_signal(signal.SIGTERM)  # what systemctl stop / docker stop send
    code = worker.wait()
    watchdog.cancel()
    assert len(emails) == 3 and code == 0, (emails, code)
    print(f"the worker handled {len(emails)} emails and stopped on SIGTERM with exit {code}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.environ["PGQUE_DSN"])
