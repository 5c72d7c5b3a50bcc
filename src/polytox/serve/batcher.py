"""Micro-batching: concurrent requests share one scorer call.

Each request puts its texts on a bounded queue and awaits their futures. One worker takes the first
waiting text, then gathers more for at most ``max_wait_s`` (a few ms) or until ``max_batch`` texts, and
scores them in one ``Scorer.score`` call on a worker thread (the event loop keeps accepting requests
meanwhile, so texts that arrive during a batch form the next one). Scorers are not assumed thread-safe:
one batch runs at a time.

The queue is bounded in texts: a request that would overflow it is refused at once (``Overloaded`` ->
503 with Retry-After) instead of growing memory. ``close()`` stops taking new texts and finishes every
text already queued (graceful shutdown).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ..scoring.base import Scorer
from ..types import Score
from .metrics import Metrics


class Overloaded(Exception):
    """The queue is full (or the server is shutting down): answer 503, do not queue."""


@dataclass
class _Item:
    text: str
    lang: str
    future: asyncio.Future[Score]


class MicroBatcher:
    def __init__(
        self,
        scorer: Scorer,
        *,
        max_batch: int = 64,
        max_wait_s: float = 0.002,
        max_queue: int = 1024,
        metrics: Metrics | None = None,
        in_flight: Callable[[], int] | None = None,
    ) -> None:
        if max_batch < 1 or max_queue < 1 or max_wait_s < 0:
            raise ValueError("max_batch and max_queue must be >= 1, max_wait_s >= 0")
        self.scorer = scorer
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        self.max_queue = max_queue
        self.metrics = metrics
        self._queue: asyncio.Queue[_Item] | None = None
        self._task: asyncio.Task[None] | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="polytox-scorer")
        self._closing = False
        self.batches = 0
        self.scored = 0
        self._outstanding = 0  # texts queued or being scored, not yet answered
        # Requests being handled by the server; when all of them already wait here, no one else can join
        # the batch, so it starts at once (a lone client pays no batching delay).
        self._in_flight = in_flight
        self._waiting_requests = 0

    @property
    def pending(self) -> int:
        return self._queue.qsize() if self._queue is not None else 0

    def start(self) -> None:
        """Start the worker on the running event loop."""
        self._queue = asyncio.Queue()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="polytox-batcher")

    async def score(self, texts: Sequence[str], langs: Sequence[str]) -> list[Score]:
        """Queue the texts (all or none) and wait for their scores, in order."""
        if self._queue is None or self._closing:
            raise Overloaded("the server is shutting down")
        if self._queue.qsize() + len(texts) > self.max_queue:
            raise Overloaded(f"the scoring queue is full ({self.max_queue} texts waiting); retry later")
        loop = asyncio.get_running_loop()
        items = [_Item(t, lang, loop.create_future()) for t, lang in zip(texts, langs, strict=True)]
        for item in items:
            self._queue.put_nowait(item)
        self._outstanding += len(items)
        self._gauge()
        self._waiting_requests += 1
        try:
            return list(await asyncio.gather(*(item.future for item in items)))
        finally:
            self._waiting_requests -= 1

    def _gauge(self) -> None:
        if self.metrics is not None and self._queue is not None:
            self.metrics.queue_depth.set(self._queue.qsize())

    async def _collect(self) -> list[_Item]:
        assert self._queue is not None
        batch = [await self._queue.get()]
        deadline = time.monotonic() + self.max_wait_s
        while len(batch) < self.max_batch:
            try:
                batch.append(self._queue.get_nowait())
                continue
            except asyncio.QueueEmpty:
                pass
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._closing or self._nobody_else():
                break
            try:
                batch.append(await asyncio.wait_for(self._queue.get(), remaining))
            except TimeoutError:
                break
        return batch

    def _nobody_else(self) -> bool:
        return self._in_flight is not None and self._in_flight() <= self._waiting_requests

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = await self._collect()
            self._gauge()
            live = [item for item in batch if not item.future.done()]  # a cancelled request drops its texts
            self._outstanding -= len(batch) - len(live)
            if not live:
                continue
            started = time.perf_counter()
            try:
                scores = await loop.run_in_executor(
                    self._executor, self.scorer.score, [i.text for i in live], [i.lang for i in live]
                )
            except Exception as exc:  # Scorer.score turns crashes into errors; anything else fails the batch
                scores = [Score.failed(f"SCORER_CRASHED: {type(exc).__name__}: {exc}", transient=True)] * len(live)
            self.batches += 1
            self.scored += len(live)
            if self.metrics is not None:
                self.metrics.batch_size.observe(len(live))
                self.metrics.batch_seconds.observe(time.perf_counter() - started)
                self.metrics.texts.inc(len(live))
            for item, score in zip(live, scores, strict=True):
                if not item.future.done():
                    item.future.set_result(score)
            self._outstanding -= len(live)

    async def close(self) -> None:
        """Refuse new texts, finish the queued ones, stop the worker."""
        self._closing = True
        while self._outstanding > 0 and self._task is not None and not self._task.done():
            await asyncio.sleep(0.005)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._executor.shutdown(wait=True)
