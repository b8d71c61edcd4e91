"""The producers through a real PgBouncer in transaction mode (round robin).

With ``pooler=True`` every send arrives, the payloads that used to come back
as "your payload is wrong" errors included; without it the first symptom
raises :class:`pgque.PgquePoolerError`, which names the option.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import pgque
from pgque.testing import PgqueTestDatabase

#: Payloads of every shape; the NUL escape and the array-looking text once came back
#: as "invalid byte sequence ... 0x00" and "malformed array literal".
PAYLOADS: list[Any] = [
    {"text": "nul \u0000 inside", "n": 1},
    ["a", "b", {"c": None}],
    {"array": "{1,2,3}", "quote": "'\"\\"},
    {"text": "ünïcödé"},
    12345,
]


def _send(kind: str, dsn: str, rounds: int, **options: Any) -> list[int]:
    """Send ``rounds`` times: each payload alone, then all as one batch, then through
    ``batch()``; the event ids."""
    if kind == "sync":
        with pgque.Producer(dsn, **options) as producer:
            ids: list[int] = []
            for _ in range(rounds):
                ids += [producer.send("q", p, type="t") for p in PAYLOADS]
                ids += producer.send_batch("q", PAYLOADS, types=["t"] * len(PAYLOADS))
                with producer.batch("q", type="t") as batch:
                    for p in PAYLOADS:
                        batch.send(p)
                ids += batch.ids
            return ids

    async def main() -> list[int]:
        async with pgque.AsyncProducer(dsn, **options) as producer:
            ids: list[int] = []
            for _ in range(rounds):
                ids += [await producer.send("q", p, type="t") for p in PAYLOADS]
                ids += await producer.send_batch("q", PAYLOADS, types=["t"] * len(PAYLOADS))
                async with producer.batch("q", type="t") as batch:
                    for p in PAYLOADS:
                        batch.send(p)
                ids += batch.ids
            return ids

    return asyncio.run(main())


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_every_send_arrives_through_the_pooler(
    kind: str, pooled: str, pgque_db: PgqueTestDatabase
) -> None:
    pgque_db.create_queue("q", consumers=["c"])
    rounds = 20
    ids = _send(kind, pooled, rounds, pooler=True)
    assert len(set(ids)) == rounds * 3 * len(PAYLOADS)
    got = pgque_db.drain("q", "c", lambda msg: None)
    assert sorted(m.msg_id for m in got) == sorted(ids)
    assert sorted(map(repr, (m.json() for m in got))) == sorted(map(repr, PAYLOADS * rounds * 3))


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_without_the_option_the_pooler_error_names_it(
    kind: str, pooled: str, pgque_db: PgqueTestDatabase
) -> None:
    pgque_db.create_queue("q", consumers=["c"])
    with pytest.raises(pgque.PgqueError) as caught:
        _send(kind, pooled, 20)
    error = caught.value
    assert isinstance(error, pgque.PgquePoolerError), repr(error)
    assert "pooler=True" in str(error)
    assert "PgBouncer" in str(error)
