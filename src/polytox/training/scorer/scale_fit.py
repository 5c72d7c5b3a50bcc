"""Fit the named scales (``scales.py``) on the committed head's raw outputs and measure them held out.

Inputs: the rows of ``scale_rows.py`` (each with its era or rater-share target and the head's split) and the
head's raw output of each text (``polytox train-scorer-step scale-rows`` writes them); ``fit_named_scales``
(``polytox train-scorer-step scale-fit``) fits and measures them. Everything is
fitted on the training split and measured on the held-out split; nothing here retrains the head.

- **English, per era.** ``perspective-2020`` takes the head's *web* map and ``perspective-2022`` its
  *continuation* map unchanged: both were fitted on out-of-fold scores of the training split, the web map on
  2020-scored web text alone, the continuation map 95% on 2022-scored model continuations (5% 2020 web text
  steadies its top bins). Neither era has texts of both kinds (2020: web text only; 2022: model
  continuations only), so no era has a text-type map of its own. ``raters`` gets an English map fitted here
  on the training split's English RTP-LX rows (their rater share).
- **Other languages on a Perspective scale** (``scale_languages.py``): texts that readers of each language
  judge equally toxic read the same value. On RTP-LX pairs (a translation and its English text, same
  ``Index``) whose two sides' annotators agree on the level, an equipercentile map takes a language's raw
  output onto the English raw output, and the scale's English map gives the value; each language's own
  quantile map is shrunk to the joint one (``SHRINK``). Both Perspective scales use the same equating, each
  with its own English map, so English values never move. Quantile matching does not regress to the mean,
  so the mostly toxic RTP-LX sample does not lift the harmless end; how the form was chosen is in
  docs/scorer-scales.md ("One scale across languages").
- DeStein's re-scoring states no year: its rows are measured for information (``unknown``), never fitted.

Caveat: the raw outputs of training rows are the final head's in-sample outputs (the head's own maps used
out-of-fold ones, which the head does not keep); the maps fitted here on them are judged on the held-out
split, where that optimism would show.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...constants import TOXIC_THRESHOLD
from ...errors import PolytoxError
from ...scoring.calibration import IsotonicMap, fit_isotonic
from ...scoring.ml.calib import CONTINUATION, WEB, ScaleMaps
from ...scoring.ml.head import MlHead, default_head_path
from ...scoring.ml.scales import (
    DEFAULT_SCALES,
    HEAD_SCALE,
    PERSPECTIVE_2020,
    PERSPECTIVE_2022,
    Scale,
    ScaleSet,
    load_scales,
    write_scales,
)
from .data import Example
from .everyday import EverydayRow, everyday_gaps, everyday_pairs, load_everyday
from .group_bootstrap import group_weights, percentile_ci, weighted_auc, weighted_mean
from .pack import unit_hash
from .scale_anchored import JOINT_WEIGHT, MIN_SLOPE, Anchors, fit_anchored, flat_runs
from .scale_languages import Equating, Pairs, fit_equated, in_check_part, language_checks, summarise
from .scale_rows import ERA_2020, ERA_2022, ERA_UNKNOWN, RATERS, ScaleRow, scale_rows

ANCHOR_2020 = f"anchor:{ERA_2020}"
ANCHOR_UNKNOWN = f"anchor:{ERA_UNKNOWN}"
# k of w = n / (n + k), the weight of a language's own quantile map against the joint one (0: each language
# with enough pairs keeps its own map; docs/scorer-scales.md, "One scale across languages")
SHRINK = 0.0


def _r(x: float | None, digits: int = 4) -> float | None:
    return None if x is None or not np.isfinite(x) else round(float(x), digits)


def compose(outer: IsotonicMap, inner: IsotonicMap, n: int) -> IsotonicMap:
    """``outer(inner(g))`` as one exact piecewise-linear map: breakpoints where either map bends."""
    lo, hi = inner.y[0], inner.y[-1]
    bends = np.array([x for x in outer.x if lo <= x <= hi])
    ys_inner = np.asarray(inner.y)
    rising = np.concatenate([[True], np.diff(ys_inner) > 0])  # np.interp needs increasing points
    back = np.interp(bends, ys_inner[rising], np.asarray(inner.x)[rising]) if len(bends) else np.array([])
    xs = np.unique(np.round(np.concatenate([inner.x, back, [0.0, 1.0]]), 7))
    ys = np.maximum.accumulate(np.round(np.clip(outer(inner(xs)), 0.0, 1.0), 6))
    return IsotonicMap(tuple(xs.tolist()), tuple(ys.tolist()), n)


def language_maps(
    equating: Equating, english: IsotonicMap, langs: Sequence[str]
) -> tuple[dict[str, IsotonicMap], IsotonicMap]:
    """(per-language maps, fallback) of one scale: the English map after each language's equating."""

    def as_map(lang: str | None) -> IsotonicMap:
        xs = np.unique(np.concatenate([np.linspace(0.0, 1.0, 11), equating.breakpoints(lang)]))
        return IsotonicMap(
            tuple(xs.tolist()), tuple(np.maximum.accumulate(equating(xs, lang or "")).tolist()), equating.n_pairs
        )

    per_lang = {lang: compose(english, as_map(lang), equating.n_pairs) for lang in langs}
    return per_lang, compose(english, as_map(None), equating.n_pairs)


