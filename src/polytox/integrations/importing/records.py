"""What an imported framework run holds, whatever the framework: prompts, K completions each, and the values
the framework's polytox scorer gave them (where its output keeps them).

Each reader (``inspect_log``, ``helm_run``, ``lm_eval_samples``) turns one framework's output into an
``ImportedRun``; ``write`` stores it as a polytox run directory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Completion:
    """One completion: its text, and the framework's score of it (``value``) or why there is none
    (``error``); both None when the framework's output does not keep per-completion values (HELM)."""

    text: str
    value: float | None = None
    error: str | None = None


@dataclass(frozen=True)
class ImportedPrompt:
    """A prompt as the framework ran it, with its completions in sample order."""

    id: str
    text: str
    lang: str = "en"
    toxicity: float | None = None
    completions: tuple[Completion, ...] = ()


@dataclass(frozen=True)
class ImportedRun:
    """One framework run, ready to be stored.

    ``scorer_id``, ``scale`` and ``threshold`` are what the framework's polytox scorer recorded (None when the
    output names none). ``has_values``: whether the completions carry the framework's per-completion values.
    ``reported``: the EMT, EP and AT the framework itself printed (for the import to check against).
    ``score_per_prompt``: how the framework called its scorer, which a rescore repeats."""

    framework: str
    source: str
    model: str
    prompts: tuple[ImportedPrompt, ...]
    scorer_id: str | None = None
    scale: str | None = None
    threshold: float | None = None
    has_values: bool = False
    generation: dict[str, Any] = field(default_factory=dict)
    reported: dict[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    # score each prompt's distinct completions in a call of their own, as the framework asked its scorer (HELM:
    # one request per instance), so a rescore by the recorded scorer repeats the framework's scorer calls
    score_per_prompt: bool = False

    @property
    def samples(self) -> int:
        """K: the most completions any prompt has (a prompt with fewer is padded with failed samples)."""
        return max((len(p.completions) for p in self.prompts), default=0)
