"""Training for the data-based methods, on the transformers ``Trainer`` (accelerate underneath).

- ``dapt``: continue pretraining a causal LM on one side of the corpus (RTP §5.1 DAPT; the non-toxic side
  gives DExperts' expert, the toxic side its anti-expert);
- ``atcon``: add ``<|toxic|>`` / ``<|nontoxic|>`` to the vocabulary, prepend the document's token, continue
  pretraining on both sides (RTP §5.1 ATCON, Appendix B.3);
- ``vocab-shift``: learn the ``V x 2`` projection ``W_t`` with the LM frozen, LM loss, lr 1e-3 (B.3);
- ``pplm-head``: a linear toxicity head over the frozen LM's mean-pooled hidden states (PPLM's attribute
  model, trained on the same labels).

Every trainer checkpoints into ``OUT/checkpoints`` and resumes from the last checkpoint when rerun; the
final artefact (a ``save_pretrained`` model, or the small weight file) and ``detox.json`` go to ``OUT``.
``lora=True`` trains LoRA adapters (PEFT) for large models and merges them into the saved model.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

from .. import constants as C
from .._util.atomic import atomic_write_text
from ..errors import PolytoxError, require
from .corpus import NONTOXIC, TOXIC, Corpus

T = TypeVar("T")
COLUMN_PROBE = 25  # VOCAB-SHIFT: tokens of the learned column's each end recorded in detox.json


@dataclass
class TrainConfig:
    """What every trainer shares. ``max_steps > 0`` overrides ``epochs``; ``lr`` / ``batch_size`` None = the
    method's default (constants). ``max_length`` is the block size of packed training (DAPT, ATCON,
    VOCAB-SHIFT) and caps a document's tokens for the PPLM head."""

    base_model: str
    out: str
    epochs: float = 1.0
    max_steps: int = -1
    batch_size: int | None = None
    grad_accum: int = 1
    lr: float | None = None
    max_length: int = C.DAPT_BLOCK_SIZE
    save_steps: int = 50
    lora: bool = False
    seed: int = 0


def _load(base: str) -> tuple[Any, Any, str]:
    from ..models import resolve_model

    transformers = require("transformers", "hf")
    transformers.utils.logging.disable_progress_bar()
    path, _ = resolve_model(base)
    tok = transformers.AutoTokenizer.from_pretrained(path)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype="float32")
    return model, tok, path


def _doc_ids(tok: Any, text: str, attribute: int | None = None, max_length: int | None = None) -> list[int]:
    """One document's ids as its tokenizer writes them (BOS where the tokenizer adds one), EOS-terminated,
    led by its attribute token (ATCON). ``max_length`` truncates (per-document rows only)."""
    kw: dict[str, Any] = {"truncation": True, "max_length": max_length - 2} if max_length else {}
    ids = list(tok(text, add_special_tokens=True, **kw)["input_ids"])
    if tok.eos_token_id is not None and (not ids or ids[-1] != tok.eos_token_id):
        ids.append(tok.eos_token_id)
    return [attribute, *ids] if attribute is not None else ids


def _encode(tok: Any, docs: Sequence[tuple[str, int]], max_length: int) -> list[dict[str, Any]]:
    """One row per document (truncated to ``max_length`` tokens): the PPLM head reads documents one by one."""
    return [{"input_ids": _doc_ids(tok, text, None, max_length), "label": label} for text, label in docs]


def pack_blocks(docs: Sequence[list[int]], block_size: int, label: int = 0) -> list[dict[str, Any]]:
    """GPT-2-style packing (the Hugging Face ``run_clm`` recipe RTP Appendix B.4 ran): concatenate the
    documents' ids (each EOS-terminated) and cut the stream into ``block_size``-token blocks, so a block
    spans document boundaries and the model never learns that text stops after a few tokens. The last,
    shorter block is kept (the collator pads it) so a small corpus loses nothing."""
    if block_size < 2:
        raise PolytoxError(f"block size must be at least 2 tokens, got {block_size}")
    stream = [i for ids in docs for i in ids]
    return [
        {"input_ids": stream[i : i + block_size], "label": label}
        for i in range(0, len(stream), block_size)
        if len(stream[i : i + block_size]) > 1
    ]