EQUIPERCENTILE, ANCHORED = "equipercentile", "anchored"
FORMS = (EQUIPERCENTILE, ANCHORED)


def other_maps(
    pairs: Pairs,
    english: IsotonicMap,
    langs: Sequence[str],
    form: str = EQUIPERCENTILE,
    shrink: float = SHRINK,
    anchors: Pairs | None = None,
    unpaired: Anchors | None = None,
) -> tuple[dict[str, IsotonicMap], IsotonicMap]:
    """(per-language maps, fallback) of the other languages on the scale whose English map is ``english``,
    from RTP-LX fit ``pairs`` and the everyday ``anchors`` (Parallel UD pairs): ``equipercentile``, the
    quantile equating composed with ``english``; ``anchored`` (``scale_anchored``), each anchor read as its
    English text's value, with ``unpaired`` (other everyday sentences, paired by quantile) as one more stratum."""
    if form == ANCHORED:
        parts = [Anchors.from_pairs(pairs)]
        if anchors is not None:
            parts.append(Anchors.from_pairs(anchors, everyday=True))
        if unpaired is not None:
            parts.append(unpaired)
        return fit_anchored(Anchors.concat(*parts), english, langs)
    if form != EQUIPERCENTILE:
        raise ValueError(f"unknown form {form!r}: {', '.join(FORMS)}")
    return language_maps(
        fit_equated(pairs if anchors is None else Pairs.concat(pairs, anchors), shrink), english, langs
    )


def anchored_text(n_pairs: int, n_anchors: int, n_unpaired: int) -> str:
    """How the ``anchored`` form's maps were fitted, as the scales file says it."""
    return (
        f"one smooth monotone map per language straight onto the scale (every slope >= {MIN_SLOPE:g}), fitted "
        f"by weighted least squares of each anchor's English value: RTP-LX pairs of the head's held-out fit part "
        f"({n_pairs:,}; harmless, toxic and middle strata), {n_anchors:,} everyday Parallel UD sentences with "
        f"their English ones and {n_unpaired:,} quantiles of other everyday sentences (fiction, legal, reviews) "
        f"against English's, each stratum of a language weighing the same; other languages at "
        f"{JOINT_WEIGHT:g} of a language's own weight"
    )


def lx_pairs(rows: Sequence[ScaleRow], raw: Mapping[tuple[str, str], float], check: bool) -> Pairs:
    """RTP-LX pairs of the held-out split's fit part (``check=False``) or check part, each with its English
    text's 2020 Perspective score where it has one (``scale_languages``: why the held-out split)."""
    persp = {r.prompt: r.value for r in rows if r.target == ANCHOR_2020 and r.lang == "en"}
    return Pairs.build(
        [
            r
            for r in rows
            if r.target == RATERS and r.heldout and r.rating is not None and in_check_part(r.prompt) == check
        ],
        raw,
        persp,
    )


