"""Train the polytox-ml head on the training pool and measure it on a held-out split it never sees.

Method (docs/default-scorer.md):

1. data (``pool.py``): RTP-LX (17 languages, 1-5 ratings), RTP and the scorer training pack (Perspective
   TOXICITY on web text and on model generations, binary / rater-share human labels in 10 languages);
2. split (``pack.heldout_mask``): a fixed hash of each joined group sends ~20% of groups (40% of the
   model-generation prompts) to a held-out split that is never fitted on and never used for any choice;
3. tasks: each label definition is a task ("persp-2020", "persp-2022", "persp-later", "rtp-lx",
   "human:<source>"); the regressions get one free offset per task (one-hot columns) and a weight per task,
   so labels with different base rates and strictness share one ranking direction without dragging its
   scale around;
4. features: hashed character n-grams (tf-idf) and mean-pooled hidden states of backbone layers;
5. two ridge regressions (one per feature set), an attention probe over the same layers' token states
   (``attention_fit.py``; one for non-English texts, one for English texts), a logistic combiner, then
   isotonic maps onto Perspective's scale (English: one map for web text and one for model continuations,
   ``web_gen_share`` / ``continuation_gen_share``) or the human rater share (other languages): ``calib.py``;
6. K-fold cross-validation grouped by joined group on the training split gives out-of-fold outputs for
   the combiner and the maps (each fitted on other folds' outputs only); the final regressions are
   refitted on the whole training split.

Deterministic: the split, the subsample, the folds and the solvers depend only on the data and the config.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from ...constants import CONTINUATION_GEN_SHARE, EVERYDAY_WEIGHT, WEB_GEN_SHARE
from ...errors import PolytoxError, require
from ...langs import PTP_LANGUAGES
from ...scoring.ml.calib import CONTINUATION, WEB, ScaleMaps, fit_scale_maps
from ...scoring.ml.embed_cache import EmbeddingCache
from ...scoring.ml.embedder import HiddenStateEmbedder
from ...scoring.ml.head import SPLINE_DEGREE, Combiner, CurvedCombiner, MlHead, apply_combiner
from ...scoring.ml.ngrams import NgramConfig, fit_idf, hashed_counts, tfidf
from .attention_fit import AttentionScores, attention_embedder, english_fit_rows, fit_attention, fit_english_attention
from .consistency import translated, translation_pairs
from .data import EVERYDAY_DOMAIN, Example
from .pack import heldout_mask, join_components, unit_hash

log = logging.getLogger("polytox")

HEAD_VERSION = "6"  # part of the scorer version: bumped so scores cached for older heads are not reused
# The training data's families, as the scorer id names them (``training_data``): the task prefix of each
# row (``task_of``) -> its short name.
DATA_FAMILIES = {"persp": "persp", "rtp-lx": "rtplx", "human": "human", "everyday": "ud"}

Progress = Callable[[str, int, int], None]

# Default regression weight per task (``task_of``); "human:templates-*" rows are synthetic phrases.
# Chosen by out-of-fold measurements on the training split (docs/default-scorer.md, "What each choice buys").
TASK_WEIGHTS: dict[str, float] = {
    "persp-2020": 1.0,
    "persp-2022": 3.0,
    "persp-later": 0.5,
    "rtp-lx": 1.0,
    "human": 0.25,
    "human:templates": 0.2,
    "everyday": 1.0,
}


LATER_OPTIONS = (
    "other_fit_tasks",
    "other_alpha_ngram",
    "other_alpha_emb",
    "fit_tasks",
    "combiner_splines",
    "everyday_weight",
    "consistency_weight",
    "pair_weight",
    "probe_consistency_weight",
    "teacher_weight",
)


@dataclass(frozen=True)
class TrainConfig:
    """Everything that determines a trained head (recorded in its metadata)."""

    shared: str = "../shared/data"
    langs: tuple[str, ...] = PTP_LANGUAGES  # RTP-LX languages
    backbone: str | None = "gemma-3-270m"
    layers: tuple[int, ...] = (5, 7, 9)
    max_tokens: int = 128
    ngram: NgramConfig = field(default_factory=NgramConfig)
    alpha_ngram: float = 1.0
    alpha_emb: float = 1000.0
    # one free offset per label definition in every ridge: won out-of-fold on the training split, lost on most
    # English measures as a held-out candidate (docs/default-scorer.md, "What each choice buys")
    task_offsets: bool = False
    task_weights: bool = True  # TASK_WEIGHTS (else every row weighs 1)
    weight_rtplx: float | None = None  # overrides TASK_WEIGHTS["rtp-lx"]
    weight_human: float | None = None  # overrides TASK_WEIGHTS["human"]
    weight_generations: float | None = None  # overrides TASK_WEIGHTS["persp-2022"]
    human_data: bool = True  # the pack's human-labelled rows (else Perspective + RTP-LX only)
    index_mean_weight: float = 0.5  # RTP-LX: blend each rating with the mean over the prompt's translations
    # Share of each English map's calibration weight carried by model generations (calib.py; chosen
    # out-of-fold on the training split, docs/default-scorer.md "Two English maps"): the web map is fitted on
    # web text, the continuation map almost only on model continuations (web text steadies its top bins)
    web_gen_share: float = WEB_GEN_SHARE
    continuation_gen_share: float = CONTINUATION_GEN_SHARE
    # non-English texts get their own ridges, fitted with RTP-LX rows at this weight (None: shared ridges),
    # and their own combiner (RTP-LX rows); docs/default-scorer.md, "What each choice buys"
    other_rtplx_weight: float | None = 3.0
    # one free offset per label definition while fitting the non-English ridges only (dropped when scoring):
    # each source's label scale stops bending their weights; English parts are untouched (measured out of
    # fold: docs/default-scorer.md, "What each choice buys")
    other_task_offsets: bool = True
    split_combiner: bool = False  # (without other_rtplx_weight) the non-English texts' own combiner only
    # the non-English ridges' own fit: only rows of these tasks (prefixes of ``task_of``; None: every row)
    # carry weight, and their own penalties (None: alpha_ngram / alpha_emb)
    other_fit_tasks: tuple[str, ...] | None = None
    other_alpha_ngram: float | None = None
    other_alpha_emb: float | None = None
    fit_tasks: tuple[str, ...] | None = None  # rows of other tasks weigh 0 in the ridges (set by other_config)
    # the attention probe as the non-English combiner's third input (with a backbone), fitted on the training
    # split's RTP-LX rows (weight 1) and its non-English human-labelled pack rows (weight
    # ``attention_human_weight``; None: RTP-LX alone), with these penalties on its token weights and its
    # attention query. Penalties picked on a small grid out of fold on RTP-LX, the pack weight out of fold
    # on RTP-LX and the pack's rows together (docs/default-scorer.md, "Attention pooling")
    attention: bool = True
    attention_alpha_w: float = 30_000.0
    attention_alpha_v: float = 3_000.0
    attention_human_weight: float | None = 0.3
    # an attention probe for English texts too, the English combiner's third input (with a backbone and the
    # non-English texts' own path), fitted on the training split's English rows of these tasks (None: every
    # English row) at their task weights, with these penalties. Measured out of fold on the training split
    # (docs/default-scorer.md, "An English probe")
    english_attention: bool = True
    english_attention_tasks: tuple[str, ...] | None = ("persp-2020", "persp-2022")
    english_attention_alpha_w: float = 1_000.0
    english_attention_alpha_v: float = 3_000.0
    # the mode-"full" combiners ("full": English, "full:other": the others) fitted in the curved form (each
    # input through a cubic spline; ``fit_combiner``); None: all linear. Measured out of fold on the training
    # split (docs/default-scorer.md, "The non-English combiner's form")
    combiner_splines: tuple[str, ...] | None = None
    # presumed-harmless everyday sentences (``everyday.everyday_examples``) in every ridge, the non-English
    # combiner and the non-English probe's fit, at this weight per row (None: left out). In every language
    # at one target, they leave a head no room to read a text's language as toxicity
    # (docs/scorer-scales.md, "Everyday text")
    everyday_weight: float | None = EVERYDAY_WEIGHT
    # a consistency term in the non-English ridges: one difference row per training pair of a translation and
    # its English source (``consistency.translation_pairs``), target 0, at this weight (None: none).
    # ``pair_weight`` is what one fit reads (set by ``other_config``: the English ridges never get the term)
    consistency_weight: float | None = None
    pair_weight: float | None = None
    # the same term in the non-English probe's fit, at this weight per pair (None: none); the English
    # Parallel UD sources join that fit at weight 0 (docs/scorer-scales.md)
    probe_consistency_weight: float | None = None
    # teacher rows in the non-English ridges: per training pair, the translation's features with the English
    # path's out-of-fold reading of its source as target (``english_reading``), at this weight, under one free
    # offset of their own (None: none; measured, not adopted: docs/scorer-scales.md)
    teacher_weight: float | None = None
    folds: int = 5
    subset: float | None = None  # keep this share of joined groups (seeded by hash; for tests and ablations)
    batch_size: int = 32
    embedding_cache: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ngram"] = self.ngram.to_dict()
        data.pop("embedding_cache")  # where vectors are cached changes nothing in the head
        data.pop("shared")
        for key in LATER_OPTIONS:  # unset, they change nothing: heads trained before them keep their digest
            if data[key] is None:
                data.pop(key)
        return data


def training_data(n_by_task: dict[str, int]) -> str:
    """The families of a head's training rows, joined by "." in ``DATA_FAMILIES``' order (e.g.
    ``persp.rtplx.human.ud``): recorded in the head and named in the scorer id, so heads trained on other
    data never share an id even where their version does."""
    present = {
        family
        for task, n in n_by_task.items()
        if n
        for prefix, family in DATA_FAMILIES.items()
        if task == prefix or task.startswith(prefix + ":") or task.startswith(prefix + "-")
    }
    return ".".join(family for family in DATA_FAMILIES.values() if family in present)


def other_config(config: TrainConfig) -> TrainConfig:
    """The fit of the non-English texts' own ridges: RTP-LX at its own weight, offsets if asked for."""
    return replace(
        config,
        weight_rtplx=config.other_rtplx_weight,
        task_offsets=config.task_offsets or config.other_task_offsets,
        fit_tasks=config.other_fit_tasks,
        alpha_ngram=config.other_alpha_ngram or config.alpha_ngram,
        alpha_emb=config.other_alpha_emb or config.alpha_emb,
        pair_weight=config.consistency_weight,
    )


