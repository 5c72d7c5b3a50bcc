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
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .. import constants as C
from .._util.atomic import atomic_write_text
from ..errors import PolytoxError, require
from .corpus import NONTOXIC, TOXIC, Corpus


@dataclass
class TrainConfig:
    """What every trainer shares. ``max_steps > 0`` overrides ``epochs``; ``lr`` None = the method's default."""

    base_model: str
    out: str
    epochs: float = 1.0
    max_steps: int = -1
    batch_size: int = 8
    grad_accum: int = 1
    lr: float | None = None
    max_length: int = 128
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


def _encode(tok: Any, docs: Sequence[tuple[str, int]], max_length: int, prefix: dict[int, int] | None = None
            ) -> list[dict[str, Any]]:
    """Token ids per document (optionally led by its label's attribute token), EOS-terminated."""
    rows = []
    for text, label in docs:
        ids = tok(text, add_special_tokens=True, truncation=True, max_length=max_length - 2)["input_ids"]
        if prefix is not None:
            ids = [prefix[label], *ids]
        if tok.eos_token_id is not None:
            ids = [*ids, tok.eos_token_id]
        rows.append({"input_ids": ids, "label": label})
    return rows


def _collate(pad_id: int) -> Any:
    def collate(rows: list[dict[str, Any]]) -> dict[str, Any]:
        import torch

        width = max(len(r["input_ids"]) for r in rows)
        ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, : len(r["input_ids"])] = torch.tensor(r["input_ids"])
            mask[i, : len(r["input_ids"])] = 1
        labels = ids.masked_fill(mask == 0, -100)
        return {"input_ids": ids, "attention_mask": mask, "labels": labels,
                "attribute": torch.tensor([r["label"] for r in rows], dtype=torch.long)}
    return collate


class _LMOnly:
    """Drops the ``attribute`` column before a plain causal LM sees the batch."""

    def __init__(self, collate: Any) -> None:
        self.collate = collate

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        batch = self.collate(rows)
        batch.pop("attribute")
        return batch


def _fit(model: Any, rows: list[dict[str, Any]], collate: Any, cfg: TrainConfig, lr: float) -> dict[str, Any]:
    """Train with ``transformers.Trainer``, resuming from ``OUT/checkpoints`` when a checkpoint exists."""
    transformers = require("transformers", "hf")
    from transformers.trainer_utils import get_last_checkpoint

    ckpt = Path(cfg.out) / "checkpoints"
    ckpt.mkdir(parents=True, exist_ok=True)
    args = transformers.TrainingArguments(
        output_dir=str(ckpt), per_device_train_batch_size=cfg.batch_size,
        gradient_accumulation_steps=cfg.grad_accum, num_train_epochs=cfg.epochs, max_steps=cfg.max_steps,
        learning_rate=lr, save_steps=cfg.save_steps, save_total_limit=1, logging_steps=10, report_to=[],
        seed=cfg.seed, remove_unused_columns=False, dataloader_num_workers=0, disable_tqdm=True,
        save_only_model=False, dataloader_pin_memory=False)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=rows, data_collator=collate)
    last = get_last_checkpoint(str(ckpt))
    started = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=last)
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    return {"steps": int(result.global_step), "train_loss": float(result.training_loss),
            "first_logged_loss": losses[0] if losses else None, "last_logged_loss": losses[-1] if losses else None,
            "resumed_from": last, "seconds": round(time.perf_counter() - started, 1)}


def _write_meta(cfg: TrainConfig, method: str, corpus: Corpus, extra: dict[str, Any]) -> None:
    meta = {"method": method, "base_model": cfg.base_model, "config": asdict(cfg), "corpus": corpus.stats, **extra}
    atomic_write_text(Path(cfg.out) / "detox.json", json.dumps(meta, indent=2, default=str) + "\n")


def _maybe_lora(model: Any, cfg: TrainConfig, extra_modules: Sequence[str] = ()) -> Any:
    if not cfg.lora:
        return model
    peft = require("peft", "detox", "peft")
    config = peft.LoraConfig(task_type="CAUSAL_LM", r=8, lora_alpha=16, target_modules="all-linear",
                             modules_to_save=list(extra_modules) or None)
    return peft.get_peft_model(model, config)


def train_lm(corpus: Corpus, cfg: TrainConfig, method: str = "dapt", subset: str = "nontoxic") -> Path:
    """DAPT on one side of the corpus, or ATCON on both with attribute tokens; returns the model folder."""
    model, tok, _ = _load(cfg.base_model)
    prefix = None
    if method == "atcon":
        tok.add_special_tokens({"additional_special_tokens": [C.ATCON_NONTOXIC_TOKEN, C.ATCON_TOXIC_TOKEN]})
        model.resize_token_embeddings(len(tok))
        prefix = {NONTOXIC: tok.convert_tokens_to_ids(C.ATCON_NONTOXIC_TOKEN),
                  TOXIC: tok.convert_tokens_to_ids(C.ATCON_TOXIC_TOKEN)}
        docs = corpus.train
    elif method == "dapt":
        if subset not in ("nontoxic", "toxic"):
            raise PolytoxError(f"dapt subset must be nontoxic or toxic, got {subset!r}")
        label = NONTOXIC if subset == "nontoxic" else TOXIC
        docs = [d for d in corpus.train if d[1] == label]
    else:
        raise PolytoxError(f"unknown LM training method {method!r}")
    rows = _encode(tok, docs, cfg.max_length, prefix)
    model = _maybe_lora(model, cfg, ("embed_tokens", "lm_head") if method == "atcon" else ())
    stats = _fit(model, rows, _LMOnly(_collate(tok.pad_token_id)), cfg, cfg.lr or C.DAPT_LR)
    if cfg.lora:
        model = model.merge_and_unload()
    model.save_pretrained(cfg.out)
    tok.save_pretrained(cfg.out)
    _write_meta(cfg, method, corpus, {"subset": subset if method == "dapt" else "both", "n_documents": len(docs),
                                      "training": stats})
    return Path(cfg.out)


