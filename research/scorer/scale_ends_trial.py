"""One scale at both ends: the candidates' maps measured on the check parts (log.md, "One scale at both
ends").

Reads the head's raw outputs written beforehand (nothing here runs the backbone):
- ``--lx-raw``: the held-out RTP-LX texts, ``python -m research.scorer.lx_raw --heldout-only``;
- ``--ud``: ``.npz`` files of ``python -m research.scorer.everyday_trial raw`` (Parallel UD ids of both
  parts, 150 other sentences a language of the fit part, 120 of the check part).

Fits ``C1`` and ``C2`` (``training/scorer/scale_anchored.py``) on the fit parts only, measures ``C0`` (the
shipped maps), ``C1``, ``C2`` on the check parts, counts each candidate's misses and applies the rule. The
result goes to ``research/scorer/results/scale-ends.json``; ``--table`` prints the per-language tables.

    python -m research.scorer.scale_ends_trial --lx-raw /tmp/h12/lx-raw --ud a.npz,b.npz
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from polytox.scoring.ml.calib import ScaleMaps
from polytox.scoring.ml.head import MlHead, default_head_path
from polytox.scoring.ml.scales import PERSPECTIVE_2020, PERSPECTIVE_2022, load_scales
from polytox.training.scorer.everyday import EverydayRow, everyday_gaps, everyday_pairs, load_everyday
from polytox.training.scorer.scale_anchored import Anchors, flat_runs
from polytox.training.scorer.scale_fit import ANCHORED, load_raw, lx_pairs, other_maps
from polytox.training.scorer.scale_languages import Pairs, language_checks, summarise
from polytox.training.scorer.scale_rows import ScaleRow, scale_rows

from .everyday_trial import fitted_kappa, level_cuts, load_parts

RESULT = Path(__file__).resolve().parent / "results" / "scale-ends.json"
SCALES = (PERSPECTIVE_2022, PERSPECTIVE_2020)
# target, the measurement's key, its limit, whether the limit bounds |value| (else value itself)
TARGETS = (
    ("harmless mean", "harmless_diff", 0.03, True),
    ("harmless share", "harmless_share_diff", 0.03, True),
    ("treebank share", "other_share_gap", 0.02, False),
    ("toxic mean", "toxic_diff", 0.05, True),
    ("MAE", "mae_diff", 0.05, False),
    ("PUD mean", "gap", 0.03, True),
)
TIE_CELLS, SHIP_MARGIN = 3, 4


def candidate_maps(head: MlHead, lx_fit: Pairs, pud: Pairs, other: Anchors) -> dict[str, dict[str, ScaleMaps]]:
    """Each candidate's maps on each Perspective scale, through the shipped fit (``scale_fit.other_maps``);
    English maps are the shipped ones in all."""
    shipped = load_scales(default_head_path(), head.digest)
    assert shipped is not None
    langs = sorted(set(head.languages) - {"en"})
    out: dict[str, dict[str, ScaleMaps]] = {"C0": {}, "C1": {}, "C2": {}}
    for name in SCALES:
        c0 = shipped.get(name).maps["full"]
        out["C0"][name] = c0
        for cand, unpaired in (("C1", None), ("C2", other)):
            per_lang, fallback = other_maps(lx_fit, c0.english, langs, ANCHORED, anchors=pud, unpaired=unpaired)
            out[cand][name] = ScaleMaps(english=c0.english, fallback=fallback, per_lang=per_lang)
    return out


def measure(
    maps: ScaleMaps,
    srows: Sequence[ScaleRow],
    lx: Mapping[tuple[str, str], float],
    check_ud: Sequence[EverydayRow],
    ud: Mapping[tuple[str, str], float],
) -> dict[str, Any]:
    """The check parts' readings under ``maps`` (log.md: measurements 1-5) and each map's widest flat run."""
    check, fit = lx_pairs(srows, lx, check=True), lx_pairs(srows, lx, check=False)
    checks = language_checks(
        check, maps.apply(check.r_t, check.lang.tolist()), maps.apply(check.r_e, ["en"] * len(check))
    )
    cuts = level_cuts(
        np.concatenate([maps.apply(fit.r_t, fit.lang.tolist()), maps.apply(fit.r_e, ["en"] * len(fit))]),
        np.concatenate([fit.h_t, fit.h_e]),
    )
    for lang, row in checks.items():
        sel = check.lang == lang
        row["kappa_fitted"] = fitted_kappa(check.h_t[sel], maps.apply(check.r_t[sel], [lang] * int(sel.sum())), cuts)
    values = maps.apply(np.array([ud[(r.text, r.lang)] for r in check_ud]), [r.lang for r in check_ud])
    everyday = everyday_gaps(check_ud, values, check=True)
    summary = summarise(checks)
    summary["kappa_fitted_mean"] = round(float(np.mean([r["kappa_fitted"] for r in checks.values()])), 4)
    return {
        "pairs": checks,
        "everyday": everyday,
        "summary": summary,
        "flat": {lang: flat_runs(m) for lang, m in sorted(maps.per_lang.items())},
    }


def misses(block: Mapping[str, Any]) -> dict[str, Any]:
    """The rule's cells: (language, target) pairs that miss, and the summed excess beyond the targets."""
    cells: list[str] = []
    excess = 0.0
    langs = sorted(set(block["pairs"]) | set(block["everyday"]))
    for lang in langs:
        if lang == "en":
            continue
        row = {**block["pairs"].get(lang, {}), **block["everyday"].get(lang, {})}
        for target, key, limit, absolute in TARGETS:
            v = row.get(key)
            if v is None:
                continue
            over = (abs(v) if absolute else v) - limit
            if over > 1e-9:
                cells.append(f"{lang}: {target} {v:+.3f}")
                excess += over
    return {"n": len(cells), "excess": round(excess, 4), "cells": cells}


