"""Fit the seven attribute heads, write ``polytox-ml-attributes.npz`` and measure them on the held-out parts.

The rule: research/scorer/log.md, "Perspective's other seven attributes". Features: the toxicity head's own
(its ``idf`` over hashed n-grams, its pool standardisation), read from the embedding cache that
``attr_data.py`` fills (pools and both attention probes' scores, so TOXICITY's shipped value, the proxy, is
computed from the cache as the scorer computes it). Only rows the cache holds are used by the pool parts;
the English n-gram ridge fits on every English fit row.

    PYTHONPATH=src:. python -m research.scorer.attr_fit --shared ../shared/data --cache .scratch/attr-emb.sqlite \\
        --out src/polytox/data/polytox-ml-attributes.npz --results research/scorer/results/attributes.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import Ridge
from sklearn.metrics import roc_auc_score

from polytox.scoring.ml.embed_cache import EmbeddingCache
from polytox.scoring.ml.embedder import model_key
from polytox.scoring.ml.head import SUPPORTED, AttributeHeads, toxicity_logit
from polytox.scoring.ml.ngrams import hashed_counts, tfidf
from polytox.scoring.ml.scorer import PolytoxMlScorer
from polytox.training.scorer.everyday import everyday_gaps, load_everyday
from polytox.training.scorer.pack import unit_hash
from polytox.types import text_hash

from .attr_data import LX_OF, OTHER, Row, load_rows

ALPHA_NGRAM = 1.0  # the toxicity head's (its meta config): same features, same penalties
ALPHA_EMB = 1000.0
FOLDS = 5
EN_MIN_POOLED = 1000  # fewer English fit rows with pools: the English head is the n-gram part alone
LX_TOXIC = 3.0  # a category counts as present at a mean rating >= 3 (as RTP-LX Toxicity for the head)
# SEVERE_TOXICITY, PROFANITY and FLIRTATION have no RTP-LX category: outside English their ridge learns the
# English head's value of the prompt's English source (distillation across RTP-LX's parallel prompts)
DISTILLED = ("severe_toxicity", "profanity", "flirtation")


def cached(rows: Sequence[Row], cache_path: str, scorer: PolytoxMlScorer) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pools (rows, dims) float32, has pools, probe scores (rows, 2): English probe, other probe; nan if none)."""
    head = scorer.head
    assert head.backbone is not None and head.probe is not None and head.probe_en is not None
    cache = EmbeddingCache(cache_path)
    key = model_key(head.backbone, head.max_tokens)
    hashes = [text_hash(r.text) for r in rows]
    layers = [cache.get_many(key, layer, hashes) for layer in head.layers]
    probes = [cache.get_many(f"{key}|attention-{p.digest}", 0, hashes) for p in (head.probe_en, head.probe)]
    cache.close()
    have = np.array([all(h in f for f in layers) for h in hashes])
    dims = sum(next(iter(f.values())).shape[0] for f in layers)
    pools = np.full((len(rows), dims), np.nan, dtype=np.float32)
    scores = np.full((len(rows), 2), np.nan)
    for i in np.flatnonzero(have):
        pools[i] = np.concatenate([f[hashes[i]] for f in layers]).astype(np.float32)
        for k, f in enumerate(probes):
            if hashes[i] in f:
                scores[i, k] = float(f[hashes[i]][0])
    return pools, have, scores


def toxicity_values(
    scorer: PolytoxMlScorer, x: Any, pools: np.ndarray, probes: np.ndarray, langs: list[str]
) -> tuple[np.ndarray, np.ndarray]:
    """TOXICITY's raw output and shipped value (default options) from cached features, as
    ``PolytoxMlScorer._read`` computes them; nan where the cache lacks the probe score a row reads."""
    head = scorer.head
    s_ngram = head.ngram_output(x, langs)
    s_emb = head.emb_output(pools, langs)
    english = np.array([lang == "en" for lang in langs])
    s_probe = np.where(english, probes[:, 0], probes[:, 1])
    raw = head.raw_probability(s_ngram, s_emb, "full", langs, np.nan_to_num(s_probe))
    value = scorer.calibrate(raw, langs)
    missing = np.isnan(s_probe)
    return np.where(missing, np.nan, raw), np.where(missing, np.nan, value)


def folds(keys: Sequence[str]) -> np.ndarray:
    return np.array([int(unit_hash(k, "attr-folds") * FOLDS) for k in keys])


def ridge(x: Any, y: np.ndarray, alpha: float, sparse: bool) -> Ridge:
    return Ridge(alpha=alpha, solver="lsqr" if sparse else "cholesky", tol=1e-4).fit(x, y)


