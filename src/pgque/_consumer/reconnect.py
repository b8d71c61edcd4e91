"""When a consumer reconnects, and when it gives up instead (no I/O).

:class:`Backoff` waits 100 ms doubling to 30 s (with 20 % jitter) and starts again
after every successful poll; :func:`recover` decides, after a session ended with an
error, between raising it (giving up, a setup error, a given connection that broke,
a first connection that can never succeed) and a pause before reconnecting.
"""

from __future__ import annotations

import logging
import random
import re

import psycopg

from pgque._consumer.failures import describe, is_connection_error, setup_problem
from pgque.errors import ConsumerGaveUp, PgqueConnectionError, pooler_error, pooler_symptom

__all__ = ["BACKOFF_CAP", "BACKOFF_START", "Backoff", "never_connects", "recover"]

#: The first pause before reconnecting (or retrying a batch that was not settled).
BACKOFF_START = 0.1
#: The longest such pause.
BACKOFF_CAP = 30.0


class Backoff:
    """Pauses that double from ``start`` to ``cap`` (20 % jitter) until :meth:`reset`."""

    def __init__(self, start: float = BACKOFF_START, cap: float = BACKOFF_CAP) -> None:
        self.start = start
        self.cap = cap
        self._next = start

    def pause(self) -> float:
        """The next pause, in seconds; the one after is twice as long, up to ``cap``."""
        pause = self._next * random.uniform(0.8, 1.2)
        self._next = min(self._next * 2, self.cap)
        return pause

    def reset(self) -> None:
        """Start again from ``start`` (after a healthy poll)."""
        self._next = self.start


# What the server answers a connection that cannot succeed until someone changes the
# DSN, a role or the server's configuration (a server that is away is transient).
_REFUSED = re.compile(
    r'database "[^"]*" does not exist|role "[^"]*" does not exist|password authentication'
    r" failed|no password supplied|no pg_hba\.conf entry|authentication failed|invalid"
    r" connection option|missing \"=\"|invalid (?:URI|integer value|port)"
)


def never_connects(exc: BaseException) -> bool:
    """True for a connection error that retrying cannot cure: no such database or role,
    a wrong password, no pg_hba.conf entry, an unparsable DSN."""
    if not isinstance(exc, (psycopg.OperationalError, psycopg.ProgrammingError)):
        return False
    return _REFUSED.search(str(exc)) is not None


def recover(
    exc: BaseException,
    backoff: Backoff,
    log: logging.Logger,
    name: str,
    *,
    given_closed: bool,
    connected: bool = True,
) -> float:
    """After a consumer's session ended with ``exc``: raise what ends ``start()`` (giving
    up, a setup error, a broken connection of the caller's, a first connection that
    can never succeed); else log it and return the pause before reconnecting."""
    if pooler_symptom(exc):
        raise pooler_error(exc) from exc
    if not connected and never_connects(exc):
        raise PgqueConnectionError(
            f"consumer {name}: cannot connect: {describe(exc)}: check the DSN (database,"
            " user, password) and the server's pg_hba.conf; not retried, since it cannot"
            " pass by itself"
        ) from exc
    if isinstance(exc, ConsumerGaveUp) or setup_problem(exc) is not None:
        raise exc
    if given_closed:
        raise PgqueConnectionError(
            f"consumer {name}: its connection broke ({exc}); a given connection is not reopened"
        ) from exc
    pause = backoff.pause()
    if is_connection_error(exc):
        log.warning("consumer %s: %s; reconnecting in %.2fs", name, describe(exc), pause)
    else:
        log.error("consumer %s: database error; reconnecting in %.2fs", name, pause, exc_info=exc)
    return pause
