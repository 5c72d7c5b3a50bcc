"""A retrained candidate against head 6 under the consistency study's rule (log.md, "A consistency term in
the non-English ridges"): `V3`, `V4` (the consistency term) and `V5` (teacher rows, "Tying the two paths")
are judged by the same gates.

Reads what the two heads' runs wrote beforehand (nothing here runs the backbone):
- ``--before`` / ``--after``: ``scale_ends_trial`` results, each read at its own head's shipped maps
  (``C0``): head 6's is ``results/scale-ends.json``; `V3`'s was written with `V3`'s head and the scales
  ``scale-fit --everyday`` fitted for it in the package's place;
- ``--card-before`` / ``--card-after``: the two heads' measurement cards (``train-scorer``).

Applies the rule's gates and choice on ``perspective-2022``, prints the per-language table (head 6 / `V3`)
and writes ``results/consistency-v3.json``.

    python -m research.scorer.consistency_trial --after /tmp/scale-ends-v3.json --card-after card.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from polytox.scoring.ml.scales import PERSPECTIVE_2020, PERSPECTIVE_2022

from .scale_ends_trial import TARGETS, _f

HERE = Path(__file__).resolve().parent
RESULT = HERE / "results" / "consistency-v3.json"
SHIP_MARGIN = 4  # fewer missed cells than head 6's that `V3` needs to ship
ENGLISH_CARD = ("auc_prompts", "auc_web_continuations", "auc_model_continuations", "mae_web", "mae_model_continuations")
ENGLISH_TOLERANCE = 0.002  # gate 1, as amended for re-extracted features


def _worst(block: Mapping[str, Any], key: str, absolute: bool = True) -> float:
    vals = [r[key] for r in block.values() if r.get(key) is not None]
    return max(abs(v) if absolute else v for v in vals)


def gates(
    before: Mapping[str, Any], after: Mapping[str, Any], card_b: Mapping[str, Any], card_a: Mapping[str, Any]
) -> dict[str, Any]:
    """The rule's five gates (`perspective-2022` blocks ``before`` / ``after``, the two cards' default rows)."""
    eng_b, eng_a = card_b["card"]["polytox-ml"], card_a["card"]["polytox-ml"]
    english = {k: round(eng_a[k] - eng_b[k], 4) for k in ENGLISH_CARD}
    aucs = [r["auc"] for r in after["pairs"].values() if r.get("auc") is not None]
    return {
        "english": {"diffs": english, "pass": all(abs(v) <= ENGLISH_TOLERANCE for v in english.values())},
        "pud": {"worst": round(_worst(after["everyday"], "gap"), 4), "pass": _worst(after["everyday"], "gap") <= 0.03},
        "kappa": {
            "before": before["summary"]["kappa_mean"],
            "after": after["summary"]["kappa_mean"],
            "pass": after["summary"]["kappa_mean"] >= before["summary"]["kappa_mean"] - 0.01,
        },
        "mae": {
            "before": round(_worst(before["pairs"], "mae_diff", False), 4),
            "after": round(_worst(after["pairs"], "mae_diff", False), 4),
            "pass": _worst(after["pairs"], "mae_diff", False) <= _worst(before["pairs"], "mae_diff", False) + 0.01,
        },
        "auc": {
            "before": before["summary"]["auc_mean"],
            "after": after["summary"]["auc_mean"],
            "lowest": min(aucs),
            "pass": after["summary"]["auc_mean"] >= before["summary"]["auc_mean"] - 0.005 and min(aucs) >= 0.75,
        },
    }


def table(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """Per language: head 6 / `V3` for every target, human AUC on the check pairs and kappa (fitted cuts)."""
    lines = [
        "| lang | harmless mean - en | harmless share - en, pt | treebank share - en, pt | toxic mean - en "
        "| MAE - en's | PUD mean - en | AUC (check pairs) | kappa (fitted cuts) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for lang in sorted(before["everyday"] | before["pairs"]):
        if lang == "en":
            continue
        rows = [{**b["pairs"].get(lang, {}), **b["everyday"].get(lang, {})} for b in (before, after)]
        cells = [
            " / ".join(_f(r.get(key), pct=key.endswith(("share_diff", "share_gap"))) for r in rows)
            for _, key, _, _ in TARGETS
        ]
        auc = " / ".join(f"{r.get('auc') or 0:.3f}" for r in rows)
        kappa = " / ".join(f"{r.get('kappa_fitted', 0):.2f}" for r in rows)
        lines.append(f"| {lang} | " + " | ".join(cells) + f" | {auc} | {kappa} |")
    return "\n".join(lines)


def card_languages(card_b: Mapping[str, Any], card_a: Mapping[str, Any]) -> dict[str, Any]:
    """The cards' human AUCs per language: over every held-out RTP-LX row (``auc_heldout``) and the card's
    headline (``auc``, out-of-fold training rows under one map), head 6 then `V3`."""
    lb, la = card_b["scorers"]["polytox-ml"]["languages"], card_a["scorers"]["polytox-ml"]["languages"]
    return {
        "per_lang": {
            k: {key: [lb[k][key], la[k][key]] for key in ("auc_heldout", "auc")} for k in sorted(lb) if k in la
        },
        "mean": {
            key: [card_b["scorers"]["polytox-ml"]["summary"][key], card_a["scorers"]["polytox-ml"]["summary"][key]]
            for key in ("mean_auc_heldout", "min_auc_heldout", "mean_auc", "min_auc")
        },
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", default=str(HERE / "results" / "scale-ends.json"))
    p.add_argument("--after", required=True)
    p.add_argument("--card-before", default=str(HERE.parents[1] / "src" / "polytox" / "data" / "polytox-ml-card.json"))
    p.add_argument("--card-after", required=True)
    p.add_argument("--out", default=str(RESULT))
    p.add_argument("--name", default="V3", help="the candidate's name in the printed tables")
    args = p.parse_args(argv)
    before_all = json.loads(Path(args.before).read_text(encoding="utf-8"))
    after_all = json.loads(Path(args.after).read_text(encoding="utf-8"))
    card_b = json.loads(Path(args.card_before).read_text(encoding="utf-8"))
    card_a = json.loads(Path(args.card_after).read_text(encoding="utf-8"))
    result: dict[str, Any] = {"heads": [before_all["head"], after_all["head"]]}
    for scale in (PERSPECTIVE_2022, PERSPECTIVE_2020):
        b, a = before_all["C0"][scale], after_all["C0"][scale]
        result[scale] = {
            "misses": [b["misses"], a["misses"]],
            "summary": [b["summary"], a["summary"]],
            "table": table(b, a),
        }
    b, a = before_all["C0"][PERSPECTIVE_2022], after_all["C0"][PERSPECTIVE_2022]
    g = gates(b, a, card_b, card_a)
    fewer = b["misses"]["n"] - a["misses"]["n"]
    result["gates"] = g
    result["card_auc_heldout"] = card_languages(card_b, card_a)
    result["decision"] = {
        "gates_pass": all(v["pass"] for v in g.values()),
        "fewer_misses": fewer,
        "ships": all(v["pass"] for v in g.values()) and fewer >= SHIP_MARGIN,
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    for scale in (PERSPECTIVE_2022, PERSPECTIVE_2020):
        print(f"\n{scale} (head 6 / {args.name})\n\n{result[scale]['table']}")
        print(
            "misses",
            [m["n"] for m in result[scale]["misses"]],
            "excess",
            [m["excess"] for m in result[scale]["misses"]],
        )
    print(
        json.dumps(
            {"gates": g, "card_auc_heldout": result["card_auc_heldout"], "decision": result["decision"]}, indent=1
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
