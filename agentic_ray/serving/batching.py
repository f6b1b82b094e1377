"""Dynamic batching of single policy calls, one batch at a time (what ``@serve.batch`` did for the policy).

A batch is formed when the previous one has finished, from the requests queued by then (at most
``max_batch_size``), after waiting at most ``wait_s`` from its first request for more. So a lone request waits
``wait_s`` (0 by default: not at all), and under load the requests that arrive while a forward runs make the next
batch, without any wait.

Why not ``@serve.batch``: Ray 2.60's batch queue forms the next batch as soon as a request is queued and only then
waits for the running one to finish (``max_concurrent_batches``), so the requests that arrive during a forward
are split into many small batches (measured: a mean batch of 1.9 at 32 HTTP clients with a wait of 0). It also
needs a Serve replica to run, and records five Serve metrics and creates two tasks per batch; the
:class:`~agentic_ray.serving.policy_runner.BatchStats` of the runner count batches here.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

__all__ = ["Batcher"]

T = TypeVar("T")
R = TypeVar("R")


class Batcher(Generic[T, R]):
    """``await batcher(item)``: the item's result from one call of ``fn`` on a batch of items.

    Args:
        fn: items -> one result per item, in order. An exception it raises is every caller of that batch's.
        max_batch_size: most items per call.
        wait_s: how long a batch waits from its first item for more (0: it takes what is queued).

    A caller that is cancelled (e.g. by the policy timeout) leaves its item out of any batch not yet formed; a
    batch already running is not interrupted. Runs on the event loop of its callers.
    """

    def __init__(
        self, fn: Callable[[list[T]], Awaitable[list[R]]], max_batch_size: int = 32, wait_s: float = 0.0
    ) -> None:
        self.fn = fn
        self.max_batch_size = max_batch_size
        self.wait_s = wait_s
        self._queue: deque[tuple[T, asyncio.Future[R]]] = deque()
        self._worker: asyncio.Task[None] | None = None
        self._full: asyncio.Future[None] | None = None

    def configure(self, max_batch_size: int, wait_s: float) -> None:
        """New settings for the batches formed from now on."""
        self.max_batch_size, self.wait_s = max_batch_size, wait_s

    async def __call__(self, item: T) -> R:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[R] = loop.create_future()
        self._queue.append((item, fut))
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._run())
        elif self._full is not None and len(self._queue) >= self.max_batch_size and not self._full.done():
            self._full.set_result(None)
        return await fut

    async def _run(self) -> None:
        while self._queue:
            if self.wait_s > 0 and len(self._queue) < self.max_batch_size:
                await self._fill()
            batch: list[tuple[T, asyncio.Future[R]]] = []
            while self._queue and len(batch) < self.max_batch_size:
                item, fut = self._queue.popleft()
                if not fut.done():  # not cancelled
                    batch.append((item, fut))
            if batch:
                await self._call(batch)

    async def _fill(self) -> None:
        """Until the queue holds a full batch or ``wait_s`` has passed."""
        loop = asyncio.get_running_loop()
        full: asyncio.Future[None] = loop.create_future()
        timer = loop.call_later(self.wait_s, _settle, full)
        self._full = full
        try:
            await full
        finally:
            timer.cancel()
            self._full = None

    async def _call(self, batch: list[tuple[T, asyncio.Future[R]]]) -> None:
        try:
            results = await self.fn([item for item, _ in batch])
            if len(results) != len(batch):
                raise RuntimeError(f"a batch of {len(batch)} items gave {len(results)} results")
        except BaseException as e:  # the callers get it; a cancelled batch cancels them
            for _, fut in batch:
                if not fut.done():
                    if isinstance(e, asyncio.CancelledError):
                        fut.cancel()
                    else:
                        fut.set_exception(e)
            if not isinstance(e, Exception):
                raise
            return
        for (_, fut), r in zip(batch, results, strict=True):
            if not fut.done():
                fut.set_result(r)


def _settle(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
