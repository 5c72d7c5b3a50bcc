"""Fit the named scales (``scales.py``) on the committed head's raw outputs and measure them held out.

Inputs: the rows of ``scale_rows.py`` (each with its era or rater-share target and the head's split) and the
head's raw output of each text (``python -m polytox.scoring.ml.scale_rows`` writes them). Everything is
fitted on the training split and measured on the held-out split; nothing here retrains the head.

- **English, per era.** ``perspective-2020`` takes the head's *web* map and ``perspective-2022`` its
  *continuation* map unchanged: both were fitted on out-of-fold scores of the training split, the web map on
  2020-scored web text alone, the continuation map 95% on 2022-scored model continuations (5% 2020 web text
  steadies its top bins). Neither era has texts of both kinds (2020: web text only; 2022: model
  continuations only), so no era has a text-type map of its own. ``raters`` gets an English map fitted here
  on the training split's English RTP-LX rows (their rater share).
- **Other languages on a Perspective scale** (``fit_cross_language``): every RTP-LX translation of an
  English prompt that carries a 2020 Perspective score gets that score as its target. Three forms are
  compared out of fold on the training split's anchored Index groups (grouped 5-fold, MAE): one joint map of
  the raw output; one joint map of the head's per-language rater-share value (the language's own shape,
  then one shared step onto Perspective); a map per language. The lowest out-of-fold MAE is kept. No 2022
  score has a translated source, so under ``perspective-2022`` the other languages read their 2020 value
  carried across by the English relation of the two eras (the continuation map of the raw score the web
  map gives that value).
- DeStein's re-scoring states no year: its rows are measured for information (``unknown``), never fitted.

Caveat: the raw outputs of training rows are the final head's in-sample outputs (the head's own maps used
out-of-fold ones, which the head does not keep); the maps fitted here on them are judged on the held-out
split, where that optimism would show.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...constants import TOXIC_THRESHOLD
from ..calibration import IsotonicMap
from .calib import CONTINUATION, WEB, ScaleMaps, fit_weighted_isotonic
from .data import Example
from .group_bootstrap import group_weights, percentile_ci, weighted_auc, weighted_mean
from .head import MlHead, default_head_path
from .scale_rows import ERA_2020, ERA_2022, ERA_UNKNOWN, RATERS, ScaleRow, scale_rows
from .scales import (
    DEFAULT_SCALES,
    HEAD_SCALE,
    PERSPECTIVE_2020,
    PERSPECTIVE_2022,
    Scale,
    ScaleSet,
    default_scales_path,
    write_scales,
)

CV_FOLDS = 5
GRID = np.unique(np.concatenate([np.linspace(0.0, 1.0, 2001), np.geomspace(1e-6, 1e-2, 200)]))
ANCHOR_2020 = f"anchor:{ERA_2020}"
ANCHOR_UNKNOWN = f"anchor:{ERA_UNKNOWN}"
CROSS_FORMS = ("joint", "rater-joint", "per-language")
MIN_ANCHORED_GROUPS = 150  # a language's own map ("per-language" form) needs this many anchored training groups


def _r(x: float | None, digits: int = 4) -> float | None:
    return None if x is None or not np.isfinite(x) else round(float(x), digits)


def _sampled(fn: Callable[[np.ndarray], np.ndarray], n: int) -> IsotonicMap:
    """A monotone function of the raw score as a piecewise-linear map on ``GRID``."""
    y = np.maximum.accumulate(np.clip(fn(GRID), 0.0, 1.0))
    return IsotonicMap(tuple(np.round(GRID, 7).tolist()), tuple(np.round(y, 6).tolist()), n)


def _compose(outer: IsotonicMap, inner: IsotonicMap) -> Callable[[np.ndarray], np.ndarray]:
    """``outer(inner(g))``: two monotone maps in a row, one monotone map."""
    return lambda g: outer(inner(g))


def _fold(groups: np.ndarray, folds: int = CV_FOLDS) -> np.ndarray:
    from .pack import unit_hash

    names = {g: int(unit_hash(g, "scale-folds") * folds) for g in set(groups.tolist())}
    return np.array([names[g] for g in groups])


def cross_language_value(form: str, x: np.ndarray, y: np.ndarray, langs: np.ndarray, rater: ScaleMaps,
                         train: np.ndarray, groups: np.ndarray) -> tuple[np.ndarray, dict[str, IsotonicMap]]:
    """(values for every row, the maps) of one cross-language form fitted on the ``train`` rows."""
    rated = np.array([rater.map_for(lang)(np.array([v]))[0] for v, lang in zip(x, langs, strict=True)])
    if form == "joint":
        joint = fit_weighted_isotonic(x[train], y[train])
        return joint(x), {"*": joint}
    if form == "rater-joint":
        joint = fit_weighted_isotonic(rated[train], y[train])
        return joint(rated), {"*": joint}
    maps: dict[str, IsotonicMap] = {"*": fit_weighted_isotonic(x[train], y[train])}
    out = maps["*"](x)
    for lang in sorted(set(langs.tolist())):
        rows = train & (langs == lang)
        if len(set(groups[rows].tolist())) >= MIN_ANCHORED_GROUPS:
            maps[lang] = fit_weighted_isotonic(x[rows], y[rows])
            out[langs == lang] = maps[lang](x[langs == lang])
    return out, maps


def choose_cross_form(x: np.ndarray, y: np.ndarray, langs: np.ndarray, groups: np.ndarray,
                      rater: ScaleMaps) -> tuple[str, dict[str, float]]:
    """The form with the lowest grouped out-of-fold MAE on the training rows; every form's MAE."""
    fold = _fold(groups)
    maes = {}
    for form in CROSS_FORMS:
        pred = np.empty(len(x))
        for k in range(CV_FOLDS):
            test = fold == k
            if test.any():
                values, _ = cross_language_value(form, x, y, langs, rater, ~test, groups)
                pred[test] = values[test]
        maes[form] = float(np.abs(pred - y).mean())
    return min(maes, key=lambda f: maes[f]), {k: round(v, 4) for k, v in maes.items()}


