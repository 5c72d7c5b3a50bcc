"""What attention pooling buys, measured on the TRAINING split's RTP-LX rows only.

Grouped 5-fold (joined groups: an RTP-LX Index with all its translations) out-of-fold scores of the
embedding part, read per language against the human label:

- the ridge on mean pools (the head's reading of the backbone), at several penalties;
- the attention probe (``attention.fit_attention_probe``) on a grid of penalties;
- the n-gram ridge with the head's settings;
- the n-gram ridge beside each embedding reading (a logistic combiner on the pooled out-of-fold outputs,
  three parameters), as the head combines its parts;
- the head's own pipeline (``train.cross_validate``, its folds, its ridges) with the best probe's score as
  a third input of its non-English combiner (``in_head``): what adopting the probe would buy.

The held-out split is never read. The token states take one backbone pass (about 150 s for 10,000
RTP-LX texts on 2 CPU cores), kept in the polytox cache (``attention_fit.cached_token_states``, the same
file ``train-scorer``'s probe fit reads).

    python -m research.scorer.attention_trial --out research/scorer/results/trainscorer-attention.json
    python -m research.scorer.attention_trial --markdown research/scorer/results/trainscorer-attention.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from polytox.errors import require
from polytox.scoring.ml.attention import fit_attention_probe, fit_ridge, mean_pools
from polytox.scoring.ml.ngrams import fit_idf, hashed_counts, tfidf
from polytox.training.scorer.attention_fit import cached_token_states, fold_probes, fold_scores, take
from polytox.training.scorer.measure import auc
from polytox.training.scorer.pack import heldout_mask, join_components
from polytox.training.scorer.pool import training_pool
from polytox.training.scorer.train import TrainConfig, build_features, cross_validate, other_view, pooled_target, select

RIDGE_ALPHAS = (1_000.0, 10_000.0, 30_000.0)
ATTENTION_GRID = ((30_000.0, 3_000.0), (10_000.0, 10_000.0), (30_000.0, 10_000.0))


def language_aucs(labels: np.ndarray, scores: np.ndarray, langs: np.ndarray) -> dict[str, Any]:
    """Per-language AUC, their mean and the lowest."""
    per = {str(lang): auc(labels[langs == lang], scores[langs == lang]) for lang in sorted(set(langs.tolist()))}
    known = {k: v for k, v in per.items() if v is not None}
    low = min(known, key=lambda k: known[k])
    return {"mean": round(float(np.mean(list(known.values()))), 4), "min": round(known[low], 4), "min_lang": low,
            "languages": {k: round(v, 4) for k, v in known.items()}}


def load_states(config: TrainConfig, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Token states of ``texts`` (kept in the polytox cache, shared with ``train-scorer``'s probe fit)."""
    from polytox.scoring.ml.embed_cache import default_embedding_cache_path
    from polytox.scoring.ml.embedder import HiddenStateEmbedder

    assert config.backbone is not None
    embedder = HiddenStateEmbedder(config.backbone, config.layers, max_tokens=config.max_tokens,
                                   batch_size=config.batch_size)
    return cached_token_states(embedder, texts, default_embedding_cache_path().parent)


def run(config: TrainConfig, folds: int = 5) -> dict[str, Any]:
    linear = require("sklearn.linear_model", "ml")
    selection = require("sklearn.model_selection", "ml")
    t0 = time.time()
    examples = select(training_pool(config.shared), config)
    heldout = np.array(heldout_mask(examples), dtype=bool)
    names = np.array(join_components(examples))
    rows = np.array([i for i, e in enumerate(examples) if e.source == "rtp-lx" and not heldout[i]])
    texts = [examples[i].text for i in rows]
    labels = np.array([examples[i].label for i in rows], dtype=bool)
    langs = np.array([examples[i].lang for i in rows])
    states, offsets = load_states(config, texts)
    print(f"{len(rows)} RTP-LX training rows, {len(states)} tokens ({time.time() - t0:.0f} s)", file=sys.stderr)
    counts = hashed_counts(texts, config.ngram)
    pools = mean_pools(states, offsets)
    out: dict[str, np.ndarray] = {}

    def put(name: str, test: np.ndarray, values: np.ndarray) -> None:
        out.setdefault(name, np.full(len(rows), np.nan))[test] = values

    splitter = selection.GroupKFold(n_splits=folds)
    for k, (fit, test) in enumerate(splitter.split(np.zeros(len(rows)), groups=names[rows])):
        target = pooled_target(examples, rows[fit], config.index_mean_weight)
        idf = fit_idf(counts[fit])
        ngram = linear.Ridge(alpha=config.alpha_ngram, solver="lsqr", tol=1e-4).fit(tfidf(counts[fit], idf), target)
        put("n-gram ridge", test, ngram.predict(tfidf(counts[test], idf)))
        mean, scale = pools[fit].mean(axis=0), pools[fit].std(axis=0)
        scale[scale < 1e-6] = 1.0
        for alpha in RIDGE_ALPHAS:
            coef, intercept = fit_ridge((pools[fit] - mean) / scale, target, alpha)
            put(f"ridge on mean pools, penalty {alpha:g}", test, ((pools[test] - mean) / scale) @ coef + intercept)
        fit_states = take(states, offsets, fit)
        test_states = take(states, offsets, test)
        for alpha_w, alpha_v in ATTENTION_GRID:
            probe = fit_attention_probe(*fit_states, target, alpha_w, alpha_v)
            put(f"attention pool, penalty w {alpha_w:g}, v {alpha_v:g}", test, probe.score(*test_states))
        print(f"fold {k + 1}/{folds} ({time.time() - t0:.0f} s)", file=sys.stderr)
    measured = {name: language_aucs(labels, values, langs) for name, values in out.items()}
    best = {kind: max((n for n in measured if n.startswith(kind)), key=lambda n: measured[n]["mean"])
            for kind in ("ridge on mean pools", "attention pool")}
    for name in best.values():
        both = np.column_stack([out["n-gram ridge"], out[name]])
        combiner = linear.LogisticRegression(C=100.0, max_iter=1000).fit(both, labels)
        measured[f"n-grams + {name}"] = language_aucs(labels, combiner.decision_function(both), langs)
    chosen = max((n for n in measured if n.startswith("attention pool")), key=lambda n: measured[n]["mean"])
    alpha_w, alpha_v = next(a for a in ATTENTION_GRID if chosen.endswith(f"w {a[0]:g}, v {a[1]:g}"))
    head = in_head(config, examples, heldout, rows, states, offsets, (alpha_w, alpha_v))
    return {"n_rows": len(rows), "n_tokens": len(states), "folds": folds, "config": config.to_dict(),
            "in_head": head,
            "note": "out-of-fold on the training split's RTP-LX rows (grouped by joined group); the held-out "
                    "split is not read; penalties picked on the same folds", "variants": measured,
            "seconds": round(time.time() - t0, 1)}


