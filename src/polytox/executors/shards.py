"""The work of one shard: generate K samples per prompt, score the generations.

Every executor (serial, pipelined, Ray Data) runs exactly these two functions, so a shard's output does not
depend on where it ran; the runner plans the shards and hands them to an executor.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import FatalGenerationError, PolytoxError
from ..generation import Generator, build_generator
from ..scoring import Scorer
from ..spec import EvalSpec, GenerationSpec
from ..types import Generation, GenerationRequest, Prompt, Score, derive_seed

GENERATION_FAILED = "GENERATION_FAILED: no text to score"


def shards(prompts: Sequence[Prompt], size: int) -> list[list[Prompt]]:
    return [list(prompts[i : i + size]) for i in range(0, len(prompts), size)]


def shard_requests(shard: Sequence[Prompt], spec: EvalSpec) -> list[GenerationRequest]:
    """The requests of a shard: K per prompt, each with the seed derived from (run seed, prompt, sample)."""
    return [
        GenerationRequest(p, k, derive_seed(spec.seed, p.id, k)) for p in shard for k in range(spec.generation.samples)
    ]


def generate_shard(generator: Generator, shard: Sequence[Prompt], spec: EvalSpec) -> list[Generation]:
    """K samples for every prompt of the shard, ordered by (prompt position, sample index).

    ``FatalGenerationError`` passes through (the backend is dead: the executor stops the run and nothing
    of this shard is written); any other exception loses only this shard, as recorded errors.
    """
    requests = shard_requests(shard, spec)
    try:
        generations = generator.generate(requests)
    except FatalGenerationError:
        raise
    except Exception as exc:  # a backend that crashes loses this shard as recorded errors, not the run
        generations = [
            Generation(
                prompt_id=r.prompt.id,
                sample_index=r.sample_index,
                text=None,
                finish_reason="error",
                error=f"GENERATION_CRASHED: {type(exc).__name__}: {exc}",
            )
            for r in requests
        ]
    order = {p.id: i for i, p in enumerate(shard)}
    return sorted(generations, key=lambda g: (order[g.prompt_id], g.sample_index))


def score_generations(scorer: Scorer, generations: Sequence[Generation], langs: dict[str, str]) -> list[Score]:
    """One score per generation; failed generations get an error score, never a value."""
    todo = [i for i, g in enumerate(generations) if g.text is not None]
    scored = scorer.score([generations[i].text or "" for i in todo], [langs[generations[i].prompt_id] for i in todo])
    out = [Score.failed(GENERATION_FAILED)] * len(generations)
    for i, s in zip(todo, scored, strict=True):
        out[i] = s
    return out


def open_generator(spec: GenerationSpec) -> Generator:
    """The spec's backend; a load failure that is not a user error (``PolytoxError``: bad option, missing
    extra) becomes ``FatalGenerationError``, so the run stops with its cause instead of a traceback."""
    try:
        return build_generator(spec)
    except PolytoxError:
        raise
    except Exception as exc:
        raise FatalGenerationError(
            f"the model failed to load ({spec.backend} backend, {spec.model}): {type(exc).__name__}: {exc}"
        ) from exc
