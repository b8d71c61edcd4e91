"""A consumer's handlers: registering them (``on``, ``on_batch``) and running them for
a batch.

:class:`AsyncHandlers` is the part of :class:`pgque.AsyncConsumer` that
keeps the handlers by message type and turns a batch's messages into an
:class:`~pgque._consumer.dispatch.Outcome` each: a handler of ``on`` is called per
message, one of ``on_batch`` once with the list of its messages (at the
place of the first of them). With ``concurrency`` the calls run in lanes
(:func:`pgque._consumer.dispatch.lanes`); a payload that does not validate into the
handler's ``model=`` (:mod:`pgque._models`) is dead-lettered without a call.
The consumer then settles the outcomes and acks the batch.
"""

from __future__ import annotations

import functools
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Concatenate, ParamSpec, TypeVar, overload

import psycopg
from opentelemetry import trace

from pgque import tracing
from pgque._acompat import ASYNC, Event, Lanes, call_with_timeout, wait_event
from pgque._consumer.dispatch import Deadline, HandlerSpec, Outcome, RateLimiter, decided, lanes
from pgque._consumer.failures import connection_lost
from pgque._consumer.options import ConsumerOptions, ConsumerSettings, check_handler
from pgque._consumer.settling import handler_failed_reason
from pgque._models import explain, model_name, validator
from pgque.errors import ConnectionAbandoned, ConsumerGaveUp
from pgque.message import Message
from pgque.otel import BATCH_MESSAGE_COUNT, CONSUMER_GROUP, MESSAGE_ID, error_type, telemetry

__all__ = ["AsyncHandlers", "BatchAborted"]

Handler = Callable[..., Awaitable[Any]]
H = TypeVar("H", bound=Handler)
M = TypeVar("M")
R = TypeVar("R")
P = ParamSpec("P")
#: A model: a class (pydantic, dataclass, msgspec Struct, TypedDict) or a callable.
Model = type[M] | Callable[[Any], M]
#: A handler of ``on(..., model=M)``: it takes a ``Message[M]`` (and the connection).
Typed = Callable[Concatenate[Message[M], P], R]
#: A handler of ``on_batch(..., model=M)``: it takes a ``list[Message[M]]``.
TypedBatch = Callable[Concatenate[list[Message[M]], P], R]


class BatchAborted(Exception):
    """Raised inside the batch transaction to roll it back (a stop past its timeout)."""


