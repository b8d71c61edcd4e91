"""The sync and asyncio halves of the SDK stay in step.

The sync modules are generated from the async ones (``tools/async_to_sync.py``);
this checks the result as a user sees it. For every pair in :data:`PAIRS` the
public names, parameters (name, kind, default) and properties must match, and
the async side's methods must be coroutines (except those in its ``plain``
set); a generated module exports the renamed names of its source, and twins
made alike have the same public attributes. The clients and producers must
also send the same SQL for the same calls. Add a pair here whenever a class
gets an async twin.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest

import pgque
from _engine import make_queue, one


@dataclass(frozen=True)
class Pair:
    """A sync class (or function) and its async twin."""

    sync: Any
    aio: Any
    #: Members of the async side that are plain functions on purpose.
    plain: frozenset[str] = field(default_factory=frozenset)


#: Every sync/async pair of the SDK.
PAIRS: list[Pair] = [
    Pair(pgque.PgqueClient, pgque.AsyncPgqueClient),
    Pair(
        pgque.Consumer, pgque.AsyncConsumer, frozenset({"on", "on_batch", "every", "stop", "reset"})
    ),
    Pair(pgque.MultiQueueConsumer, pgque.AsyncMultiQueueConsumer, frozenset({"stop"})),
    Pair(pgque.Producer, pgque.AsyncProducer, frozenset({"batch"})),
    Pair(pgque.ProducerBatch, pgque.AsyncProducerBatch, frozenset({"send"})),
    Pair(pgque.connect, pgque.connect_async),
]

# Context-manager protocol: the async side has the async spelling.
_RENAMED = {"__enter__": "__aenter__", "__exit__": "__aexit__"}
_KEPT_DUNDERS = {"__init__", "__len__", "__iter__", "__call__"}


def _members(cls: type) -> dict[str, Any]:
    """Public members, plus the context-manager dunders and the dunders a class defines."""

    def wanted(name: str) -> bool:
        if not name.startswith("_") or name in _RENAMED or name in _RENAMED.values():
            return True
        return name in _KEPT_DUNDERS and getattr(cls, name) is not getattr(object, name, None)

    return {name: inspect.getattr_static(cls, name) for name in dir(cls) if wanted(name)}


def _parameters(func: Callable[..., Any]) -> list[tuple[str, Any, Any]]:
    sig = inspect.signature(func)
    return [(p.name, p.kind, p.default) for p in sig.parameters.values()]


def _compare_callables(where: str, sync: Any, aio: Any, *, plain: bool) -> list[str]:
    problems: list[str] = []
    sync_func = sync.__func__ if isinstance(sync, (staticmethod, classmethod)) else sync
    aio_func = aio.__func__ if isinstance(aio, (staticmethod, classmethod)) else aio
    if _parameters(sync_func) != _parameters(aio_func):
        problems.append(
            f"{where}: parameters differ: {inspect.signature(sync_func)}"
            f" vs {inspect.signature(aio_func)}"
        )
    if inspect.iscoroutinefunction(sync_func):
        problems.append(f"{where}: the sync side is a coroutine function")
    if plain and inspect.iscoroutinefunction(aio_func):
        problems.append(f"{where}: expected a plain function on the async side")
    if not plain and not inspect.iscoroutinefunction(aio_func):
        problems.append(f"{where}: not a coroutine function on the async side")
    return problems


def differences(pair: Pair) -> list[str]:
    """Everything that is on one side only, or different; [] when in step."""
    if not isinstance(pair.sync, type):
        return _compare_callables(pair.sync.__name__, pair.sync, pair.aio, plain=False)
    sync, aio = _members(pair.sync), _members(pair.aio)
    problems: list[str] = []
    expected = {_RENAMED.get(name, name): name for name in sync}
    for name in sorted(set(aio) - set(expected)):
        problems.append(f"{pair.aio.__name__}.{name}: only on the async side")
    for aio_name, sync_name in sorted(expected.items()):
        where = f"{pair.sync.__name__}.{sync_name}"
        if aio_name not in aio:
            problems.append(f"{where}: missing on the async side ({aio_name})")
            continue
        s, a = sync[sync_name], aio[aio_name]
        if isinstance(s, property) or isinstance(a, property):
            if not (isinstance(s, property) and isinstance(a, property)):
                problems.append(f"{where}: a property on one side only")
            continue
        if callable(s) or isinstance(s, (staticmethod, classmethod)):
            is_init = sync_name == "__init__"
            if is_init:
                sig_s, sig_a = _parameters(s), _parameters(a)
                # the first argument's type differs (connection vs async connection)
                if [p[0::2] for p in sig_s] != [p[0::2] for p in sig_a]:
                    problems.append(f"{where}: parameters differ")
                continue
            plain = aio_name in pair.plain or sync_name == "__len__"
            problems += _compare_callables(where, s, a, plain=plain)
        elif s != a:
            problems.append(f"{where}: value differs ({s!r} vs {a!r})")
    return problems


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p.sync.__name__)
def test_pairs_are_in_step(pair: Pair) -> None:
    assert differences(pair) == []


#: Every generated module and its async source.
MODULES = ["client", "producer", "consumer", "multi_consumer"]


def _sync_name(name: str) -> str:
    return "connect" if name == "connect_async" else name.removeprefix("Async")


@pytest.mark.parametrize("name", MODULES)
def test_a_generated_module_exports_its_sources_names(name: str) -> None:
    sync = importlib.import_module(f"pgque.{name}")
    aio = importlib.import_module(f"pgque.async_{name}")
    assert sorted(sync.__all__) == sorted(_sync_name(n) for n in aio.__all__)
    assert "Generated by tools/async_to_sync.py" in inspect.getsource(sync)


def _public_attributes(obj: object) -> dict[str, Any]:
    return {k: v for k, v in vars(obj).items() if not k.startswith("_")}


def test_twins_made_alike_have_the_same_public_attributes() -> None:
    options = {"queue": "q", "name": "c", "rate_limit": 5.0, "retry_backoff": [1, 2]}
    sync = pgque.Consumer("dbname=x", **options)  # type: ignore[arg-type]
    aio = pgque.AsyncConsumer("dbname=x", **options)  # type: ignore[arg-type]
    assert _public_attributes(sync) == _public_attributes(aio)
    assert sync.options == aio.options and sync.retry_backoff == (1, 2)
    assert (
        _public_attributes(pgque.MultiQueueConsumer([sync])).keys()
        == _public_attributes(pgque.AsyncMultiQueueConsumer([aio])).keys()
    )


def test_the_check_notices_a_difference() -> None:
    class Sync:
        def send(self, queue: str, *, type: str = "default") -> int:
            return 0

        def only_sync(self) -> None:
            pass

        def __enter__(self) -> Sync:
            return self

    class Async:
        async def send(self, queue: str, *, type: str = "other") -> int:
            return 0

        def plain(self) -> None:
            pass

        async def __aenter__(self) -> Async:
            return self

    found = differences(Pair(Sync, Async))
    assert any("Sync.send: parameters differ" in p for p in found)
    assert any("Sync.only_sync: missing" in p for p in found)
    assert any("Async.plain: only on the async side" in p for p in found)
    assert not any("__enter__" in p for p in found)


# -- same SQL for the same calls -----------------------------------------------------


class Recorder:
    """Wraps a connection (sync or async) and records the SQL it is asked to run."""

    def __init__(self, conn: Any, sent: list[str]) -> None:
        self._conn = conn
        self._sent = sent

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        self._sent.append(str(query))
        return self._conn.execute(query, params, **kwargs)

    def cursor(self, *args: Any, **kwargs: Any) -> Any:
        return Recorder(self._conn.cursor(*args, **kwargs), self._sent)

    def __enter__(self) -> Any:
        self._conn.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self._conn.__exit__(*exc)

    async def __aenter__(self) -> Any:
        await self._conn.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._conn.__aexit__(*exc)


# (method, args, kwargs) for every public client method. BATCH and MESSAGE are
# filled in from the last receive, DEAD from the last dlq_inspect, GROUP per
# side (the sides share a database).
CLIENT_CALLS: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("create_queue", ("aq",), {"options": {"max_retries": 3, "ticker_paused": False}}),
    ("set_queue_config", ("aq", "ticker_max_lag", 1), {}),
    ("pause_queue", ("aq",), {}),
    ("resume_queue", ("aq",), {}),
    ("drop_queue", ("aq",), {"force": True}),
    ("set_queue_config", ("q", "max_retries", 0), {}),
    ("send", ("q", {"a": 1}), {}),
    ("send", ("q", {"a": 1}), {"type": "t"}),
    ("send", ("q", pgque.Event({"e": 1}, type="ev")), {}),
    ("send", ("q", {"a": 1}), {"extras": ("k", None, None, None)}),
    ("send_batch", ("q", "t", [{"b": 1}, {"b": 2}]), {}),
    ("send_at", ("q", {"d": 1}), {"delay": timedelta(hours=1), "type": "later"}),
    ("send_at", ("q", '{"n":"\\u0000"}'), {"at": datetime(2000, 1, 1, tzinfo=timezone.utc)}),
    ("subscribe", ("q", "c2"), {}),
    ("unsubscribe", ("q", "c2"), {}),
    ("force_next_tick", ("q",), {}),
    ("ticker", ("q",), {}),
    ("force_tick", ("q",), {}),
    ("ticker_all", (), {}),
    ("receive", ("q", "c", 2), {}),
    ("receive_rest", ("BATCH", 0), {}),
    ("nack", ("BATCH", "MESSAGE"), {"retry_after": 0, "reason": "r"}),
    ("ack", ("BATCH",), {}),
    ("dlq_inspect", ("q",), {"limit": None}),
    ("dead_letter", ("DEAD",), {}),
    ("recent_events", ("q",), {"limit": 5, "type": "t"}),
    ("dlq_replay", ("DEAD",), {}),
    ("dlq_replay_all", ("q",), {}),
    ("dlq_purge", ("q",), {"older_than": 0}),
    ("set_queue_config", ("q", "max_retries", None), {}),
    ("subscribe_subconsumer", ("q", "GROUP", "s"), {}),
    ("receive_coop", ("q", "GROUP", "s"), {"max_messages": 5, "dead_interval": "1 hour"}),
    ("touch_subconsumer", ("q", "GROUP", "s"), {}),
    ("unsubscribe_subconsumer", ("q", "GROUP", "s"), {"batch_handling": 1}),
    ("start_scheduler", (), {}),
    ("start_timetable", (), {"ticks_per_second": 20}),
    ("stop_scheduler", (), {}),
    ("status", (), {}),
    ("queue_stats", (), {}),
    ("queue_stats", ("q",), {}),
    ("consumer_stats", ("q",), {}),
    ("queue_health", (), {}),
    ("health", (), {}),
    ("throughput", ("q", 3600, 120), {}),
    ("error_rate", ("q", 3600, 120), {}),
    ("metric_samples", (), {}),
    ("consumer_positions", ("q",), {}),
    ("subconsumer_stats", ("q",), {"limit": 10}),
    ("partition_slots", ("q",), {"limit": 10}),
    ("write_privileges", (), {}),
    ("schedule", ("q", "s", "@daily", {"r": 1}), {"type": "t", "time_zone": "Europe/Paris"}),
    ("schedules", (), {}),
    ("schedules", ("q",), {}),
    ("unschedule", ("q", "s"), {}),
    # Partition slots: GROUP is the partitioned consumer here (one slot).
    ("subscribe_slot", ("q", "GROUP", 0, 1), {}),
    ("claim_slot", ("q", "GROUP", 0, "w"), {"ttl": 60}),
    ("send", ("q", {"s": 1}), {"type": "slot"}),
    ("force_next_tick", ("q",), {}),
    ("ticker", ("q",), {}),
    ("receive_partitioned", ("q", "GROUP", 0, 1, "w"), {"max_messages": 5}),
    ("nack_partitioned", ("q", "GROUP", 0, 1, "w", "MESSAGE"), {"retry_after": 1, "reason": "r"}),
    ("dead_letter_partitioned", ("q", "GROUP", 0, 1, "w", "MESSAGE"), {"reason": "d"}),
    ("ack_partitioned", ("q", "GROUP", 0, 1, "w"), {}),
    ("release_slot", ("q", "GROUP", 0, "w"), {}),
    ("unsubscribe_slot", ("q", "GROUP", 0), {}),
]

# Refused without pg_cron / pg_timetable in the test database (the SQL is sent all the same).
MAY_REFUSE = {"start_scheduler", "start_timetable"}


def _call(method: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    try:
        return method(*args, **kwargs)
    except pgque.PgqueError:
        if name not in MAY_REFUSE:
            raise
        return None


async def _acall(method: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    try:
        return await method(*args, **kwargs)
    except pgque.PgqueError:
        if name not in MAY_REFUSE:
            raise
        return None


def _fill(
    args: Iterable[Any], last: list[pgque.Message], dead: list[pgque.DeadLetter], group: str
) -> tuple[Any, ...]:
    values: dict[str, Any] = {"GROUP": group}
    if last:
        values |= {"BATCH": last[0].batch_id, "MESSAGE": last[0]}
    if dead:
        values["DEAD"] = dead[0].dl_id
    return tuple(values.get(a, a) if isinstance(a, str) else a for a in args)


def _public_methods(cls: type) -> set[str]:
    return {n for n, v in vars(cls).items() if not n.startswith("_") and callable(v)}


def test_the_call_list_covers_every_client_method() -> None:
    assert {c[0] for c in CLIENT_CALLS} == _public_methods(pgque.PgqueClient) - {"close"}


def test_clients_send_the_same_sql(db: str, conn: psycopg.Connection[Any]) -> None:
    make_queue(conn, "q")
    one(conn, "select pgque.subscribe('q', 'c')")
    sync_sent: list[str] = []
    with psycopg.connect(db, autocommit=True) as raw:
        client = pgque.PgqueClient(Recorder(raw, sync_sent))  # type: ignore[arg-type]
        last: list[pgque.Message] = []
        dead: list[pgque.DeadLetter] = []
        for name, args, kwargs in CLIENT_CALLS:
            filled = _fill(args, last, dead, "g_sync")
            result = _call(getattr(client, name), name, filled, kwargs)
            if name in ("receive", "receive_partitioned"):
                last = result
            elif name == "dlq_inspect":
                dead = result
    assert last, "the scenario must receive something"
    assert dead, "the scenario must dead-letter something"

    async def run_async() -> list[str]:
        sent: list[str] = []
        async with await psycopg.AsyncConnection.connect(db, autocommit=True) as raw:
            client = pgque.AsyncPgqueClient(Recorder(raw, sent))  # type: ignore[arg-type]
            last: list[pgque.Message] = []
            dead: list[pgque.DeadLetter] = []
            for name, args, kwargs in CLIENT_CALLS:
                filled = _fill(args, last, dead, "g_async")
                result = await _acall(getattr(client, name), name, filled, kwargs)
                if name in ("receive", "receive_partitioned"):
                    last = result
                elif name == "dlq_inspect":
                    dead = result
        return sent

    assert asyncio.run(run_async()) == sync_sent


def test_producers_send_the_same_sql(db: str, conn: psycopg.Connection[Any]) -> None:
    make_queue(conn, "q")

    def scenario_sync(producer: pgque.Producer, c: Any) -> None:
        producer.send("q", {"a": 1}, conn=c)
        producer.send("q", {"a": 1}, type="t", extras=("k", None, None, None), conn=c)
        producer.send_batch("q", [1, 2], conn=c)
        producer.send_batch("q", [1, 2], types=["x", None], extras=[None, ("e", None, None, None)],
                            conn=c)  # fmt: skip
        producer.send_at("q", 1, delay=timedelta(seconds=5), conn=c)
        with producer.batch("q", conn=c) as batch:
            batch.send(1, type="b")

    sync_sent: list[str] = []
    with psycopg.connect(db, autocommit=True) as raw, pgque.Producer(db) as producer:
        scenario_sync(producer, Recorder(raw, sync_sent))

    async def run_async() -> list[str]:
        sent: list[str] = []
        async with (
            await psycopg.AsyncConnection.connect(db, autocommit=True) as raw,
            pgque.AsyncProducer(db) as producer,
        ):
            c: Any = Recorder(raw, sent)
            await producer.send("q", {"a": 1}, conn=c)
            await producer.send("q", {"a": 1}, type="t", extras=("k", None, None, None), conn=c)
            await producer.send_batch("q", [1, 2], conn=c)
            await producer.send_batch(
                "q", [1, 2], types=["x", None], extras=[None, ("e", None, None, None)], conn=c
            )
            await producer.send_at("q", 1, delay=timedelta(seconds=5), conn=c)
            async with producer.batch("q", conn=c) as batch:
                batch.send(1, type="b")
        return sent

    assert len(sync_sent) == 8  # six sends; after the first, one look at the consumers (two)
    assert asyncio.run(run_async()) == sync_sent
