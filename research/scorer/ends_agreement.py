"""Why a translation reads below its English source at the harmless end and above it at the toxic end: each
path's agreement with its own annotators (a diagnostic of issue 61's targets, log.md "The two paths against
their annotators"; it fits nothing and decides nothing).

For every held-out RTP-LX toxicity-preserving pair (both parts of the cut), with the shipped head's raw
outputs and its maps on ``perspective-2022``:
- ``rho_t`` / ``rho_e``: Spearman correlation of the translation's raw output with its own annotators' mean
  rating, and of the English text's with its annotators'. No monotone map changes either;
- ``rho_cross``: the translation's raw output against the *English* annotators' rating, the same people
  ``rho_e`` reads, so ``rho_cross - rho_e`` compares the two paths on one judgement;
- ``harmless`` / ``toxic``: the mean of translation minus English value on the pairs both sides' annotators
  rate harmless (below 1.5) or toxic (3 or more, not only preserving pairs), check part only (the
  per-language maps were fitted on the fit part), the quantities issue 61's targets read.

If a path agrees better with its annotators than the English path does with its own, then among pairs chosen
by those annotators it reads more extreme: lower on harmless ones, higher on toxic ones. This holds under any
monotone map that matches the two sides' distributions.

    python -m research.scorer.ends_agreement --lx-raw /tmp/h6/lx-raw
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from polytox.scoring.ml.head import MlHead, default_head_path
from polytox.scoring.ml.scales import PERSPECTIVE_2022, load_scales
from polytox.training.scorer.scale_fit import load_raw, lx_pairs
from polytox.training.scorer.scale_languages import HARMLESS_BELOW, TOXIC_FROM, Pairs
from polytox.training.scorer.scale_rows import scale_rows

RESULT = Path(__file__).resolve().parent / "results" / "ends-agreement.json"


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rho (average ranks for ties), NaN below 5 values."""
    if len(a) < 5:
        return float("nan")
    stats = __import__("scipy.stats", fromlist=["spearmanr"])
    return float(stats.spearmanr(a, b).statistic)


def per_language(every: Pairs, check: Pairs, values: dict[str, np.ndarray]) -> dict[str, dict[str, Any]]:
    """The module docstring's quantities per language (``values``: the check pairs' mapped t and e)."""
    out: dict[str, dict[str, Any]] = {}
    for lang in sorted(set(every.lang.tolist())):
        p = every.subset((every.lang == lang) & every.preserving)
        sel = check.lang == lang
        harmless = sel & (check.h_t < HARMLESS_BELOW) & (check.h_e < HARMLESS_BELOW)
        toxic = sel & (check.h_t >= TOXIC_FROM) & (check.h_e >= TOXIC_FROM)
        d = values["t"] - values["e"]
        out[lang] = {
            "n": len(p),
            "rho_t": round(spearman(p.r_t, p.h_t), 4),
            "rho_e": round(spearman(p.r_e, p.h_e), 4),
            "rho_cross": round(spearman(p.r_t, p.h_e), 4),
            "n_harmless": int(harmless.sum()),
            "harmless": round(float(d[harmless].mean()), 4) if harmless.any() else None,
            "n_toxic": int(toxic.sum()),
            "toxic": round(float(d[toxic].mean()), 4) if toxic.any() else None,
        }
    return out


def summary(rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Across languages: the mean agreement gap and its correlation with the two ends' differences."""
    langs = [k for k, r in rows.items() if r["harmless"] is not None and r["toxic"] is not None]
    gap = np.array([rows[k]["rho_t"] - rows[k]["rho_e"] for k in langs])
    harmless = np.array([rows[k]["harmless"] for k in langs])
    toxic = np.array([rows[k]["toxic"] for k in langs])
    return {
        "languages": len(langs),
        "rho_t_minus_rho_e_mean": round(float(gap.mean()), 4),
        "languages_rho_t_above_rho_e": int((gap > 0).sum()),
        "rho_cross_minus_rho_e_mean": round(
            float(np.mean([rows[k]["rho_cross"] - rows[k]["rho_e"] for k in langs])), 4
        ),
        "harmless_mean": round(float(harmless.mean()), 4),
        "toxic_mean": round(float(toxic.mean()), 4),
        "corr_gap_with_toxic_minus_harmless": round(float(np.corrcoef(gap, toxic - harmless)[0, 1]), 4),
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shared", default="../shared/data")
    p.add_argument("--lx-raw", required=True, help="the held-out RTP-LX raw outputs (lx_raw.py --heldout-only)")
    p.add_argument("--out", default=str(RESULT))
    args = p.parse_args(argv)
    head = MlHead.load(default_head_path())
    scales = load_scales(default_head_path(), head.digest)
    assert scales is not None
    maps = scales.get(PERSPECTIVE_2022).maps["full"]
    srows = scale_rows(args.shared)
    raw = load_raw(args.lx_raw, "full")
    check = lx_pairs(srows, raw, check=True)
    every = Pairs.concat(lx_pairs(srows, raw, check=False), check)
    values = {"t": maps.apply(check.r_t, check.lang.tolist()), "e": maps.apply(check.r_e, ["en"] * len(check))}
    rows = per_language(every, check, values)
    result = {"head": head.digest, "scale": PERSPECTIVE_2022, "languages": rows, "summary": summary(rows)}
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print("| lang | n | rho_t | rho_e | rho_cross | harmless t - e (n) | toxic t - e (n) |")
    print("| --- | ---: | ---: | ---: | ---: | --- | --- |")
    for lang, r in rows.items():
        h = "-" if r["harmless"] is None else f"{r['harmless']:+.3f} ({r['n_harmless']})"
        t = "-" if r["toxic"] is None else f"{r['toxic']:+.3f} ({r['n_toxic']})"
        print(f"| {lang} | {r['n']} | {r['rho_t']:.3f} | {r['rho_e']:.3f} | {r['rho_cross']:.3f} | {h} | {t} |")
    print(json.dumps(result["summary"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
