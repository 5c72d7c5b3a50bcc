"""What other forms of the combiners would buy (mostly the NON-ENGLISH one), on the TRAINING split only.

The non-English combiner is one logistic regression over three inputs (the non-English n-gram and
hidden-state ridges and the attention probe), fitted on RTP-LX's 16 other languages at once. Two cheap
changes could move the per-language AUC against humans without touching the backbone:

- **per-language combiners:** a language whose n-grams or hidden states carry less of the label (cs, sv)
  could weigh them differently: an own combiner per language, or the pooled one plus per-language
  copies of its inputs, shrunk towards it (``copies`` scales the copies: the smaller, the stronger the
  shrinkage under the penalty ``COPIES_C``);
- **more inputs:** scores the head already computes for other texts, as extra inputs: the English
  probe's score, and the shared (English) ridges' outputs;
- **a curved combiner:** each input through a cubic spline (``train.spline_combiner_model``: its knots
  and penalty) before the logistic regression, in case the parts' evidence is not linear in the logit.

The ENGLISH combiner (the ridges and the English probe, fitted on Perspective and RTP-LX rows with their
task weights) is measured in its curved forms too, and with its non-English RTP-LX fit rows read through
their own ridges (as ``attention_en_trial`` fitted it), on the card's English columns (``measure_english``).

Every variant is fitted and read out of fold on the head's own folds (``train.cross_validate``: its ridges,
probes and combined scores), on the training split's RTP-LX rows, per language against the human label
(raw combined scores: one monotone map per language would not reorder them). English keeps its own
combiner, so its AUC is the same in every row. Each row's difference from the head carries a 95% group
bootstrap CI (joined groups: an RTP-LX Index with its translations). The held-out split is never read.
The run takes 13-18 minutes on 2 CPU cores with warm caches (both probes are fitted again), 68 from
empty probe caches.

    python -m research.scorer.combiner_trial --out research/scorer/results/trainscorer-combiner.json
    python -m research.scorer.combiner_trial --out FILE --only NAME [--only NAME]   # some variants
    python -m research.scorer.combiner_trial --markdown research/scorer/results/trainscorer-combiner.json
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from polytox.constants import BOOTSTRAP_RESAMPLES, CI_LEVEL
from polytox.errors import PolytoxError, require
from polytox.training.scorer.group_bootstrap import group_weights, weighted_auc
from polytox.training.scorer.measure import auc
from polytox.training.scorer.pack import heldout_mask, join_components
from polytox.training.scorer.pool import training_pool
from polytox.training.scorer.train import (
    OTHER,
    Features,
    TrainConfig,
    attention_scores,
    build_features,
    combiner_rows,
    cross_validate,
    other_view,
    select,
    spline_combiner_model,
)
from research.scorer.attention_en_trial import english_card
from research.scorer.attention_en_trial import markdown as english_markdown
from research.scorer.attention_trial import language_aucs, trial_cli

COMBINER_C = 100.0  # train.fit_combiner's penalty: the head's combiners are all but unpenalised
COPIES_C = 1.0  # the penalty of the pooled-plus-copies combiner, whose copies' scale sets their shrinkage


@dataclass(frozen=True)
class Variant:
    """One form of the non-English combiner: its extra inputs (``raw`` keys read beside the head's three)
    and its form: ``pooled`` (the head's), ``own`` (one combiner per language), ``copies`` (the pooled
    inputs plus per-language copies scaled by ``scale``) or ``splines`` (pooled, each input through a
    spline basis whose knots are placed by ``knots``)."""

    extra: tuple[str, ...] = ()
    form: str = "pooled"
    scale: float = 1.0
    knots: str = "uniform"  # splines: knots evenly spaced over each input's range, or at its quantiles
    # English combiner only: its non-English RTP-LX fit rows read their own ridges (``train.other_view``), as
    # ``attention_en_trial`` fitted it, instead of the shared ridges ``train.fit_combiners`` gives them
    own_ridges: bool = False


HEAD = "head (one pooled combiner, three inputs)"
VARIANTS: dict[str, Variant] = {
    HEAD: Variant(),
    "own combiner per language": Variant(form="own"),
    "pooled + per-language copies, scale 0.1": Variant(form="copies", scale=0.1),
    "pooled + per-language copies, scale 1": Variant(form="copies", scale=1.0),
    "splines of the three inputs": Variant(form="splines"),
    "splines of the three inputs, quantile knots": Variant(form="splines", knots="quantile"),
    "splines, quantile knots, + the shared ridges": Variant(extra=("ngram", "emb"), form="splines", knots="quantile"),
    "+ the English probe's score": Variant(extra=("probe",)),
    "+ the shared ridges' outputs": Variant(extra=("ngram", "emb")),
    "+ the English probe and the shared ridges": Variant(extra=("ngram", "emb", "probe")),
}


def design(inputs: np.ndarray, langs: np.ndarray, languages: Sequence[str], scale: float) -> np.ndarray:
    """The pooled inputs, then per language a copy of them and an intercept, each zero outside the language
    and scaled by ``scale`` (under a fixed penalty, a smaller scale shrinks the copies harder)."""
    blocks = [inputs]
    for lang in languages:
        inside = (langs == lang).astype(float)[:, None] * scale
        blocks += [inputs * inside, inside]
    return np.column_stack(blocks)


FORMS = ("pooled", "own", "copies", "splines")


def combiner_model(variant: Variant) -> Any:
    """An unfitted scikit-learn classifier of ``variant``'s form (``own``: the one each language gets)."""
    linear = require("sklearn.linear_model", "ml")
    if variant.form not in FORMS:
        raise PolytoxError(f"unknown combiner form {variant.form!r}; known: {', '.join(FORMS)}")
    if variant.form == "splines":
        return spline_combiner_model(variant.knots)
    return linear.LogisticRegression(C=COPIES_C if variant.form == "copies" else COMBINER_C, max_iter=1000)


def nested_scores(variant: Variant, inputs: np.ndarray, labels: np.ndarray, langs: np.ndarray,
                  folds: Sequence[np.ndarray]) -> np.ndarray:
    """Out-of-fold P(toxic) of ``variant``'s combiner: for each fold, fitted on the rows of the other folds and
    applied to the fold's rows (``folds``: positions into ``inputs``, whose rows are the non-English RTP-LX
    training rows)."""
    languages = sorted(set(langs.tolist()))
    out = np.full(len(inputs), np.nan)
    for test in folds:
        fit = np.setdiff1d(np.concatenate(list(folds)), test)
        if variant.form == "own":
            for lang in languages:
                f, t = fit[langs[fit] == lang], test[langs[test] == lang]
                out[t] = combiner_model(variant).fit(inputs[f], labels[f]).predict_proba(inputs[t])[:, 1]
            continue
        x: Callable[[np.ndarray], np.ndarray] = (
            (lambda rows: design(inputs[rows], langs[rows], languages, variant.scale))
            if variant.form == "copies" else (lambda rows: inputs[rows]))
        out[test] = combiner_model(variant).fit(x(fit), labels[fit]).predict_proba(x(test))[:, 1]
    return out


def mean_auc_difference(labels: np.ndarray, langs: np.ndarray, groups: np.ndarray, variant: np.ndarray,
                        head: np.ndarray, n_boot: int = BOOTSTRAP_RESAMPLES) -> dict[str, Any]:
    """The variant's mean per-language AUC minus the head's, and its 95% group bootstrap CI (the same
    resamples of the joined groups for both, so the interval is of the paired difference)."""
    weights = group_weights(groups, n_boot)
    languages = sorted(set(langs.tolist()))
    diffs = np.zeros(n_boot)
    for lang in languages:
        m = langs == lang
        diffs += weighted_auc(labels[m], variant[m], weights[:, m]) - weighted_auc(labels[m], head[m], weights[:, m])
    diffs /= len(languages)
    point = np.mean([_auc(labels[langs == lang], variant[langs == lang])
                     - _auc(labels[langs == lang], head[langs == lang])
                     for lang in languages])
    half = (1 - CI_LEVEL) / 2
    low, high = np.nanquantile(diffs, [half, 1 - half])
    return {"diff": round(float(point), 4), "ci": [round(float(low), 4), round(float(high), 4)]}


def _auc(labels: np.ndarray, scores: np.ndarray) -> float:
    value = auc(labels, scores)
    if value is None:
        raise PolytoxError("a language needs toxic and non-toxic rows for its AUC")
    return value


def training_features(config: TrainConfig) -> tuple[list[Any], np.ndarray, np.ndarray, Features]:
    """The training pool, its held-out mask, the training rows and their features with both probes' out-of-
    fold scores: what ``train-scorer`` cross-validates, built the same way for the trials."""
    examples = select(training_pool(config.shared, config.langs), config)
    heldout = np.array(heldout_mask(examples), dtype=bool)
    train_rows = np.flatnonzero(~heldout)
    feats = build_features(config, examples)
    feats.attention = attention_scores(config, examples, train_rows)
    feats.attention_en = attention_scores(config, examples, train_rows, english=True)
    return list(examples), heldout, train_rows, feats


def run(config: TrainConfig, only: Sequence[str] | None = None) -> dict[str, Any]:
    started = time.time()
    examples, heldout, train_rows, feats = training_features(config)
    combined, raw, folds = cross_validate(config, examples, feats, train_rows)
    data = measure(combined["full"], raw, folds, examples, heldout, only, started)
    data["english"] = measure_english(config, combined["full"], raw, folds, examples, heldout, only)
    data["seconds"] = round(time.time() - started, 1)
    return data


ENGLISH_VARIANTS: dict[str, Variant] = {
    HEAD: Variant(),
    "splines of the three inputs": Variant(form="splines"),
    "splines of the three inputs, quantile knots": Variant(form="splines", knots="quantile"),
    "linear, non-English fit rows through their own ridges": Variant(own_ridges=True),
}


def english_scores(variant: Variant, config: TrainConfig, examples: Sequence[Any], raw: dict[str, np.ndarray],
                   folds: Sequence[np.ndarray]) -> np.ndarray:
    """Out-of-fold P(toxic) of the ENGLISH combiner in ``variant``'s form (pooled forms only) for the English
    rows of ``folds``: per fold fitted, as ``train.fit_combiners`` fits it, on the other folds'
    ``train.combiner_rows`` with their task weights, from the head's three English inputs (the ridges and the
    English probe: its non-English RTP-LX fit rows read the shared ridges too, as in training)."""
    if variant.form not in ("pooled", "splines") or variant.extra:
        raise PolytoxError("the English combiner trial takes the pooled and spline forms, without extra inputs")
    english = np.array([e.lang == "en" for e in examples])
    if variant.own_ridges:
        inputs = np.column_stack([other_view(raw, english, "ngram"), other_view(raw, english, "emb"), raw["probe"]])
    else:
        inputs = np.column_stack([raw["ngram"], raw["emb"], raw["probe"]])  # the shared ridges on every fit row
    all_rows = np.concatenate(list(folds))
    out = np.full(len(examples), np.nan)
    for fold in folds:
        sel, labels, weight = combiner_rows(config, examples, np.setdiff1d(all_rows, fold))
        model = combiner_model(variant)
        fit_weight = {"logisticregression__sample_weight": weight} if variant.form == "splines" else {
            "sample_weight": weight}
        model.fit(inputs[sel], labels, **fit_weight)
        test = fold[english[fold]]
        out[test] = model.predict_proba(inputs[test])[:, 1]
    return out


def measure_english(config: TrainConfig, combined: np.ndarray, raw: dict[str, np.ndarray],
                    folds: Sequence[np.ndarray], examples: Sequence[Any], heldout: np.ndarray,
                    only: Sequence[str] | None = None) -> dict[str, Any]:
    """The card's English columns (``attention_en_trial.english_card``: AUC, MAE, share >= 0.5 and ECE
    against Perspective, the training split's real run) with each form of the English combiner, out of
    fold; the head's row must reproduce the head's own out-of-fold scores."""
    english = np.array([e.lang == "en" for e in examples])
    rows = np.concatenate(list(folds))
    rows = rows[english[rows]]
    results: dict[str, Any] = {}
    for name, variant in ENGLISH_VARIANTS.items():
        if only and name not in only and name != HEAD:
            continue
        scores = combined.copy()
        scores[rows] = english_scores(variant, config, examples, raw, folds)[rows]
        if name == HEAD and not np.allclose(scores[rows], combined[rows], atol=1e-6):
            raise PolytoxError("the trial's refit of the English combiner does not reproduce the head's scores")
        results[name] = english_card(config, examples, heldout, scores, folds)
        print("English:", name, results[name], flush=True)
    return results


@dataclass(frozen=True)
class NonEnglishRows:
    """The rows the non-English combiner is read on: the training split's RTP-LX rows (``lx``), the
    non-English ones among them (``other``), and the head's folds as positions into ``other``."""

    lx: np.ndarray
    other: np.ndarray
    folds: list[np.ndarray]
    labels: np.ndarray  # every example's label
    langs: np.ndarray  # every example's language
    groups: np.ndarray  # the joined group of each ``lx`` row (an RTP-LX Index with its translations)

    @classmethod
    def of(cls, examples: Sequence[Any], heldout: np.ndarray, folds: Sequence[np.ndarray]) -> NonEnglishRows:
        langs = np.array([e.lang for e in examples])
        lx = np.flatnonzero(np.array([e.source == "rtp-lx" for e in examples]) & ~heldout)
        other = lx[langs[lx] != "en"]
        position = np.full(len(examples), -1)
        position[other] = np.arange(len(other))
        return cls(lx=lx, other=other, folds=[position[np.intersect1d(fold, other)] for fold in folds],
                   labels=np.array([e.label for e in examples], dtype=bool), langs=langs,
                   groups=np.array(join_components(examples))[lx])

    def scores(self, variant: Variant, raw: dict[str, np.ndarray], combined: np.ndarray) -> np.ndarray:
        """``combined`` with the non-English rows re-scored out of fold by ``variant``'s combiner, fitted on
        the head's three non-English inputs plus ``variant.extra`` from ``raw`` (one pipeline's part outputs)."""
        head_inputs = [raw["ngram" + OTHER], raw["emb" + OTHER], raw["probe" + OTHER]]
        inputs = np.column_stack([x[self.other] for x in head_inputs + [raw[k] for k in variant.extra]])
        out = combined.copy()
        out[self.other] = nested_scores(variant, inputs, self.labels[self.other], self.langs[self.other], self.folds)
        return out

    def refit(self, raw: dict[str, np.ndarray], combined: np.ndarray, pipeline: str = "head") -> np.ndarray:
        """The trial's refit of the three-input combiner, which must reproduce ``combined`` (the pipeline's
        own out-of-fold scores), or it stops: otherwise no variant's difference from it means anything."""
        scores = self.scores(Variant(), raw, combined)
        if not np.allclose(scores[self.lx], combined[self.lx], atol=1e-6):
            raise PolytoxError(f"the trial's refit of the {pipeline}'s combiner does not reproduce its scores")
        return scores

    def aucs(self, scores: np.ndarray) -> dict[str, Any]:
        return language_aucs(self.labels[self.lx], scores[self.lx], self.langs[self.lx])

    def versus(self, scores: np.ndarray, head: np.ndarray) -> dict[str, Any]:
        """The paired difference of the mean per-language AUC from ``head``'s, with its group bootstrap CI."""
        return mean_auc_difference(self.labels[self.lx], self.langs[self.lx], self.groups, scores[self.lx],
                                   head[self.lx])


def measure(combined: np.ndarray, raw: dict[str, np.ndarray], folds: Sequence[np.ndarray], examples: Sequence[Any],
            heldout: np.ndarray, only: Sequence[str] | None = None, started: float | None = None) -> dict[str, Any]:
    """Every variant's per-language AUCs on the training split's RTP-LX rows from the head's out-of-fold
    part outputs (``raw``, ``combined``: ``train.cross_validate``'s, mode ``full``)."""
    rows = NonEnglishRows.of(examples, heldout, folds)
    head = rows.refit(raw, combined)
    results: dict[str, Any] = {}
    for name, variant in VARIANTS.items():
        if only and name not in only and name != HEAD:
            continue
        scores = head if name == HEAD else rows.scores(variant, raw, combined)
        entry = rows.aucs(scores)
        if name != HEAD:
            entry["vs_head"] = rows.versus(scores, combined)
        results[name] = entry
        print(name, entry["mean"], entry["min"], entry.get("vs_head"), flush=True)
    return {"variants": results, "n_rows": len(rows.lx), "n_other": len(rows.other),
            "note": "out of fold on the training split's RTP-LX rows (the head's folds); the held-out split is "
                    "not read", "seconds": None if started is None else round(time.time() - started, 1)}


def nonenglish_table(variants: dict[str, Any]) -> list[str]:
    """The per-language rows of ``variants`` (the head's first): mean, lowest, the head's three lowest
    languages and the paired difference from the head."""
    head = variants[HEAD]["languages"]
    lowest = sorted(head, key=lambda lang: head[lang])[:3]  # the head's three lowest languages
    lines = [f"| non-English combiner (RTP-LX training rows, out of fold) | mean AUC | min AUC | {' / '.join(lowest)} "
             "| mean vs head [95% CI] |", "| --- | ---: | ---: | ---: | ---: |"]
    for name, m in variants.items():
        vs = m.get("vs_head")
        diff = f"{vs['diff']:+.4f} [{vs['ci'][0]:+.4f}, {vs['ci'][1]:+.4f}]" if vs else "-"
        low = " / ".join(f"{m['languages'][lang]:.3f}" for lang in lowest)
        lines.append(f"| {name} | {m['mean']:.4f} | {m['min']:.4f} ({m['min_lang']}) | {low} | {diff} |")
    return lines


def markdown(data: dict[str, Any]) -> str:
    lines = nonenglish_table(data["variants"])
    if data.get("english"):  # the English combiner's forms, on the card's English columns
        lines += ["", english_markdown({"variants": data["english"]}).replace(
            "English combiner (training split, out of fold)", "English combiner form (training split, out of fold)")]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    return trial_cli(argv, __doc__ or "", run, markdown, list(VARIANTS | ENGLISH_VARIANTS))


if __name__ == "__main__":
    raise SystemExit(main())
