"""Which map puts non-English raw scores on the English Perspective scale over the whole range.

**Question.** The shipped non-English maps were fitted to the Perspective score of each RTP-LX translation's
English source. 88% of those anchors score 0.5 or more, so the maps learned that non-English text is toxic:
a harmless German sentence could not read below about 0.3. Which map makes texts that readers of each
language judge equally toxic read the same score, in the units of the English scale?

**Data.** RTP-LX pairs: a translation and its English text with the same ``Index``, each with the mean of
its own three Toxicity ratings (1-5). Training split only (``pack.heldout_mask``, the head's own split),
grouped 5-fold by Index; the held-out split is read only by ``--heldout`` after the choice is made.

- harmless pairs: both sides' mean rating below 1.5;
- toxic pairs: both sides' mean rating 3 or more;
- toxicity-preserving pairs: the two means at most ``PRESERVING`` apart.

**Candidates** (each maps a language's raw head output ``r`` to a value; ``E`` is the scale's English map):

- ``shipped``: the maps in ``polytox-ml-scales.json`` before this study (the joint map onto the source's
  2020 score);
- ``english``: ``E(r)``, the English map as it is;
- ``equate-joint``: ``E(q(r))``, ``q`` the equipercentile map from the pooled non-English raw scores of
  toxicity-preserving pairs onto their English texts' raw scores (same texts, same human judgement, so
  equal quantiles mean equal toxicity; quantile matching does not regress to the mean, so a sample that is
  mostly toxic does not lift the harmless end);
- ``equate-lang``: ``E(w q_L(r) + (1 - w) q(r))``, a language's own equipercentile map shrunk to the joint
  one, ``w = n_L / (n_L + k)`` with ``k`` in ``SHRINK``;
- ``iso-level``: isotonic regression, per language shrunk to joint as above, of a target equal to the
  English text's value ``E(r_en)`` moved by the human-level difference of the pair (an isotonic map of
  English value on English mean rating gives the units), onto ``r``.

**Revision (written after the first run on the n-gram head, before any full-head number was read).** Fitted
on the training split, every candidate looked excellent out of fold (``equate-lang``: harmless difference
0.004 mean, toxic 0.036) and failed on the held-out split (harmless +0.22 mean): the raw outputs of
training rows are the head's *in-sample* outputs (it was fitted on those very RTP-LX texts), so a map
fitted on them does not transfer to text the head has not seen. The study therefore runs on the head's
held-out split only, whose raw outputs are out of sample, as every text a user scores is: its Index groups
are cut once by hash into a *fit* part (70%) and a *check* part (30%). The choice below is made out of fold
within the fit part (grouped 5-fold, the same rule); the chosen candidate, fitted on the whole fit part, is
then measured once on the check part, which no choice reads. The training-split numbers stay in the
results file for information (``--split train``).

**Rule (written before any number was read).** For each candidate and language, out of fold: ``dh`` the
harmless pairs' mean minus their English texts' mean, ``dt`` the same on toxic pairs, ``dm`` the MAE to
the English source's 2020 Perspective score on preserving anchored pairs minus the English texts' own
MAE on the same pairs. A language's cost is ``max(|dh| / 0.03, |dt| / 0.05, max(dm, 0) / 0.05)`` (each
target's tolerance as issue 44 states it); the candidate with the lowest mean cost over the 16 languages
wins, on ``perspective-2020`` in the full head mode. Ties within 0.05 go to the simpler candidate (the
order of ``CANDIDATES``).

    python -m research.scorer.lx_scale_trial --shared ../shared/data --raw /tmp/lx-raw [--heldout]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

CV_FOLDS = 5
PRESERVING = 0.5  # the two sides' mean ratings at most this far apart
HARMLESS_BELOW, TOXIC_FROM = 1.5, 3.0
SHRINK = (0.0, 50.0, 200.0, float("inf"))  # k of w = n / (n + k); 0 = own map only, inf = joint only
CANDIDATES = ("shipped", "english", "equate-joint", "equate-lang", "iso-level")
TOLERANCE = {"dh": 0.03, "dt": 0.05, "dm": 0.05}

Map = Callable[[np.ndarray, str], np.ndarray]  # (raw scores of one language, lang) -> values


def load_pairs(shared: Path | str, raw_dir: Path | str, mode: str) -> dict[str, np.ndarray]:
    """One entry per (Index, non-English language) pair present on both sides, as columns."""
    from polytox.training.scorer.data import load_rtplx
    from polytox.training.scorer.scale_fit import load_raw
    from polytox.training.scorer.scale_rows import ERA_2020, RATERS, scale_rows

    raw = load_raw(raw_dir, mode)
    rows = load_rtplx(Path(shared) / "rtp-lx")
    split = scale_rows(shared)
    heldout = {(r.text, r.lang): r.heldout for r in split if r.source == "rtp-lx" and r.target == RATERS}
    anchor = {r.prompt: r.value for r in split if r.source == "rtp-lx" and r.target == f"anchor:{ERA_2020}"
              and r.lang == "en"}
    english = {r.group: r for r in rows if r.lang == "en"}
    cols: dict[str, list[Any]] = {k: [] for k in ("index", "lang", "r_t", "h_t", "r_e", "h_e", "heldout", "persp",
                                                  "heldout_e")}
    for r in rows:
        e = english.get(r.group)
        if r.lang == "en" or e is None or (r.text, r.lang) not in raw or (e.text, "en") not in raw:
            continue
        cols["index"].append(r.group)
        cols["lang"].append(r.lang)
        cols["r_t"].append(raw[(r.text, r.lang)])
        cols["h_t"].append(r.rating)
        cols["r_e"].append(raw[(e.text, "en")])
        cols["h_e"].append(e.rating)
        cols["heldout"].append(heldout[(r.text, r.lang)])
        cols["heldout_e"].append(heldout[(e.text, "en")])
        cols["persp"].append(anchor.get(r.group, np.nan))
    out = {k: np.asarray(v) for k, v in cols.items()}
    mixed = out["heldout"] != out["heldout_e"]
    if mixed.any():  # the split keeps an Index's languages together; a pair split across it is left out
        out = {k: v[~mixed] for k, v in out.items()}
    return out


def subset(pairs: dict[str, np.ndarray], mask: np.ndarray) -> dict[str, np.ndarray]:
    return {k: v[mask] for k, v in pairs.items()}


# ---- the equipercentile map: the shipped one (training/scorer/scale_languages.py), the same quantiles -------
def equate(source: np.ndarray, target: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """``F_target^-1(F_source(x))``, monotone on [0, 1] (``scale_languages.equipercentile``)."""
    from polytox.training.scorer.scale_languages import equipercentile

    return equipercentile(source, target)


def preserving(pairs: dict[str, np.ndarray]) -> np.ndarray:
    return np.abs(pairs["h_t"] - pairs["h_e"]) <= PRESERVING


def fit_equate(train: dict[str, np.ndarray], english: Callable[[np.ndarray], np.ndarray], k: float) -> Map:
    keep = preserving(train)
    joint = equate(train["r_t"][keep], train["r_e"][keep])
    own: dict[str, tuple[Callable[[np.ndarray], np.ndarray], float]] = {}
    if k != float("inf"):
        for lang in sorted(set(train["lang"].tolist())):
            sel = keep & (train["lang"] == lang)
            n = int(sel.sum())
            if n >= 20:
                own[lang] = (equate(train["r_t"][sel], train["r_e"][sel]), n / (n + k) if k > 0 else 1.0)

    def apply(r: np.ndarray, lang: str) -> np.ndarray:
        q = joint(r)
        if lang in own:
            fn, w = own[lang]
            q = w * fn(r) + (1.0 - w) * q
        return english(q)

    return apply


def fit_iso_level(train: dict[str, np.ndarray], english: Callable[[np.ndarray], np.ndarray], k: float,
                  english_rows: tuple[np.ndarray, np.ndarray]) -> Map:
    from polytox.scoring.calibration import fit_isotonic

    level = fit_isotonic((english_rows[1] - 1.0) / 4.0, english(english_rows[0]))
    target = np.clip(english(train["r_e"]) + level((train["h_t"] - 1) / 4) - level((train["h_e"] - 1) / 4), 0, 1)
    joint = fit_isotonic(train["r_t"], target)
    own: dict[str, tuple[Any, float]] = {}
    if k != float("inf"):
        for lang in sorted(set(train["lang"].tolist())):
            sel = train["lang"] == lang
            n = int(sel.sum())
            own[lang] = (fit_isotonic(train["r_t"][sel], target[sel]), n / (n + k) if k > 0 else 1.0)

    def apply(r: np.ndarray, lang: str) -> np.ndarray:
        v = joint(r)
        if lang in own:
            fn, w = own[lang]
            v = w * fn(r) + (1.0 - w) * v
        return v

    return apply


# ---- the checks ------------------------------------------------------------------------------------------
def kappa(levels: np.ndarray, values: np.ndarray) -> float:
    """RTP-LX's agreement measure, as the shipped checks compute it (``scale_languages.kappa``)."""
    from polytox.training.scorer.scale_languages import kappa as shipped_kappa

    return shipped_kappa(levels, values)