def fit_cross_language(x: np.ndarray, y: np.ndarray, langs: np.ndarray, groups: np.ndarray, rater: ScaleMaps,
                       all_langs: Sequence[str]) -> tuple[dict[str, IsotonicMap], IsotonicMap, dict[str, Any]]:
    """Per-language maps and a fallback from raw output onto the English source's Perspective score."""
    form, maes = choose_cross_form(x, y, langs, groups, rater)
    _, maps = cross_language_value(form, x, y, langs, rater, np.ones(len(x), dtype=bool), groups)
    n = len(x)
    per_lang: dict[str, IsotonicMap] = {}
    if form == "rater-joint":
        joint = maps["*"]
        for lang in all_langs:
            per_lang[lang] = _sampled(_compose(joint, rater.map_for(lang)), n)
        fallback = _sampled(lambda g: joint(rater.fallback(g)), n)
    else:
        fallback = maps["*"]
        per_lang = {k: v for k, v in maps.items() if k != "*"}
    own = sorted(k for k in per_lang if form == "per-language")
    info = {"form": form, "oof_mae": maes, "n_rows": n, "n_groups": len(set(groups.tolist())),
            "languages_with_own_map": own}
    return per_lang, fallback, info


def era_bridge(head_maps: ScaleMaps) -> IsotonicMap:
    """2020 value -> 2022 value as the English maps relate them: for raw score r, web(r) -> continuation(r)."""
    web, cont = head_maps.english_map(WEB)(GRID), head_maps.english_map(CONTINUATION)(GRID)
    xs, first = np.unique(np.round(web, 6), return_index=True)
    ys = np.maximum.accumulate(np.round(cont[first], 6))
    return IsotonicMap(tuple(xs.tolist()), tuple(ys.tolist()), len(GRID))