def other_languages_text(n_preserving: int, n_pairs: int, n_anchors: int, shrink: float) -> str:
    """How the other languages' maps of a Perspective scale were fitted, as the scales file says it."""
    everyday = (
        f" and {n_anchors:,} everyday Parallel UD sentences with their English ones (the fit part of "
        "ud-sentences), the harmless end"
        if n_anchors
        else ""
    )
    return (
        f"the English map after an equipercentile map of each language's raw output onto its English texts' "
        f"(RTP-LX, {n_preserving:,} toxicity-preserving pairs of {n_pairs:,} in the fit part of "
        f"the head's held-out split{everyday}; each language's "
        f"own map shrunk to the joint one, k = {shrink:g})"
    )


def fit_scales(
    rows: Sequence[ScaleRow],
    raw: Mapping[tuple[str, str], float],
    head: MlHead,
    mode: str = "full",
    shrink: float = SHRINK,
    previous: ScaleSet | None = None,
    anchors: Pairs | None = None,
    form: str = EQUIPERCENTILE,
    unpaired: Anchors | None = None,
) -> ScaleSet:
    """The named scales of ``head`` (see the module docstring); English maps from training rows, the other
    languages' from the fit part of the held-out RTP-LX pairs (``scale_languages``) and ``anchors`` (more
    toxicity-preserving pairs: ``everyday.everyday_pairs``, the harmless end). With ``previous`` (scales of
    the same head), ``raters`` keeps its English map: a refit moves no English value. ``form``: the other
    languages' maps, ``other_maps``."""
    head_maps = ScaleMaps.from_json(head.scale[mode])
    langs_all = sorted(set(head.languages) - {"en"})
    pairs = lx_pairs(rows, raw, check=False)
    n_anchors = 0 if anchors is None else len(anchors)
    equating = fit_equated(pairs if anchors is None else Pairs.concat(pairs, anchors), shrink)
    web, cont = head_maps.english_map(WEB), head_maps.english_map(CONTINUATION)
    per_2020, fallback_2020 = other_maps(pairs, web, langs_all, form, shrink, anchors, unpaired)
    per_2022, fallback_2022 = other_maps(pairs, cont, langs_all, form, shrink, anchors, unpaired)
    p2020 = ScaleMaps(english=web, fallback=fallback_2020, per_lang=per_2020)
    p2022 = ScaleMaps(english=cont, fallback=fallback_2022, per_lang=per_2022)
    kept = previous.scales.get(RATERS) if previous is not None and previous.head == head.digest else None
    en_raters = [r for r in rows if r.target == RATERS and not r.heldout and r.lang == "en" and (r.text, "en") in raw]
    if kept is not None and mode in kept.maps:
        raters_en = kept.maps[mode].english
    else:
        raters_en = fit_isotonic(
            np.array([raw[(r.text, "en")] for r in en_raters]), np.array([r.value for r in en_raters])
        )
    raters = ScaleMaps(english=raters_en, fallback=head_maps.fallback, per_lang=dict(head_maps.per_lang))
    n_2020 = sum(1 for r in rows if r.target == ERA_2020 and not r.heldout)
    n_2022 = sum(1 for r in rows if r.target == ERA_2022 and not r.heldout)
    cross_info = {
        "form": form,
        "n_unpaired_anchors": 0 if unpaired is None else len(unpaired),
        "shrink": shrink,
        "n_pairs": len(pairs),
        "n_everyday_pairs": n_anchors,
        "n_preserving_pairs": equating.n_pairs,
        "preserving_pairs_by_language": dict(equating.n_by_lang),
        "languages_with_own_map": sorted(equating.own),
    }
    other = other_languages_text(equating.n_pairs - n_anchors, len(pairs), n_anchors, shrink)
    if form == ANCHORED:
        other = anchored_text(len(pairs), n_anchors, 0 if unpaired is None else len(unpaired))
    scales = {
        PERSPECTIVE_2020: Scale(
            PERSPECTIVE_2020,
            {mode: p2020},
            {
                "era": "2020",
                "target": "Perspective TOXICITY as RealToxicityPrompts released it (2020)",
                "english": f"the head's web map: out of fold on {n_2020:,} training-split web texts with 2020 scores "
                "(quark, fgdilp, shared rtp/); no model continuations carry a 2020 score",
                "other_languages": other,
                "cross_language": cross_info,
            },
        ),
        PERSPECTIVE_2022: Scale(
            PERSPECTIVE_2022,
            {mode: p2022},
            {
                "era": "2022",
                "target": "Perspective TOXICITY as IA024 read it (2022)",
                "english": f"the head's continuation map: out of fold on {n_2022} training-split GPT-2 / GPT-Neo "
                "continuations with 2022 scores (95% of the weight; 5% 2020 web text for the top bins); no "
                "web text carries a 2022 score",
                "other_languages": other,
                "cross_language": cross_info,
            },
        ),
        RATERS: Scale(
            RATERS,
            {mode: raters},
            {
                "era": None,
                "target": "share of human raters calling the text toxic (RTP-LX: of 3, rating >= 3)",
                "english": f"fitted on {len(en_raters)} training-split English RTP-LX rows",
                "other_languages": "the head's rater-share maps (out of fold; own map with >= 300 rows)",
            },
        ),
    }
    return ScaleSet(
        head=head.digest,
        default=DEFAULT_SCALES[CONTINUATION],
        scales=scales,
        info={
            "mode_fitted": mode,
            "fitted_on": "training split only (pack.heldout_mask)",
            "defaults": dict(DEFAULT_SCALES),
        },
    )