def checks(pairs: dict[str, np.ndarray], values: np.ndarray, english: Callable[[np.ndarray], np.ndarray],
           english_2020: Callable[[np.ndarray], np.ndarray] | None = None) -> dict[str, dict[str, Any]]:
    """Per language: (a) harmless and (b) toxic pairs' mean and share >= 0.5 minus English's; (c) MAE to the
    English source's 2020 Perspective score on preserving anchored pairs, minus English's own; (d) human AUC;
    (e) kappa. English values are ``english(r_e)``."""
    from sklearn.metrics import roc_auc_score

    en = english(pairs["r_e"])
    out: dict[str, dict[str, Any]] = {}
    for lang in sorted(set(pairs["lang"].tolist())):
        sel = pairs["lang"] == lang
        v, e, ht, he = values[sel], en[sel], pairs["h_t"][sel], pairs["h_e"][sel]
        harmless = (ht < HARMLESS_BELOW) & (he < HARMLESS_BELOW)
        toxic = (ht >= TOXIC_FROM) & (he >= TOXIC_FROM)
        anchored = preserving(subset(pairs, sel)) & np.isfinite(pairs["persp"][sel])
        persp = pairs["persp"][sel]
        label = ht >= TOXIC_FROM
        row: dict[str, Any] = {"n": int(sel.sum()), "n_harmless": int(harmless.sum()), "n_toxic": int(toxic.sum()),
                               "n_anchored": int(anchored.sum())}
        if harmless.any():
            row.update(harmless_mean=float(v[harmless].mean()), harmless_en=float(e[harmless].mean()),
                       dh=float(v[harmless].mean() - e[harmless].mean()),
                       dh_share=float((v[harmless] >= 0.5).mean() - (e[harmless] >= 0.5).mean()))
        if toxic.any():
            row.update(toxic_mean=float(v[toxic].mean()), toxic_en=float(e[toxic].mean()),
                       dt=float(v[toxic].mean() - e[toxic].mean()),
                       dt_share=float((v[toxic] >= 0.5).mean() - (e[toxic] >= 0.5).mean()))
        if anchored.any():
            e20 = (english_2020 or english)(pairs["r_e"][sel])
            row.update(mae=float(np.abs(v[anchored] - persp[anchored]).mean()),
                       mae_en=float(np.abs(e20[anchored] - persp[anchored]).mean()),
                       mae_const=float(np.abs(np.median(persp[anchored]) - persp[anchored]).mean()))
            row["dm"] = row["mae"] - row["mae_en"]
        if 0 < label.sum() < len(label):
            row["auc"] = float(roc_auc_score(label, pairs["r_t"][sel]))
        row["kappa"] = kappa(ht, v)
        row["kappa_en"] = kappa(he, e)
        out[lang] = row
    return out


