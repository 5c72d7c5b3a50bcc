"""What an attention probe would buy ENGLISH texts, measured on the TRAINING split only.

The head's attention probe (``attention.py``) reads only non-English texts: it was fitted on RTP-LX and
the pack's non-English human rows, and English texts keep the two-input combiner. This trial fits a
second probe for English on the training split's English rows and adds its score as a third input of the
English combiner, in the head's own pipeline (``train.cross_validate``: its folds, ridges and maps), all
out of fold. It reads the card's English columns (AUC, MAE, share >= 0.5, ECE against Perspective, and
the training split's real run) with and without the probe.

Fit rows (one variant each):

- ``perspective``: the English Perspective rows (2020 web text at weight 1, 2022 model generations at
  weight 3, ``train.task_weight``), the two scales the English maps target;
- ``all English``: every English training row at the English ridges' task weights;
- the head's probe (``perspective``, w 1000) fitted up to 200 L-BFGS iterations instead of 60, closer to
  its optimum.

The English combiner also learns from RTP-LX rows in every language (``train.combiner_rows``), so those
rows are scored by the English probes too, out of fold, from the token states ``train-scorer`` keeps for
the non-English probe. The held-out split is never read.

    python -m research.scorer.attention_en_trial --out research/scorer/results/trainscorer-attention-en.json
    python -m research.scorer.attention_en_trial --markdown research/scorer/results/trainscorer-attention-en.json
    python -m research.scorer.attention_en_trial --out FILE --only NAME [--only NAME]   # some variants
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from polytox.scoring.ml.attention import PROBE_ITERATIONS
from polytox.scoring.ml.card import POOLED_RUN
from polytox.scoring.ml.head import apply_combiner
from polytox.training.scorer.attention_fit import (
    attention_embedder,
    fit_row_groups,
    fold_probes,
    fold_scores,
    group_states,
)
from polytox.training.scorer.measure import card_summary, measure_scorer
from polytox.training.scorer.pack import heldout_mask
from polytox.training.scorer.pool import training_pool
from polytox.training.scorer.train import (
    TrainConfig,
    build_features,
    combiner_rows,
    cross_validate,
    fit_combiner,
    oof_calibrated,
    other_view,
    pooled_target,
    select,
    task_of,
    task_weight,
)
from research.scorer.attention_trial import trial_cli

FIT_ROWS = {"perspective": ("persp-2020", "persp-2022"), "all English": None}
PENALTIES = ((1_000.0, 3_000.0), (30_000.0, 3_000.0))


def variant_name(rows_name: str, penalties: tuple[float, float], max_iter: int) -> str:
    more = "" if max_iter == PROBE_ITERATIONS else f", up to {max_iter} iterations"
    return f"probe on {rows_name} rows, penalty w {penalties[0]:g}, v {penalties[1]:g}{more}"


# (fit rows, penalties, L-BFGS iterations); the last: the head's probe fitted closer to its optimum
VARIANTS = {variant_name(*v): v for v in (("perspective", PENALTIES[0], PROBE_ITERATIONS),
                                          ("perspective", PENALTIES[1], PROBE_ITERATIONS),
                                          ("all English", PENALTIES[0], PROBE_ITERATIONS),
                                          ("perspective", PENALTIES[0], 200))}
COLUMNS = ("auc_prompts", "auc_web_continuations", "auc_model_continuations", "mae_web", "mae_model_continuations",
           "share_model_continuations", "ece_web", "ece_model_continuations")


def english_card(config: TrainConfig, examples: Sequence[Any], heldout: np.ndarray, combined: np.ndarray,
                 folds: Sequence[np.ndarray]) -> dict[str, Any]:
    """The card's English columns and the real run's differences, from out-of-fold combined scores."""
    measured = measure_scorer(examples, ~heldout, oof_calibrated(config, examples, combined, folds))
    summary = card_summary(measured)
    pooled: dict[str, Any] = next((r for r in measured["run"] if r["model"] == POOLED_RUN), {})
    return {**{k: summary.get(k) for k in COLUMNS},
            "run": {k: pooled[k] for k in pooled if k.endswith("_diff") or k == "n_prompts"}}


def run(config: TrainConfig, only: Sequence[str] | None = None) -> dict[str, Any]:
    """The head without an English probe, then each variant (``only``: these names) out of fold."""
    t0 = time.time()
    examples = select(training_pool(config.shared), config)
    heldout = np.array(heldout_mask(examples), dtype=bool)
    train_rows = np.flatnonzero(~heldout)
    feats = build_features(config, examples)
    combined, raw, folds = cross_validate(config, examples, feats, train_rows)  # English: no probe anywhere
    print(f"cross-validation ({time.time() - t0:.0f} s)", file=sys.stderr)
    english = np.array([e.lang == "en" for e in examples])
    tasks = [task_of(e) for e in examples]
    weights = np.array([task_weight(t, config) for t in tasks])
    en_rows = train_rows[english[train_rows]]
    assert config.backbone is not None
    embedder, folder = attention_embedder(config.backbone, config.layers, config.max_tokens, config.batch_size,
                                          config.embedding_cache)
    en_rows, _, en_states, en_offsets = group_states(embedder, examples, [(en_rows, 1.0)], folder)
    lx_group = fit_row_groups(examples, train_rows, None)  # the non-English probe's RTP-LX file (cached)
    lx_all, _, lx_states, lx_offsets = group_states(embedder, examples, lx_group, folder)
    embedder.close()
    print(f"{len(en_rows)} English rows, {len(en_states)} tokens; {len(lx_all)} RTP-LX rows ({time.time() - t0:.0f} s)",
          file=sys.stderr)
    en_pos = np.full(len(examples), -1)
    en_pos[en_rows] = np.arange(len(en_rows))
    lx_pos = np.full(len(examples), -1)
    lx_pos[lx_all] = np.arange(len(lx_all))
    ngram, emb = other_view(raw, english, "ngram"), other_view(raw, english, "emb")
    results: dict[str, Any] = {"head": english_card(config, examples, heldout, combined["full"], folds)}
    for name, (rows_name, penalties, max_iter) in VARIANTS.items():
        if only and name not in only:
            continue
        started = time.time()
        wanted = FIT_ROWS[rows_name]
        fit_rows = en_rows if wanted is None else np.array([i for i in en_rows if tasks[i] in wanted], dtype=np.int64)
        probes = fold_probes(en_states, en_offsets, en_pos, fit_rows, folds,
                             lambda r: pooled_target(examples, r, config.index_mean_weight), penalties,
                             weight=weights[en_rows], final=False, max_iter=max_iter)
        probe = fold_scores(probes, folds, en_rows, en_pos, en_states, en_offsets, len(examples))
        lx_only = lx_all[~english[lx_all]]
        lx_score = fold_scores(probes, folds, lx_only, lx_pos, lx_states, lx_offsets, len(examples))
        probe[lx_only] = lx_score[lx_only]
        with_probe = combined["full"].copy()
        for fold in folds:  # the English combiner, refitted with the probe beside the two ridges, as train does
            sel, fit_labels, fit_weight = combiner_rows(config, examples, np.setdiff1d(train_rows, fold))
            combiner = fit_combiner(ngram[sel], emb[sel], fit_labels, fit_weight, probe[sel])
            test = fold[english[fold]]
            with_probe[test] = apply_combiner(combiner, ngram[test], emb[test], probe[test])
        results[name] = english_card(config, examples, heldout, with_probe, folds) | {
            "fit_rows": len(fit_rows), "seconds": round(time.time() - started, 1)}
        print(name, results[name], file=sys.stderr, flush=True)
    return {"config": config.to_dict(), "n_english_rows": len(en_rows), "n_english_tokens": len(en_states),
            "note": "out-of-fold on the training split (the head's folds); the held-out split is not read",
            "variants": results, "seconds": round(time.time() - t0, 1)}


def markdown(data: dict[str, Any]) -> str:
    head = ("| English combiner (training split, out of fold) | AUC web prompts | AUC web cont | AUC model cont | "
            "MAE web | MAE model cont | >=0.5 model cont | ECE web | ECE model cont | EMT / EP / AT diff |")
    lines = [head, "| --- |" + " ---: |" * 9]
    for name, m in data["variants"].items():
        cells = [f"{m[k]:.3f}" if k != "share_model_continuations" else f"{100 * m[k]:.1f}%" for k in COLUMNS]
        run = m["run"]
        diffs = " / ".join(f"{run[k + '_diff']:+.3f}" for k in ("emt", "ep", "at"))
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {diffs} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    return trial_cli(argv, __doc__ or "", run, markdown, list(VARIANTS))


if __name__ == "__main__":
    raise SystemExit(main())
