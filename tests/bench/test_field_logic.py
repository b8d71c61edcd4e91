"""The field case's producer rule: keep 4,000 jobs waiting with batches of up to 1,000.

No database here (the case itself runs in ``python -m benchmarks run --quick``):
these pin the arithmetic that decides what every system is sent.
"""

from __future__ import annotations

import asyncio

from benchmarks.field_runs import BATCH, DEPTH, Meter, hold_depth


def test_the_producer_tops_the_depth_up_in_batches_of_at_most_1000() -> None:
    assert (DEPTH, BATCH) == (4_000, 1_000)
    meter, halt = Meter(), asyncio.Event()
    batches: list[int] = []
    waiting: list[int] = []

    async def send_batch(count: int) -> None:
        batches.append(count)
        waiting.append(meter.waiting)
        if len(batches) == 4:
            meter.completed += 1_500  # the worker handled some meanwhile
        if len(batches) == 6:
            halt.set()

    asyncio.run(hold_depth(send_batch, meter, halt))
    assert batches == [1_000, 1_000, 1_000, 1_000, 1_000, 500]
    assert waiting == [1_000, 2_000, 3_000, 4_000, 3_500, 4_000]  # never above the depth
    assert meter.sent == 5_500


def test_the_producer_sends_nothing_while_the_depth_is_full() -> None:
    meter, halt = Meter(sent=DEPTH), asyncio.Event()
    batches: list[int] = []

    async def send_batch(count: int) -> None:
        batches.append(count)

    async def run() -> None:
        producer = asyncio.create_task(hold_depth(send_batch, meter, halt))
        for _ in range(5):  # several of its pauses
            await asyncio.sleep(0)
        assert not batches
        meter.completed = 10
        while not batches:
            await asyncio.sleep(0.001)
        halt.set()
        await producer

    asyncio.run(run())
    assert batches[0] == 10


def test_handler_start_times_are_kept_only_in_a_paced_run() -> None:
    counted, paced = Meter(), Meter(paced=True)
    for meter in (counted, paced):
        meter.begin(7)
        meter.begin(7)
        meter.done()
    assert counted.started == {} and counted.completed == 1
    assert list(paced.started) == [7] and paced.completed == 1