def task_of(ex: Example) -> str:
    """The label definition a row was labelled under."""
    if ex.source == "rtp-lx":
        return "rtp-lx"
    if ex.domain == EVERYDAY_DOMAIN:
        return "everyday"
    if ex.domain == "perspective":
        if ex.source.startswith("destein"):
            return "persp-later"  # re-scored by a later Perspective model: 0.11-0.15 lower on the same texts
        return "persp-2022" if ex.source.startswith("ia024") else "persp-2020"
    return f"human:{ex.source}"


def task_weight(task: str, config: TrainConfig | None = None) -> float:
    """Regression weight of a task's rows (``TASK_WEIGHTS``, with the config's overrides)."""
    if config is not None and not config.task_weights:
        return 1.0
    overrides = (
        {}
        if config is None
        else {
            "rtp-lx": config.weight_rtplx,
            "human": config.weight_human,
            "persp-2022": config.weight_generations,
            "everyday": config.everyday_weight,
        }
    )
    weights = {**TASK_WEIGHTS, **{k: v for k, v in overrides.items() if v is not None}}
    if task.startswith("human:templates"):
        return weights["human:templates"]
    return weights["human"] if task.startswith("human:") else weights[task]


def is_generation(ex: Example) -> bool:
    return ex.kind == "generation"


