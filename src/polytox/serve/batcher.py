"""Micro-batching: concurrent requests share one scorer call.

Each request puts its texts on a bounded queue and awaits their futures. One worker takes the first
waiting text, then gathers more for at most ``max_wait_s`` (a few ms) or until ``max_batch`` texts, and
scores them in one ``Scorer.score`` call on a worker thread (the event loop keeps accepting requests
meanwhile, so texts that arrive during a batch form the next one). Scorers are not assumed thread-safe:
one batch runs at a time.

The queue is bounded twice, so overload is shed instead of answered late:

- in time: with ``max_queue_wait_s`` > 0, a request whose estimated wait for the scorer is over the
  bound is refused at once (``Shed`` -> 429 with Retry-After). The estimate is the number of batches
  that must finish before its last text's batch starts (texts queued or being scored, plus its own, over
  ``max_batch``, rounded up, less its own batch) times the measured batch cycle (an exponential average
  of the time from a batch's first text to its scores). Counting in batches, not texts per second, keeps
  the estimate from feeding on itself: shedding makes batches small, and small batches would make a
  texts-per-second rate look low and shed still more. A request that fits one batch on an idle server
  is always admitted, however slow the scorer, so a scorer slower than the bound still serves. A text
  that nevertheless waited longer than the bound (the estimate lags a sudden slow-down) is refused when
  the worker takes it, so an answered request waited at most the bound, plus its own batch's scoring;
- in texts: a request that would overflow ``max_queue`` is refused at once (``Shed`` too) instead of
  growing memory.

``close()`` stops taking new texts (``Overloaded`` -> 503) and finishes every text already queued
(graceful shutdown).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ..scoring.base import Scorer
from ..scoring.storing import no_store
from ..types import Score
from .metrics import Metrics

CYCLE_SMOOTHING = 0.2  # weight of the newest batch in the average batch cycle


class Overloaded(Exception):
    """The server is shutting down: answer 503, do not queue."""


class Shed(Exception):
    """Too much work waits already: answer 429 with ``retry_after_s``, do not queue."""

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


@dataclass
class _Item:
    text: str
    lang: str
    future: asyncio.Future[Score]
    queued: float  # time.monotonic() when it was queued
    store: bool = True  # False: the request said doNotStore (no cache write for this text)


class MicroBatcher:
    def __init__(
        self,
        scorer: Scorer,
        *,
        max_batch: int = 64,
        max_wait_s: float = 0.002,
        max_queue: int = 1024,
        max_queue_wait_s: float = 0.0,
        metrics: Metrics | None = None,
        in_flight: Callable[[], int] | None = None,
    ) -> None:
        if max_batch < 1 or max_queue < 1 or max_wait_s < 0 or max_queue_wait_s < 0:
            raise ValueError("max_batch and max_queue must be >= 1, max_wait_s and max_queue_wait_s >= 0")
        self.scorer = scorer
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        self.max_queue = max_queue
        self.max_queue_wait_s = max_queue_wait_s  # 0: no bound in time
        self.cycle_s = 0.0  # measured seconds per batch cycle (0: not measured yet)
        self.shed = 0  # texts refused for overload
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
        self._cycle_start = 0.0  # when the batch being collected took its first text

    @property
    def pending(self) -> int:
        return self._queue.qsize() if self._queue is not None else 0

    def start(self) -> None:
        """Start the worker on the running event loop."""
        self._queue = asyncio.Queue()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="polytox-batcher")

    def estimated_wait(self, n: int) -> float:
        """Seconds before the batch of the last of ``n`` more texts would start: the batches ahead of it
        times the batch cycle (0 before any batch is measured, and for texts that fit an idle batch)."""
        return max(0, math.ceil((self._outstanding + n) / self.max_batch) - 1) * self.cycle_s

    def _admit(self, n: int) -> None:
        """Refuse ``n`` texts (``Shed``) that the queue cannot hold or serve within ``max_queue_wait_s``."""
        assert self._queue is not None
        if self._queue.qsize() + n > self.max_queue:
            wait = max(1.0, self.estimated_wait(0))
            raise Shed(f"the scoring queue is full ({self.max_queue} texts waiting); retry later", wait)
        wait = self.estimated_wait(n)
        if self.max_queue_wait_s and wait > self.max_queue_wait_s:
            raise Shed(
                f"the estimated wait ({wait:.1f} s: {self._outstanding} texts ahead, a batch of up to "
                f"{self.max_batch} every {self.cycle_s:.2f} s) is over the bound of {self.max_queue_wait_s:g} s "
                f"(--max-queue-wait); retry later",
                wait - self.max_queue_wait_s,
            )

    async def score(self, texts: Sequence[str], langs: Sequence[str], store: bool = True) -> list[Score]:
        """Queue the texts (all or none) and wait for their scores, in order. ``store=False`` (a request's
        ``doNotStore``) scores them without writing the score cache."""
        if self._queue is None or self._closing:
            raise Overloaded("the server is shutting down")
        try:
            self._admit(len(texts))
        except Shed:
            self._count_shed(len(texts))
            raise
        loop = asyncio.get_running_loop()
        now = time.monotonic()
        items = [_Item(t, lang, loop.create_future(), now, store) for t, lang in zip(texts, langs, strict=True)]
        for item in items:
            self._queue.put_nowait(item)
        self._outstanding += len(items)
        self._gauge()
        self._waiting_requests += 1
        try:
            return list(await asyncio.gather(*(item.future for item in items)))
        except Shed:
            for item in items:  # the request is answered 429: its other texts need no scoring
                item.future.cancel()
            raise
        finally:
            self._waiting_requests -= 1

    def _count_shed(self, n: int) -> None:
        self.shed += n
        if self.metrics is not None:
            self.metrics.shed.inc(n)

    def _gauge(self) -> None:
        if self.metrics is not None and self._queue is not None:
            self.metrics.queue_depth.set(self._queue.qsize())

    async def _collect(self) -> list[_Item]:
        assert self._queue is not None
        batch = [await self._queue.get()]
        self._cycle_start = time.monotonic()
        deadline = self._cycle_start + self.max_wait_s
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

    def _shed_stale(self, batch: list[_Item]) -> list[_Item]:
        """The texts to score: a cancelled request's are dropped, and (with a time bound) those that waited
        past it are refused (``Shed``), so their requests get 429 instead of a late answer."""
        now = time.monotonic()
        live = []
        for item in batch:
            if item.future.done():
                continue
            waited = now - item.queued
            if self.max_queue_wait_s and waited > self.max_queue_wait_s:
                message = (
                    f"the request waited {waited:.1f} s for the scorer, over the bound of "
                    f"{self.max_queue_wait_s:g} s (--max-queue-wait); retry later"
                )
                item.future.set_exception(Shed(message, max(1.0, self.estimated_wait(0))))
                self._count_shed(1)
                continue
            live.append(item)
        self._outstanding -= len(batch) - len(live)
        return live

    def _score_sync(self, items: list[_Item]) -> list[Score]:
        """Score on the worker thread; doNotStore texts go in their own call, inside ``no_store()``."""
        out: dict[int, Score] = {}
        for store in (True, False):
            group = [i for i, item in enumerate(items) if item.store is store]
            if not group:
                continue
            with contextlib.nullcontext() if store else no_store():
                scores = self.scorer.score([items[i].text for i in group], [items[i].lang for i in group])
            out.update(zip(group, scores, strict=True))
        return [out[i] for i in range(len(items))]

    def _measure(self) -> None:
        """Fold one batch cycle (from its first text taken to its scores) into the average."""
        cycle = time.monotonic() - self._cycle_start
        self.cycle_s = cycle if self.cycle_s == 0 else (1 - CYCLE_SMOOTHING) * self.cycle_s + CYCLE_SMOOTHING * cycle

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            live = self._shed_stale(await self._collect())
            self._gauge()
            if not live:
                continue
            started = time.perf_counter()
            try:
                scores = await loop.run_in_executor(self._executor, self._score_sync, live)
            except Exception as exc:  # Scorer.score turns crashes into errors; anything else fails the batch
                scores = [Score.failed(f"SCORER_CRASHED: {type(exc).__name__}: {exc}", transient=True)] * len(live)
            self._measure()
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