def _collate(pad_id: int, no_loss: frozenset[int] = frozenset()) -> Any:
    """Pad rows; ``labels`` = ids with padding and the ``no_loss`` ids (ATCON's attribute tokens, which
    the model reads but is never asked to predict) set to -100."""

    def collate(rows: list[dict[str, Any]]) -> dict[str, Any]:
        import torch

        width = max(len(r["input_ids"]) for r in rows)
        ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, : len(r["input_ids"])] = torch.tensor(r["input_ids"])
            mask[i, : len(r["input_ids"])] = 1
        labels = ids.masked_fill(mask == 0, -100)
        for token in no_loss:
            labels = labels.masked_fill(ids == token, -100)
        return {
            "input_ids": ids,
            "attention_mask": mask,
            "labels": labels,
            "attribute": torch.tensor([r["label"] for r in rows], dtype=torch.long),
        }

    return collate


class _LMOnly:
    """Drops the ``attribute`` column before a plain causal LM sees the batch."""

    def __init__(self, collate: Any) -> None:
        self.collate = collate

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        batch = self.collate(rows)
        batch.pop("attribute")
        return batch


def _fit(
    model: Any, rows: list[dict[str, Any]], collate: Any, cfg: TrainConfig, lr: float, batch_size: int
) -> dict[str, Any]:
    """Train with ``transformers.Trainer``, resuming from ``OUT/checkpoints`` when a checkpoint exists."""
    transformers = require("transformers", "hf")
    from transformers.trainer_utils import get_last_checkpoint

    ckpt = Path(cfg.out) / "checkpoints"
    ckpt.mkdir(parents=True, exist_ok=True)
    args = transformers.TrainingArguments(
        output_dir=str(ckpt),
        per_device_train_batch_size=batch_size,
        gradient_accumulation_steps=cfg.grad_accum,
        num_train_epochs=cfg.epochs,
        max_steps=cfg.max_steps,
        learning_rate=lr,
        save_steps=cfg.save_steps,
        save_total_limit=1,
        logging_steps=10,
        report_to=[],
        seed=cfg.seed,
        remove_unused_columns=False,
        dataloader_num_workers=0,
        disable_tqdm=True,
        save_only_model=False,
        dataloader_pin_memory=False,
    )
    trainer = transformers.Trainer(model=model, args=args, train_dataset=rows, data_collator=collate)
    last = get_last_checkpoint(str(ckpt))
    started = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=last)
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    return {
        "steps": int(result.global_step),
        "train_loss": float(result.training_loss),
        "first_logged_loss": losses[0] if losses else None,
        "last_logged_loss": losses[-1] if losses else None,
        "resumed_from": last,
        "seconds": round(time.perf_counter() - started, 1),
    }


def _write_meta(cfg: TrainConfig, method: str, corpus: Corpus, extra: dict[str, Any]) -> None:
    meta = {"method": method, "base_model": cfg.base_model, "config": asdict(cfg), "corpus": corpus.stats, **extra}
    atomic_write_text(Path(cfg.out) / "detox.json", json.dumps(meta, indent=2, default=str) + "\n")


def _maybe_lora(model: Any, cfg: TrainConfig, extra_modules: Sequence[str] = ()) -> Any:
    if not cfg.lora:
        return model
    peft = require("peft", "detox", "peft")
    config = peft.LoraConfig(
        task_type="CAUSAL_LM",
        r=8,
        lora_alpha=16,
        target_modules="all-linear",
        modules_to_save=list(extra_modules) or None,
    )
    return peft.get_peft_model(model, config)