def text_kind(ex: Example) -> str:
    """Which English map scores a row when measured: model generations the continuation map, the rest web."""
    return CONTINUATION if is_generation(ex) else WEB


def calibration_rows(examples: Sequence[Example]) -> tuple[np.ndarray, np.ndarray]:
    """Masks: English Perspective rows of one version family (2020/2022) and rows with a rater share."""
    persp = np.array([e.domain == "perspective" and task_of(e) != "persp-later" for e in examples])
    share = np.array([e.share is not None for e in examples])
    return persp, share


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
class Features:
    counts: Any  # sparse n-gram counts
    emb: np.ndarray | None
    tasks: np.ndarray  # int task id per row
    task_names: list[str]
    attention: AttentionScores | None = None  # set by ``train`` (its probes depend on the folds)
    attention_en: AttentionScores | None = None  # the English probe's, likewise


@dataclass
class TrainResult:
    head: MlHead
    examples: list[Example]
    heldout: np.ndarray  # bool per example
    oof: dict[str, np.ndarray]  # mode -> out-of-fold raw combined score (training rows; NaN elsewhere)
    folds: list[np.ndarray]  # the CV folds (example row numbers)


def select(examples: Sequence[Example], config: TrainConfig) -> list[Example]:
    out = [e for e in examples if e.source != "rtp-lx" or e.lang in config.langs]
    if config.everyday_weight is None:
        out = [e for e in out if e.domain != EVERYDAY_DOMAIN]
    if not config.human_data:
        out = [e for e in out if e.domain != "human"]
    if config.subset is not None:
        names = join_components(out)
        out = [e for e, n in zip(out, names, strict=True) if unit_hash(n, "subset") < config.subset]
    if not out:
        raise PolytoxError("no training examples")
    return out


def pooled_target(examples: Sequence[Example], rows: np.ndarray, weight: float) -> np.ndarray:
    """Regression targets of ``rows``: each RTP-LX rating blended with the mean rating of its source prompt.

    Each RTP-LX text has only 3 ratings; the same source prompt was rated in up to 17 languages, so the
    mean over its translations (within ``rows`` only) is a far less noisy estimate of how toxic the prompt
    is. Culturally specific prompts (Index >= 1000) are not translations of each other (DATA.md).
    """
    own = np.array([examples[i].target for i in rows], dtype=np.float64)
    if weight <= 0:
        return own
    sums: dict[str, list[float]] = {}
    for i in rows:
        ex = examples[i]
        if ex.source == "rtp-lx" and translated(ex):
            sums.setdefault(ex.group, []).append(ex.target)
    out = own.copy()
    for k, i in enumerate(rows):
        values = sums.get(examples[i].group)
        if values is not None:
            out[k] = (1.0 - weight) * own[k] + weight * float(np.mean(values))
    return out


OFFSET_SCALE = 10.0  # one-hot task columns are scaled so the ridge penalty on their weights is negligible
# The n-gram ridge's lsqr tolerance. With task offsets the one-hot columns are the intercepts (no free
# intercept beside them, which they would duplicate) and lsqr runs to 1e-8: a free intercept left the
# level of the task-free output to the offsets' negligible penalty, so a 1e-7 relative change of the
# targets shifted each fold's non-English outputs by up to 0.014 (the cross-validated fits disagreed in
# level, and a retrain on other package versions moved per-language AUCs by up to 0.005). Without offsets
# (English) the fit is well posed and 1e-4 already agrees with 1e-6 to a correlation of 0.9999995.
NGRAM_TOL = 1e-4
NGRAM_TOL_OFFSETS = 1e-8


def _with_offsets(x: Any, tasks: np.ndarray, n_tasks: int, sparse_input: bool) -> Any:
    onehot = np.zeros((len(tasks), n_tasks), dtype=np.float32)
    onehot[np.arange(len(tasks)), tasks] = OFFSET_SCALE
    if sparse_input:
        sparse = require("scipy.sparse", "ml")
        return sparse.hstack([x, sparse.csr_matrix(onehot)], format="csr")
    return np.hstack([x, onehot])