def cost(by_lang: dict[str, dict[str, Any]]) -> float:
    """The rule's cost: mean over languages of the worst tolerance-normalised miss."""
    per = []
    for row in by_lang.values():
        parts = [abs(row.get("dh", 0.0)) / TOLERANCE["dh"], abs(row.get("dt", 0.0)) / TOLERANCE["dt"],
                 max(row.get("dm", 0.0), 0.0) / TOLERANCE["dm"]]
        per.append(max(parts))
    return float(np.mean(per))


def fold_of(index: np.ndarray) -> np.ndarray:
    from polytox.training.scorer.pack import unit_hash

    return np.array([int(unit_hash(str(i), "lx-scale-folds") * CV_FOLDS) for i in index])


def candidate(name: str, k: float, train: dict[str, np.ndarray], english: Callable[[np.ndarray], np.ndarray],
              shipped: Any, english_rows: tuple[np.ndarray, np.ndarray]) -> Map:
    if name == "shipped":
        return lambda r, lang: shipped.apply(r, [lang] * len(r), "continuation")
    if name == "english":
        return lambda r, lang: english(r)
    if name == "equate-joint":
        return fit_equate(train, english, float("inf"))
    if name == "equate-lang":
        return fit_equate(train, english, k)
    if name == "iso-level":
        return fit_iso_level(train, english, k, english_rows)
    raise ValueError(name)


def apply_map(fn: Map, pairs: dict[str, np.ndarray]) -> np.ndarray:
    out = np.empty(len(pairs["r_t"]))
    for lang in set(pairs["lang"].tolist()):
        sel = pairs["lang"] == lang
        out[sel] = fn(pairs["r_t"][sel], lang)
    return out


def variants() -> list[tuple[str, float]]:
    out: list[tuple[str, float]] = []
    for name in CANDIDATES:
        if name in ("equate-lang", "iso-level"):
            out += [(name, k) for k in SHRINK if not (name == "equate-lang" and k == float("inf"))]
        else:
            out.append((name, float("inf")))
    return out


