"""How one batch's messages reach their handlers: outcomes, lanes, limits.

Handlers run (one after another, or in lanes with ``concurrency``: threads
for :class:`pgque.Consumer`, tasks for :class:`pgque.AsyncConsumer`) and
leave an :class:`Outcome` per message; the consumer then settles every
outcome on the batch's connection, in message order, and acks the batch.
Only transactional handlers touch the connection themselves, one at a time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pgque.message import Message

__all__ = ["Deadline", "HandlerSpec", "Outcome", "RateLimiter", "decided", "lanes"]


@dataclass
class HandlerSpec:
    """A registered handler and its options."""

    func: Callable[..., Any]
    transactional: bool = False
    timeout: float | None = None
    ordered_by: str | None = None
    #: Registered with ``on_batch``: called once with the list of its messages.
    batch: bool = False
    #: Turns the decoded payload into the model's value (``model=``), or None.
    validate: Callable[[Any], Any] | None = None
    #: The model's name, for the reason of a payload that does not validate.
    model_name: str = ""


@dataclass
class Outcome:
    """What became of one message.

    ``action`` is ``"ack"`` (handled: the batch ack covers it), ``"nack"``
    (retry after ``retry_after`` seconds, or dead-letter past max retries),
    ``"dead"`` (straight to the dead letter queue) or ``"fail"`` (neither
    handled nor settled: the batch must not be acked).
    """

    action: Literal["ack", "nack", "dead", "fail"] = "ack"
    retry_after: float | None = None
    reason: str | None = None
    error: BaseException | None = field(default=None, repr=False)
    unhandled: bool = False


class RateLimiter:
    """A token bucket: at most ``rate`` messages a second, bursts up to ``burst``."""

    def __init__(self, rate: float, burst: float | None = None) -> None:
        if rate <= 0:
            raise ValueError(f"rate_limit must be > 0 messages/s, got {rate}")
        self.rate = rate
        self.capacity = burst if burst is not None else max(1.0, rate)
        self._tokens = self.capacity
        self._stamp = time.monotonic()
        self._lock = threading.Lock()

    def wait_time(self) -> float:
        """Take a token and return 0.0, or return the seconds until one is there (then
        ask again); safe from several threads."""
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self.capacity, self._tokens + (now - self._stamp) * self.rate)
            self._stamp = now
            if self._tokens >= 1:
                self._tokens -= 1
                return 0.0
            return (1 - self._tokens) / self.rate


@dataclass
class Deadline:
    """A point in monotonic time after which a batch stops dispatching (None: never)."""

    at: float | None = None

    def passed(self) -> bool:
        """True once the deadline is behind us."""
        return self.at is not None and time.monotonic() >= self.at

    def tighten(self, seconds: float) -> None:
        """Move the deadline to at most ``seconds`` from now."""
        candidate = time.monotonic() + seconds
        self.at = candidate if self.at is None else min(self.at, candidate)


def decided(msg: Message) -> Outcome | None:
    """What the handler decided with ``msg.nack()`` or ``msg.dead_letter()`` (None: nothing)."""
    if msg._decision is None:
        return None
    action, retry_after, reason = msg._decision
    return Outcome("dead" if action == "dead" else "nack", retry_after, reason)


def lanes(
    msgs: list[Message],
    spec_for: Callable[[Message], HandlerSpec | None],
    *,
    ordered: bool = True,
) -> list[list[Message]]:
    """Group messages into lanes run one after another inside, lanes in parallel.

    The messages of a batch handler (``on_batch``) make one lane, where its
    first message is, for one call; with ``ordered``, messages whose handler
    has ``ordered_by`` share a lane per value of that field (so one key's
    messages keep their order); every other message is a lane of its own.
    Without ``ordered`` (one lane at a time) the lanes keep the messages' order
    but for the batch handlers' messages, which wait for their call.
    """
    keyed: dict[tuple[Any, ...], list[Message]] = {}
    result: list[list[Message]] = []
    for msg in msgs:
        spec = spec_for(msg)
        key: tuple[Any, ...] | None = None
        if spec is not None and spec.batch:
            key = ("batch", id(spec))
        elif spec is not None and spec.ordered_by and ordered:
            key = (spec.ordered_by, getattr(msg, spec.ordered_by, None))
        if key is not None:
            if key not in keyed:
                keyed[key] = []
                result.append(keyed[key])
            keyed[key].append(msg)
        else:
            result.append([msg])
    return result