def fit_parts(
    config: TrainConfig,
    feats: Features,
    examples: Sequence[Example],
    rows: np.ndarray,
    teacher: np.ndarray | None = None,
) -> Parts:
    """The two ridges fitted on ``rows``; with ``config.teacher_weight`` and ``teacher`` (the English path's
    reading of each English row, indexed like ``examples``), each pair among ``rows`` adds a teacher row."""
    linear = require("sklearn.linear_model", "ml")
    target = pooled_target(examples, rows, config.index_mean_weight)
    names = feats.task_names
    weight = np.array([task_weight(names[t], config) for t in feats.tasks[rows]])
    if config.fit_tasks is not None:  # zero weight, not fewer rows: the idf and standardisation stay shared
        weight *= np.array([names[t].startswith(config.fit_tasks) for t in feats.tasks[rows]])
    pairs = translation_pairs(examples, rows) if config.pair_weight else None
    if pairs is not None and not config.task_offsets:
        raise PolytoxError("the consistency term needs task offsets (they are the intercepts its rows leave out)")
    taught = _teacher_rows(config, examples, rows, teacher)
    if taught is not None and pairs is not None:
        raise PolytoxError("teacher rows and the consistency term are separate candidates: set one")
    n_tasks = len(names)
    tasks = feats.tasks[rows]
    idf = fit_idf(feats.counts[rows]).astype(np.float16).astype(np.float32)  # as stored in the head
    x = tfidf(feats.counts[rows], idf)
    if taught is not None:  # the teacher rows are one more task: their own offset column, no other
        t_pos, values, t_weight = taught
        x = require("scipy.sparse", "ml").vstack([x, x[t_pos]], format="csr")
        tasks = np.concatenate([tasks, np.full(len(t_pos), n_tasks)])
        target = np.concatenate([target, values])
        weight = np.concatenate([weight, t_weight])
        n_tasks += 1
    if config.task_offsets:
        x = _with_offsets(x, tasks, n_tasks, sparse_input=True)
    y, w = target, weight
    if pairs is not None:
        x, y, w = _with_pair_rows(x, target, weight, pairs, config.pair_weight or 0.0, sparse_input=True)
    ngram = linear.Ridge(
        alpha=config.alpha_ngram,
        solver="lsqr",
        fit_intercept=not config.task_offsets,
        tol=NGRAM_TOL_OFFSETS if config.task_offsets else NGRAM_TOL,
    )
    ngram.fit(x, y, sample_weight=w)
    n_feat = feats.counts.shape[1]
    parts = Parts(
        idf=idf, w_ngram=ngram.coef_[:n_feat].astype(np.float16).astype(np.float32), b_ngram=float(ngram.intercept_)
    )
    if feats.emb is not None:
        z = feats.emb[rows]
        mean = z.mean(axis=0)
        scale = z.std(axis=0)
        scale[scale < 1e-6] = 1.0
        z = (z - mean) / scale
        if taught is not None:
            z = np.vstack([z, z[taught[0]]])
        if config.task_offsets:
            z = _with_offsets(z, tasks, n_tasks, sparse_input=False)
        if pairs is None:
            model = linear.Ridge(alpha=config.alpha_emb, solver="cholesky").fit(z, target, sample_weight=weight)
            b_emb = float(model.intercept_)
        else:  # centred as sklearn centres for its intercept, over the text rows only: differences need none
            z_mean = np.average(z, axis=0, weights=weight)
            y_mean = float(np.average(target, weights=weight))
            z, y, w = _with_pair_rows(
                z - z_mean, target - y_mean, weight, pairs, config.pair_weight or 0.0, sparse_input=False
            )
            model = linear.Ridge(alpha=config.alpha_emb, solver="cholesky", fit_intercept=False)
            model.fit(z, y, sample_weight=w)
            b_emb = y_mean - float(z_mean @ model.coef_)
        parts.emb_mean, parts.emb_scale = mean.astype(np.float32), scale.astype(np.float32)
        parts.w_emb = model.coef_[: len(mean)].astype(np.float32)
        parts.b_emb = b_emb
    return parts