def in_head(config: TrainConfig, examples: Sequence[Any], heldout: np.ndarray, rows: np.ndarray,
            states: np.ndarray, offsets: np.ndarray, penalties: tuple[float, float]) -> dict[str, Any]:
    """The probe's score as a third input of the head's own non-English combiner, out of fold on the
    head's own folds (``train.cross_validate``): per-language AUC of the RTP-LX training rows (``rows``)
    read from the raw combined scores, which one monotone map per language would not reorder."""
    linear = require("sklearn.linear_model", "ml")
    feats = build_features(config, examples)
    combined, raw, folds = cross_validate(config, examples, feats, np.flatnonzero(~heldout))
    english = np.array([e.lang == "en" for e in examples])
    labels = np.array([e.label for e in examples], dtype=bool)
    langs = np.array([e.lang for e in examples])
    position = np.full(len(examples), -1)
    position[rows] = np.arange(len(rows))
    ngram, emb = other_view(raw, english, "ngram"), other_view(raw, english, "emb")
    with_probe = combined["full"].copy()
    probes = fold_probes(states, offsets, position, rows, folds,
                         lambda fit: pooled_target(examples, fit, config.index_mean_weight), penalties, final=False)
    probe_score = fold_scores(probes, folds, rows[~english[rows]], position, states, offsets, len(examples))
    for fold in folds:  # the non-English combiner, refitted with the probe beside the two ridges
        fit, test = np.setdiff1d(rows, fold), np.intersect1d(rows, fold)
        fit, test = fit[~english[fit]], test[~english[test]]
        inputs = np.column_stack([ngram[fit], emb[fit], probe_score[fit]])
        combiner = linear.LogisticRegression(C=100.0, max_iter=1000).fit(inputs, labels[fit])
        with_probe[test] = combiner.decision_function(np.column_stack([ngram[test], emb[test], probe_score[test]]))
    return {"head": language_aucs(labels[rows], combined["full"][rows], langs[rows]),
            "head + attention pool in the non-English combiner": language_aucs(labels[rows], with_probe[rows],
                                                                               langs[rows]),
            "penalties": list(penalties)}


def markdown(data: dict[str, Any]) -> str:
    lines = ["| embedding reading (RTP-LX training rows, out of fold) | mean AUC | min AUC |", "| --- | ---: | ---: |"]
    for name, m in data["variants"].items():
        lines.append(f"| {name} | {m['mean']:.3f} | {m['min']:.3f} ({m['min_lang']}) |")
    if "in_head" in data:
        lines += ["", "| the head's own pipeline (RTP-LX training rows, out of fold) | mean AUC | min AUC |",
                  "| --- | ---: | ---: |"]
        lines += [f"| {name} | {m['mean']:.3f} | {m['min']:.3f} ({m['min_lang']}) |"
                  for name, m in data["in_head"].items() if name != "penalties"]
    return "\n".join(lines)


def trial_cli(argv: Sequence[str] | None, description: str, run_trial: Callable[..., dict[str, Any]],
              table: Callable[[dict[str, Any]], str], variants: Sequence[str] | None = None) -> int:
    """The command line of a training-split trial: ``--out FILE`` measures and writes JSON, ``--markdown
    FILE`` prints the table of a results file. With ``variants`` (the trial's variant names), ``--only NAME``
    (repeatable) runs only those, passed to ``run_trial`` as ``only``."""
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--out", type=Path, help="measure and write the results here (JSON)")
    what.add_argument("--markdown", type=Path, metavar="JSON", help="print the table of a results file and exit")
    p.add_argument("--shared", default="../shared/data")
    if variants is not None:
        p.add_argument("--only", action="append", choices=list(variants), metavar="NAME",
                       help="run only this variant (repeatable): " + "; ".join(variants))
    args = p.parse_args(argv)
    if args.markdown:
        print(table(json.loads(args.markdown.read_text())))
        return 0
    config = TrainConfig(shared=args.shared)
    data = run_trial(config, only=args.only) if variants is not None else run_trial(config)
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    print(table(data))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return trial_cli(argv, __doc__ or "", run, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
