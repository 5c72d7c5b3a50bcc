"""The attention probe of a head, fitted inside ``polytox train-scorer`` (``train.train``).

The probe (``attention.py``) is the third input of the non-English combiner, so the combiner and the maps
need it out of fold, exactly like the two ridges:

1. token states of the training split's fit rows (one backbone pass per row group, each kept in the
   polytox cache as an ``.npz`` file keyed by the texts, the backbone and the layers): RTP-LX in all 17
   languages at weight 1 and, with ``TrainConfig.attention_human_weight``, the pack's non-English
   human-labelled rows at that weight;
2. one probe per cross-validation fold, fitted on the other folds' fit rows, and the head's own probe,
   fitted on all of them; targets are ``train.pooled_target``'s, penalties ``TrainConfig.attention_alpha_*``
   (chosen on the training split, docs/default-scorer.md "Attention pooling");
3. one more backbone pass over every non-English text (both splits) computes all the probes' scores the way
   the scorer does at run time (``HiddenStateEmbedder.embed_and_probe``, the probe's scores cached in the
   embedding cache under its digest): each training row keeps its own fold's probe score, and every row
   keeps the head's probe score for measuring the finished head.

The English probe (head version 5, ``fit_english_attention``) is fitted the same way on the training split's
Perspective-scored English rows, and scored over every English text and the training split's RTP-LX rows
(the English combiner learns from those too); it is the English combiner's third input.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..._util.atomic import atomic_write
from ...scoring.ml.attention import PROBE_ITERATIONS, AttentionProbe, fit_attention_probe
from ...scoring.ml.embed_cache import EmbeddingCache
from ...scoring.ml.embedder import HiddenStateEmbedder
from ...types import text_hash
from .consistency import translated, translation_pairs
from .data import EVERYDAY_DOMAIN, Example

log = logging.getLogger("polytox")

Progress = Callable[[str, int, int], None]


@dataclass
class AttentionScores:
    """The fitted probes' scores per example (NaN where a score is not needed)."""

    probe: AttentionProbe  # the head's: fitted on every fit row of the training split
    oof: np.ndarray  # non-English training rows: the score of the probe fitted without the row's fold
    final: np.ndarray  # non-English rows: the head's probe's score
    folds: list[np.ndarray]  # the folds the out-of-fold scores follow (``train.make_folds``)


def states_path(cache_dir: Path, embedder: HiddenStateEmbedder, texts: Sequence[str]) -> Path:
    """Where the token states of ``texts`` are kept: one file per (backbone, layers, length cap, texts)."""
    key = text_hash(f"{embedder.key}|{list(embedder.layers)}\n" + "\n".join(texts))
    return cache_dir / "token-states" / f"{key[:24]}.npz"


def cached_token_states(
    embedder: HiddenStateEmbedder, texts: Sequence[str], cache_dir: Path | None
) -> tuple[np.ndarray, np.ndarray]:
    """``embedder.token_states(texts)``, read from (or written atomically to) ``cache_dir`` when given."""
    path = None if cache_dir is None else states_path(cache_dir, embedder, texts)
    if path is not None and path.exists():
        with np.load(path) as stored:
            if int(stored["texts"]) == len(texts):
                return stored["states"], stored["offsets"]
    states, offsets = embedder.token_states(texts)
    if path is not None:

        def write(tmp: str) -> None:
            with open(tmp, "wb") as fh:
                np.savez(fh, states=states, offsets=offsets, texts=np.array(len(texts)))

        atomic_write(path, write)
    return states, offsets


