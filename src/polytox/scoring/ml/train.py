"""Train the polytox-ml head and measure it with cross-validation grouped by source prompt.

Method (docs/trainscorer.md):

1. data: RTP-LX prompts in the 17 languages (target: mean of 3 human ratings mapped to 0-1; label: mean
   >= 3) and, optionally, RTP prompts and continuations (target and label from Perspective TOXICITY);
2. targets: each rating blended with the mean rating of its source prompt over its translations in the
   training fold (``index_mean_weight``), a less noisy estimate than 3 annotators;
3. features: hashed character n-grams (tf-idf) and, with a backbone, mean-pooled hidden states of chosen
   middle layers (cached on disk by model and text hash, so retraining costs only the head);
4. two ridge regressions on the graded target, one per feature set, and a logistic combiner on their
   outputs that yields a calibrated P(toxic);
5. K-fold cross-validation with folds grouped by RTP-LX Index (joined with identical RTP texts), so a
   prompt and all its translations are always on the same side; per-language AUC, and AUC / Pearson r
   against Perspective on RTP, for the head and for the baselines on the same texts;
6. the final head is fitted on all data; the combiner on the out-of-fold outputs.

Deterministic: the folds, the subset sampling and the solvers depend only on the data and ``seed``.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ...errors import PolytoxError, require
from ...langs import PTP_LANGUAGES
from .data import Example, join_groups, load_rtp, load_rtplx
from .embed_cache import EmbeddingCache
from .embedder import HiddenStateEmbedder
from .head import MlHead
from .ngrams import NgramConfig, fit_idf, hashed_counts, tfidf

log = logging.getLogger("polytox")

# RTP-LX (de Wynter et al. 2024), as DATA.md records it: prompts with Index >= 1000 are culturally
# specific additions per language, not translations of a shared source prompt.
CULTURAL_INDEX_START = 1000

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class TrainConfig:
    """Everything that determines a trained head (recorded in its metadata)."""

    rtplx: str
    rtp: str | None = None
    langs: tuple[str, ...] = PTP_LANGUAGES
    backbone: str | None = "gemma-3-270m"
    layers: tuple[int, ...] = (7, 9)
    max_tokens: int = 128
    ngram: NgramConfig = field(default_factory=NgramConfig)
    alpha_ngram: float = 0.5
    alpha_emb: float = 3000.0
    rtp_weight: float = 2.0  # sample weight of RTP (Perspective) texts in the regressions
    index_mean_weight: float = 0.5  # regress on (1-w) * own rating + w * mean rating of the same Index
    folds: int = 5
    groups_limit: int | None = None  # subset: this many RTP-LX source prompts (Index), seeded
    rtp_limit: int | None = None  # subset: this many RTP texts, seeded
    batch_size: int = 32
    seed: int = 0
    embedding_cache: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ngram"] = self.ngram.to_dict()
        data.pop("embedding_cache")  # where vectors are cached changes nothing in the head
        return data


@dataclass
class Parts:
    """The two fitted regressors (before the combiner)."""

    idf: np.ndarray
    w_ngram: np.ndarray
    b_ngram: float
    emb_mean: np.ndarray | None = None
    emb_scale: np.ndarray | None = None
    w_emb: np.ndarray | None = None
    b_emb: float = 0.0


@dataclass
class TrainResult:
    head: MlHead
    examples: list[Example]
    predictions: dict[str, np.ndarray]  # scorer name -> out-of-fold (or fold-free baseline) predictions
    table: dict[str, Any]


def load_examples(config: TrainConfig) -> list[Example]:
    """The training texts (a seeded subset when ``groups_limit`` / ``rtp_limit`` are set)."""
    examples = load_rtplx(config.rtplx, langs=config.langs)
    if config.groups_limit is not None:
        groups = sorted({e.group for e in examples})
        keep = set(random.Random(config.seed).sample(groups, min(config.groups_limit, len(groups))))
        examples = [e for e in examples if e.group in keep]
    if config.rtp:
        rtp = load_rtp(config.rtp)
        if config.rtp_limit is not None:
            rtp = random.Random(config.seed + 1).sample(rtp, min(config.rtp_limit, len(rtp)))
            rtp.sort(key=lambda e: e.group)
        examples += rtp
    if not examples:
        raise PolytoxError("no training examples (check --rtplx, --rtp and --lang)")
    return examples


def pooled_target(examples: Sequence[Example], rows: np.ndarray, weight: float) -> np.ndarray:
    """Regression targets of ``rows``: each RTP-LX rating blended with the mean rating of its source prompt.

    Each RTP-LX text has only 3 ratings; the same source prompt was rated in up to 17 languages, so the
    mean over its translations (within the training rows only) is a far less noisy estimate of how toxic
    the prompt is. Culturally specific prompts (Index >= 1000) are not translations of each
    other (DATA.md) and keep their own rating, as do RTP texts (Perspective scores).
    """
    own = np.array([examples[i].target for i in rows], dtype=np.float64)
    if weight <= 0:
        return own
    sums: dict[str, list[float]] = {}
    for i in rows:
        ex = examples[i]
        if ex.source == "rtp-lx" and int(ex.group.split(":", 1)[1]) < CULTURAL_INDEX_START:
            sums.setdefault(ex.group, []).append(ex.target)
    out = own.copy()
    for k, i in enumerate(rows):
        values = sums.get(examples[i].group)
        if values is not None:
            out[k] = (1.0 - weight) * own[k] + weight * float(np.mean(values))
    return out


def fit_parts(config: TrainConfig, counts: Any, emb: np.ndarray | None, examples: Sequence[Example],
              rows: np.ndarray) -> Parts:
    linear = require("sklearn.linear_model", "ml")
    target = pooled_target(examples, rows, config.index_mean_weight)
    weight = np.array([config.rtp_weight if examples[i].source == "rtp" else 1.0 for i in rows])
    idf = fit_idf(counts[rows])
    ngram = linear.Ridge(alpha=config.alpha_ngram).fit(tfidf(counts[rows], idf), target, sample_weight=weight)
    parts = Parts(idf=idf, w_ngram=ngram.coef_.astype(np.float16).astype(np.float32),
                  b_ngram=float(ngram.intercept_))
    parts.idf = idf.astype(np.float16).astype(np.float32)  # as stored in the head
    if emb is not None:
        x = emb[rows]
        mean = x.mean(axis=0)
        scale = x.std(axis=0)
        scale[scale < 1e-6] = 1.0
        model = linear.Ridge(alpha=config.alpha_emb).fit((x - mean) / scale, target, sample_weight=weight)
        parts.emb_mean, parts.emb_scale = mean, scale
        parts.w_emb, parts.b_emb = model.coef_.astype(np.float32), float(model.intercept_)
    return parts


def part_outputs(parts: Parts, counts: Any, emb: np.ndarray | None, rows: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray | None]:
    s_ngram = np.asarray(tfidf(counts[rows], parts.idf) @ parts.w_ngram).ravel() + parts.b_ngram
    s_emb = None
    if emb is not None and parts.w_emb is not None:
        assert parts.emb_mean is not None and parts.emb_scale is not None
        s_emb = ((emb[rows] - parts.emb_mean) / parts.emb_scale) @ parts.w_emb + parts.b_emb
    return s_ngram, s_emb


def fit_combiner(s_ngram: np.ndarray, s_emb: np.ndarray | None, labels: np.ndarray) -> tuple[float, float, float]:
    """Logistic weights (bias, ngram, emb): a calibrated P(toxic) from the regressors' outputs."""
    linear = require("sklearn.linear_model", "ml")
    x = s_ngram[:, None] if s_emb is None else np.column_stack([s_ngram, s_emb])
    model = linear.LogisticRegression(C=100.0, max_iter=1000).fit(x, labels)
    coef = model.coef_.ravel()
    return float(model.intercept_[0]), float(coef[0]), float(coef[1]) if s_emb is not None else 0.0