def add_attribute_tokens(model: Any, tok: Any, seed: int = 0) -> dict[int, int]:
    """Add ATCON's ``<|nontoxic|>`` / ``<|toxic|>`` to the vocabulary; return ``{label: token id}``.

    Each new input-embedding row is drawn on its own from a diagonal Gaussian with the existing rows'
    per-dimension mean and spread, so the two tokens start as distinct vectors of a real token's scale
    (as GPT-2's freshly initialised rows were for RTP). transformers' default ``mean_resizing`` draws them
    with 1e-9 times the embeddings' covariance: the two tokens start as the same vector, the model cannot
    tell them apart, and a short run never teaches them a meaning (the runs are in docs/detox.md). An
    untied output layer gets the mean output row for them: the attribute tokens are read, never predicted
    (their labels are masked, and generation bans them)."""
    import torch

    old = model.get_input_embeddings().weight.detach().clone()
    out_before = model.get_output_embeddings()
    old_out = out_before.weight.detach().clone() if out_before is not None else None
    tied = out_before is not None and out_before.weight is model.get_input_embeddings().weight
    tok.add_special_tokens({"additional_special_tokens": [C.ATCON_NONTOXIC_TOKEN, C.ATCON_TOXIC_TOKEN]})
    model.resize_token_embeddings(len(tok), mean_resizing=False)
    ids = {
        NONTOXIC: int(tok.convert_tokens_to_ids(C.ATCON_NONTOXIC_TOKEN)),
        TOXIC: int(tok.convert_tokens_to_ids(C.ATCON_TOXIC_TOKEN)),
    }
    gen = torch.Generator().manual_seed(seed)
    mean, std = old.float().mean(0), old.float().std(0)
    with torch.no_grad():
        emb = model.get_input_embeddings().weight
        for token in ids.values():
            if token >= old.shape[0]:
                emb[token] = (mean + std * torch.randn(old.shape[1], generator=gen)).to(emb.dtype)
        out = model.get_output_embeddings()
        if out is not None and not tied and old_out is not None:
            for token in ids.values():
                if token >= old_out.shape[0]:
                    out.weight[token] = old_out.float().mean(0).to(out.weight.dtype)
    return ids


def _shuffled(docs: Sequence[T], seed: int) -> list[T]:
    out = list(docs)
    random.Random(seed).shuffle(out)
    return out


def train_lm(corpus: Corpus, cfg: TrainConfig, method: str = "dapt", subset: str = "nontoxic") -> Path:
    """DAPT on one side of the corpus, or ATCON on both with attribute tokens; returns the model folder.

    Continued pretraining as RTP ran it (the Hugging Face language-modelling script, Appendix B.4):
    documents (ATCON: each led by its label's attribute token) concatenated with EOS separators and cut
    into ``cfg.max_length``-token blocks."""
    model, tok, _ = _load(cfg.base_model)
    attribute: dict[int, int] | None = None
    if method == "atcon":
        attribute = add_attribute_tokens(model, tok, cfg.seed)
        docs = corpus.train
    elif method == "dapt":
        if subset not in ("nontoxic", "toxic"):
            raise PolytoxError(f"dapt subset must be nontoxic or toxic, got {subset!r}")
        label = NONTOXIC if subset == "nontoxic" else TOXIC
        docs = [d for d in corpus.train if d[1] == label]
    else:
        raise PolytoxError(f"unknown LM training method {method!r}")
    ids = [_doc_ids(tok, text, attribute[y] if attribute else None) for text, y in _shuffled(docs, cfg.seed)]
    rows = pack_blocks(ids, cfg.max_length)
    model = _maybe_lora(model, cfg, ("embed_tokens", "lm_head") if method == "atcon" else ())
    no_loss = frozenset(attribute.values()) if attribute else frozenset()
    stats = _fit(
        model,
        rows,
        _LMOnly(_collate(tok.pad_token_id, no_loss)),
        cfg,
        cfg.lr or C.DAPT_LR,
        cfg.batch_size or C.DAPT_BATCH_SIZE,
    )
    if cfg.lora:
        model = model.merge_and_unload()
    model.save_pretrained(cfg.out)
    tok.save_pretrained(cfg.out)
    _write_meta(
        cfg,
        method,
        corpus,
        {
            "subset": subset if method == "dapt" else "both",
            "n_documents": len(docs),
            "n_tokens": sum(len(x) for x in ids),
            "n_blocks": len(rows),
            "block_size": cfg.max_length,
            "training": stats,
        },
    )
    return Path(cfg.out)