def take(states: np.ndarray, offsets: np.ndarray, texts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The token states and offsets of the texts numbered ``texts`` only."""
    lengths = np.diff(offsets)[texts]
    index = (
        np.concatenate([np.arange(offsets[t], offsets[t + 1]) for t in texts])
        if len(texts)
        else np.zeros(0, dtype=np.int64)
    )
    return states[index], np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def fit_row_groups(
    examples: Sequence[Example],
    train_rows: np.ndarray,
    human_weight: float | None,
    everyday_weight: float | None = None,
    sources: bool = False,
) -> list[tuple[np.ndarray, float]]:
    """The probe's fit rows as (rows, weight) groups: the training split's RTP-LX rows at weight 1, its
    non-English human-labelled pack rows at ``human_weight`` and its non-English everyday sentences at
    ``everyday_weight`` (each group none when its weight is None); with ``sources``, the English Parallel UD
    sentences at weight 0, which enter the fit only through a consistency term's pairs (RTP-LX's English
    sources are fit rows already)."""
    groups = [(np.array([i for i in train_rows if examples[i].source == "rtp-lx"], dtype=np.int64), 1.0)]
    if everyday_weight is not None:
        groups.append(
            (
                np.array(
                    [i for i in train_rows if examples[i].domain == EVERYDAY_DOMAIN and examples[i].lang != "en"],
                    dtype=np.int64,
                ),
                float(everyday_weight),
            )
        )
    if human_weight is not None:
        groups.append(
            (
                np.array(
                    [i for i in train_rows if examples[i].domain == "human" and examples[i].lang != "en"],
                    dtype=np.int64,
                ),
                float(human_weight),
            )
        )
    if sources:
        english_pud = [
            i
            for i in train_rows
            if examples[i].domain == EVERYDAY_DOMAIN and examples[i].lang == "en" and translated(examples[i])
        ]
        groups.append((np.array(english_pud, dtype=np.int64), 0.0))
    return [(rows, weight) for rows, weight in groups if len(rows)]


def group_states(
    embedder: HiddenStateEmbedder,
    examples: Sequence[Example],
    groups: Sequence[tuple[np.ndarray, float]],
    cache_dir: Path | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The rows of ``groups`` side by side: (rows, their weights, token states, offsets), each group's
    states cached on its own (``cached_token_states``)."""
    parts = [cached_token_states(embedder, [examples[i].text for i in rows], cache_dir) for rows, _ in groups]
    rows = np.concatenate([r for r, _ in groups]) if groups else np.zeros(0, dtype=np.int64)
    weights = np.concatenate([np.full(len(r), w) for r, w in groups]) if groups else np.zeros(0)
    starts = np.cumsum([0] + [int(o[-1]) for _, o in parts])
    offsets = np.concatenate([o[:-1] + start for (_, o), start in zip(parts, starts, strict=False)] + [starts[-1:]])
    states = np.concatenate([s for s, _ in parts]) if parts else np.zeros((0, 0), dtype=np.float16)
    return rows, weights, states, offsets.astype(np.int64)


def fold_probes(
    states: np.ndarray,
    offsets: np.ndarray,
    position: np.ndarray,
    fit_rows: np.ndarray,
    folds: Sequence[np.ndarray],
    target: Callable[[np.ndarray], np.ndarray],
    penalties: tuple[float, float],
    weight: np.ndarray | None = None,
    final: bool = True,
    progress: Progress | None = None,
    max_iter: int = PROBE_ITERATIONS,
    pairs_of: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None,
    pair_weight: float = 0.0,
) -> list[AttentionProbe]:
    """One probe per fold, fitted on the ``fit_rows`` (example rows) outside it, then (``final``) one on all
    of them: the head's. ``position`` maps an example row to its text in ``states`` / ``offsets``;
    ``weight`` (per text of ``states``, None: unweighted) weighs the rows in the fit; ``max_iter`` caps each
    fit's L-BFGS iterations (the head's by default). ``pairs_of(rows)`` (positions in ``rows``) gives each
    fit the pairs of its consistency term, at ``pair_weight`` each."""
    probes: list[AttentionProbe] = []
    left_out = [*folds, np.zeros(0, dtype=np.int64)] if final else list(folds)  # the last: none left out
    for k, fold in enumerate(left_out):
        rows = np.setdiff1d(fit_rows, fold)
        probes.append(
            fit_attention_probe(
                *take(states, offsets, position[rows]),
                target(rows),
                *penalties,
                max_iter=max_iter,
                weight=None if weight is None else weight[position[rows]],
                pairs=None if pairs_of is None else pairs_of(rows),
                pair_weight=pair_weight,
            )
        )
        if progress:
            progress("attention probes", k + 1, len(left_out))
    return probes