def oof(x: Any, y: np.ndarray, fold: np.ndarray, alpha: float, sparse: bool) -> np.ndarray:
    out = np.zeros(y.shape)
    for f in range(FOLDS):
        m = ridge(x[fold != f], y[fold != f], alpha, sparse)
        out[fold == f] = m.predict(x[fold == f])
    return out


def isotonic(x: np.ndarray, y: np.ndarray) -> tuple[tuple[float, ...], tuple[float, ...]]:
    iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(x, y)
    return tuple(float(v) for v in iso.X_thresholds_), tuple(float(v) for v in iso.y_thresholds_)


def auc(labels: np.ndarray, scores: np.ndarray) -> float | None:
    ok = ~np.isnan(scores)
    if ok.sum() < 2 or len(set(labels[ok].tolist())) < 2:
        return None
    return round(float(roc_auc_score(labels[ok], scores[ok])), 4)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shared", required=True)
    p.add_argument("--cache", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--results", required=True)
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    rows = load_rows(args.shared)
    scorer = PolytoxMlScorer()
    head = scorer.head
    pools, have, probes = cached(rows, args.cache, scorer)
    print(f"rows {len(rows)}, with pools {int(have.sum())} ({time.perf_counter() - t0:.0f}s)", flush=True)
    english_rows = np.array([r.lang == "en" for r in rows])
    need_x = english_rows & (np.array([r.source != "ud" for r in rows]) | have) | have
    idx_x = np.flatnonzero(need_x)
    x_all = tfidf(hashed_counts([rows[i].text for i in idx_x], head.ngram), head.idf)
    where_x = {int(i): k for k, i in enumerate(idx_x)}
    print(f"n-gram features for {len(idx_x)} rows ({time.perf_counter() - t0:.0f}s)", flush=True)

    def X(sel: np.ndarray) -> Any:
        return x_all[[where_x[int(i)] for i in sel]]

    z_all = (pools - head.emb_mean) / head.emb_scale
    traw = np.full(len(rows), np.nan)
    tval = np.full(len(rows), np.nan)
    with_pools = np.flatnonzero(have)
    traw[with_pools], tval[with_pools] = toxicity_values(
        scorer, X(with_pools), pools[with_pools], probes[with_pools], [rows[i].lang for i in with_pools]
    )
    have = have & ~np.isnan(traw)  # the pool parts read TOXICITY's raw output too
    tlogit = np.nan_to_num(toxicity_logit(traw))
    print(f"rows with pools and TOXICITY {int(have.sum())}", flush=True)
    src = np.array([r.source for r in rows])
    part = np.array([r.part for r in rows])
    persp = np.array([[r.persp.get(a, np.nan) for a in OTHER] for r in rows])
    # ---- English: n-gram ridge (every English fit row), pool ridge (embedded fit rows + everyday fit rows)
    en_fit = np.flatnonzero((src == "pack") & (part == "fit"))
    fold_ng = folds([rows[i].text for i in en_fit])
    y_ng = persp[en_fit]
    oof_ng = oof(X(en_fit), y_ng, fold_ng, ALPHA_NGRAM, True)
    ngram = ridge(X(en_fit), y_ng, ALPHA_NGRAM, True)
    w_ngram = ngram.coef_.astype(np.float16).astype(np.float32)
    print(f"n-gram ridge on {len(en_fit)} ({time.perf_counter() - t0:.0f}s)", flush=True)
    emb_fit = np.flatnonzero(
        ((src == "pack") & (part == "fit") | (src == "ud") & (part == "ud-fit") & english_rows) & have
    )
    y_emb = np.nan_to_num(persp[emb_fit], nan=0.0)  # everyday rows: 0 on every attribute
    fold_emb = folds([rows[i].text for i in emb_fit])
    oof_emb = oof(z_all[emb_fit], y_emb, fold_emb, ALPHA_EMB, False)
    emb = ridge(z_all[emb_fit], y_emb, ALPHA_EMB, False)
    # combiner and map on the pack rows with both parts' out-of-fold outputs
    pos_ng = {int(i): k for k, i in enumerate(en_fit)}
    both = [k for k, i in enumerate(emb_fit) if int(i) in pos_ng]
    s_ng = oof_ng[[pos_ng[int(emb_fit[k])] for k in both]]
    s_em = oof_emb[both]
    y_both = y_emb[both]
    t_both = tlogit[emb_fit[both]]
    combine: dict[str, tuple[float, float, float, float]] = {}
    maps: dict[str, dict[str, tuple[tuple[float, ...], tuple[float, ...]]]] = {}
    full = len(both) >= EN_MIN_POOLED
    for k, a in enumerate(OTHER):
        if full:  # n-gram, pool and TOXICITY inputs on the pooled rows
            design = np.column_stack([np.ones(len(both)), s_ng[:, k], s_em[:, k], t_both])
            coef = np.linalg.lstsq(design, y_both[:, k], rcond=None)[0]
            combine[a] = (float(coef[0]), float(coef[1]), float(coef[2]), float(coef[3]))
            maps[a] = {"en": isotonic(design @ coef, y_both[:, k])}
        else:  # too few pooled rows: the n-gram part alone, on every English fit row
            design = np.column_stack([np.ones(len(en_fit)), oof_ng[:, k]])
            coef = np.linalg.lstsq(design, y_ng[:, k], rcond=None)[0]
            combine[a] = (float(coef[0]), float(coef[1]), 0.0, 0.0)
            maps[a] = {"en": isotonic(design @ coef, y_ng[:, k])}
    print(
        f"English combiners ({'full' if full else 'n-gram'}; {len(both)} pooled) ({time.perf_counter() - t0:.0f}s)",
        flush=True,
    )

    def english_values(sel: np.ndarray) -> np.ndarray:
        s1 = np.asarray(X(sel) @ w_ngram.T) + ngram.intercept_
        s2 = z_all[sel] @ emb.coef_.T + emb.intercept_
        out = np.zeros((len(sel), len(OTHER)))
        for k, a in enumerate(OTHER):
            b, a1, a2, a3 = combine[a]
            out[:, k] = np.interp(b + a1 * s1[:, k] + a2 * s2[:, k] + a3 * tlogit[sel], *maps[a]["en"])
        return out

    # ---- other languages: pool ridge on RTP-LX fit rows (all 17) + everyday fit rows, then equated
    lx_index_en: dict[str, int] = {
        r.index: i for i, r in enumerate(rows) if r.source == "rtp-lx" and r.lang == "en" and have[i]
    }
    en_teacher_rows = np.array(sorted(lx_index_en.values()))
    teacher = (
        dict(zip(en_teacher_rows.tolist(), english_values(en_teacher_rows), strict=True))
        if len(en_teacher_rows)
        else {}
    )
    other_fit = np.flatnonzero(((src == "rtp-lx") & (part == "fit") | (src == "ud") & (part == "ud-fit")) & have)
    y_other = np.zeros((len(other_fit), len(OTHER)))
    keep = np.ones(len(other_fit), dtype=bool)
    for j, i in enumerate(other_fit):
        r = rows[i]
        if r.source != "rtp-lx":
            continue
        for k, a in enumerate(OTHER):
            if a in LX_OF:
                y_other[j, k] = (r.lx[LX_OF[a]] - 1.0) / 4.0
            elif r.index in lx_index_en:
                y_other[j, k] = teacher[lx_index_en[r.index]][k]
            else:
                keep[j] = False
    other_fit, y_other = other_fit[keep], y_other[keep]
    fold_other = folds([rows[i].index or rows[i].sent_id or rows[i].text for i in other_fit])
    oof_other = oof(z_all[other_fit], y_other, fold_other, ALPHA_EMB, False)
    other = ridge(z_all[other_fit], y_other, ALPHA_EMB, False)
    print(f"other-language ridge on {len(other_fit)} ({time.perf_counter() - t0:.0f}s)", flush=True)
    # equating pairs: a non-English fit row's out-of-fold raw against the English head's value of its source
    pud_en = {
        r.sent_id: i for i, r in enumerate(rows) if r.source == "ud" and r.parallel and r.lang == "en" and have[i]
    }
    src_of: list[tuple[int, int]] = []
    for j, i in enumerate(other_fit):
        r = rows[i]
        if r.lang == "en":
            continue
        if r.source == "rtp-lx" and r.index in lx_index_en:
            src_of.append((j, lx_index_en[r.index]))
        elif r.source == "ud" and r.parallel and r.sent_id in pud_en:
            src_of.append((j, pud_en[r.sent_id]))
    js = np.array([j for j, _ in src_of])
    en_src = np.array([e for _, e in src_of])
    en_vals = english_values(en_src)
    combine_other: dict[str, tuple[float, float, float]] = {}
    for k, a in enumerate(OTHER):
        design = np.column_stack([np.ones(len(other_fit)), oof_other[:, k], tlogit[other_fit]])
        coef = np.linalg.lstsq(design, y_other[:, k], rcond=None)[0]
        combine_other[a] = (float(coef[0]), float(coef[1]), float(coef[2]))
        maps[a]["other"] = isotonic((design @ coef)[js], en_vals[:, k])
    print(f"equating pairs {len(js)} ({time.perf_counter() - t0:.0f}s)", flush=True)
    heads = AttributeHeads(
        names=OTHER,
        w_ngram=w_ngram,
        b_ngram=np.asarray(ngram.intercept_, dtype=np.float64),
        w_emb=emb.coef_.astype(np.float32).astype(np.float64),
        b_emb=np.asarray(emb.intercept_, dtype=np.float64),
        w_emb_other=other.coef_.astype(np.float32).astype(np.float64),
        b_emb_other=np.asarray(other.intercept_, dtype=np.float64),
        combine=combine,
        combine_other=combine_other,
        maps=maps,
        languages={a: tuple(sorted(SUPPORTED[a])) for a in OTHER},
        toxicity_head=head.digest,
        meta={
            "rule": "research/scorer/log.md, Perspective's other seven attributes",
            "n_fit": {
                "english_ngram": len(en_fit),
                "english_pools": len(emb_fit),
                "english_combiner": len(both) if full else len(en_fit),
                "english_form": "ngram+pools+toxicity" if full else "ngram",
                "other_pools": len(other_fit),
                "equating_pairs": len(js),
            },
            "alpha": {"ngram": ALPHA_NGRAM, "emb": ALPHA_EMB},
        },
    )
    digest = heads.save(args.out)
    print(f"wrote {args.out} ({digest})", flush=True)
    heads = AttributeHeads.load(args.out)
    results = measure(rows, heads, scorer, x_all, where_x, pools, have, traw, tval, src, part)
    if not full:  # the English head reads n-grams alone: it is measured on every English held-out row too
        results["english_every_row"] = english_every_row(rows, heads, scorer, x_all, where_x, src, part)
    # the card section (``polytox scorers --attributes``): what was measured, in the file it describes
    heads.meta["card"] = {
        "summary": results["summary"],
        "languages": {a: list(heads.languages[a]) for a in OTHER},
        "human_auc": {  # per language, where RTP-LX rates the attribute's category: [AUC, proxy AUC, n]
            a: {lang: [b["auc"], b["proxy_auc"], b["n"]] for lang, b in results["rtp_lx"][a]["per_language"].items()}
            for a in OTHER
            if results["rtp_lx"][a]["gated"]
        },
        "n": {
            "english": next(iter(results["english"].values()))["n"],
            "rtp_lx": sum(b["n"] for b in next(iter(results["rtp_lx"].values()))["per_language"].values()),
        },
    }
    digest = heads.save(args.out)
    print(f"wrote {args.out} with its card ({digest})", flush=True)
    results["digest"] = digest
    results["n_fit"] = heads.meta["n_fit"]
    Path(args.results).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(results["summary"], indent=1))
    return 0