# ---- held-out measurement -----------------------------------------------------------------------------
def agreement(pred: np.ndarray, ref: np.ndarray, groups: np.ndarray) -> dict[str, Any]:
    """AUC (reference >= 0.5), MAE, mean and share >= 0.5 against a graded reference, with group CIs."""
    label = ref >= TOXIC_THRESHOLD
    w = group_weights(groups)
    out: dict[str, Any] = {
        "n": len(ref),
        "n_groups": len(set(groups.tolist())),
        "n_toxic": int(label.sum()),
        "reference_mean": _r(float(ref.mean())),
        "reference_share": _r(float(label.mean())),
        "mean": _r(float(pred.mean())),
        "share": _r(float((pred >= TOXIC_THRESHOLD).mean())),
        "mae": _r(float(np.abs(pred - ref).mean())),
        "mae_ci": percentile_ci(weighted_mean(np.abs(pred - ref), w)),
        "share_diff": _r(float((pred >= TOXIC_THRESHOLD).mean() - label.mean())),
        "share_diff_ci": percentile_ci(weighted_mean((pred >= TOXIC_THRESHOLD) - label.astype(float), w)),
    }
    if 0 < label.sum() < len(label):
        out["auc"] = _r(float(weighted_auc(label, pred, np.ones((1, len(pred))))[0]))
        out["auc_ci"] = percentile_ci(weighted_auc(label, pred, w))
    return out


def scale_values(
    name: str, scales: ScaleSet, head: MlHead, x: np.ndarray, langs: Sequence[str], mode: str, text: str = CONTINUATION
) -> np.ndarray:
    if name.startswith(HEAD_SCALE):
        return ScaleMaps.from_json(head.scale[mode]).apply(x, langs, name.partition(":")[2] or text)
    return scales.get(name).apply(x, langs, mode)


MEASURED = (PERSPECTIVE_2020, PERSPECTIVE_2022, RATERS, f"{HEAD_SCALE}:{CONTINUATION}", f"{HEAD_SCALE}:{WEB}")