def fold_scores(
    probes: Sequence[AttentionProbe],
    folds: Sequence[np.ndarray],
    rows: np.ndarray,
    position: np.ndarray,
    states: np.ndarray,
    offsets: np.ndarray,
    n: int,
) -> np.ndarray:
    """Out-of-fold probe scores read from token states: each of ``rows`` (example rows that have states,
    ``position``) scored by the probe of the fold that holds it (``probes[k]`` left out ``folds[k]``), NaN
    for the other of the ``n`` examples. The training-split trials read their fold probes this way;
    ``fit_attention`` scores through the backbone instead, as the scorer does."""
    out = np.full(n, np.nan)
    for probe, fold in zip(probes, folds, strict=False):  # a final probe after the folds' is not read
        test = np.intersect1d(rows, fold)
        out[test] = probe.score(*take(states, offsets, position[test]))
    return out


def english_fit_rows(
    examples: Sequence[Example],
    train_rows: np.ndarray,
    tasks: Sequence[str] | None,
    weight_of: Callable[[str], float],
    task: Callable[[Example], str],
) -> tuple[np.ndarray, np.ndarray]:
    """The English probe's fit rows, the training split's English rows of ``tasks`` (None: all), and
    their weights (their tasks' regression weights)."""
    rows = np.array(
        [i for i in train_rows if examples[i].lang == "en" and (tasks is None or task(examples[i]) in tasks)],
        dtype=np.int64,
    )
    return rows, np.array([weight_of(task(examples[i])) for i in rows])


def fit_attention(
    examples: Sequence[Example],
    train_rows: np.ndarray,
    folds: Sequence[np.ndarray],
    target: Callable[[np.ndarray], np.ndarray],
    embedder: HiddenStateEmbedder,
    penalties: tuple[float, float],
    cache_dir: Path | None = None,
    progress: Progress | None = None,
    human_weight: float | None = None,
    everyday_weight: float | None = None,
    pair_weight: float | None = None,
) -> AttentionScores:
    """The non-English probe: fold probes and the head's probe on the fit rows of ``train_rows``
    (``fit_row_groups``), and their scores of every non-English text; with ``pair_weight``, each fit has
    the consistency term over its rows' translation pairs (``consistency.translation_pairs``).

    ``target(rows)`` gives the regression target of example rows (``train.pooled_target``); ``embedder``
    reads the head's backbone and layers (its embedding cache, if any, keeps the probes' scores)."""
    fit_rows, row_weight, states, offsets = non_english_fit(
        embedder, examples, train_rows, human_weight, cache_dir, everyday_weight, sources=pair_weight is not None
    )
    other = np.array([i for i, e in enumerate(examples) if e.lang != "en"], dtype=np.int64)
    return fit_scored(
        examples,
        train_rows,
        folds,
        target,
        embedder,
        penalties,
        (states, offsets),
        fit_rows,
        fit_rows,
        row_weight,
        other,
        "attention",
        progress,
        None if pair_weight is None else (lambda rows: translation_pairs(examples, rows)),
        pair_weight or 0.0,
    )


def non_english_fit(
    embedder: HiddenStateEmbedder,
    examples: Sequence[Example],
    train_rows: np.ndarray,
    human_weight: float | None,
    cache_dir: Path | None,
    everyday_weight: float | None = None,
    sources: bool = False,
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray]:
    """The non-English probe's fit: (rows, their weights, token states, offsets) of ``fit_row_groups``.
    The weights are None with neither ``human_weight`` nor ``everyday_weight``: every row is RTP-LX then,
    and the fit is unweighted."""
    groups = fit_row_groups(examples, train_rows, human_weight, everyday_weight, sources)
    rows, row_weight, states, offsets = group_states(embedder, examples, groups, cache_dir)
    unweighted = human_weight is None and everyday_weight is None and not sources
    return rows, None if unweighted else row_weight, states, offsets