def english_every_row(
    rows: Sequence[Row],
    heads: AttributeHeads,
    scorer: PolytoxMlScorer,
    x_all: Any,
    where_x: dict[int, int],
    src: np.ndarray,
    part: np.ndarray,
) -> dict[str, Any]:
    """AUC and MAE on every English held-out pack row: exact without pools when the English combiners give
    the pool and TOXICITY inputs weight 0 (then neither changes a value)."""
    sel = np.flatnonzero((src == "pack") & (part == "heldout"))
    x = x_all[[where_x[int(i)] for i in sel]]
    dims = heads.w_emb.shape[1]
    values = heads.values(
        x,
        np.asarray(scorer.head.emb_mean)[None, :].repeat(len(sel), 0).reshape(len(sel), dims),
        np.full(len(sel), 0.5),
        ["en"] * len(sel),
        scorer.head,
    )
    out: dict[str, Any] = {}
    for a in OTHER:
        y = np.array([rows[int(i)].persp[a] for i in sel])
        out[a] = {
            "n": len(sel),
            "n_positive": int((y >= 0.5).sum()),
            "auc": auc(y >= 0.5, values[a]),
            "mae": round(float(np.abs(values[a] - y).mean()), 4),
        }
    return out


def measure(
    rows: Sequence[Row],
    heads: AttributeHeads,
    scorer: PolytoxMlScorer,
    x_all: Any,
    where_x: dict[int, int],
    pools: np.ndarray,
    have: np.ndarray,
    traw: np.ndarray,
    tval: np.ndarray,
    src: np.ndarray,
    part: np.ndarray,
) -> dict[str, Any]:
    """The held-out measurements of the rule, each beside TOXICITY's value (the proxy) and a constant."""
    sel = np.flatnonzero(
        have & np.array([int(i) in where_x for i in range(len(rows))]) & (part != "fit") & (part != "ud-fit")
    )
    langs = [rows[int(i)].lang for i in sel]
    x = x_all[[where_x[int(i)] for i in sel]]
    values = heads.values(x, pools[sel], traw[sel], langs, scorer.head)
    tox = tval[sel]
    out: dict[str, Any] = {"english": {}, "rtp": {}, "rtp_lx": {}, "everyday": {}, "summary": {}}
    fit_means = {
        a: float(np.nanmean([r.persp.get(a, np.nan) for r in rows if r.source == "pack" and r.part == "fit"]))
        for a in OTHER
    }
    for name, source in (("english", "pack"), ("rtp", "rtp")):
        m = np.array([src[i] == source and part[i] == "heldout" for i in sel])
        if not m.any():
            continue
        for a in OTHER:
            y = np.array([rows[i].persp[a] for i in sel[m]])
            v, t = values[a][m], tox[m]
            tm = ~np.isnan(t)
            const = np.full(len(y), fit_means[a])
            out[name][a] = {
                "n": int(m.sum()),
                "auc": auc(y >= 0.5, v),
                "mae": round(float(np.abs(v - y).mean()), 4),
                "n_positive": int((y >= 0.5).sum()),
                "proxy_auc": auc(y[tm] >= 0.5, t[tm]),
                "proxy_mae": round(float(np.abs(t[tm] - y[tm]).mean()), 4) if tm.any() else None,
                "constant_auc": 0.5,
                "constant_mae": round(float(np.abs(const - y).mean()), 4),
            }
    lx_m = np.array([src[i] == "rtp-lx" and part[i] == "heldout" for i in sel])
    for a in OTHER:
        cat = LX_OF.get(a, "Toxicity")
        per: dict[str, Any] = {}
        for lang in sorted({rows[i].lang for i in sel[lx_m]}):
            m = lx_m & np.array([rows[int(i)].lang == lang for i in sel])
            y = np.array([rows[i].lx[cat] >= LX_TOXIC for i in sel[m]])
            per[lang] = {
                "n": int(m.sum()),
                "n_positive": int(y.sum()),
                "auc": auc(y, values[a][m]),
                "proxy_auc": auc(y, tox[m]),
            }
        mean = [b["auc"] for b in per.values() if b["auc"] is not None]
        pmean = [b["proxy_auc"] for b in per.values() if b["proxy_auc"] is not None]
        out["rtp_lx"][a] = {
            "category": cat,
            "gated": a in LX_OF,
            "mean_auc": round(float(np.mean(mean)), 4) if mean else None,
            "proxy_mean_auc": round(float(np.mean(pmean)), 4) if pmean else None,
            "per_language": per,
        }
    ud = np.array([src[i] == "ud" and part[i] == "ud-check" and rows[int(i)].parallel for i in sel])
    everyday_rows = load_everyday("../shared/data/ud-sentences")
    by_key = {(r.text, r.lang): r for r in everyday_rows}
    ev_rows = [by_key[(rows[i].text, rows[i].lang)] for i in sel[ud]]
    for a in ("toxicity", *OTHER):
        vals = tox[ud] if a == "toxicity" else values[a][ud]
        gaps = everyday_gaps(ev_rows, vals)
        worst = max((abs(b["gap"]) for lang, b in gaps.items() if "gap" in b and lang != "en"), default=None)
        out["everyday"][a] = {
            "worst_gap": worst,
            "per_language": {
                k: {"n": b["n_pud"], "gap": b.get("gap"), "mean": b.get("pud_mean")} for k, b in gaps.items()
            },
        }
    for a in OTHER:
        e, lx = out["english"][a], out["rtp_lx"][a]
        out["summary"][a] = {
            "en_auc": e["auc"],
            "en_mae": e["mae"],
            "en_proxy_auc": e["proxy_auc"],
            "en_proxy_mae": e["proxy_mae"],
            "en_constant_mae": e["constant_mae"],
            "lx_mean_auc": lx["mean_auc"],
            "lx_proxy_mean_auc": lx["proxy_mean_auc"],
            "everyday_worst_gap": out["everyday"][a]["worst_gap"],
        }
    out["summary"]["toxicity_everyday_worst_gap"] = out["everyday"]["toxicity"]["worst_gap"]
    return out


if __name__ == "__main__":
    sys.exit(main())