def _apply(combiner: tuple[float, float, float], s_ngram: np.ndarray, s_emb: np.ndarray | None) -> np.ndarray:
    bias, a, b = combiner
    logit = bias + a * s_ngram + (b * s_emb if s_emb is not None else 0.0)
    return np.asarray(1.0 / (1.0 + np.exp(-logit)))


def cross_validate(config: TrainConfig, examples: Sequence[Example], counts: Any, emb: np.ndarray | None,
                   progress: Progress | None = None) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray | None]:
    """Out-of-fold P(toxic) per mode, plus the out-of-fold regressor outputs (for the final combiner)."""
    selection = require("sklearn.model_selection", "ml")
    groups = join_groups(examples)
    if len(set(groups.tolist())) < config.folds:
        raise PolytoxError(f"{len(set(groups.tolist()))} source prompts cannot make {config.folds} folds")
    labels = np.array([e.label for e in examples], dtype=bool)
    folds = list(selection.GroupKFold(n_splits=config.folds).split(np.zeros(len(examples)), labels, groups))
    oof_ngram = np.zeros(len(examples))
    oof_emb = np.zeros(len(examples)) if emb is not None else None
    for k, (train_rows, test_rows) in enumerate(folds):
        parts = fit_parts(config, counts, emb, examples, train_rows)
        s_ngram, s_emb = part_outputs(parts, counts, emb, test_rows)
        oof_ngram[test_rows] = s_ngram
        if oof_emb is not None and s_emb is not None:
            oof_emb[test_rows] = s_emb
        if progress:
            progress("cross-validation", k + 1, len(folds))
    predictions: dict[str, np.ndarray] = {}
    modes = {"ngram": None} if oof_emb is None else {"full": oof_emb, "ngram": None}
    for mode, second in modes.items():
        pred = np.zeros(len(examples))
        for train_rows, test_rows in folds:  # the combiner, too, never sees the fold it predicts
            combiner = fit_combiner(oof_ngram[train_rows], None if second is None else second[train_rows],
                                    labels[train_rows])
            pred[test_rows] = _apply(combiner, oof_ngram[test_rows], None if second is None else second[test_rows])
        predictions[mode] = pred
    return predictions, oof_ngram, oof_emb