def fit_english_attention(
    examples: Sequence[Example],
    train_rows: np.ndarray,
    folds: Sequence[np.ndarray],
    target: Callable[[np.ndarray], np.ndarray],
    embedder: HiddenStateEmbedder,
    penalties: tuple[float, float],
    english: tuple[np.ndarray, np.ndarray],
    cache_dir: Path | None = None,
    progress: Progress | None = None,
) -> AttentionScores:
    """The English probe: fold probes and the head's probe on ``english`` (``english_fit_rows``: the rows
    and their weights; their token states kept as one file), and their scores of every English text and of
    the training split's other RTP-LX rows, from which the English combiner also learns
    (``train.combiner_rows``)."""
    rows, row_weight = english
    _, _, states, offsets = group_states(embedder, examples, [(rows, 1.0)], cache_dir)
    training = set(train_rows.tolist())
    scored = np.array(
        [i for i, e in enumerate(examples) if e.lang == "en" or (e.source == "rtp-lx" and i in training)],
        dtype=np.int64,
    )
    return fit_scored(
        examples,
        train_rows,
        folds,
        target,
        embedder,
        penalties,
        (states, offsets),
        rows,
        rows,
        row_weight,
        scored,
        "English attention",
        progress,
    )


def fit_scored(
    examples: Sequence[Example],
    train_rows: np.ndarray,
    folds: Sequence[np.ndarray],
    target: Callable[[np.ndarray], np.ndarray],
    embedder: HiddenStateEmbedder,
    penalties: tuple[float, float],
    token_states: tuple[np.ndarray, np.ndarray],
    rows: np.ndarray,
    fit_rows: np.ndarray,
    row_weight: np.ndarray | None,
    scored: np.ndarray,
    name: str,
    progress: Progress | None,
    pairs_of: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None,
    pair_weight: float = 0.0,
) -> AttentionScores:
    """Fold probes and the head's probe fitted on ``fit_rows`` (example rows among ``rows``, whose token
    states ``token_states`` holds in that order; ``row_weight`` per row of ``rows``, None: unweighted),
    then every probe's score of the ``scored`` rows in one backbone pass, as the scorer computes them."""
    states, offsets = token_states
    position = np.full(len(examples), -1)
    position[rows] = np.arange(len(rows))
    log.info(
        "%s probe: %d training texts, %d tokens", name, len(fit_rows), int(np.diff(offsets)[position[fit_rows]].sum())
    )
    probes = fold_probes(
        states,
        offsets,
        position,
        fit_rows,
        folds,
        target,
        penalties,
        row_weight,
        progress=None if progress is None else lambda what, done, total: progress(f"{name} probes", done, total),
        pairs_of=pairs_of,
        pair_weight=pair_weight,
    )
    del states
    callback = (lambda done, total: progress(f"{name} scores", done, total)) if progress else None
    _, scores = embedder.embed_and_probe([examples[i].text for i in scored], probes, callback)
    oof = np.full(len(examples), np.nan)
    final = np.full(len(examples), np.nan)
    final[scored] = scores[:, -1]
    in_train = np.isin(scored, train_rows)
    for k, fold in enumerate(folds):
        held = in_train & np.isin(scored, fold)
        oof[scored[held]] = scores[held, k]
    return AttentionScores(probe=probes[-1], oof=oof, final=final, folds=[np.asarray(f) for f in folds])


def attention_embedder(
    backbone: str, layers: Sequence[int], max_tokens: int, batch_size: int, cache: str | None
) -> tuple[HiddenStateEmbedder, Path | None]:
    """The embedder that reads the probe's token states (with the training's embedding cache unless
    ``cache`` is ``off``) and the cache folder for the fit rows' token states."""
    from ...scoring.ml.embed_cache import default_embedding_cache_path

    store = None if cache == "off" else EmbeddingCache(cache)
    folder = None if store is None else (Path(cache).parent if cache else default_embedding_cache_path().parent)
    return HiddenStateEmbedder(backbone, layers, max_tokens=max_tokens, batch_size=batch_size, cache=store), folder