def decide(result: Mapping[str, Any]) -> dict[str, Any]:
    """The rule's gates and choice on perspective-2022."""
    c0 = result["C0"][PERSPECTIVE_2022]

    def worst(block: Mapping[str, Any], key: str, absolute: bool = True) -> float:
        vals = [r[key] for r in block.values() if r.get(key) is not None]
        return max(abs(v) if absolute else v for v in vals)

    gates: dict[str, dict[str, bool]] = {}
    for cand in ("C1", "C2"):
        b = result[cand][PERSPECTIVE_2022]
        pud = worst(b["everyday"], "gap")
        gates[cand] = {
            "english_maps_equal": bool(result["english_equal"][cand]),
            "pud": pud <= 0.03 or pud <= worst(c0["everyday"], "gap") + 0.01,
            "kappa": b["summary"]["kappa_mean"] >= c0["summary"]["kappa_mean"] - 0.01,
            "mae": worst(b["pairs"], "mae_diff", False) <= worst(c0["pairs"], "mae_diff", False) + 0.01,
        }
    passing = ["C0", *(c for c in ("C1", "C2") if all(gates[c].values()))]
    order = {"C0": 0, "C1": 1, "C2": 2}

    def key(c: str) -> tuple[float, float, int]:
        return (result[c][PERSPECTIVE_2022]["misses"]["n"], result[c][PERSPECTIVE_2022]["misses"]["excess"], order[c])

    best = min(passing, key=key)
    fewest = min(result[c][PERSPECTIVE_2022]["misses"]["n"] for c in passing)
    tied = [c for c in passing if result[c][PERSPECTIVE_2022]["misses"]["n"] - fewest <= TIE_CELLS]
    winner = min(tied, key=lambda c: (result[c][PERSPECTIVE_2022]["misses"]["excess"], order[c]))
    n0 = result["C0"][PERSPECTIVE_2022]["misses"]["n"]
    ships = winner != "C0" and n0 - result[winner][PERSPECTIVE_2022]["misses"]["n"] >= SHIP_MARGIN
    return {"gates": gates, "fewest_misses": best, "winner": winner, "ships": ships}


def _f(x: Any, pct: bool = False) -> str:
    if x is None:
        return "-"
    return f"{100 * x:+.1f}" if pct else f"{x:+.3f}"


