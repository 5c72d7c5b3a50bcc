"""What scoring 1,000 generations costs inside each framework integration, beside the scorer called directly.

Rows, for one scorer (cache off, so every text is really scored), on 1,000 real RTP continuations
(../shared/data/rtp, English, the ``continuation.text`` of each record):

- ``direct, one call``: ``scorer.score`` on all 1,000 texts at once: the simple baseline (the floor);
- ``direct, 1 text/call``: one text per call, what per-sample metric code does without pooling;
- ``direct, 5 texts/call``: the pattern HELM's toxicity metric imposes (one request per instance of 5);
- ``lm-eval filter``: ``ScoreGenerations.apply`` (what lm_eval runs once per task), with the per-document
  ``process_results``;
- ``pooled, 1,000 concurrent``: ``ScorePool`` fed one text per coroutine (inspect_ai's per-sample calls);
- ``inspect scorer``: the real ``polytox.integrations.inspect.toxicity`` scorer called per sample,
  concurrently, with inspect_ai's own TaskState (only where inspect_ai is installed);
- ``HELM client, 5/request``: ``PolytoxToxicityClient.get_toxicity_scores`` once per instance of 5
  completions (HELM's ToxicityMetric asks per instance; cache off; only where crfm-helm is installed).

Each row is the best of ``--repeat`` runs (3; the 1 text/call row runs once) and compares its values with
the baseline's: ``mismatched`` counts values not bit-identical, ``max |diff|`` their largest difference
(a transformer scorer's values move in the last bits with the batch a text is padded in; svm's do not).
Generation is not timed: it depends on the model, not on the integration. Nothing here is a test.

Usage: python benchmarks/bench_integrations.py [--scorer svm] [--scorer-opt K=V ...] [--texts 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import platform
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

from polytox.integrations.lm_eval.metrics import ScoreGenerations, process_results
from polytox.integrations.pool import ScorePool
from polytox.integrations.scoring import ScorerChoice, get_scorer

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
DATA = Path(os.environ.get("POLYTOX_SHARED_DATA") or SHARED) / "rtp"


def load_texts(n: int) -> list[str]:
    texts: list[str] = []
    for name in ("nontoxic.jsonl", "toxic.jsonl"):
        for line in (DATA / name).read_text(encoding="utf-8").splitlines():
            text = json.loads(line).get("continuation", {}).get("text")
            if text and text.strip():
                texts.append(text)
            if len(texts) >= n:
                return texts
    return texts


def timed(fn: Callable[[], list[float | None]], repeat: int) -> tuple[float, list[float | None]]:
    """Best wall time of ``repeat`` runs (the least disturbed by other work on the machine)."""
    best = float("inf")
    values: list[float | None] = []
    for _ in range(repeat):
        start = time.perf_counter()
        values = fn()
        best = min(best, time.perf_counter() - start)
    return best, values


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scorer", default="svm")
    parser.add_argument("--scorer-opt", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--texts", type=int, default=1000)
    parser.add_argument("--no-one-by-one", action="store_true",
                        help="skip the 1 text/call row (minutes for a transformer scorer on CPU)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per row; the best is reported")
    parser.add_argument("--json", help="write the rows here too")
    args = parser.parse_args(argv)
    options = dict(o.split("=", 1) for o in args.scorer_opt)
    options.setdefault("cache", "off")
    choice = ScorerChoice.resolve(args.scorer, options)
    texts = load_texts(args.texts)
    langs = ["en"] * len(texts)
    scorer = get_scorer(choice)
    scorer.score(texts[:8], langs[:8])  # load weights before any timing

    def direct() -> list[float | None]:
        return [s.get("toxicity") for s in scorer.score(texts, langs)]

    def one_by_one() -> list[float | None]:
        return [scorer.score([t], ["en"])[0].get("toxicity") for t in texts]

    def five_per_call() -> list[float | None]:
        return [s.get("toxicity") for i in range(0, len(texts), 5) for s in scorer.score(texts[i:i + 5], ["en"] * 5)]

    def lm_eval_filter() -> list[float | None]:
        docs = [{"lang": "en"}] * (len(texts) // 25)
        resps = [texts[i * 25:(i + 1) * 25] for i in range(len(docs))]
        out = ScoreGenerations(scorer=choice.name, scorer_opt=";".join(f"{k}={v}" for k, v in choice.options)
                               ).apply(resps, docs)
        for doc, o in zip(docs, out, strict=True):
            process_results(doc, [o])
        return [s["toxicity"] for o in out for s in o["samples"]]

    def pooled() -> list[float | None]:
        async def run() -> list[float | None]:
            pool = ScorePool(choice)
            results = await asyncio.gather(*(pool.score(t, "en") for t in texts))
            return [r.scored.value for r in results]
        return asyncio.run(run())

    rows: list[tuple[str, Callable[[], list[float | None]]]] = [
        ("direct, one call (baseline)", direct), ("direct, 1 text/call", one_by_one),
        ("direct, 5 texts/call (as HELM asks)", five_per_call), ("lm-eval filter (K=25 docs)", lm_eval_filter),
        ("pooled, 1,000 concurrent", pooled)]
    if args.no_one_by_one:
        rows = [r for r in rows if r[1] is not one_by_one]

    if importlib.util.find_spec("inspect_ai") is not None:
        # Imports and TaskStates are made before timing: inspect creates the states for its samples anyway.
        from inspect_ai.model import ModelOutput
        from inspect_ai.scorer import Target
        from inspect_ai.solver import TaskState

        from polytox.integrations.inspect import toxicity

        states = [TaskState(model="mockllm/model", sample_id=i, epoch=1, input="", messages=[],
                            output=ModelOutput.from_content("mockllm/model", t)) for i, t in enumerate(texts)]
        inspect_score = toxicity(scorer=choice.name, scorer_opt=";".join(f"{k}={v}" for k, v in choice.options))

        def inspect_scorer() -> list[float | None]:
            async def run() -> list[float | None]:
                results = await asyncio.gather(*(inspect_score(s, Target("")) for s in states))
                return [r.value["emt"] for r in results]  # type: ignore[index]
            return asyncio.run(run())
        rows.append(("inspect scorer, per sample", inspect_scorer))

    if importlib.util.find_spec("helm") is not None:
        from helm.common.cache import BlackHoleCacheConfig
        from helm.common.perspective_api_request import PerspectiveAPIRequest

        from polytox.integrations.helm import PolytoxToxicityClient

        client = PolytoxToxicityClient(BlackHoleCacheConfig(), choice)

        def helm_client() -> list[float | None]:
            values: list[float | None] = []
            for i in range(0, len(texts), 5):
                batch = texts[i:i + 5]
                result = client.get_toxicity_scores(PerspectiveAPIRequest(text_batch=batch, attributes=["TOXICITY"]))
                values += [result.text_to_toxicity_attributes[t].toxicity_score for t in batch]
            return values
        rows.append(("HELM client, 5 texts/request", helm_client))

    console = Console()
    table = Table(title=f"{len(texts)} RTP continuations scored by {scorer.id}, cache off, best of {args.repeat} "
                        f"({platform.processor() or platform.machine()}, {os.cpu_count()} CPUs)")
    for col in ("path", "s per 1,000", "texts/s", "x baseline", "mismatched", "max |diff|"):
        table.add_column(col, justify="left" if col == "path" else "right")
    base_time, base_values = timed(direct, args.repeat)
    out = []
    for name, fn in rows:
        seconds, values = (base_time, base_values) if fn is direct else timed(
            fn, 1 if fn is one_by_one else args.repeat)
        mismatched = sum(1 for a, b in zip(values, base_values, strict=False) if a != b) + abs(
            len(values) - len(base_values))
        diffs = [abs(a - b) for a, b in zip(values, base_values, strict=False) if a is not None and b is not None]
        max_diff = max(diffs, default=0.0)
        per_1000 = seconds * 1000 / len(texts)
        out.append({"path": name, "seconds_per_1000": per_1000, "texts_per_s": len(texts) / seconds,
                    "x_baseline": seconds / base_time, "mismatched": mismatched, "max_abs_diff": max_diff})
        table.add_row(name, f"{per_1000:.3f}", f"{len(texts) / seconds:,.0f}", f"{seconds / base_time:.2f}",
                      str(mismatched), f"{max_diff:.1e}")
    console.print(table)
    if args.json:
        Path(args.json).write_text(json.dumps({"scorer": scorer.id, "rows": out}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
