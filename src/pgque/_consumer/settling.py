"""The rules of settling a batch (no I/O): how long a nacked message waits, what a
refused nack or ack does, and when a consumer gives up.

A nack the server refuses dead-letters the message with the cause
(:func:`settle_refused`); a batch that still cannot be settled (a dead letter or
the ack refused) is rolled back (:class:`SettleFailed`) and tried again after a
growing pause, and :class:`SettleFailures` raises :class:`~pgque.ConsumerGaveUp`
after ``max_settle_failures`` such batches in a row.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TYPE_CHECKING

from pgque._consumer.failures import describe, is_connection_error
from pgque._consumer.reconnect import Backoff
from pgque.errors import ConsumerGaveUp, PgquePoolerError, pooler_error, pooler_symptom
from pgque.otel import error_type

if TYPE_CHECKING:
    from pgque._consumer.dispatch import Outcome
    from pgque.message import Message

__all__ = [
    "SettleFailed",
    "SettleFailures",
    "handler_failed_reason",
    "retry_delay",
    "retry_interval",
    "settle_refused",
]


class SettleFailed(Exception):
    """Raised inside a batch's transaction to roll it back: a message or the batch
    could not be settled. ``handled`` is how many messages were dispatched."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(describe(cause))
        self.cause = cause
        self.handled = 1


def retry_delay(
    msg: Message, outcome: Outcome, retry_after: float, backoff: tuple[float, float] | None
) -> float:
    """Seconds before a nacked message comes again: the handler's choice, else the
    backoff (for a handler that raised), else ``retry_after``."""
    if outcome.retry_after is not None:
        return outcome.retry_after
    if backoff is not None and outcome.error is not None:
        base, cap = backoff
        return float(min(cap, base * 2.0 ** min(msg.retry_count or 0, 64)))
    return retry_after


def retry_interval(seconds: float) -> timedelta:
    """The delay as the ``interval`` parameter of ``pgque.nack`` (exact, any size in range)."""
    return timedelta(seconds=seconds)


class SettleFailures:
    """Batches in a row that could not be settled, and the pause before the next try."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0
        self._backoff = Backoff()

    def failed(self, cause: BaseException, log: logging.Logger, name: str) -> float:
        """Count one and log it; the pause before the batch comes again, or
        :class:`ConsumerGaveUp` at the limit."""
        self.count += 1
        if self.count >= self.limit:
            raise ConsumerGaveUp(
                f"consumer {name}: {self.count} batches in a row could not be settled"
                f" (the last: {describe(cause)}); see the logged errors, fix the cause"
                " and start it again"
            ) from cause
        pause = self._backoff.pause()
        log.error("consumer %s: the batch could not be settled (%s); rolled back, trying it"
                  " again in %.2fs (%d of %d failures in a row before giving up)",
                  name, describe(cause), pause, self.count, self.limit)  # fmt: skip
        return pause

    def succeeded(self) -> None:
        """A batch was acked: the count and the pause start again."""
        self.count = 0
        self._backoff.reset()


def settle_refused(
    exc: BaseException,
    msg: Message,
    delay: float | None,
    reason: str | None,
    log: logging.Logger,
    name: str,
) -> str:
    """After settling ``msg`` failed with ``exc``: re-raise a lost connection; for a
    refused nack (``delay`` given) log it and return the reason to dead-letter the
    message with; for a refused dead letter raise :class:`SettleFailed`. A pooler's
    symptom (:class:`PgquePoolerError`) is raised at once: never a dead letter."""
    if pooler_symptom(exc):
        raise pooler_error(exc) from exc
    if isinstance(exc, PgquePoolerError) or is_connection_error(exc):
        raise exc
    if delay is None:
        raise SettleFailed(exc) from exc
    log.error("consumer %s: nack of msg_id=%s refused (%s); dead-lettering it",
              name, msg.msg_id, describe(exc))  # fmt: skip
    text = f"nack failed: {describe(exc)}" + (f" (nack reason: {reason})" if reason else "")
    return text.replace("\x00", "")


_REASON_LIMIT = 1000
"""Characters of a handler's error kept in a dead letter's reason."""


def handler_failed_reason(exc: BaseException, msg: Message) -> str:
    """The reason a nack after a handler's error carries: the dead letter's reason once
    the message has used its retries (a nack that retries stores none), naming the
    error of the last attempt."""
    attempts = (msg.retry_count or 0) + 1
    error = f"{error_type(exc)}: {describe(exc)}"
    if len(error) > _REASON_LIMIT:
        error = error[: _REASON_LIMIT - 1] + "\u2026"
    text = f"max retries exceeded after {attempts} attempts; last error: {error}"
    return text.replace("\x00", "")
