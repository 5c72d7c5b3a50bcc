"""The generator contract: requests (prompt, sample index, seed) in, one ``Generation`` each out.

A generator must be deterministic given the requests' seeds and the batch they arrive in, so a resumed
run that replays a shard reproduces it exactly. Failures of single requests are returned as
``Generation`` records with ``finish_reason='error'`` and the error text (a tag first: ``HTTP_503: ...``),
never raised past the batch that failed. When the backend itself is gone (engine dead, server
unreachable beyond the retry budget, model not loadable) it raises ``FatalGenerationError`` instead: the
run stops rather than record every remaining sample as the same error.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from .._util.options import Option, check_options
from ..types import Generation, GenerationRequest

if TYPE_CHECKING:
    from ..spec import GenerationSpec


class Generator(ABC):
    """Base class of generation backends."""

    name: ClassVar[str] = "generator"

    def describe(self) -> dict[str, Any]:
        """What the manifest records about the model (id, revision, dtype, device...)."""
        return {"backend": self.name}

    @abstractmethod
    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        """One generation per request, in the same order."""

    # The ``--model-opt`` options, each declared once (``polytox._util.options``: kind, range or choices,
    # default, help); checked before any work and listed by ``polytox scorers --options generators``. None: a
    # plugin backend that checks its own options.
    OPTIONS: ClassVar[Mapping[str, Option] | None] = None

    @classmethod
    def check(cls, spec: GenerationSpec) -> None:
        """Refuse a spec this backend cannot run (unknown option, bad value, a model that cannot be found,
        a server that cannot be reached) before any work starts: ``evaluate`` calls it before it opens the
        run directory. The default checks ``OPTIONS`` when the backend declares them."""
        if cls.OPTIONS is not None:
            check_options(f"backend {cls.name!r}", cls.OPTIONS, dict(spec.options), flag="--model-opt")

    def retry_requests(
        self, failed: Sequence[GenerationRequest], shard: Sequence[GenerationRequest]
    ) -> list[GenerationRequest]:
        """What to send so that the ``failed`` requests of a shard come out exactly as in an uninterrupted
        run (``polytox eval --retry-failed``); only the failed samples' outputs are kept.

        The default, the failed requests alone, is right for backends whose samples depend on their own
        seed only. A backend that draws a prompt's K samples from one seeded request (vLLM's and the
        openai backend's ``n=K``) returns all the samples of the prompts concerned instead.
        """
        return list(failed)

    @classmethod
    def default_batch_size(cls, samples: int) -> int:
        """Prompts per batch when the spec says 0 (auto); a class method so no model is loaded for it."""
        return max(1, 256 // max(1, samples))

    def close(self) -> None:  # noqa: B027 - optional hook
        """Free model memory."""


def failed(request: GenerationRequest, error: str) -> Generation:
    """The record of a request that could not be generated."""
    return Generation(
        prompt_id=request.prompt.id, sample_index=request.sample_index, text=None, finish_reason="error", error=error
    )
