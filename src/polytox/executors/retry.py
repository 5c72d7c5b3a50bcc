"""``polytox eval --retry-failed``: regenerate the failed samples of a run, rescore, and record it.

After every shard is stored, each shard holding a failed generation or a failed score is repaired:

1. its failed generations are generated again from their original requests (same prompt, sample index
   and seed, the seed derived from (run seed, prompt id, sample index)); the backend says what to send
   for that (``Generator.retry_requests``: the failed samples alone, or the whole prompt when a prompt's
   K samples come from one seeded ``n=K`` request), and only the failed samples' new outputs are kept;
2. the shard is scored again as a whole, exactly as the uninterrupted run scored it (the score cache
   answers for the unchanged texts), so a score that had failed is retried too, a cached permanent
   error included (``scoring.cache.retrying_errors``: a Perspective 400 whose cause was fixed is asked
   again, not replayed from the cache);
3. both parts are rewritten atomically, generation part first.

A sample that fails again stays a failure, stored with its new error. With a deterministic backend and
scorer the repaired run equals a run that never failed. A ``FatalGenerationError`` stops the repair like
it stops a run; the shards repaired so far stay repaired.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from ..errors import FatalGenerationError
from ..generation import Generator
from ..metrics.failures import OUTCOMES, error_kind
from ..scoring.cache import retrying_errors
from ..store import now
from ..types import Generation, GenerationRequest
from .base import Work
from .shards import open_generator, score_generations, shard_requests


@dataclass
class RetryReport:
    """What a retry did; appended to the manifest's ``retries`` list."""

    at: str
    shards_repaired: int = 0
    generations_retried: int = 0
    generations_recovered: int = 0
    scores_retried: int = 0  # samples with text whose score had failed
    scores_recovered: int = 0
    samples_sent: int = 0  # requests sent to the backend (more than retried when whole prompts go again)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, object]:
        out = asdict(self)
        out["seconds"] = round(self.seconds, 3)
        return out


def _failed_score_keys(work: Work, index: int, generations: list[Generation]) -> set[tuple[str, int]]:
    """Samples with text whose stored score failed (not a failed generation's score, which only repeats
    that failure, nor an empty or invalid text, which no retry changes)."""
    if not work.store.has_scores(work.scorer.id, index):
        return set()
    has_text = {(g.prompt_id, g.sample_index) for g in generations if g.error is None}
    return {
        key
        for key, error in work.store.read_score_errors(work.scorer.id, index).items()
        if error is not None and key in has_text and error_kind(error) not in OUTCOMES
    }


def retry_failed(work: Work) -> RetryReport:
    """Repair every stored shard of ``work`` that holds a failed generation or score (see the module doc)."""
    report = RetryReport(at=now())
    start = time.perf_counter()
    generator: Generator | None = None
    try:
        for index, shard in enumerate(work.plan):
            if not work.store.has_generations(index):
                continue
            generations = work.store.read_generations(index)
            failed_keys = {(g.prompt_id, g.sample_index) for g in generations if g.error is not None}
            bad_scores = _failed_score_keys(work, index, generations)
            if not failed_keys and not bad_scores and work.store.has_scores(work.scorer.id, index):
                continue
            report.shards_repaired += 1
            if failed_keys:
                if generator is None:
                    generator = open_generator(work.spec.generation)
                generations = _regenerate(
                    generator, work, shard_requests(shard, work.spec), generations, failed_keys, report
                )
                work.store.write_generations(index, generations)
            with retrying_errors(work.scorer):  # a cached error is asked again, not replayed
                scores = score_generations(work.scorer, generations, work.langs)
            work.store.write_scores(work.scorer.id, index, generations, scores, work.scorer.attributes)
            report.scores_retried += len(bad_scores)
            keys = [(g.prompt_id, g.sample_index) for g in generations]
            report.scores_recovered += sum(scores[i].ok for i, key in enumerate(keys) if key in bad_scores)
    finally:
        if generator is not None:
            generator.close()
        report.seconds = time.perf_counter() - start
    return report


def _regenerate(
    generator: Generator,
    work: Work,
    requests: list[GenerationRequest],
    generations: list[Generation],
    failed_keys: set[tuple[str, int]],
    report: RetryReport,
) -> list[Generation]:
    """``generations`` with each failed sample replaced by its regenerated output."""
    failed = [r for r in requests if (r.prompt.id, r.sample_index) in failed_keys]
    send = generator.retry_requests(failed, requests)
    try:
        fresh = {(g.prompt_id, g.sample_index): g for g in generator.generate(send)}
    except FatalGenerationError:
        raise
    except Exception:  # the backend crashed on this batch again: the samples keep their stored failures
        fresh = {}
    report.samples_sent += len(send)
    report.generations_retried += len(failed)
    out = []
    for g in generations:
        key = (g.prompt_id, g.sample_index)
        if key in failed_keys and key in fresh:
            g = fresh[key]
            report.generations_recovered += g.error is None
        out.append(g)
    return out