def table(result: Mapping[str, Any], scale: str) -> str:
    """Per language: C0 -> C1 -> C2 for every target (check parts), then human AUC and kappa."""
    cands = ("C0", "C1", "C2")
    lines = [
        "| lang | harmless mean - en | harmless share - en, pt | treebank share - en, pt | toxic mean - en "
        "| MAE - en's | PUD mean - en | AUC | kappa (fitted cuts) | widest flat run C0 |",
        "| --- | --- | --- | --- | --- | --- | --- | ---: | --- | --- |",
    ]
    blocks = [result[c][scale] for c in cands]
    for lang in sorted(blocks[0]["everyday"] | blocks[0]["pairs"]):
        if lang == "en":
            continue
        rows = [{**b["pairs"].get(lang, {}), **b["everyday"].get(lang, {})} for b in blocks]
        cells = [
            " / ".join(_f(r.get(key), pct=key.endswith(("share_diff", "share_gap"))) for r in rows)
            for _, key, _, _ in TARGETS
        ]
        flat = blocks[0]["flat"].get(lang, {})
        run = f"{flat['from']:.3f}-{flat['to']:.3f} at {flat['value']:.2f}" if flat.get("width") else "-"
        kappa = " / ".join(f"{r.get('kappa_fitted', 0):.2f}" for r in rows)
        lines.append(f"| {lang} | " + " | ".join(cells) + f" | {rows[0].get('auc') or 0:.3f} | {kappa} | {run} |")
    for c, b in zip(cands, blocks, strict=True):
        s = b["summary"]
        lines.append(
            f"\n{c}: misses {b['misses']['n']} (excess {b['misses']['excess']:.3f}); AUC mean {s['auc_mean']:.3f} "
            f"(lowest {s['auc_min']:.3f}); kappa mean {s['kappa_mean']:.3f} (fixed cuts), "
            f"{s['kappa_fitted_mean']:.3f} (fitted cuts)"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shared", default="../shared/data")
    p.add_argument("--lx-raw", help="the held-out RTP-LX raw outputs (lx_raw.py --heldout-only)")
    p.add_argument("--ud", help="comma list of everyday_trial raw .npz files")
    p.add_argument("--out", default=str(RESULT))
    p.add_argument("--table", action="store_true", help="print the tables of --out and stop")
    args = p.parse_args(argv)
    if args.table:
        shown = json.loads(Path(args.out).read_text(encoding="utf-8"))
        for scale in SCALES:
            print(f"\n{scale} (C0 / C1 / C2)\n\n{table(shown, scale)}")
        print(json.dumps(shown["decision"], indent=1))
        return 0
    head = MlHead.load(default_head_path())
    srows = scale_rows(args.shared)
    lx = load_raw(args.lx_raw, "full")
    rows = load_everyday(Path(args.shared) / "ud-sentences")
    sel: list[EverydayRow] = []
    ud: dict[tuple[str, str], float] = {}
    for path in args.ud.split(","):
        got, parts = load_parts(path, rows)
        sel += got
        ud.update({(r.text, r.lang): float(v) for r, v in zip(got, parts["raw"], strict=True)})
    lx_fit = lx_pairs(srows, lx, check=False)
    pud = everyday_pairs(sel, ud)
    other = Anchors.from_unpaired(sel, ud)
    maps = candidate_maps(head, lx_fit, pud, other)
    check_ud = [r for r in sel if r.check]
    result: dict[str, Any] = {
        "head": head.digest,
        "n_anchors": {"rtp-lx": len(lx_fit), "pud": len(pud), "other": len(other)},
        "n_check": {"ud": len(check_ud), "rtp-lx pairs": len(lx_pairs(srows, lx, check=True))},
        "english_equal": {c: all(m[s].english == maps["C0"][s].english for s in SCALES) for c, m in maps.items()},
    }
    for cand, by_scale in maps.items():
        result[cand] = {}
        for scale, m in by_scale.items():
            block = measure(m, srows, lx, check_ud, ud)
            block["misses"] = misses(block)
            result[cand][scale] = block
    result["constant"] = {"gaps": 0.0, "share_gaps": 0.0, "auc": 0.5, "kappa": 0.0}
    result["decision"] = decide(result)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(result["decision"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