class VocabShiftModel:
    """Frozen LM + trainable ``W [V, 2]``: logits + W[:, label] (built lazily so torch stays optional)."""

    @staticmethod
    def build(lm: Any) -> Any:
        import torch

        class Module(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.W = torch.nn.Parameter(torch.zeros(lm.get_output_embeddings().weight.shape[0], 2))
                self._lm = (lm,)  # a tuple: the frozen LM is neither trained nor checkpointed

            def forward(self, input_ids: Any, attention_mask: Any, labels: Any, attribute: Any) -> dict[str, Any]:
                with torch.no_grad():
                    logits = self._lm[0](input_ids=input_ids, attention_mask=attention_mask).logits
                shifted = logits + self.W.t()[attribute].unsqueeze(1)
                loss = torch.nn.functional.cross_entropy(shifted[:, :-1].reshape(-1, shifted.shape[-1]),
                                                         labels[:, 1:].reshape(-1), ignore_index=-100)
                return {"loss": loss}

        return Module()


class HeadModel:
    """Frozen LM + trainable linear head on the mean-pooled last hidden state (PPLM's attribute model)."""

    @staticmethod
    def build(lm: Any) -> Any:
        import torch

        class Module(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.head = torch.nn.Linear(lm.config.hidden_size, 2)
                self._lm = (lm,)

            def forward(self, input_ids: Any, attention_mask: Any, labels: Any, attribute: Any) -> dict[str, Any]:
                with torch.no_grad():
                    hidden = self._lm[0](input_ids=input_ids, attention_mask=attention_mask,
                                         output_hidden_states=True).hidden_states[-1]
                    m = attention_mask.unsqueeze(-1).to(hidden.dtype)
                    pooled = (hidden * m).sum(1) / m.sum(1).clamp_min(1)
                logits = self.head(pooled)
                return {"loss": torch.nn.functional.cross_entropy(logits, attribute), "logits": logits}

        return Module()


def _fit_on_frozen_lm(corpus: Corpus, cfg: TrainConfig, build: Any) -> tuple[Any, Any, dict[str, Any]]:
    """Train a small module ``build(lm)`` around the frozen base LM on the labelled corpus (VOCAB-SHIFT's
    projection, PPLM's head): ``(module, tokenizer, training stats)``."""
    lm, tok, _ = _load(cfg.base_model)
    lm.eval().requires_grad_(False)
    module = build(lm)
    rows = _encode(tok, corpus.train, cfg.max_length)
    stats = _fit(module, rows, _collate(tok.pad_token_id), cfg, cfg.lr or C.VOCAB_SHIFT_LR)
    return module, tok, stats


def train_vocab_shift(corpus: Corpus, cfg: TrainConfig) -> Path:
    """Learn ``W_t`` on the balanced corpus with the LM frozen; writes ``vocab_shift.safetensors``."""
    from safetensors.torch import save_file

    from .vocab_shift import WEIGHTS

    module, _, stats = _fit_on_frozen_lm(corpus, cfg, VocabShiftModel.build)
    save_file({"W": module.W.detach().cpu().contiguous()}, str(Path(cfg.out) / WEIGHTS))
    _write_meta(cfg, "vocab-shift", corpus, {"training": stats, "vocab": int(module.W.shape[0])})
    return Path(cfg.out)


def train_pplm_head(corpus: Corpus, cfg: TrainConfig) -> Path:
    """Train PPLM's toxicity head on the frozen LM; writes ``pplm_head.safetensors``."""
    import torch
    from safetensors.torch import save_file

    from .pplm import HEAD_WEIGHTS

    module, tok, stats = _fit_on_frozen_lm(corpus, cfg, HeadModel.build)
    held = _encode(tok, corpus.heldout, cfg.max_length)
    correct = 0
    collate = _collate(tok.pad_token_id)
    with torch.no_grad():
        for i in range(0, len(held), 16):
            batch = collate(held[i:i + 16])
            out = module(**batch)
            correct += int((out["logits"].argmax(-1) == batch["attribute"]).sum())
    stats["heldout_accuracy"] = correct / len(held) if held else None
    save_file({k: v.detach().cpu().contiguous() for k, v in module.head.state_dict().items()},
              str(Path(cfg.out) / HEAD_WEIGHTS))
    _write_meta(cfg, "pplm-head", corpus, {"training": stats})
    return Path(cfg.out)
