"""The policy's batcher: the requests that arrive while a batch runs make the next batch, a lone request does not
wait, and a batch's failure or a caller's cancellation reaches only whom it concerns."""

from __future__ import annotations

import asyncio
import time

import pytest

from agentic_ray.serving.batching import Batcher


class Recorder:
    """A batch function that records its batches and takes ``delay_s`` (off the loop, as a forward does)."""

    def __init__(self, delay_s: float = 0.0, fail_on: int | None = None) -> None:
        self.batches: list[list[int]] = []
        self.delay_s = delay_s
        self.fail_on = fail_on

    async def __call__(self, items: list[int]) -> list[int]:
        self.batches.append(list(items))
        await asyncio.sleep(self.delay_s)
        if self.fail_on in items:
            raise ValueError(f"bad item {self.fail_on}")
        return [10 * i for i in items]


def test_requests_that_arrive_during_a_batch_make_the_next_one() -> None:
    fn = Recorder(delay_s=0.02)
    b = Batcher(fn, max_batch_size=32, wait_s=0.0)

    async def main() -> list[int]:
        first = asyncio.create_task(b(0))
        await asyncio.sleep(0.005)  # the first batch is running
        rest = [asyncio.create_task(b(i)) for i in range(1, 11)]
        return [await first, *[await r for r in rest]]

    assert asyncio.run(main()) == [10 * i for i in range(11)]
    assert fn.batches == [[0], list(range(1, 11))]


def test_batches_hold_at_most_max_batch_size_and_keep_the_order() -> None:
    fn = Recorder(delay_s=0.01)
    b = Batcher(fn, max_batch_size=4)

    async def main() -> list[int]:
        return list(await asyncio.gather(*(b(i) for i in range(10))))

    assert asyncio.run(main()) == [10 * i for i in range(10)]
    assert fn.batches == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_a_lone_request_does_not_wait_and_a_wait_gathers_company() -> None:
    async def lone(b: Batcher[int, int]) -> float:
        t = time.perf_counter()
        assert await b(7) == 70
        return time.perf_counter() - t

    assert asyncio.run(lone(Batcher(Recorder(), wait_s=0.0))) < 0.05
    assert asyncio.run(lone(Batcher(Recorder(), wait_s=0.1))) >= 0.09
    fn = Recorder()
    b = Batcher(fn, max_batch_size=8, wait_s=0.05)

    async def spaced() -> None:
        first = asyncio.create_task(b(0))
        await asyncio.sleep(0.01)  # within the wait: the same batch
        await asyncio.gather(first, b(1))

    asyncio.run(spaced())
    assert fn.batches == [[0, 1]]
    full = Recorder()
    b = Batcher(full, max_batch_size=2, wait_s=10.0)  # a full batch does not wait

    async def two() -> float:
        t = time.perf_counter()
        await asyncio.gather(b(0), b(1))
        return time.perf_counter() - t

    assert asyncio.run(two()) < 1.0 and full.batches == [[0, 1]]


def test_a_failed_batch_fails_its_callers_only_and_a_cancelled_caller_is_left_out() -> None:
    fn = Recorder(delay_s=0.02, fail_on=2)
    b = Batcher(fn, max_batch_size=32)

    async def main() -> None:
        first = asyncio.create_task(b(0))
        await asyncio.sleep(0.005)
        doomed = [asyncio.create_task(b(i)) for i in (1, 2)]
        gone = asyncio.create_task(b(3))
        await asyncio.sleep(0)
        gone.cancel()
        assert await first == 0
        for d in doomed:
            with pytest.raises(ValueError, match="bad item 2"):
                await d
        assert await b(4) == 40  # the batcher goes on

    asyncio.run(main())
    assert fn.batches == [[0], [1, 2], [4]]
