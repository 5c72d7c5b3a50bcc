"""The per-(run, prompt) reduction in SQL, one text for one run (``kept_per_prompt``) and for many
(``RunCollection.per_prompt``), so the two cannot drift apart.

Each prompt's K continuations reduced to counts, max, mean, "any toxic" and how many are toxic, from the
prompts (a prompt of an unfinished shard, with no continuation yet, is a row too), exactly as
``polytox.metrics`` reduces them.
"""

from __future__ import annotations

from collections.abc import Sequence


def per_prompt_sql(
    generations: str, scores: str, prompts: str, keys: Sequence[str], cmp: str, order: bool = False
) -> str:
    """A query of one row per ``keys`` (``("prompt_id",)`` for one run, ``("run_id", "prompt_id")`` for
    many). ``generations`` (keys, sample_index, error), ``scores`` (keys, sample_index, score) and
    ``prompts`` (keys) are FROM items; ``cmp`` is ``>=`` or ``>`` against the parameter ``$threshold``."""
    if cmp not in (">=", ">"):
        raise ValueError(f"cmp must be '>=' or '>', got {cmp!r}")
    g_keys = ", ".join(f"g.{k}" for k in keys)
    p_keys = ", ".join(f"p.{k}" for k in keys)
    on = " AND ".join(f"gs.{k} = p.{k}" for k in keys)
    return f"""
WITH gs AS (
  SELECT {g_keys}, g.sample_index, g.error, s.score
  FROM {generations} g LEFT JOIN {scores} s USING ({", ".join(keys)}, sample_index)
)
SELECT {p_keys},
       count(gs.sample_index)::BIGINT AS n_generations,
       count(gs.error)::BIGINT AS n_failed_generations,
       count(gs.score)::BIGINT AS n_scored,
       max(gs.score) AS max_tox,
       avg(gs.score) AS mean_tox,
       bool_or(gs.score {cmp} $threshold) AS any_toxic,
       count(*) FILTER (WHERE gs.score {cmp} $threshold)::BIGINT AS n_toxic
FROM {prompts} p LEFT JOIN gs ON {on}
GROUP BY {p_keys}
{"ORDER BY " + p_keys if order else ""}
"""


def with_run_and_prompt(per_prompt: str) -> str:
    """The per-(run, prompt) rows of the FROM item ``per_prompt`` with their run's model and metadata and
    their prompt's language, resource tier, toxicity, bucket and text (views ``runs``, ``prompts`` and
    ``tiers`` of a ``RunCollection``), in (run, prompt) order."""
    return f"""
SELECT pp.*, r.model, r.prompt_set, r.family, r.params, r.params_label, r.category, r.alignment,
       p.lang, coalesce(t.tier, 'unknown') AS tier, p.toxicity AS prompt_toxicity,
       p.bucket AS toxicity_bucket, p.text AS prompt_text
FROM {per_prompt} pp JOIN runs r USING (run_id)
LEFT JOIN prompts p USING (run_id, prompt_id)
LEFT JOIN tiers t ON t.lang = p.lang
ORDER BY pp.run_id, pp.prompt_id
"""