def fit_scales(rows: Sequence[ScaleRow], raw: Mapping[tuple[str, str], float], head: MlHead,
               mode: str = "full") -> ScaleSet:
    """The named scales of ``head`` (see the module docstring); fitted on training rows only."""
    head_maps = ScaleMaps.from_json(head.scale[mode])
    langs_all = sorted(set(head.languages) - {"en"})

    def select(target: str, heldout: bool, english: bool | None = None) -> list[ScaleRow]:
        return [r for r in rows if r.target == target and r.heldout == heldout and (r.text, r.lang) in raw
                and (english is None or (r.lang == "en") == english)]

    def arrays(sel: Sequence[ScaleRow]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return (np.array([raw[(r.text, r.lang)] for r in sel]), np.array([r.value for r in sel]),
                np.array([r.lang for r in sel], dtype=object), np.array([r.group for r in sel], dtype=object))

    anchored = select(ANCHOR_2020, False, english=False)
    x, y, langs, groups = arrays(anchored)
    per_lang, fallback, cross_info = fit_cross_language(x, y, langs, groups, head_maps, langs_all)
    web, cont = head_maps.english_map(WEB), head_maps.english_map(CONTINUATION)
    p2020 = ScaleMaps(english=web, fallback=fallback, per_lang=per_lang)
    bridge = era_bridge(head_maps)
    p2022 = ScaleMaps(english=cont, fallback=_sampled(lambda g: bridge(fallback(g)), fallback.n),
                      per_lang={k: _sampled(_compose(bridge, m), m.n) for k, m in per_lang.items()})
    en_raters = select(RATERS, False, english=True)
    xr, yr, _, _ = arrays(en_raters)
    raters = ScaleMaps(english=fit_weighted_isotonic(xr, yr), fallback=head_maps.fallback,
                       per_lang=dict(head_maps.per_lang))
    n_2020 = sum(1 for r in rows if r.target == ERA_2020 and not r.heldout)
    n_2022 = sum(1 for r in rows if r.target == ERA_2022 and not r.heldout)
    scales = {
        PERSPECTIVE_2020: Scale(PERSPECTIVE_2020, {mode: p2020}, {
            "era": "2020", "target": "Perspective TOXICITY as RealToxicityPrompts released it (2020)",
            "english": f"the head's web map: out of fold on {n_2020:,} training-split web texts with 2020 scores "
                       "(quark, fgdilp, shared rtp/); no model continuations carry a 2020 score",
            "other_languages": f"{cross_info['form']} map onto the 2020 score of each RTP-LX translation's English "
                               f"source: {cross_info['n_rows']:,} training rows, {cross_info['n_groups']} Index groups",
            "cross_language": cross_info}),
        PERSPECTIVE_2022: Scale(PERSPECTIVE_2022, {mode: p2022}, {
            "era": "2022", "target": "Perspective TOXICITY as IA024 read it (2022)",
            "english": f"the head's continuation map: out of fold on {n_2022} training-split GPT-2 / GPT-Neo "
                       "continuations with 2022 scores (95% of the weight; 5% 2020 web text for the top bins); no "
                       "web text carries a 2022 score",
            "other_languages": "no translated text has a 2022-scored source: the perspective-2020 value, carried "
                               "to 2022 by the English relation of the two maps"}),
        RATERS: Scale(RATERS, {mode: raters}, {
            "era": None, "target": "share of human raters calling the text toxic (RTP-LX: of 3, rating >= 3)",
            "english": f"fitted on {len(en_raters)} training-split English RTP-LX rows",
            "other_languages": "the head's rater-share maps (out of fold; own map with >= 300 rows)"}),
    }
    return ScaleSet(head=head.digest, default=DEFAULT_SCALES[CONTINUATION], scales=scales,
                    info={"mode_fitted": mode, "fitted_on": "training split only (pack.heldout_mask)",
                          "defaults": dict(DEFAULT_SCALES)})


# ---- held-out measurement -----------------------------------------------------------------------------
def agreement(pred: np.ndarray, ref: np.ndarray, groups: np.ndarray) -> dict[str, Any]:
    """AUC (reference >= 0.5), MAE, mean and share >= 0.5 against a graded reference, with group CIs."""
    label = ref >= TOXIC_THRESHOLD
    w = group_weights(groups)
    out: dict[str, Any] = {"n": len(ref), "n_groups": len(set(groups.tolist())), "n_toxic": int(label.sum()),
                           "reference_mean": _r(float(ref.mean())), "reference_share": _r(float(label.mean())),
                           "mean": _r(float(pred.mean())), "share": _r(float((pred >= TOXIC_THRESHOLD).mean())),
                           "mae": _r(float(np.abs(pred - ref).mean())),
                           "mae_ci": percentile_ci(weighted_mean(np.abs(pred - ref), w)),
                           "share_diff": _r(float((pred >= TOXIC_THRESHOLD).mean() - label.mean())),
                           "share_diff_ci": percentile_ci(
                               weighted_mean((pred >= TOXIC_THRESHOLD) - label.astype(float), w))}
    if 0 < label.sum() < len(label):
        out["auc"] = _r(float(weighted_auc(label, pred, np.ones((1, len(pred))))[0]))
        out["auc_ci"] = percentile_ci(weighted_auc(label, pred, w))
    return out


def scale_values(name: str, scales: ScaleSet, head: MlHead, x: np.ndarray, langs: Sequence[str], mode: str,
                 text: str = CONTINUATION) -> np.ndarray:
    if name.startswith(HEAD_SCALE):
        return ScaleMaps.from_json(head.scale[mode]).apply(x, langs, name.partition(":")[2] or text)
    return scales.get(name).apply(x, langs, mode)


MEASURED = (PERSPECTIVE_2020, PERSPECTIVE_2022, RATERS, f"{HEAD_SCALE}:{CONTINUATION}", f"{HEAD_SCALE}:{WEB}")


def measure_scales(rows: Sequence[ScaleRow], raw: Mapping[tuple[str, str], float], head: MlHead,
                   scales: ScaleSet, mode: str = "full") -> dict[str, Any]:
    """Held-out error of every scale on every era's data, real-run EMT / EP / AT, and the languages."""
    from .measure import run_metrics

    held = [r for r in rows if r.heldout and (r.text, r.lang) in raw]
    out: dict[str, Any] = {"eras": {}, "run": {}, "languages": {}}
    for era in (ERA_2020, ERA_2022, ERA_UNKNOWN):
        sel = [r for r in held if r.target == era]
        if not sel:
            continue
        x = np.array([raw[(r.text, r.lang)] for r in sel])
        ref = np.array([r.value for r in sel])
        groups = np.array([r.group for r in sel])
        out["eras"][era] = {name: agreement(scale_values(name, scales, head, x, [r.lang for r in sel], mode), ref,
                                            groups) for name in MEASURED}
        gens = [i for i, r in enumerate(sel) if r.kind == "continuation"]
        if gens:
            examples = [Example(text=r.text, lang=r.lang, target=r.value, label=r.value >= TOXIC_THRESHOLD,
                                source=r.source, group=r.prompt, kind="generation", domain="perspective") for r in sel]
            idx = np.array(gens)
            out["run"][era] = {
                name: run_metrics(examples, idx, scale_values(name, scales, head, x, [r.lang for r in sel], mode),
                                  groups) for name in MEASURED}
    out["languages"] = measure_languages(held, raw, head, scales, mode)
    return out


def measure_languages(held: Sequence[ScaleRow], raw: Mapping[tuple[str, str], float], head: MlHead,
                      scales: ScaleSet, mode: str) -> dict[str, Any]:
    """Per language on held-out anchored Index groups: MAE against the English source's 2020 Perspective
    score under perspective-2020 (English: its own prompt through the English map), and the AUC against
    the human label (mean rating >= 3) as the card reports it."""
    out: dict[str, Any] = {}
    anchored = [r for r in held if r.target == ANCHOR_2020]
    rated = [r for r in held if r.target == RATERS]
    for lang in sorted({r.lang for r in anchored}):
        sel = [r for r in anchored if r.lang == lang]
        x = np.array([raw[(r.text, r.lang)] for r in sel])
        ref = np.array([r.value for r in sel])
        groups = np.array([r.group for r in sel])
        pred = scales.get(PERSPECTIVE_2020).apply(x, [lang] * len(sel), mode)
        before = ScaleMaps.from_json(head.scale[mode]).apply(x, [lang] * len(sel), CONTINUATION)
        lab = [r for r in rated if r.lang == lang]
        xl = np.array([raw[(r.text, r.lang)] for r in lab])
        labels = np.array([bool(r.label) for r in lab])
        auc = weighted_auc(labels, xl, np.ones((1, len(xl))))[0] if len(set(labels.tolist())) == 2 else np.nan
        out[lang] = {"n": len(sel), "n_groups": len(set(groups.tolist())),
                     "mae": _r(float(np.abs(pred - ref).mean())),
                     "mae_ci": percentile_ci(weighted_mean(np.abs(pred - ref), group_weights(groups))),
                     "mean": _r(float(pred.mean())), "reference_mean": _r(float(ref.mean())),
                     "mae_head_scale": _r(float(np.abs(before - ref).mean())),
                     "auc_humans": _r(float(auc)), "n_humans": len(lab)}
    return out


def load_raw(folder: Path | str, mode: str = "full") -> dict[tuple[str, str], float]:
    """(text, lang) -> raw output of head mode ``mode``, from the parts ``scale_rows`` wrote."""
    import pyarrow.parquet as pq

    out: dict[tuple[str, str], float] = {}
    for part in sorted(Path(folder).glob(f"part-*-{mode}.parquet")):
        table = pq.read_table(part).to_pydict()
        out.update({(t, lang): float(v) for t, lang, v in zip(table["text"], table["lang"], table["raw"], strict=True)})
    return out


def main(argv: Sequence[str] | None = None) -> int:
    import json

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shared", default="../shared/data")
    p.add_argument("--raw", required=True, help="the folder 'python -m polytox.scoring.ml.scale_rows' wrote")
    p.add_argument("--out", default=str(default_scales_path()))
    p.add_argument("--measurements", help="write the held-out measurements (JSON) here too")
    args = p.parse_args(argv)
    head = MlHead.load(default_head_path())
    rows = scale_rows(args.shared)
    fitted: dict[str, ScaleSet] = {}
    measured: dict[str, Any] = {}
    for mode in ("full", "ngram"):  # the full head first: its measurements are the scales' card
        raw = load_raw(args.raw, mode)
        if raw and mode in head.scale:
            fitted[mode] = fit_scales(rows, raw, head, mode)
            measured[mode] = measure_scales(rows, raw, head, fitted[mode], mode)
    first = next(iter(fitted.values()))
    main_mode = next(iter(fitted))
    scales = ScaleSet(head=first.head, default=first.default,
                      scales={n: Scale(n, {m: fitted[m].scales[n].maps[m] for m in fitted},
                                       {**s.info, "heldout": _card_block(n, measured[main_mode])})
                              for n, s in first.scales.items()},
                      info={**first.info, "mode_fitted": list(fitted), "measured_mode": main_mode})
    write_scales(scales, args.out)
    if args.measurements:
        Path(args.measurements).write_text(json.dumps(measured, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({n: s.info["heldout"] for n, s in scales.scales.items()}, indent=1))
    return 0


def _card_block(name: str, measured: Mapping[str, Any]) -> dict[str, Any]:
    """What ``polytox scorers`` shows of a scale: its held-out error on every era's data."""
    out: dict[str, Any] = {}
    for era, by_scale in measured["eras"].items():
        m = by_scale[name]
        out[era] = {k: m.get(k) for k in ("n", "auc", "mae", "share_diff", "mean", "reference_mean")}
    for era, by_scale in measured["run"].items():
        pooled = by_scale[name][-1]
        out[era]["run"] = {k: pooled.get(k) for k in ("emt_diff", "ep_diff", "at_diff", "emt_diff_ci", "ep_diff_ci",
                                                      "at_diff_ci", "n_prompts")}
    if name == PERSPECTIVE_2020:  # the languages are measured on the scale their anchors belong to
        out["languages"] = {lang: {k: m.get(k) for k in ("n_groups", "mae", "mae_ci", "mae_head_scale", "auc_humans")}
                            for lang, m in measured["languages"].items()}
    return out


if __name__ == "__main__":
    sys.exit(main())
