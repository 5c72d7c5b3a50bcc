"""polytox inside the evaluation frameworks people already run.

One module per framework, each an optional extra imported only when used:

- ``polytox.integrations.lm_eval``: task YAMLs and metric functions for lm-evaluation-harness
  (``pip install 'polytox[lm-eval]'``);
- ``polytox.integrations.inspect``: a scorer and an RTP task for inspect_ai (``polytox[inspect]``);
- ``polytox.integrations.helm``: a ``helm-run --plugins`` module giving HELM's toxicity metric a polytox
  classifier (``polytox[helm]``, in its own virtualenv: see docs/integrations.md).

All three score through ``polytox.integrations.scoring``: a scorer from the registry, chosen by name and
options, called on whole batches of texts, with failed scores kept as errors and counted, never as 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._util.lazy import lazy_getattr

if TYPE_CHECKING:
    from .scoring import ScorerChoice, get_scorer, score_texts

__all__ = ["ScorerChoice", "get_scorer", "score_texts"]

__getattr__ = lazy_getattr(
    __name__,
    {
        "ScorerChoice": ".scoring",
        "get_scorer": ".scoring",
        "score_texts": ".scoring",
    },
)
