"""A test-only generation backend that echoes its prompt: how a hostile model-written string (HTML,
``<script>``, ``onerror=``) reaches the stored generations and then the report."""

from __future__ import annotations

from collections.abc import Sequence

from polytox.generation.base import Generator
from polytox.spec import GenerationSpec
from polytox.types import Generation, GenerationRequest


class EchoGenerator(Generator):
    name = "echo"

    def __init__(self, spec: GenerationSpec) -> None:
        self.model = spec.model

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        return [
            Generation(
                prompt_id=r.prompt.id,
                sample_index=r.sample_index,
                text=f" {r.prompt.text} (sample {r.sample_index}) you idiot",
                finish_reason="length",
                n_tokens=8,
            )
            for r in requests
        ]