def embed_examples(config: TrainConfig, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray | None:
    if config.backbone is None:
        return None
    cache = EmbeddingCache(config.embedding_cache) if config.embedding_cache != "off" else None
    embedder = HiddenStateEmbedder(config.backbone, config.layers, max_tokens=config.max_tokens,
                                   batch_size=config.batch_size, cache=cache)
    callback = (lambda done, total: progress("embed", done, total)) if progress else None
    try:
        return embedder.embed(texts, progress=callback)
    finally:
        embedder.close()
        if cache is not None:
            cache.close()


def train(config: TrainConfig, progress: Progress | None = None, baselines: dict[str, np.ndarray] | None = None,
          examples: Sequence[Example] | None = None) -> TrainResult:
    """Cross-validate, then fit the head on all data.

    ``baselines``: other scorers' predictions on ``examples`` (default: ``load_examples(config)``) to tabulate.
    """
    from .quality import quality_table

    examples = list(examples) if examples is not None else load_examples(config)
    texts = [e.text for e in examples]
    counts = hashed_counts(texts, config.ngram)
    emb = embed_examples(config, texts, progress)
    predictions, oof_ngram, oof_emb = cross_validate(config, examples, counts, emb, progress)
    labels = np.array([e.label for e in examples], dtype=bool)
    parts = fit_parts(config, counts, emb, examples, np.arange(len(examples)))
    combine = {"ngram": fit_combiner(oof_ngram, None, labels)}
    if oof_emb is not None:
        combine["full"] = fit_combiner(oof_ngram, oof_emb, labels)
    named = {f"polytox-ml ({mode})": pred for mode, pred in predictions.items()}
    named.update(baselines or {})
    table = quality_table(examples, named)
    langs = tuple(sorted({e.lang for e in examples}))
    head = MlHead(
        ngram=config.ngram, idf=parts.idf, w_ngram=parts.w_ngram, b_ngram=parts.b_ngram, combine=combine,
        backbone=config.backbone if emb is not None else None, layers=config.layers if emb is not None else (),
        max_tokens=config.max_tokens, emb_mean=parts.emb_mean, emb_scale=parts.emb_scale, w_emb=parts.w_emb,
        b_emb=parts.b_emb, languages=langs,
        meta={"version": "1", "config": config.to_dict(), "n_examples": len(examples),
              "n_by_source": {s: sum(e.source == s for e in examples) for s in ("rtp-lx", "rtp")},
              "cv": table},
    )
    return TrainResult(head=head, examples=list(examples), predictions=named, table=table)