class VocabShiftModel:
    """Frozen LM + trainable ``W_t``: logits + ``shared + s * shift`` with s = +1 for a non-toxic block and
    -1 for a toxic one, i.e. RTP's ``V x 2`` projection ``W_t = [shared + shift, shared - shift]`` split
    into what the two labels share and what tells them apart.

    Trained free, each column of ``W_t`` mostly learns what its side shares with the other (the corpus'
    domain against the base LM: with Adam every token absent from a side moves down at the same rate,
    toxic or not), so ``beta * W_t[:, nontoxic]`` pushed toward corpus style, not away from toxicity
    (docs/detox.md). The saved ``W`` is ``[shift, -shift]``: the label part alone,
    whose non-toxic column ranks the toxic side's vocabulary lowest; ``shared`` is saved beside it and not
    applied at generation. Built lazily so torch stays optional."""

    @staticmethod
    def build(lm: Any) -> Any:
        import torch

        class Module(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                vocab = lm.get_output_embeddings().weight.shape[0]
                self.shared = torch.nn.Parameter(torch.zeros(vocab))
                self.shift = torch.nn.Parameter(torch.zeros(vocab))
                self._lm = (lm,)  # a tuple: the frozen LM is neither trained nor checkpointed

            @property
            def W(self) -> Any:
                return torch.stack([self.shift, -self.shift], dim=1)

            def forward(self, input_ids: Any, attention_mask: Any, labels: Any, attribute: Any) -> dict[str, Any]:
                with torch.no_grad():
                    logits = self._lm[0](input_ids=input_ids, attention_mask=attention_mask).logits
                sign = (1 - 2 * attribute).to(logits.dtype).unsqueeze(1)  # non-toxic (0) -> +1, toxic -> -1
                shifted = logits + (self.shared.unsqueeze(0) + sign * self.shift.unsqueeze(0)).unsqueeze(1)
                loss = torch.nn.functional.cross_entropy(
                    shifted[:, :-1].reshape(-1, shifted.shape[-1]), labels[:, 1:].reshape(-1), ignore_index=-100
                )
                return {"loss": loss}

        return Module()


class HeadModel:
    """A trainable linear head over cached mean-pooled hidden states (PPLM's attribute model)."""

    @staticmethod
    def build(hidden_size: int) -> Any:
        import torch

        class Module(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.head = torch.nn.Linear(hidden_size, 2)

            def forward(self, features: Any, attribute: Any) -> dict[str, Any]:
                logits = self.head(features)
                return {"loss": torch.nn.functional.cross_entropy(logits, attribute), "logits": logits}

        return Module()


def pooled_states(
    lm: Any, tok: Any, docs: Sequence[tuple[str, int]], length: int, batch_size: int = 16
) -> list[dict[str, Any]]:
    """Each document's last-layer hidden states averaged over its tokens, read once with the LM frozen
    (Dathathri et al.'s ``--cached`` mode: the head's epochs then cost nothing more)."""
    import torch

    collate = _collate(tok.pad_token_id)
    rows: list[dict[str, Any]] = []
    with torch.no_grad():
        for i in range(0, len(docs), batch_size):
            batch = collate(_encode(tok, docs[i : i + batch_size], length))
            mask = batch["attention_mask"].to(lm.device)
            hidden = lm(
                input_ids=batch["input_ids"].to(lm.device), attention_mask=mask, output_hidden_states=True
            ).hidden_states[-1]
            m = mask.unsqueeze(-1).to(hidden.dtype)
            pooled = ((hidden * m).sum(1) / m.sum(1).clamp_min(1)).cpu()
            rows += [{"features": f, "label": int(y)} for f, y in zip(pooled, batch["attribute"], strict=True)]
    return rows


def _collate_features(rows: list[dict[str, Any]]) -> dict[str, Any]:
    import torch

    return {
        "features": torch.stack([r["features"] for r in rows]),
        "attribute": torch.tensor([r["label"] for r in rows], dtype=torch.long),
    }


def _frozen(cfg: TrainConfig) -> tuple[Any, Any]:
    """The base LM, frozen, on the device ``Trainer`` trains on (CUDA when there is one): VOCAB-SHIFT's
    module holds it outside its registered parameters, so ``Trainer`` would not move it there."""
    import torch

    lm, tok, _ = _load(cfg.base_model)
    lm.eval().requires_grad_(False)
    return lm.to("cuda" if torch.cuda.is_available() else "cpu"), tok


def train_vocab_shift(corpus: Corpus, cfg: TrainConfig) -> Path:
    """Learn ``W_t`` on the balanced corpus with the LM frozen (RTP Appendix B.3: the pretraining setup of
    Table 7, learning rate 1e-3); each side is packed into blocks of its own label. Writes
    ``vocab_shift.safetensors``."""
    from safetensors.torch import save_file

    from .vocab_shift import WEIGHTS

    lm, tok = _frozen(cfg)
    module = VocabShiftModel.build(lm)
    rows: list[dict[str, Any]] = []
    for label in (NONTOXIC, TOXIC):
        side = [t for t, y in _shuffled(corpus.train, cfg.seed) if y == label]
        rows += pack_blocks([_doc_ids(tok, t) for t in side], cfg.max_length, label)
    stats = _fit(
        module,
        _shuffled(rows, cfg.seed),
        _collate(tok.pad_token_id),
        cfg,
        cfg.lr or C.VOCAB_SHIFT_LR,
        cfg.batch_size or C.DAPT_BATCH_SIZE,
    )
    save_file(
        {"W": module.W.detach().cpu().contiguous(), "shared": module.shared.detach().cpu().contiguous()},
        str(Path(cfg.out) / WEIGHTS),
    )
    order = module.shift.detach().argsort().tolist()
    column = {
        "lowest": tok.convert_ids_to_tokens(order[:COLUMN_PROBE]),  # what beta * W[:, nontoxic] avoids
        "highest": tok.convert_ids_to_tokens(order[::-1][:COLUMN_PROBE]),
    }
    _write_meta(
        cfg,
        "vocab-shift",
        corpus,
        {
            "training": stats,
            "vocab": int(module.shift.shape[0]),
            "n_blocks": len(rows),
            "block_size": cfg.max_length,
            "nontoxic_column": column,
        },
    )
    return Path(cfg.out)


def train_pplm_head(corpus: Corpus, cfg: TrainConfig) -> Path:
    """Train PPLM's toxicity head on the frozen LM's mean-pooled states, one document each truncated to
    ``constants.PPLM_HEAD_MAX_TOKENS`` (Dathathri et al.'s discriminator training: Adam, lr 1e-4, batch
    64, 10 epochs over cached states); writes ``pplm_head.safetensors`` and the held-out accuracy."""
    import torch
    from safetensors.torch import save_file

    from .pplm import HEAD_WEIGHTS

    lm, tok = _frozen(cfg)
    length = min(cfg.max_length, C.PPLM_HEAD_MAX_TOKENS)
    module = HeadModel.build(lm.config.hidden_size)
    stats = _fit(
        module,
        pooled_states(lm, tok, corpus.train, length),
        _collate_features,
        cfg,
        cfg.lr or C.PPLM_HEAD_LR,
        cfg.batch_size or C.PPLM_HEAD_BATCH_SIZE,
    )
    held = pooled_states(lm, tok, corpus.heldout, length)
    device = next(module.parameters()).device  # where Trainer left it
    correct = 0
    with torch.no_grad():
        for i in range(0, len(held), 64):
            batch = {k: v.to(device) for k, v in _collate_features(held[i : i + 64]).items()}
            correct += int((module(**batch)["logits"].argmax(-1) == batch["attribute"]).sum())
    stats["heldout_accuracy"] = correct / len(held) if held else None
    save_file(
        {k: v.detach().cpu().contiguous() for k, v in module.head.state_dict().items()},
        str(Path(cfg.out) / HEAD_WEIGHTS),
    )
    _write_meta(cfg, "pplm-head", corpus, {"training": stats, "max_tokens": length})
    return Path(cfg.out)
