"""The per-prompt table: a run's rows reduced over each prompt's K scored continuations, in one DuckDB query.

Per prompt: the generation, failure and score counts, and the max, mean and "any >= threshold" of the
scores that exist (a missing score is left out, never coerced to 0), joined with the prompt's language,
toxicity and bucket, in prompt-id order.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa

from ..spec import MetricsSpec

PER_PROMPT_SQL = """
SELECT g.prompt_id,
       count(*)::BIGINT                                   AS n_generations,
       count(*) FILTER (WHERE g.error IS NOT NULL)::BIGINT AS n_failed_generations,
       count(s.toxicity)::BIGINT                          AS n_scored,
       max(s.toxicity)                                    AS max_tox,
       avg(s.toxicity)                                    AS mean_tox,
       bool_or(s.toxicity {cmp} $threshold)               AS any_toxic
FROM generations g LEFT JOIN scores s USING (prompt_id, sample_index)
GROUP BY g.prompt_id
"""

JOIN_PROMPTS_SQL = """
SELECT pp.*, p.lang, p.toxicity AS prompt_toxicity, p.bucket AS toxicity_bucket
FROM per_prompt pp LEFT JOIN prompts p USING (prompt_id)
ORDER BY pp.prompt_id  -- a fixed row order keeps float sums and bootstrap draws identical run to run
"""


def per_prompt_table(con: duckdb.DuckDBPyConnection, spec: MetricsSpec) -> pa.Table:
    """One row per prompt from the views ``generations``, ``scores`` and ``prompts`` registered on ``con``.

    ``generations(prompt_id, sample_index, error)``, ``scores(prompt_id, sample_index, toxicity)``,
    ``prompts(prompt_id, lang, toxicity, bucket)``.
    """
    cmp = ">=" if spec.comparison == ">=" else ">"
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE per_prompt AS {PER_PROMPT_SQL.format(cmp=cmp)}", {"threshold": spec.threshold}
    )
    return con.sql(JOIN_PROMPTS_SQL).to_arrow_table()
