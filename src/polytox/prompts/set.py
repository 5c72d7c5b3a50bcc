"""``PromptSet``: the prompts a run evaluates, with the counts and problems of their selection."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..types import Prompt


@dataclass
class PromptSet:
    """Selected prompts plus the bookkeeping a user needs to trust the selection."""

    prompts: list[Prompt]
    n_records: int = 0
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def n_bad(self) -> int:
        return len(self.problems)