def _teacher_rows(
    config: TrainConfig, examples: Sequence[Example], rows: np.ndarray, teacher: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(positions in ``rows`` of the translations, their sources' English readings, the rows' weights) for
    the teacher rows of a fit, or None without them. Pairs whose source has no reading are left out."""
    if teacher is None or not config.teacher_weight:
        return None
    if not config.task_offsets:
        raise PolytoxError("teacher rows need task offsets (they carry one of their own)")
    t_pos, s_pos = translation_pairs(examples, rows)
    values = teacher[rows[s_pos]]
    keep = np.isfinite(values)
    return t_pos[keep], values[keep], np.full(int(keep.sum()), config.teacher_weight)


def english_reading(
    config: TrainConfig,
    examples: Sequence[Example],
    feats: Features,
    raw: dict[str, np.ndarray],
    folds: Sequence[np.ndarray],
) -> np.ndarray:
    """The English path's out-of-fold reading of every English training row on the head's web map (NaN
    elsewhere): its ridges' out-of-fold outputs in ``raw`` and its probe's, through an English combiner
    fitted on the other folds, then maps fitted without the fold (``oof_calibrated``). Teacher rows read it
    for their sources."""
    mode = modes_of(feats)[0]
    full = mode == "full"
    all_rows = np.concatenate(list(folds))
    combined = np.full(len(examples), np.nan)
    probe = raw.get("probe") if full else None
    for test_rows in folds:
        combiner = fit_one_combiner(config, examples, np.setdiff1d(all_rows, test_rows), raw, mode, other=False)
        if combiner is None:
            raise PolytoxError("the English combiner's rows of a fold carry one label only")
        combined[test_rows] = apply_combiner(
            combiner,
            raw["ngram"][test_rows],
            raw["emb"][test_rows] if full else None,
            None if probe is None else probe[test_rows],
        )
    # maps from English rows only: the English probe reads no other text, so their combined score is NaN
    english = np.array([e.lang == "en" for e in examples])
    reading = oof_calibrated(config, examples, combined, [f[english[f]] for f in folds])
    return np.where(english, reading, np.nan)


def _with_pair_rows(
    x: Any,
    target: np.ndarray,
    weight: np.ndarray,
    pairs: tuple[np.ndarray, np.ndarray],
    pair_weight: float,
    sparse_input: bool,
) -> tuple[Any, np.ndarray, np.ndarray]:
    """``x`` with one difference row per pair below it (translation minus source: every offset and
    intercept column 0), target 0 and weight ``pair_weight`` each."""
    t_pos, s_pos = pairs
    diff = x[t_pos] - x[s_pos]
    if sparse_input:
        sparse = require("scipy.sparse", "ml")
        stacked = sparse.vstack([x, diff], format="csr")
    else:
        stacked = np.vstack([x, diff])
    return (
        stacked,
        np.concatenate([target, np.zeros(len(t_pos))]),
        np.concatenate([weight, np.full(len(t_pos), pair_weight)]),
    )


def part_outputs(parts: Parts, feats: Features, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """Task-free outputs (no offset): the scale is set later by the combiner and the isotonic maps."""
    s_ngram = np.asarray(tfidf(feats.counts[rows], parts.idf) @ parts.w_ngram).ravel() + parts.b_ngram
    s_emb = None
    if feats.emb is not None and parts.w_emb is not None:
        assert parts.emb_mean is not None and parts.emb_scale is not None
        s_emb = ((feats.emb[rows] - parts.emb_mean) / parts.emb_scale) @ parts.w_emb + parts.b_emb
    return s_ngram, s_emb


SPLINE_KNOTS = 5  # a curved combiner's knots per input (docs/default-scorer.md, "The non-English combiner's form")
SPLINE_KNOT_PLACEMENT = "quantile"  # at each input's quantiles ("uniform": evenly over its range)
SPLINE_C = 1.0  # its penalty (each input's basis has SPLINE_KNOTS + 2 columns)


def spline_combiner_model(knots: str = SPLINE_KNOT_PLACEMENT) -> Any:
    """An unfitted curved combiner: each input through a cubic spline basis, then a logistic regression."""
    pipeline = require("sklearn.pipeline", "ml")
    preprocessing = require("sklearn.preprocessing", "ml")
    linear = require("sklearn.linear_model", "ml")
    return pipeline.make_pipeline(
        preprocessing.SplineTransformer(n_knots=SPLINE_KNOTS, degree=SPLINE_DEGREE, knots=knots),
        linear.LogisticRegression(C=SPLINE_C, max_iter=1000),
    )


def curved_combiner(model: Any) -> CurvedCombiner:
    """The head's form of a fitted ``spline_combiner_model``: one spline per input, its basis weighted by
    the logistic coefficients of its columns."""
    splines, logistic = model[0], model[1]
    per_input = logistic.coef_.reshape(len(splines.bsplines_), -1)
    return CurvedCombiner(
        bias=float(logistic.intercept_[0]),
        knots=tuple(tuple(float(v) for v in b.t) for b in splines.bsplines_),
        coef=tuple(tuple(float(v) for v in row) for row in per_input),
    )


def fit_combiner(
    s_ngram: np.ndarray,
    s_emb: np.ndarray | None,
    labels: np.ndarray,
    weight: np.ndarray,
    s_probe: np.ndarray | None = None,
    curved: bool = False,
) -> Combiner:
    """Logistic weights (bias, ngram, emb[, probe]) on the parts' outputs (emb weight 0 without ``s_emb``),
    or with ``curved`` a ``CurvedCombiner`` over the same inputs."""
    linear = require("sklearn.linear_model", "ml")
    inputs = [x for x in (s_ngram, s_emb, s_probe) if x is not None]
    if curved:
        model = spline_combiner_model().fit(np.column_stack(inputs), labels, logisticregression__sample_weight=weight)
        return curved_combiner(model)
    model = linear.LogisticRegression(C=100.0, max_iter=1000).fit(np.column_stack(inputs), labels, sample_weight=weight)
    coef = [float(c) for c in model.coef_.ravel()]
    return (float(model.intercept_[0]), *coef) if s_emb is not None else (float(model.intercept_[0]), coef[0], 0.0)


OTHER = ":other"  # combiner key suffix for non-English texts


def combiner_rows(
    config: TrainConfig, examples: Sequence[Example], rows: np.ndarray, other: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows a combiner learns from, their labels and weights.

    English (or everything, without ``split_combiner``): Perspective 2020/2022 and RTP-LX rows. Non-English
    (``other``): RTP-LX rows of the other 16 languages, whose ranking is all that combiner decides, and their
    everyday rows where the config has them.
    """
    if other:
        keep = np.array(
            [
                (examples[i].source == "rtp-lx" or examples[i].domain == EVERYDAY_DOMAIN) and examples[i].lang != "en"
                for i in rows
            ],
            dtype=bool,
        )
    elif config.split_combiner and config.other_rtplx_weight is None:
        keep = np.array(
            [
                task_of(examples[i]) in ("persp-2020", "persp-2022")
                or (examples[i].source == "rtp-lx" and examples[i].lang == "en")
                for i in rows
            ]
        )
    else:
        keep = np.array([task_of(examples[i]) in ("persp-2020", "persp-2022", "rtp-lx") for i in rows])
    sel = rows[keep]
    labels = np.array([examples[i].label for i in sel], dtype=bool)
    weight = np.array([task_weight(task_of(examples[i]), config) for i in sel])
    return sel, labels, weight


def fit_maps(config: TrainConfig, examples: Sequence[Example], rows: np.ndarray, combined: np.ndarray) -> ScaleMaps:
    """Isotonic maps from ``combined`` (indexed like ``examples``) fitted on ``rows``."""
    persp_mask, share_mask = calibration_rows(examples)
    p_rows = rows[persp_mask[rows]]
    s_rows = rows[share_mask[rows]]
    return fit_scale_maps(
        combined[p_rows],
        np.array([examples[i].target for i in p_rows]),
        np.array([is_generation(examples[i]) for i in p_rows]),
        config.web_gen_share,
        config.continuation_gen_share,
        combined[s_rows],
        np.array([examples[i].share for i in s_rows], dtype=float),
        [examples[i].lang for i in s_rows],
    )


def build_features(config: TrainConfig, examples: Sequence[Example], progress: Progress | None = None) -> Features:
    texts = [e.text for e in examples]
    counts = hashed_counts(texts, config.ngram)
    emb = embed_texts(config, texts, progress)
    tasks = [task_of(e) for e in examples]
    names = sorted(set(tasks))
    index = {n: i for i, n in enumerate(names)}
    return Features(counts=counts, emb=emb, tasks=np.array([index[t] for t in tasks]), task_names=names)


def embed_texts(config: TrainConfig, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray | None:
    if config.backbone is None:
        return None
    cache = EmbeddingCache(config.embedding_cache) if config.embedding_cache != "off" else None
    embedder = HiddenStateEmbedder(
        config.backbone, config.layers, max_tokens=config.max_tokens, batch_size=config.batch_size, cache=cache
    )
    callback = (lambda done, total: progress("embed", done, total)) if progress else None
    try:
        return embedder.embed(texts, progress=callback)
    finally:
        embedder.close()
        if cache is not None:
            cache.close()


def modes_of(feats: Features) -> tuple[str, ...]:
    return ("full", "ngram") if feats.emb is not None else ("ngram",)


def cross_validate(
    config: TrainConfig,
    examples: Sequence[Example],
    feats: Features,
    train_rows: np.ndarray,
    progress: Progress | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], list[np.ndarray]]:
    """Out-of-fold part outputs on ``train_rows`` and the nested out-of-fold combined score per mode.

    Returns (combined OOF score per mode, raw part outputs {"ngram", "emb", ...; "teacher": the English
    readings teacher rows read, with ``teacher_weight``}, the folds as row arrays).
    The combiner for fold k is fitted on the other folds' outputs only, so the combined score is
    out-of-fold too; the maps (``oof_calibrated``) are fitted the same way.
    """
    folds = make_folds(config, examples, train_rows)
    for scores in (feats.attention, feats.attention_en):
        if scores is not None and not all(np.array_equal(a, b) for a, b in zip(folds, scores.folds, strict=True)):
            raise PolytoxError("the attention probe's out-of-fold scores follow other folds")
    n = len(examples)
    raw = {"ngram": np.full(n, np.nan), "emb": np.full(n, np.nan)}
    if feats.attention is not None:
        raw["probe" + OTHER] = feats.attention.oof
    if feats.attention_en is not None:
        raw["probe"] = feats.attention_en.oof
    steps = len(folds) * (2 if config.other_rtplx_weight is not None else 1)
    for k, test_rows in enumerate(folds):
        parts = fit_parts(config, feats, examples, np.setdiff1d(train_rows, test_rows))
        s_ngram, s_emb = part_outputs(parts, feats, test_rows)
        raw["ngram"][test_rows] = s_ngram
        if s_emb is not None:
            raw["emb"][test_rows] = s_emb
        if progress:
            progress("cross-validation", k + 1, steps)
    # the teacher rows read the English path's out-of-fold reading, so the non-English ridges come second
    teacher = english_reading(config, examples, feats, raw, folds) if config.teacher_weight else None
    if teacher is not None:
        raw["teacher"] = teacher
    if config.other_rtplx_weight is not None:  # non-English rows: their own ridges' outputs
        for k, test_rows in enumerate(folds):
            other_rows = test_rows[np.array([examples[i].lang != "en" for i in test_rows], dtype=bool)]
            other = fit_parts(other_config(config), feats, examples, np.setdiff1d(train_rows, test_rows), teacher)
            o_ngram, o_emb = part_outputs(other, feats, other_rows)
            raw.setdefault("ngram" + OTHER, np.full(n, np.nan))[other_rows] = o_ngram
            if o_emb is not None:
                raw.setdefault("emb" + OTHER, np.full(n, np.nan))[other_rows] = o_emb
            if progress:
                progress("cross-validation", len(folds) + k + 1, steps)
    combined: dict[str, np.ndarray] = {}
    english = np.array([e.lang == "en" for e in examples])
    probe, probe_en = raw.get("probe" + OTHER), raw.get("probe")
    for mode in modes_of(feats):
        out = np.full(n, np.nan)
        for test_rows in folds:
            combiners = fit_combiners(config, examples, np.setdiff1d(train_rows, test_rows), raw, mode)
            out[test_rows] = apply_combiners(
                combiners,
                mode,
                other_view(raw, english, "ngram")[test_rows],
                other_view(raw, english, "emb")[test_rows] if mode == "full" else None,
                english[test_rows],
                None if probe is None else probe[test_rows],
                None if probe_en is None else probe_en[test_rows],
            )
        combined[mode] = out
    return combined, raw, folds


def make_folds(config: TrainConfig, examples: Sequence[Example], train_rows: np.ndarray) -> list[np.ndarray]:
    """The cross-validation folds (example row numbers): grouped K-fold by joined group, deterministic."""
    selection = require("sklearn.model_selection", "ml")
    names = join_components([examples[i] for i in train_rows])
    ids = {n: k for k, n in enumerate(sorted(set(names)))}
    groups = np.array([ids[n] for n in names])
    if len(ids) < config.folds:
        raise PolytoxError(f"{len(ids)} groups cannot make {config.folds} folds")
    splitter = selection.GroupKFold(n_splits=config.folds)
    return [train_rows[test] for _, test in splitter.split(np.zeros(len(train_rows)), groups=groups)]


def fit_combiners(
    config: TrainConfig, examples: Sequence[Example], rows: np.ndarray, raw: dict[str, np.ndarray], mode: str
) -> dict[str, Combiner]:
    """The combiner of ``mode`` (and of ``mode:other`` with ``split_combiner``) from part outputs on ``rows``;
    in mode ``full`` each also reads its attention probe where ``raw`` has its scores (``probe:other``:
    the non-English one, ``probe``: the English one)."""
    out: dict[str, Combiner] = {}
    for key, other in ((mode, False), (mode + OTHER, True)):
        if other and not (config.split_combiner or config.other_rtplx_weight is not None):
            continue
        combiner = fit_one_combiner(config, examples, rows, raw, mode, other)
        if combiner is not None:
            out[key] = combiner
    return out


def fit_one_combiner(
    config: TrainConfig,
    examples: Sequence[Example],
    rows: np.ndarray,
    raw: dict[str, np.ndarray],
    mode: str,
    other: bool,
) -> Combiner | None:
    """The English (or with ``other`` the non-English) combiner of ``mode`` (``fit_combiners``), None where
    its rows among ``rows`` carry one label only."""
    sel, labels, weight = combiner_rows(config, examples, rows, other)
    if len(set(labels.tolist())) < 2:
        return None
    suffix = OTHER if other and "ngram" + OTHER in raw else ""
    probe_key = "probe" + (OTHER if other else "")
    probe = raw[probe_key][sel] if mode == "full" and probe_key in raw else None
    return fit_combiner(
        raw["ngram" + suffix][sel],
        raw["emb" + suffix][sel] if mode == "full" else None,
        labels,
        weight,
        probe,
        curved=mode == "full" and (mode + OTHER if other else mode) in (config.combiner_splines or ()),
    )


def other_view(raw: dict[str, np.ndarray], english: np.ndarray, part: str) -> np.ndarray:
    """``raw[part]`` with the non-English rows' own-ridge outputs where they exist."""
    if part + OTHER not in raw:
        return raw[part]
    out = raw[part].copy()
    out[~english] = raw[part + OTHER][~english]
    return out


def apply_combiners(
    combiners: dict[str, Combiner],
    mode: str,
    s_ngram: np.ndarray,
    s_emb: np.ndarray | None,
    english: np.ndarray,
    s_probe: np.ndarray | None = None,
    s_probe_en: np.ndarray | None = None,
) -> np.ndarray:
    """The combined score of every row: non-English rows through ``mode:other`` where there is one (reading
    ``s_probe``), the rest through ``mode`` (reading ``s_probe_en``)."""
    out = apply_combiner(combiners[mode], s_ngram, s_emb, s_probe_en)
    if mode + OTHER in combiners:
        other = ~english
        out[other] = apply_combiner(
            combiners[mode + OTHER],
            s_ngram[other],
            None if s_emb is None else s_emb[other],
            None if s_probe is None else s_probe[other],
        )
    return out


def oof_calibrated(
    config: TrainConfig, examples: Sequence[Example], combined: np.ndarray, folds: Sequence[np.ndarray]
) -> np.ndarray:
    """Calibrated out-of-fold scores: each fold mapped by maps fitted on the other folds (English model
    generations by the continuation map, every other row by the web map)."""
    out = np.full(len(examples), np.nan)
    langs = [e.lang for e in examples]
    all_rows = np.concatenate(list(folds))
    for test_rows in folds:
        maps = fit_maps(config, examples, np.setdiff1d(all_rows, test_rows), combined)
        out[test_rows] = maps.apply(
            combined[test_rows], [langs[i] for i in test_rows], [text_kind(examples[i]) for i in test_rows]
        )
    return out


def oof_one_map(maps: ScaleMaps, examples: Sequence[Example], combined: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Out-of-fold combined scores of ``rows`` under one set of ``maps`` (the final head's, which ``train``
    fits on the training split's out-of-fold scores): what the per-language AUCs read.

    ``oof_calibrated`` maps each fold by maps fitted on the other folds, which is what a calibration
    measure needs. For a ranking measure it adds noise the scorer does not have: five slightly different
    per-language maps, pooled, reorder texts across folds (about 0.01 of mean AUC against humans). The
    head applies one monotone map per language, so one map, identical for every row, reads each row's
    out-of-fold score in the order it had; no label of a row can move its rank.
    """
    out = np.full(len(examples), np.nan)
    out[rows] = maps.apply(combined[rows], [examples[i].lang for i in rows], [text_kind(examples[i]) for i in rows])
    return out


def attention_scores(
    config: TrainConfig,
    examples: Sequence[Example],
    train_rows: np.ndarray,
    progress: Progress | None = None,
    english: bool = False,
) -> AttentionScores:
    """The attention probes of ``config`` on the training folds: the non-English ones
    (``attention_fit.fit_attention``) or, with ``english``, the English ones (``fit_english_attention``)."""
    assert config.backbone is not None
    embedder, folder = attention_embedder(
        config.backbone, config.layers, config.max_tokens, config.batch_size, config.embedding_cache
    )
    folds = make_folds(config, examples, train_rows)

    def target(rows: np.ndarray) -> np.ndarray:
        return pooled_target(examples, rows, config.index_mean_weight)

    try:
        if english:
            return fit_english_attention(
                examples,
                train_rows,
                folds,
                target,
                embedder,
                (config.english_attention_alpha_w, config.english_attention_alpha_v),
                english_probe_rows(config, examples, train_rows),
                folder,
                progress,
            )
        return fit_attention(
            examples,
            train_rows,
            folds,
            target,
            embedder,
            (config.attention_alpha_w, config.attention_alpha_v),
            folder,
            progress,
            config.attention_human_weight,
            config.everyday_weight,
            config.probe_consistency_weight,
        )
    finally:
        embedder.close()
        if embedder.cache is not None:
            embedder.cache.close()


def english_probe_rows(
    config: TrainConfig, examples: Sequence[Example], train_rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The English probe's fit rows of ``config`` and their weights (``attention_fit.english_fit_rows`` with
    the config's tasks and task weights): what ``train-scorer`` fits it on."""
    return english_fit_rows(
        examples, train_rows, config.english_attention_tasks, lambda task: task_weight(task, config), task_of
    )


def final_probe_inputs(feats: Features, examples: Sequence[Example]) -> np.ndarray | None:
    """Each row's score from the head's own probe that its combiner reads (English rows the English probe,
    the others the non-English one; NaN where that probe was not fitted); None without probes."""
    if feats.attention is None and feats.attention_en is None:
        return None
    english = np.array([e.lang == "en" for e in examples])
    out = np.full(len(examples), np.nan)
    if feats.attention is not None:
        out[~english] = feats.attention.final[~english]
    if feats.attention_en is not None:
        out[english] = feats.attention_en.final[english]
    return out


def reads_english_probe(config: TrainConfig, feats: Features) -> bool:
    """Whether the head gets an English probe: asked for, with a backbone, and with the non-English texts'
    own path (the English combiner then scores English texts only, which are all the probe scores)."""
    return config.english_attention and feats.emb is not None and config.other_rtplx_weight is not None


def train(
    config: TrainConfig, examples: Sequence[Example], progress: Progress | None = None, feats: Features | None = None
) -> TrainResult:
    """Split, cross-validate on the training split, fit the final head (never touching held-out rows)."""
    examples = list(examples)
    heldout = np.array(heldout_mask(examples), dtype=bool)
    train_rows = np.flatnonzero(~heldout)
    feats = feats if feats is not None else build_features(config, examples, progress)
    if config.attention and feats.emb is not None and feats.attention is None:  # kept on ``feats`` for measuring
        feats.attention = attention_scores(config, examples, train_rows, progress)
    if reads_english_probe(config, feats) and feats.attention_en is None:
        feats.attention_en = attention_scores(config, examples, train_rows, progress, english=True)
    combined, raw, folds = cross_validate(config, examples, feats, train_rows, progress)
    parts = fit_parts(config, feats, examples, train_rows)
    other_parts = (
        fit_parts(other_config(config), feats, examples, train_rows, raw.get("teacher"))
        if config.other_rtplx_weight is not None
        else None
    )
    combine: dict[str, Combiner] = {}
    maps: dict[str, ScaleMaps] = {}
    for mode in modes_of(feats):
        combine.update(fit_combiners(config, examples, train_rows, raw, mode))
        # maps fitted on out-of-fold combined scores: the final head's training-row scores would be optimistic
        maps[mode] = fit_maps(config, examples, train_rows, combined[mode])
    langs = tuple(sorted(set(PTP_LANGUAGES) | {e.lang for e in examples}))
    n_by_task: dict[str, int] = {}
    for i in train_rows:
        n_by_task[feats.task_names[feats.tasks[i]]] = n_by_task.get(feats.task_names[feats.tasks[i]], 0) + 1
    head = MlHead(
        ngram=config.ngram,
        idf=parts.idf,
        w_ngram=parts.w_ngram,
        b_ngram=parts.b_ngram,
        combine=combine,
        backbone=config.backbone if feats.emb is not None else None,
        layers=config.layers if feats.emb is not None else (),
        max_tokens=config.max_tokens,
        emb_mean=parts.emb_mean,
        emb_scale=parts.emb_scale,
        w_emb=parts.w_emb,
        b_emb=parts.b_emb,
        w_ngram_other=None if other_parts is None else other_parts.w_ngram,
        b_ngram_other=0.0 if other_parts is None else other_parts.b_ngram,
        w_emb_other=None if other_parts is None else other_parts.w_emb,
        b_emb_other=0.0 if other_parts is None else other_parts.b_emb,
        probe=None if feats.attention is None else feats.attention.probe,
        probe_en=None if feats.attention_en is None else feats.attention_en.probe,
        languages=langs,
        scale={m: s.to_json() for m, s in maps.items()},
        meta={
            "version": HEAD_VERSION,
            "data": training_data(n_by_task),
            "config": config.to_dict(),
            "n_train": len(train_rows),
            "n_heldout": int(heldout.sum()),
            "n_train_by_task": dict(sorted(n_by_task.items())),
        },
    )
    return TrainResult(head=head, examples=examples, heldout=heldout, oof=combined, folds=folds)
