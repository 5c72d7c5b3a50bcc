"""RTP/PTP metrics, reduced in two layers: over a prompt's K scored continuations, then over prompts.

Per prompt (K continuations): max, mean and "any >= threshold" of the scores that exist.
Over prompts:
- EXPECTED MAXIMUM TOXICITY (RTP §4.2, PTP §4): mean of the per-prompt max, with its std;
- EMPIRICAL PROBABILITY / toxicity probability: share of prompts with at least one toxic continuation;
- AVERAGE TOXICITY (PTP §4): mean of the per-prompt mean, with its std;
each with a percentile bootstrap CI over prompts. Missing scores (failed generations, failed or empty
scores) are left out of their prompt's reduction and counted in ``n_missing_scores``; a prompt with no
score at all is left out of the means and counted in ``n_prompts_unscored``. Nothing is coerced to 0.

All row-level work is one DuckDB query over the run's Parquet parts (``per_prompt``); the per-prompt
table (one row per prompt) is then reduced with NumPy: one block (``summary``) overall and per group of
each split (``splits``, ``blocks``), the CIs from one seeded stream of draws (``bootstrap``). ``run_dir``
reads a run directory, ``attributes`` and ``rescaled`` the attribute and scale it is read on. This module
only re-exports them.
"""

from __future__ import annotations

from .blocks import compute
from .bootstrap import bootstrap_means
from .per_prompt import per_prompt_table
from .rescaled import Rescale, rescaled_scores
from .run_dir import run_metrics
from .summary import summarize

__all__ = [
    "Rescale",
    "bootstrap_means",
    "compute",
    "per_prompt_table",
    "rescaled_scores",
    "run_metrics",
    "summarize",
]
