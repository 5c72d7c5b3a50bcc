"""The measurement file of a trained head: every scorer of the card measured on the same held-out texts.

``measurements`` scores every example with the finished head exactly as ``polytox-ml`` does at run time
(the stored float16 weights, the combiner, the scale maps; model generations with ``text=continuation``,
every other text with ``text=web``), takes out-of-fold values for RTP-LX rows of the
training split, adds the untrained baselines, attaches 95% group bootstrap CIs (the joined groups of the
held-out split are the sampling unit), and returns the JSON that ``polytox scorers`` prints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...scoring.ml.calib import ScaleMaps
from ...scoring.ml.head import MlHead
from ...scoring.ml.ngrams import tfidf
from ...store import package_versions, platform_info
from .data import Example
from .measure import TARGETS, card_summary, measure_scorer, reliability, slice_masks
from .pack import join_components
from .train import Features, TrainConfig, TrainResult, final_probe_inputs, oof_calibrated, oof_one_map, text_kind

# /2: per-language AUCs read out-of-fold scores under one map per language (``train.oof_one_map``)
MEASUREMENT_FORMAT = "polytox-scorer-card/2"


def head_scores(head: MlHead, feats: Features, examples: Sequence[Example], mode: str) -> np.ndarray:
    """The head's calibrated values for every row, as the scorer computes them with the ``text`` option that
    matches the row: model generations through the continuation map, everything else through the web map."""
    langs = [e.lang for e in examples]
    s_ngram = head.ngram_output(tfidf(feats.counts, head.idf), langs)
    s_emb = head.emb_output(feats.emb, langs) if mode == "full" and feats.emb is not None else None
    s_probe = final_probe_inputs(feats, examples) if mode == "full" else None
    return head.probability(s_ngram, s_emb, mode, langs, [text_kind(e) for e in examples], s_probe)


def measurements(
    config: TrainConfig,
    result: TrainResult,
    feats: Features,
    baselines: Mapping[str, np.ndarray] | None = None,
    notes: Sequence[str] = (),
) -> dict[str, Any]:
    examples: list[Example] = result.examples
    lx_train = np.array([e.source == "rtp-lx" for e in examples]) & ~result.heldout
    folds = result.folds
    scorers: dict[str, Any] = {}
    diagrams: dict[str, Any] = {}
    modes = [m for m in ("full", "ngram") if m in result.head.combine]
    target = np.array([e.target for e in examples])
    masks = slice_masks(examples)
    groups = np.array(join_components(examples))  # the held-out split's sampling unit, for the CIs
    for mode in modes:
        pred = head_scores(result.head, feats, examples, mode)
        oof = oof_calibrated(config, examples, result.oof[mode], folds)
        lx_pred = np.where(lx_train, oof, pred)
        # the AUCs read the out-of-fold scores under the final head's own maps (one per language)
        maps = ScaleMaps.from_json(result.head.scale[mode])
        lx_rank = np.where(lx_train, oof_one_map(maps, examples, result.oof[mode], np.flatnonzero(lx_train)), pred)
        name = "polytox-ml" if mode == "full" else "polytox-ml (ngram)"
        scorers[name] = measure_scorer(examples, result.heldout, pred, lx_pred, groups, lx_rank)
        diagrams[name] = {
            s: reliability(pred[masks[s] & result.heldout], target[masks[s] & result.heldout])
            for s in ("web (all)", "model continuations")
        }
    if "polytox-ml" in scorers:
        scorers = {"default": {**scorers["polytox-ml"], "routes": "polytox-ml for every language"}, **scorers}
        diagrams["default"] = diagrams["polytox-ml"]
    for name, values in (baselines or {}).items():
        scorers[name] = measure_scorer(examples, result.heldout, np.asarray(values, dtype=float), groups=groups)
    return {
        "format": MEASUREMENT_FORMAT,
        "head_digest": result.head.digest,
        "head_version": result.head.meta.get("version"),
        "n_train": result.head.meta.get("n_train"),
        "n_heldout": result.head.meta.get("n_heldout"),
        "targets": TARGETS,
        "notes": list(notes),
        # a retrain gives this head byte for byte only from the same caches, package versions and CPU kind
        "environment": {"versions": package_versions(), "platform": platform_info()},
        "card": {name: card_summary(m) for name, m in scorers.items()},
        "scorers": scorers,
        "reliability": diagrams,
    }
