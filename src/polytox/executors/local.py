"""In-process executors: serial (generate a shard, score it, repeat) and pipelined.

Pipelined: the main thread only generates; a single scoring thread scores finished shards, so the
backend starts the next shard while the previous one is scored. At most ``queue_depth`` generated shards
wait for the scorer (bounded memory); when the scorer is slower than generation, generation waits, and
that wait is measured (``wait_for_scores_seconds``). Scoring runs on one thread, in shard order, so the
progress and the cache see the same sequence as the serial executor. Parts are written by the same store
calls, so both executors produce identical run directories.

A ``FatalGenerationError`` (the backend is dead) stops both: no further shard is generated, the shards
already generated are still scored and written (pipelined: the scoring queue is drained first), then the
error goes to the runner, which ends the run as stopped.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor

from ..errors import FatalGenerationError
from ..generation import Generator
from ..types import Generation
from .base import Executor, ExecutorStats, Work


class _Shards:
    """Generation and scoring of one shard, with the bookkeeping both local executors share."""

    def __init__(self, work: Work, stats: ExecutorStats) -> None:
        self.work = work
        self.stats = stats
        self.generator: Generator | None = None
        self.described: dict[str, object] | None = None
        self.done = 0
        self.lock = threading.Lock()

    def generate(self, index: int) -> list[Generation]:
        from .shards import generate_shard, open_generator

        w = self.work
        if self.generator is None:
            self.generator = open_generator(w.spec.generation)
            plan_run = getattr(self.generator, "plan_run", None)
            if plan_run is not None:  # the samples still to generate (compile=auto weighs them)
                plan_run(
                    sum(len(w.plan[i]) for i in range(index, len(w.plan)) if not w.store.has_generations(i))
                    * w.spec.generation.samples
                )
            self.described = self.generator.describe()
            w.store.update_manifest(model=self.described)
        start = time.perf_counter()
        generations = generate_shard(self.generator, w.plan[index], w.spec)
        w.store.write_generations(index, generations)
        described = self.generator.describe()
        if described != self.described:  # what a backend learned while generating (e.g. a server's max n)
            self.described = described
            w.store.update_manifest(model=described)
        self.stats.generate_seconds += time.perf_counter() - start
        self.stats.shards_generated += 1
        return generations

    def score(self, index: int, generations: list[Generation] | None) -> None:
        from .shards import score_generations

        w = self.work
        start = time.perf_counter()
        if generations is None:
            generations = w.store.read_generations(index)
        scores = score_generations(w.scorer, generations, w.langs)
        w.store.write_scores(w.scorer.id, index, generations, scores, w.scorer.attributes)
        with self.lock:
            self.stats.score_seconds += time.perf_counter() - start
            self.stats.shards_scored += 1
        self.advance(index)

    def advance(self, index: int) -> None:
        with self.lock:
            self.done += len(self.work.plan[index]) * self.work.spec.generation.samples
            done = self.done
        self.work.report("generate+score", done, self.work.total)

    def close(self) -> None:
        if self.generator is not None:
            self.generator.close()


class SerialExecutor(Executor):
    """Generate a shard, score it, write both, repeat: the simplest order, and the baseline."""

    name = "serial"

    def run(self, work: Work) -> ExecutorStats:
        stats = ExecutorStats(self.name, shards_total=len(work.plan))
        shards = _Shards(work, stats)
        wall = time.perf_counter()
        try:
            for index in range(len(work.plan)):
                generations = None if work.store.has_generations(index) else shards.generate(index)
                if work.store.has_scores(work.scorer.id, index):
                    shards.advance(index)
                    continue
                shards.score(index, generations)
        finally:
            shards.close()
        stats.wall_seconds = time.perf_counter() - wall
        stats.wait_for_scores_seconds = stats.score_seconds  # the backend is idle while each shard scores
        return stats


class PipelinedExecutor(Executor):
    """Generation on the calling thread, scoring on a worker thread, at most ``queue_depth`` shards apart."""

    name = "pipelined"

    def run(self, work: Work) -> ExecutorStats:
        stats = ExecutorStats(self.name, shards_total=len(work.plan), details={"queue_depth": self.config.queue_depth})
        shards = _Shards(work, stats)
        pending: deque[Future[None]] = deque()
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="polytox-score")
        wall = time.perf_counter()
        drain = 0.0
        try:
            for index in range(len(work.plan)):
                try:
                    generations = None if work.store.has_generations(index) else shards.generate(index)
                except FatalGenerationError:
                    while pending:  # the shards generated before the backend died are still scored and stored
                        pending.popleft().result()
                    raise
                if work.store.has_scores(work.scorer.id, index):
                    pending.append(pool.submit(shards.advance, index))
                    continue
                while len(pending) >= max(1, self.config.queue_depth):
                    start = time.perf_counter()
                    pending.popleft().result()  # re-raises a failed store write here
                    stats.wait_for_scores_seconds += time.perf_counter() - start
                pending.append(pool.submit(shards.score, index, generations))
            start = time.perf_counter()
            while pending:
                pending.popleft().result()
            drain = time.perf_counter() - start
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            shards.close()
        stats.wall_seconds = time.perf_counter() - wall
        stats.details["drain_seconds"] = round(drain, 4)  # scoring the last shards after generation ended
        return stats