def measure_scales(
    rows: Sequence[ScaleRow],
    raw: Mapping[tuple[str, str], float],
    head: MlHead,
    scales: ScaleSet,
    mode: str = "full",
    before: ScaleSet | None = None,
    anchors: Pairs | None = None,
    everyday: Sequence[EverydayRow] = (),
    form: str = EQUIPERCENTILE,
    unpaired: Anchors | None = None,
) -> dict[str, Any]:
    """Held-out error of every scale on every era's data, real-run EMT / EP / AT, and the languages (on
    ``before`` too, for the pairs' checks; ``anchors``: the extra pairs the maps were fitted with;
    ``everyday``: ud-sentences rows, whose check part's gaps to English are measured where ``raw`` has them)."""
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
        out["eras"][era] = {
            name: agreement(scale_values(name, scales, head, x, [r.lang for r in sel], mode), ref, groups)
            for name in MEASURED
        }
        gens = [i for i, r in enumerate(sel) if r.kind == "continuation"]
        if gens:
            examples = [
                Example(
                    text=r.text,
                    lang=r.lang,
                    target=r.value,
                    label=r.value >= TOXIC_THRESHOLD,
                    source=r.source,
                    group=r.prompt,
                    kind="generation",
                    domain="perspective",
                )
                for r in sel
            ]
            idx = np.array(gens)
            out["run"][era] = {
                name: run_metrics(
                    examples, idx, scale_values(name, scales, head, x, [r.lang for r in sel], mode), groups
                )
                for name in MEASURED
            }
    out["languages"] = measure_languages(held, raw, head, scales, mode)
    out["pairs"] = measure_pairs(rows, raw, scales, mode, before, anchors=anchors, form=form, unpaired=unpaired)
    out["everyday"] = measure_everyday(
        [r for r in everyday if r.check and (r.text, r.lang) in raw], raw, scales, mode, before
    )
    out["flat"] = measure_flat(scales, mode)
    return out


def measure_flat(scales: ScaleSet, mode: str) -> dict[str, dict[str, dict[str, float]]]:
    """Per Perspective scale and language, the map's widest flat step (``scale_anchored.flat_runs``): where
    one step covers a band of raw outputs, every text in it reads one value."""
    return {
        name: {
            "en": flat_runs(scales.get(name).maps[mode].english),
            **{lang: flat_runs(m) for lang, m in sorted(scales.get(name).maps[mode].per_lang.items())},
        }
        for name in PAIR_SCALES
        if name in scales.scales and mode in scales.get(name).maps
    }


def with_flat(scales: ScaleSet, mode: str = "full") -> ScaleSet:
    """``scales`` with every Perspective scale's flat steps (``measure_flat``) in its held-out block, no map
    changed: the card's reading of maps already fitted (``--flat-only``)."""
    flat = measure_flat(scales, mode)
    return ScaleSet(
        head=scales.head,
        default=scales.default,
        scales={
            n: Scale(n, s.maps, {**s.info, "heldout": {**s.info.get("heldout", {}), "flat": flat[n]}})
            if n in flat
            else s
            for n, s in scales.scales.items()
        },
        info=scales.info,
    )


PAIR_SCALES = (PERSPECTIVE_2020, PERSPECTIVE_2022)


OOF_FOLDS = 5


def measure_pairs(
    rows: Sequence[ScaleRow],
    raw: Mapping[tuple[str, str], float],
    scales: ScaleSet,
    mode: str,
    before: ScaleSet | None = None,
    shrink: float = SHRINK,
    anchors: Pairs | None = None,
    form: str = EQUIPERCENTILE,
    unpaired: Anchors | None = None,
) -> dict[str, Any]:
    """``scale_languages.language_checks`` on each Perspective scale: ``after`` on the check part's RTP-LX
    pairs (the shipped maps; no fit or choice read them), ``oof`` on every held-out pair, each Index group read
    by maps fitted without it (grouped 5-fold cross-fitting: more pairs, the same form; ``anchors`` join every
    fold's fit), ``before`` (the scales these replace) on the check part and ``before_every`` on every held-out
    pair (they never read any)."""
    check = lx_pairs(rows, raw, check=True)
    every = Pairs.concat(lx_pairs(rows, raw, check=False), check)
    out: dict[str, Any] = {}
    for name in PAIR_SCALES:
        block: dict[str, Any] = {}
        for label, found, pairs in (
            ("after", scales, check),
            ("before", before, check),
            ("before_every", before, every),
        ):
            if found is not None and name in found.scales and mode in found.get(name).maps:
                block[label] = _checks(pairs, found.get(name).maps[mode])
                block[f"{label}_summary"] = summarise(block[label])
        english = scales.get(name).maps[mode].english
        values = np.empty(len(every))
        fold = np.array([int(unit_hash(str(i), "lx-scale-oof") * OOF_FOLDS) for i in every.index])
        for k in range(OOF_FOLDS):
            test = fold == k
            if test.any():
                per_lang, fallback = other_maps(
                    every.subset(~test), english, sorted(set(every.lang.tolist())), form, shrink, anchors, unpaired
                )
                maps = ScaleMaps(english=english, fallback=fallback, per_lang=per_lang)
                values[test] = maps.apply(every.r_t[test], every.lang[test].tolist())
        english_values = ScaleMaps(english=english, fallback=english).apply(every.r_e, ["en"] * len(every))
        block["oof"] = language_checks(every, values, english_values)
        block["oof_summary"] = summarise(block["oof"])
        out[name] = block
    return out


