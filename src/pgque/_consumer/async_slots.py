"""The partition slots a consumer made with ``partitions=`` works.

A worker (one consumer in one process) holds up to ``max_slots`` of the
consumer's N slots by lease. It claims free slots, starting at a slot that
depends on its worker id so that workers spread out; ``claim_slot`` returning
None means another worker holds that slot, and the worker tries the next
one. Only slots that ``partition_slot_status`` shows without a live owner
are claimed: ``claim_slot`` locks the slot's row, which the holder keeps
locked while its batch is open, so claiming a busy slot would wait for that
batch. Working a slot renews its lease (every ``receive_partitioned`` and
``ack_partitioned`` does); a slot whose call raises ``PgqueFenced`` was taken
over by another worker and is dropped. Workers holding fewer slots than
``max_slots`` look for free ones again every third of the lease's TTL, so
the slots of a worker that died are taken over once its leases expire.
"""

from __future__ import annotations

import logging
import time
import zlib
from dataclasses import dataclass

from pgque._consumer.options import ALL_MESSAGES
from pgque.async_client import AsyncPgqueClient
from pgque.message import Message

__all__ = ["AsyncSlotLeases", "SlotRef"]

#: The most ``partition_slot_status`` rows read per claim round.
_STATUS_ROWS = 100_000


@dataclass(frozen=True)
class SlotRef:
    """One slot as the slot functions name it: queue, consumer, slot, n and worker."""

    queue: str
    consumer: str
    slot: int
    n: int
    worker: str


class AsyncSlotLeases:
    """The slots one worker holds, claimed and worked in turn.

    Args:
        queue: The queue.
        consumer: The partitioned consumer.
        n: Its slot count.
        max_slots: The most slots this worker holds at once.
        worker: The worker id (unique per process).
        ttl: The lease's time to live, in seconds.
        log: Where claims and losses are logged.
    """

    def __init__(
        self,
        queue: str,
        consumer: str,
        n: int,
        *,
        max_slots: int,
        worker: str,
        ttl: float,
        log: logging.Logger,
    ) -> None:
        self.queue = queue
        self.consumer = consumer
        self.n = n
        self.max_slots = max_slots
        self.worker = worker
        self.ttl = ttl
        #: The slots held, in the order they were claimed.
        self.held: list[int] = []
        self._log = log
        self._first = zlib.crc32(worker.encode()) % n
        self._last_claim = float("-inf")
        self._turn = 0

    def ref(self, slot: int) -> SlotRef:
        """The :class:`SlotRef` of one of the consumer's slots for this worker."""
        return SlotRef(self.queue, self.consumer, slot, self.n, self.worker)

    async def subscribe(self, client: AsyncPgqueClient) -> None:
        """Subscribe every slot of the consumer (those subscribed are left alone)."""
        for slot in range(self.n):
            await client.subscribe_slot(self.queue, self.consumer, slot, self.n)

    async def claim(self, client: AsyncPgqueClient) -> None:
        """Claim free slots while fewer than ``max_slots`` are held (at most every
        third of the TTL while some are held); each claim is its own statement."""
        if len(self.held) >= self.max_slots:
            return
        now = time.monotonic()
        if self.held and now - self._last_claim < self.ttl / 3:
            return
        self._last_claim = now
        # Slots this worker owns already come first (it restarted with the same
        # id: same epoch). Slots with another live owner are skipped: claiming
        # them would wait for that owner's open batch. Slots not subscribed are
        # tried, so that claim_slot says what to do.
        rows = [r for r in await client.partition_slots(self.queue, _STATUS_ROWS)
                if r.consumer == self.consumer]  # fmt: skip
        own = [r.slot for r in rows if r.lease_owner == self.worker]
        busy = {r.slot for r in rows if r.lease_owner not in (None, self.worker)}
        order = own + [(self._first + i) % self.n for i in range(self.n)]
        for slot in dict.fromkeys(order):
            if slot in self.held or slot in busy:
                continue
            epoch = await client.claim_slot(self.queue, self.consumer, slot, self.worker, self.ttl)
            if epoch is None:
                continue  # another worker holds it
            self.held.append(slot)
            self._log.info(
                "worker %s claimed slot %s/%s of %s on %s (epoch %s)",
                self.worker, slot, self.n, self.consumer, self.queue, epoch,
            )  # fmt: skip
            if len(self.held) >= self.max_slots:
                return

    def in_turn(self) -> list[int]:
        """The held slots, starting after the one that had messages last."""
        start = self._turn % len(self.held) if self.held else 0
        return self.held[start:] + self.held[:start]

    def worked(self, slot: int) -> None:
        """Note that ``slot`` had messages: the next round starts after it."""
        self._turn = self.held.index(slot) + 1

    def lost(self, slot: int) -> None:
        """Drop a slot another worker took over."""
        if slot in self.held:
            self.held.remove(slot)
        self._log.warning(
            "worker %s lost slot %s/%s of %s on %s to another worker",
            self.worker, slot, self.n, self.consumer, self.queue,
        )  # fmt: skip

    async def receive(self, client: AsyncPgqueClient, slot: int) -> list[Message]:
        """The slot's share of its open or next batch, all of it (renews the lease)."""
        return await client.receive_partitioned(
            self.queue, self.consumer, slot, self.n, self.worker, ALL_MESSAGES
        )

    async def release(self, client: AsyncPgqueClient) -> None:
        """Give up every held slot, so other workers take them over at once."""
        for slot in self.held:
            await client.release_slot(self.queue, self.consumer, slot, self.worker)
        self.held.clear()
