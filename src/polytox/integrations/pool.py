"""Pool texts that arrive one at a time (a framework scoring each sample on its own) into scorer batches.

inspect_ai calls a scorer once per sample, from many concurrent coroutines. ``ScorePool.score`` parks each
text with a future; the first one waiting starts a short timer (``max_wait``), a full batch
(``max_batch``) goes at once, and each batch is scored in one ``score_texts`` call on a worker thread, so
the event loop keeps generating while the classifier runs.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from .scoring import Scored, ScorerChoice, score_texts

DEFAULT_MAX_BATCH = 256
DEFAULT_MAX_WAIT_S = 0.05


@dataclass(frozen=True)
class PooledScore:
    """A text's score and the size of the scorer call it was part of."""

    scored: Scored
    batch_size: int


class ScorePool:
    """Micro-batches ``score`` calls made on one event loop."""

    def __init__(
        self, choice: ScorerChoice, max_batch: int = DEFAULT_MAX_BATCH, max_wait: float = DEFAULT_MAX_WAIT_S
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be >= 1")
        self.choice = choice
        self.max_batch = max_batch
        self.max_wait = max_wait
        self._pending: list[tuple[str, str, asyncio.Future[PooledScore]]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._running: set[asyncio.Task[None]] = set()
        self.batches: list[int] = []  # sizes of the scorer calls made, in order

    async def score(self, text: str, lang: str) -> PooledScore:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[PooledScore] = loop.create_future()
        self._pending.append((text, lang, future))
        if len(self._pending) >= self.max_batch:
            self._flush()
        elif self._timer is None:
            self._timer = loop.call_later(self.max_wait, self._flush)
        return await future

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._pending = self._pending, []
        if batch:
            task = asyncio.ensure_future(self._run(batch))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    async def _run(self, batch: list[tuple[str, str, asyncio.Future[PooledScore]]]) -> None:
        self.batches.append(len(batch))
        try:
            results = await asyncio.to_thread(score_texts, self.choice, [b[0] for b in batch], [b[1] for b in batch])
        except Exception as exc:  # the whole batch failed (POLYTOX_ON_SCORE_ERROR=raise, a broken scorer)
            for *_, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for (*_, future), scored in zip(batch, results, strict=True):
            if not future.done():
                future.set_result(PooledScore(scored, len(batch)))