def measure_everyday(
    rows: Sequence[EverydayRow],
    raw: Mapping[tuple[str, str], float],
    scales: ScaleSet,
    mode: str,
    before: ScaleSet | None = None,
) -> dict[str, Any]:
    """Per Perspective scale, ``everyday.everyday_gaps`` of the check part's ``rows`` (never fitted on) under
    these scales (``after``) and under ``before``."""
    if not rows:
        return {}
    x = np.array([raw[(r.text, r.lang)] for r in rows])
    langs = [r.lang for r in rows]
    out: dict[str, Any] = {}
    for name in PAIR_SCALES:
        block = {"after": everyday_gaps(rows, scales.get(name).apply(x, langs, mode))}
        if before is not None and name in before.scales and mode in before.get(name).maps:
            block["before"] = everyday_gaps(rows, before.get(name).apply(x, langs, mode))
        out[name] = block
    return out


def _checks(pairs: Pairs, maps: ScaleMaps) -> dict[str, dict[str, Any]]:
    english = maps.apply(pairs.r_e, ["en"] * len(pairs))
    return language_checks(pairs, maps.apply(pairs.r_t, pairs.lang.tolist()), english)


def measure_languages(
    held: Sequence[ScaleRow], raw: Mapping[tuple[str, str], float], head: MlHead, scales: ScaleSet, mode: str
) -> dict[str, Any]:
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
        out[lang] = {
            "n": len(sel),
            "n_groups": len(set(groups.tolist())),
            "mae": _r(float(np.abs(pred - ref).mean())),
            "mae_ci": percentile_ci(weighted_mean(np.abs(pred - ref), group_weights(groups))),
            "mean": _r(float(pred.mean())),
            "reference_mean": _r(float(ref.mean())),
            "mae_head_scale": _r(float(np.abs(before - ref).mean())),
            "auc_humans": _r(float(auc)),
            "n_humans": len(lab),
        }
    return out


def load_raw(folder: Path | str, mode: str = "full") -> dict[tuple[str, str], float]:
    """(text, lang) -> raw output of head mode ``mode``, from the parts ``scale_rows`` wrote."""
    import pyarrow.parquet as pq

    out: dict[tuple[str, str], float] = {}
    for part in sorted(Path(folder).glob(f"part-*-{mode}.parquet")):
        table = pq.read_table(part).to_pydict()
        out.update({(t, lang): float(v) for t, lang, v in zip(table["text"], table["lang"], table["raw"], strict=True)})
    return out


