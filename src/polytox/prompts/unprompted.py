"""The unprompted setting (RTP §3.1): N empty prompts, each continued from the model's start token alone.

Each of the N generations is its own prompt with one sample, so the pool shards, pipelines, resumes and
runs on Ray like any prompted run; backends turn the empty text into the BOS token
(``generation.prompting.encode_prompt``). Ids have a fixed width, so the first N of a larger pool are
the same prompts with the same seeds.
"""

from __future__ import annotations

from ..spec import PromptSpec
from ..types import Prompt
from .set import PromptSet


def unprompted_prompts(spec: PromptSpec) -> PromptSet:
    """``spec.unprompted`` empty prompts in the first ``--lang`` (default ``en``: what the scorer is told)."""
    lang = spec.langs[0] if spec.langs else "en"
    prompts = [
        Prompt(id=f"unprompted:{i:07d}", text="", lang=lang, source="unprompted", meta={"unprompted": True})
        for i in range(spec.unprompted)
    ]
    note = (
        f"unprompted: {spec.unprompted} generations from the start token alone (RTP §3.1); "
        f"the prompt source and selection flags are ignored"
    )
    return PromptSet(prompts=prompts, n_records=0, notes=[note])
