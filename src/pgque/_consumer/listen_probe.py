"""Whether a consumer's LISTEN connection hears at all (a pooler's listener never does)."""

from __future__ import annotations

import logging
import secrets
import time

__all__ = ["LISTEN_PROBE_WINDOW", "ListenProbe"]

#: Seconds the listener gets to hear the NOTIFY its consumer committed.
LISTEN_PROBE_WINDOW = 5.0


class ListenProbe:
    """Whether the LISTEN connection hears at all: on each new listener the runner
    LISTENs on a channel of its own (:meth:`start`) and NOTIFYs it from the batch
    connection, a commit of its own. A listener through a transaction-mode pooler
    never hears it (the pooler lends its session to others between statements): one
    WARNING (per consumer, not per poll) names ``listen_dsn``."""

    def __init__(self, log: logging.Logger, name: str) -> None:
        self._log = log
        self._name = name
        self.channel = f"pgque_probe_{secrets.token_hex(8)}"
        self._sent: float | None = None
        self.warned = False

    def start(self) -> str:
        """A new listener: the channel to LISTEN on and NOTIFY (the clock starts)."""
        self._sent = time.monotonic()
        return self.channel

    def heard(self, channel: str) -> bool:
        """Note a notification; True when it is the probe's (no work)."""
        if channel != self.channel:
            return False
        self._sent = None
        return True

    def check(self) -> None:
        """Warn once when the probe's notification is overdue."""
        sent = self._sent
        if sent is None or self.warned or time.monotonic() - sent < LISTEN_PROBE_WINDOW:
            return
        self.warned = True
        self._sent = None
        self._log.warning(
            "consumer %s: the LISTEN connection did not hear, within %.0f s, the NOTIFY this"
            " consumer committed: it seems to go through a transaction-mode pooler (PgBouncer,"
            " Supavisor, RDS Proxy), so wakeups never arrive and messages wait for"
            " poll_interval; give listen_dsn= a connection string that reaches PostgreSQL"
            " directly (see docs/operations.md, Poolers)",
            self._name, LISTEN_PROBE_WINDOW,
        )  # fmt: skip