def fit_named_scales(
    shared: Path | str,
    raw_folder: Path | str,
    *,
    everyday: bool = False,
    form: str = EQUIPERCENTILE,
    other_genres: bool = False,
) -> tuple[ScaleSet, dict[str, Any]]:
    """The named scales fitted on the committed head's raw outputs in ``raw_folder`` (each head mode found
    there, the full head first) and their held-out measurements per mode. ``everyday`` anchors the harmless
    end with the fit part of ud-sentences' Parallel UD ids (their raw outputs in ``raw_folder``). ``form``
    picks the other languages' maps (quantile equating, or smooth maps anchored at both ends,
    ``scale_anchored``); ``other_genres`` adds, with the anchored form, the fit part's other everyday
    sentences as one more stratum."""
    head = MlHead.load(default_head_path())
    # the full head first: its measurements are the scales' card
    raws = {mode: load_raw(raw_folder, mode) for mode in ("full", "ngram") if mode in head.scale}
    raws = {mode: raw for mode, raw in raws.items() if raw}
    if not raws:
        raise PolytoxError(
            f"{raw_folder}: no raw outputs of the head (part-*-full.parquet or part-*-ngram.parquet); "
            "write them with 'polytox train-scorer-step scale-rows'"
        )
    previous = load_scales(default_head_path(), head.digest)
    rows = scale_rows(shared)
    sentences = load_everyday(Path(shared) / "ud-sentences") if everyday else []
    fitted: dict[str, ScaleSet] = {}
    measured: dict[str, Any] = {}
    for mode, raw in raws.items():
        anchors = everyday_pairs(sentences, raw) if sentences else None
        if anchors is not None and not len(anchors):
            raise ValueError(f"--everyday: no raw outputs of the fit part's Parallel UD sentences ({mode})")
        unpaired = Anchors.from_unpaired(sentences, raw) if other_genres else None
        fitted[mode] = fit_scales(
            rows, raw, head, mode, previous=previous, anchors=anchors, form=form, unpaired=unpaired
        )
        measured[mode] = measure_scales(
            rows, raw, head, fitted[mode], mode, previous, anchors, sentences, form, unpaired
        )
    first = next(iter(fitted.values()))
    main_mode = next(iter(fitted))
    scales = ScaleSet(
        head=first.head,
        default=first.default,
        scales={
            n: Scale(
                n,
                {m: fitted[m].scales[n].maps[m] for m in fitted},
                {
                    **s.info,
                    "heldout": carried_eras(n, _card_block(n, measured[main_mode]), previous, fitted[main_mode]),
                },
            )
            for n, s in first.scales.items()
        },
        info={**first.info, "mode_fitted": list(fitted), "measured_mode": main_mode},
    )
    return scales, measured


def carried_eras(name: str, block: dict[str, Any], previous: ScaleSet | None, fitted: ScaleSet) -> dict[str, Any]:
    """``block`` with the English eras' held-out measurements of ``previous`` where the raw outputs given held
    no English era rows (a refit of the other languages alone): valid because every English map is the
    previous one, which is checked."""
    if previous is None or name not in previous.scales:
        return block
    old = previous.get(name)
    eras = {k: v for k, v in old.info.get("heldout", {}).items() if k not in block and k not in ("languages", "pairs")}
    if not eras:
        return block
    for mode, maps in fitted.get(name).maps.items():
        before = old.maps.get(mode)
        if before is None or before.english != maps.english or before.english_continuation != maps.english_continuation:
            raise ValueError(f"{name}: English maps changed, so its era measurements cannot be carried over")
    return {**eras, **block}


def _card_block(name: str, measured: Mapping[str, Any]) -> dict[str, Any]:
    """What ``polytox scorers`` shows of a scale: its held-out error on every era's data."""
    out: dict[str, Any] = {}
    for era, by_scale in measured["eras"].items():
        m = by_scale[name]
        out[era] = {k: m.get(k) for k in ("n", "auc", "mae", "share_diff", "mean", "reference_mean")}
    for era, by_scale in measured["run"].items():
        pooled = by_scale[name][-1]
        out[era]["run"] = {
            k: pooled.get(k)
            for k in ("emt_diff", "ep_diff", "at_diff", "emt_diff_ci", "ep_diff_ci", "at_diff_ci", "n_prompts")
        }
    if name == PERSPECTIVE_2020:  # the languages are measured on the scale their anchors belong to
        out["languages"] = {
            lang: {k: m.get(k) for k in ("n_groups", "mae", "mae_ci", "mae_head_scale", "auc_humans")}
            for lang, m in measured["languages"].items()
        }
    if name in measured.get("pairs", {}):  # the same-judgement checks of the other languages (held-out pairs)
        out["pairs"] = measured["pairs"][name]
    if name in measured.get("everyday", {}):  # everyday text against English's (ud-sentences' check part)
        out["everyday"] = measured["everyday"][name]
    if name in measured.get("flat", {}):  # each language map's widest flat step
        out["flat"] = measured["flat"][name]
    return out


def measure_flat_steps(out: Path | str) -> None:
    """Refit nothing: measure the committed scales' flat steps (each language map's widest run of raw values
    read as one value) into their card data at ``out``."""
    head = MlHead.load(default_head_path())
    previous = load_scales(default_head_path(), head.digest)
    if previous is None:
        raise ValueError(f"no scales fitted for head {head.digest} to measure")
    write_scales(with_flat(previous, str(previous.info.get("measured_mode", "full"))), out)