class AsyncHandlers(ConsumerSettings):
    """The handlers of :class:`pgque.AsyncConsumer` and the running of them for a batch
    (the consumer sets the state below up)."""

    _handlers: dict[str, HandlerSpec]
    _log: logging.Logger
    _stop: Event
    _hard_stop: Event
    _batch_deadline: Deadline
    _observed: tuple[bool, bool]  # (tracing, metering), set per batch
    _abandoned: int
    _rate: RateLimiter | None
    #: Runs a batch's lanes (made on the first batch with concurrency, and again when
    #: ``concurrency`` changed).
    _lanes: Lanes | None = None

    def _check_options(self, options: ConsumerOptions) -> None:
        """A changed option must suit every handler registered (``concurrency`` above 1
        and a transactional handler exclude each other)."""
        for type, spec in getattr(self, "_handlers", {}).items():
            try:
                check_handler(options.concurrency, spec.transactional, spec.timeout,
                              spec.ordered_by)  # fmt: skip
            except ValueError as exc:
                raise ValueError(
                    f"consumer {options.name}: concurrency={options.concurrency} refused:"
                    f" {exc} (the handler of type {type!r} is transactional)"
                ) from None

    # -- registering -------------------------------------------------------------

    @overload
    def on(
        self,
        type: str,
        *,
        transactional: bool = ...,
        timeout: float | None = ...,
        ordered_by: str | None = ...,
        model: None = ...,
    ) -> Callable[[H], H]: ...

    @overload
    def on(
        self,
        type: str,
        *,
        transactional: bool = ...,
        timeout: float | None = ...,
        ordered_by: str | None = ...,
        model: Model[M],
    ) -> Callable[[Typed[M, P, R]], Typed[M, P, R]]: ...

    def on(
        self,
        type: str,
        *,
        transactional: bool = False,
        timeout: float | None = None,
        ordered_by: str | None = None,
        model: Any = None,
    ) -> Callable[[Any], Any]:
        """Register the decorated function for messages of ``type`` (``"*"``: any other).

        The function (a coroutine function) is called with the
        :class:`~pgque.Message` (and, when ``transactional``, the batch's
        connection as second argument) and is returned unchanged.

        Args:
            type: The message type, or ``"*"`` for every type without a handler.
            transactional: Pass the batch's connection: the handler's writes
                commit with the ack, or roll back with a failure (exactly-once
                for work in the same database).
            timeout: Seconds the handler may run; past them its message is
                nacked. A task is cancelled; a thread cannot be killed, so it
                is abandoned (see ``max_abandoned``). A transactional handler
                that still runs has its connection closed (rolling the batch
                back) and the consumer reconnects.
            ordered_by: A message attribute (e.g. ``"extra1"``): messages with
                the same value are handled one after another, in order, even
                with ``concurrency``. A nacked message comes back after later
                messages of its key.
            model: Validate the payload into this before the call: a pydantic
                model, a dataclass, a msgspec ``Struct``, a ``TypedDict`` or any
                callable taking the decoded JSON; the handler reads the value as
                ``msg.data``. A payload that does not validate is dead-lettered
                at once, with the error as its reason.

        Raises:
            ValueError: A bad option, or ``type`` has an :meth:`on_batch` handler.
        """
        check_handler(self.concurrency, transactional, timeout, ordered_by)
        return self._registrar(type, False, transactional, timeout, ordered_by, model)

    @overload
    def on_batch(
        self,
        type: str,
        *,
        transactional: bool = ...,
        timeout: float | None = ...,
        model: None = ...,
    ) -> Callable[[H], H]: ...

    @overload
    def on_batch(
        self,
        type: str,
        *,
        transactional: bool = ...,
        timeout: float | None = ...,
        model: Model[M],
    ) -> Callable[[TypedBatch[M, P, R]], TypedBatch[M, P, R]]: ...

    def on_batch(
        self,
        type: str,
        *,
        transactional: bool = False,
        timeout: float | None = None,
        model: Any = None,
    ) -> Callable[[Any], Any]:
        """Register the decorated function for the messages of ``type`` (``"*"``: of any
        other type), called once per batch with the list of them in event order.

        The function (a coroutine function) is called with a list of
        :class:`~pgque.Message` (and, when ``transactional``, the batch's
        connection as second argument) and is returned unchanged. Returning
        acks the messages with the batch; raising nacks them (a message the
        function settled with ``msg.nack()`` or ``msg.dead_letter()`` keeps
        that); ``msg.nack()``/``msg.dead_letter()`` settle single messages and
        the rest are acked. A batch read in two (``max_messages``, then the
        rest of the batch) makes one call per read. The call comes where the
        batch's first message of ``type`` is; with ``concurrency`` it is one
        lane. ``rate_limit`` counts its messages (the call waits for a token
        for each).

        Args:
            type: The message type, or ``"*"`` for every type without a handler.
            transactional: Pass the batch's connection: the function's writes
                commit with the ack (in a savepoint: a raising function's
                writes roll back, and the batch goes on).
            timeout: Seconds the call may run; past them its messages are
                nacked (as for :meth:`on`).
            model: As for :meth:`on`: each payload is validated; the messages
                that do not validate are dead-lettered, the function gets the
                others (and is not called when none is left).

        Raises:
            ValueError: A bad option, or ``type`` has an :meth:`on` handler.
        """
        check_handler(self.concurrency, transactional, timeout, None)
        return self._registrar(type, True, transactional, timeout, None, model)

    def _registrar(
        self, type: str, batch: bool, transactional: bool, timeout: float | None,
        ordered_by: str | None, model: Any,
    ) -> Callable[[Any], Any]:  # fmt: skip
        self._check_kind(type, batch)
        validate = validator(model) if model is not None else None
        name = model_name(model) if model is not None else ""

        def register(handler: Any) -> Any:
            if ASYNC:
                is_async = inspect.iscoroutinefunction(handler)  # apart: no type narrowing
                if not is_async:
                    raise TypeError(f"AsyncConsumer handlers must be async functions: {handler!r}")
            self._check_kind(type, batch)
            self._handlers[type] = HandlerSpec(
                handler, transactional, timeout, ordered_by, batch, validate, name
            )
            return handler

        return register

    def _check_kind(self, type: str, batch: bool) -> None:
        """Refuse ``on`` and ``on_batch`` for one type."""
        existing = self._handlers.get(type)
        if existing is not None and existing.batch != batch:
            had, new = ("on_batch", "on") if existing.batch else ("on", "on_batch")
            raise ValueError(
                f"consumer {self.name!r} (queue {self.queue!r}) has an {had} handler for"
                f" type {type!r}: a type gets either on or on_batch, so {new} cannot be"
                " added; register the other kind under another type"
            )

    def _handler_for(self, msg: Message) -> HandlerSpec | None:
        return self._handlers.get(msg.type or "") or self._handlers.get("*")

    # -- running -----------------------------------------------------------------

    async def _run_handlers(
        self, conn: psycopg.AsyncConnection[Any], msgs: list[Message]
    ) -> list[Outcome]:
        """An outcome per message, in message order."""
        single = self.concurrency == 1
        if single and not any(spec.batch for spec in self._handlers.values()):
            # the common case, kept lean: one message after another, no lanes
            return [await self._outcome(conn, msg) for msg in msgs]
        results: dict[int, Outcome] = {}

        async def run_lane(lane: list[Message]) -> None:
            lane_conn = conn if single else None
            spec = self._handler_for(lane[0])
            if spec is not None and spec.batch:
                outcomes = await self._batch_outcomes(lane_conn, spec, lane)
                results.update(zip(map(id, lane), outcomes, strict=True))
                return
            for msg in lane:
                results[id(msg)] = await self._outcome(lane_conn, msg)

        grouped = lanes(msgs, self._handler_for, ordered=not single)
        if single:
            for lane in grouped:
                await run_lane(lane)
        else:
            calls = [functools.partial(run_lane, lane) for lane in grouped]
            if self._lanes is None or self._lanes.limit != self.concurrency:
                self._lanes = Lanes(self.concurrency)
            await self._lanes.run(calls)  # re-raises BatchAborted from a lane
        return [results[id(m)] for m in msgs]

    def _may_go_on(self, conn: psycopg.AsyncConnection[Any] | None) -> Outcome | None:
        """Before a call: raise when the batch must end, an outcome when its time is up."""
        if self._hard_stop.is_set() or (self._stop.is_set() and self._batch_deadline.passed()):
            raise BatchAborted
        if self._batch_deadline.passed():
            return Outcome("nack", reason="max_batch_time exceeded")
        if conn is not None and conn.closed:  # a handler swallowed the lost connection's error
            raise connection_lost(None)
        return None

    def _invalid(self, spec: HandlerSpec, msg: Message) -> Outcome | None:
        """Validate the payload into the handler's model (kept as ``msg.data``); the
        dead letter of one that does not validate."""
        if spec.validate is None:
            return None
        try:
            msg.data = spec.validate(msg.json())
        except Exception as exc:
            reason = f"payload does not validate as {spec.model_name}: {explain(exc)}"
            self._log.warning("msg_id=%s: %s; dead-lettering it", msg.msg_id, reason)
            return Outcome("dead", reason=reason, error=exc)
        return None

    async def _take_tokens(self, count: int) -> None:
        """Wait for ``count`` tokens of ``rate_limit`` (or a stop now)."""
        if self._rate is None:
            return
        for _ in range(count):
            while (pause := self._rate.wait_time()) > 0:
                if await wait_event(self._hard_stop, pause):
                    return

    async def _outcome(self, conn: psycopg.AsyncConnection[Any] | None, msg: Message) -> Outcome:
        """Run the message's handler and say what became of the message."""
        if (late := self._may_go_on(conn)) is not None:
            return late
        spec = self._handler_for(msg)
        if spec is None:
            if self.unknown_handler_policy == "ack":
                self._log.warning(
                    "no handler for event type=%s ev_id=%s; acking", msg.type, msg.msg_id
                )
                return Outcome("ack")
            self._log.warning(
                "no handler for event type=%s ev_id=%s; nacking", msg.type, msg.msg_id
            )
            return Outcome("nack", reason=f"no handler for type={msg.type}", unhandled=True)
        if spec.validate is not None and (invalid := self._invalid(spec, msg)) is not None:
            return invalid
        if self._rate is not None:
            await self._take_tokens(1)
        tel = telemetry()
        traced, measured = self._observed
        started = time.perf_counter()
        failed: str | None = None
        try:
            if traced:
                # The message's creation context is the parent of its processing.
                with tel.span("process", self.queue,
                              context=tracing.extract(msg.extra1, msg.extra4), attributes={
                    MESSAGE_ID: str(msg.msg_id), CONSUMER_GROUP: self.name,
                }):  # fmt: skip
                    await self._call(conn, spec, msg)
            else:  # nothing is created per message when nobody listens
                await self._call(conn, spec, msg)
        except (BatchAborted, ConnectionAbandoned, ConsumerGaveUp):
            raise
        except Exception as exc:
            failed = error_type(exc)
            if conn is not None and conn.closed:  # the batch is gone: no further handler
                raise connection_lost(exc) from exc
            self._log.exception("handler failed for msg_id=%s, nacking", msg.msg_id)
            return Outcome("nack", reason=handler_failed_reason(exc, msg), error=exc)
        finally:
            if measured:
                tel.record_process(self.queue, time.perf_counter() - started, error=failed,
                                   attributes={CONSUMER_GROUP: self.name})  # fmt: skip
        return decided(msg) or Outcome("ack")

    async def _batch_outcomes(
        self, conn: psycopg.AsyncConnection[Any] | None, spec: HandlerSpec, msgs: list[Message]
    ) -> list[Outcome]:
        """Call a batch handler once with its messages that validate; their outcomes."""
        if (late := self._may_go_on(conn)) is not None:
            return [Outcome(late.action, reason=late.reason) for _ in msgs]
        outcomes: dict[int, Outcome] = {}
        valid: list[Message] = []
        for msg in msgs:
            if (invalid := self._invalid(spec, msg)) is not None:
                outcomes[id(msg)] = invalid
            else:
                valid.append(msg)
        if valid:
            await self._take_tokens(len(valid))
            called = await self._batch_call(conn, spec, valid)
            outcomes.update(zip(map(id, valid), called, strict=True))
        return [outcomes[id(m)] for m in msgs]

    async def _batch_call(
        self, conn: psycopg.AsyncConnection[Any] | None, spec: HandlerSpec, msgs: list[Message]
    ) -> list[Outcome]:
        tel = telemetry()
        traced, measured = self._observed
        started = time.perf_counter()
        failed: str | None = None
        try:
            if traced:
                parents = [tracing.extract(msg.extra1, msg.extra4) for msg in msgs]
                links = [trace.Link(trace.get_current_span(parent).get_span_context())
                         for parent in parents if parent is not None]  # fmt: skip
                attributes = {CONSUMER_GROUP: self.name, BATCH_MESSAGE_COUNT: len(msgs)}
                with tel.span("process", self.queue, links=links, attributes=attributes):
                    await self._call(conn, spec, msgs)
            else:
                await self._call(conn, spec, msgs)
        except (BatchAborted, ConnectionAbandoned, ConsumerGaveUp):
            raise
        except Exception as exc:
            failed = error_type(exc)
            if conn is not None and conn.closed:  # the batch is gone: no further handler
                raise connection_lost(exc) from exc
            self._log.exception("batch handler failed for %s, nacking them", _describe(msgs))
            return [
                decided(msg) or Outcome("nack", reason=handler_failed_reason(exc, msg), error=exc)
                for msg in msgs
            ]
        finally:
            if measured:
                tel.record_process(self.queue, time.perf_counter() - started, error=failed,
                                   attributes={CONSUMER_GROUP: self.name})  # fmt: skip
        return [decided(msg) or Outcome("ack") for msg in msgs]

    async def _call(
        self, conn: psycopg.AsyncConnection[Any] | None, spec: HandlerSpec,
        arg: Message | list[Message],
    ) -> None:  # fmt: skip
        """Call the handler with ``arg`` (a message, or a batch handler's list) as its
        options say."""
        if spec.transactional:
            assert conn is not None
            await self._call_transactional(conn, spec, arg)
        elif spec.timeout is not None:
            label = _describe(arg)
            name = f"pgque-handler-{label}"
            state = await call_with_timeout(lambda: spec.func(arg), spec.timeout, name)
            if state != "done":
                self._timed_out(label, spec.timeout, still_running=state == "running")
        else:
            await spec.func(arg)

    async def _call_transactional(
        self, conn: psycopg.AsyncConnection[Any], spec: HandlerSpec,
        arg: Message | list[Message],
    ) -> None:  # fmt: skip
        # A savepoint: a failing handler's writes go, the batch goes on.
        async with conn.transaction():
            if spec.timeout is None:
                await spec.func(arg, conn)
                return
            label = _describe(arg)
            name = f"pgque-handler-{label}"
            state = await call_with_timeout(lambda: spec.func(arg, conn), spec.timeout, name)
            if state == "stopped":
                raise TimeoutError(f"handler exceeded {spec.timeout}s")
            if state == "running":
                self._log.error(
                    "transactional handler for %s exceeded %ss; closing the batch's"
                    " connection (the batch rolls back) and reconnecting",
                    label, spec.timeout,
                )  # fmt: skip
                await conn.cancel_safe()
                await conn.close()
                raise ConnectionAbandoned(f"handler for {label} timed out")

    def _timed_out(self, label: str, timeout: float, *, still_running: bool) -> None:
        """A handler outlived its timeout: count it if it still runs, give up past
        ``max_abandoned``, else raise TimeoutError (the message is nacked)."""
        if still_running:
            self._abandoned += 1
            self._log.error(
                "handler for %s exceeded %ss and still runs: abandoned (%d of %d allowed)",
                label, timeout, self._abandoned, self.max_abandoned,
            )  # fmt: skip
            if self._abandoned > self.max_abandoned:
                raise ConsumerGaveUp(f"{self._abandoned} handlers timed out and are still running")
        raise TimeoutError(f"handler exceeded {timeout}s")


def _describe(arg: Message | list[Message]) -> str:
    """How logs and errors name the message(s) of a handler's call."""
    if isinstance(arg, list):
        return f"a batch of {len(arg)} (msg_id={arg[0].msg_id}...)"
    return f"msg_id={arg.msg_id}"