def english_rows(shared: Path | str, raw_dir: Path | str, mode: str, heldout: bool = False,
                 fit_part_only: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(raw, mean rating) of the English RTP-LX rows of one split (the iso-level candidate's units)."""
    from polytox.training.scorer.data import load_rtplx
    from polytox.training.scorer.scale_fit import load_raw
    from polytox.training.scorer.scale_rows import RATERS, scale_rows

    raw = load_raw(raw_dir, mode)
    split = {(r.text, r.lang): r.heldout for r in scale_rows(shared) if r.source == "rtp-lx" and r.target == RATERS}
    rows = [r for r in load_rtplx(Path(shared) / "rtp-lx", langs=("en",)) if split[(r.text, "en")] == heldout]
    if fit_part_only:
        rows = [r for r, c in zip(rows, check_part(np.array([r.group for r in rows])), strict=True) if not c]
    return np.array([raw[(r.text, "en")] for r in rows]), np.array([r.rating for r in rows])


def check_part(index: np.ndarray) -> np.ndarray:
    from polytox.training.scorer.scale_languages import in_check_part  # the same cut the shipped fit uses

    return np.array([in_check_part(str(i)) for i in index])


def run(shared: str, raw_dir: str, mode: str, scale: str, heldout: bool, split: str = "heldout") -> dict[str, Any]:
    from polytox.scoring.ml.head import MlHead, default_head_path
    from polytox.scoring.ml.scales import load_scales

    head = MlHead.load(default_head_path())
    found = load_scales(default_head_path(), head.digest)
    assert found is not None
    shipped = found.get(scale).maps[mode]
    english = shipped.english
    english_2020 = found.get("perspective-2020").maps[mode].english
    pairs = load_pairs(shared, raw_dir, mode)
    if split == "train":
        train = subset(pairs, ~pairs["heldout"])
        en_rows = english_rows(shared, raw_dir, mode)
    else:  # the held-out split: fit part for the choice, check part for the one measurement
        check = check_part(pairs["index"])
        train = subset(pairs, pairs["heldout"] & ~check)
        pairs = {**pairs, "heldout": pairs["heldout"] & check}
        en_rows = english_rows(shared, raw_dir, mode, heldout=True, fit_part_only=True)
    result: dict[str, Any] = {"mode": mode, "scale": scale, "split": split, "n_train_pairs": len(train["r_t"]),
                              "n_heldout_pairs": int((pairs["heldout"]).sum()), "cv": {}, "heldout": {}}
    fold = fold_of(train["index"])
    for name, k in variants():
        label = name if k == float("inf") or name not in ("equate-lang", "iso-level") else f"{name}:k={k:g}"
        values = np.empty(len(train["r_t"]))
        for f in range(CV_FOLDS):
            test = fold == f
            fn = candidate(name, k, subset(train, ~test), english, shipped, en_rows)
            values[test] = apply_map(fn, subset(train, test))
        by_lang = checks(train, values, english, english_2020)
        result["cv"][label] = {"cost": cost(by_lang), "by_lang": by_lang}
        if heldout:
            held = subset(pairs, pairs["heldout"])
            fn = candidate(name, k, train, english, shipped, en_rows)
            by_lang = checks(held, apply_map(fn, held), english, english_2020)
            result["heldout"][label] = {"cost": cost(by_lang), "by_lang": by_lang}
    return result


def summary(result: dict[str, Any], part: str) -> str:
    lines = [f"{part} ({result['mode']}, {result['scale']}): candidate | cost | mean |dh| | max |dh| | mean |dt| "
             "| max |dt| | mean dm | mean dh_share | kappa"]
    for label, block in result[part].items():
        rows = block["by_lang"].values()
        dh = [abs(r.get("dh", 0)) for r in rows]
        dt = [abs(r.get("dt", 0)) for r in rows]
        dm = [r.get("dm", 0) for r in rows]
        ds = [r.get("dh_share", 0) for r in rows]
        kp = [r["kappa"] for r in rows]
        lines.append(f"{label} | {block['cost']:.2f} | {np.mean(dh):.3f} | {np.max(dh):.3f} | {np.mean(dt):.3f} | "
                     f"{np.max(dt):.3f} | {np.mean(dm):+.3f} | {np.mean(ds):+.3f} | {np.mean(kp):.3f}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shared", required=True)
    p.add_argument("--raw", required=True, help="the folder research.scorer.lx_raw wrote")
    p.add_argument("--mode", default="full")
    p.add_argument("--scale", default="perspective-2020")
    p.add_argument("--heldout", action="store_true", help="also measure every candidate on the check part")
    p.add_argument("--split", choices=("heldout", "train"), default="heldout",
                   help="fit on the held-out split's fit part (default) or, for information, on the training split")
    p.add_argument("--out", help="write the full results (JSON) here")
    args = p.parse_args(argv)
    result = run(args.shared, args.raw, args.mode, args.scale, args.heldout, args.split)
    print(summary(result, "cv"))
    if args.heldout:
        print(summary(result, "heldout"))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
