"""``hf``: any Hugging Face sequence-classification checkpoint as a polytox scorer.

Usage: ``--scorer hf --scorer-opt model=textdetox/xlmr-large-toxicity-classifier`` (a Hub id, or a
folder saved with ``save_pretrained``). Options (all ``--scorer-opt KEY=VALUE``, or a ``scorer_opt``
mapping in YAML):

- ``model`` (required): Hub id or local folder; ``revision``: a Hub branch, tag or commit to pin.
- ``label_map``: ``SRC:DST,...`` renames outputs (SRC a label name or index); ``toxicity_label``: the
  output that is ``toxicity``; ``attributes``: comma list of outputs to keep (``toxicity`` always is).
- ``activation``: ``auto`` (from ``config.problem_type``, as ``transformers.pipeline`` decides) |
  ``sigmoid`` | ``softmax`` | ``none``.
- ``max_length``: tokens per text (default: the checkpoint's limit); ``truncation``: ``head`` (keep the
  start, default) | ``tail`` (keep the end).
- ``batch_size``: texts per forward pass; ``max_batch_tokens``: padded tokens per forward pass (``0`` =
  no budget). Defaults: 16 and 4096 on CPU (larger batches are slower there, measured), 64 and 16384
  on a GPU.
- ``device``: ``auto`` (cuda > mps > cpu) or a torch device; ``dtype``: ``auto`` (see
  ``_util.torch_device``: bfloat16 on GPUs and on CPUs with native bfloat16, else float32) | ``float32`` |
  ``float16`` | ``bfloat16``.
- ``languages``: ``any`` (default) or a comma list; texts in other languages become errors, not scores.
- ``trust_remote_code``: ``true`` for checkpoints that ship their own model code.

The scorer's version (its cache identity) holds the checkpoint's commit or content fingerprint and every
option that changes a score, so a cached score is never reused for a different model or setting.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from .._util import ranges as R
from .._util.options import Option, as_bool, as_int
from .._util.torch_device import dtype_name, pick_device, pick_dtype
from ..errors import PolytoxError
from ..types import Score
from .base import Scorer, config_digest
from .classifier_engine import TRUNCATION_SIDES, SequenceClassifier, default_max_length
from .hf_load import load_pretrained
from .labels import LabelPlan, build_label_plan, choose_activation
from .model_identity import checkpoint_identity

# (texts, padded tokens) per forward pass. On CPU a BERT-base forward costs the same per text from 16
# texts up (GEMMs are large enough; bigger batches fall out of cache and get slower): measured in
# benchmarks/bench_local_scoring.py. On a GPU, larger batches keep the device busy.
CPU_BATCH = (16, 4096)
GPU_BATCH = (64, 16_384)
# Texts handed to the engine at once: the window inside which texts are sorted by length.
SORT_WINDOW = 4096


def check_truncation(truncation: str) -> None:
    """Fail on a bad policy before any weights are loaded."""
    if truncation not in TRUNCATION_SIDES:
        raise PolytoxError(f"truncation must be head or tail, got {truncation!r}")


def as_languages(value: str | None, default: frozenset[str] | None) -> frozenset[str] | None:
    """``any`` -> None (every language); a comma list -> normalised codes; empty -> ``default``."""
    if value is None or value == "":
        return default
    if value.strip().lower() == "any":
        return None
    from ..langs import normalize_lang

    return frozenset(normalize_lang(x) for x in value.split(",") if x.strip())


def load_sequence_classifier(
    model: str, *, revision: str = "", device: str = "cpu", dtype: Any = None, trust_remote_code: bool = False
) -> tuple[Any, Any]:
    """``(model, tokenizer)`` from a Hub id or a local folder, on ``device`` in ``dtype``, in eval mode."""
    return load_pretrained(
        "AutoModelForSequenceClassification",
        model,
        revision=revision,
        device=device,
        dtype=dtype,
        trust_remote_code=trust_remote_code,
        what="sequence-classification checkpoint",
        hint="A Hub id needs network access the first time (HF_HUB_OFFLINE must be unset); offline, pass "
        "model=FOLDER of a checkpoint saved with save_pretrained.",
    )


# The engine's options, the same for every local classifier (``hf``, ``detoxify``): declared once here.
ENGINE_OPTIONS: dict[str, Option] = {
    "max_length": Option("int", range=R.Range(2, integer=True), help="tokens per text (default: the model's)"),
    "truncation": Option("str", default="head", help="head or tail: which end of a long text is kept"),
    "batch_size": Option("int", range=R.AT_LEAST_ONE, help="texts per forward pass (default: automatic)"),
    "max_batch_tokens": Option("int", range=R.COUNT, help="tokens per forward pass (0: no limit)"),
    "device": Option("str", default="auto", help="auto, cpu, cuda, cuda:N, mps"),
    "dtype": Option("str", default="auto", help="auto, float32, float16, bfloat16"),
}


class LocalClassifierScorer(Scorer):
    """Shared by ``hf`` and ``detoxify``: a ``SequenceClassifier`` engine behind the scorer contract."""

    name = "local-classifier"
    batch_size = SORT_WINDOW
    engine: SequenceClassifier
    model_identity: str = ""
    device: str = "cpu"
    dtype: str = "float32"

    def _make_engine(
        self,
        model: Any,
        tokenizer: Any,
        plan: LabelPlan,
        *,
        max_length: str | int | None,
        truncation: str,
        batch_size: str | int | None,
        max_batch_tokens: str | int | None,
    ) -> None:
        check_truncation(truncation)
        length = as_int(max_length, "max_length", 2) or default_max_length(tokenizer, model.config)
        default_size, default_budget = CPU_BATCH if self.device == "cpu" else GPU_BATCH
        budget = as_int(max_batch_tokens, "max_batch_tokens", 0)
        budget = default_budget if budget is None else (budget or None)
        self.engine = SequenceClassifier(
            model,
            tokenizer,
            plan,
            device=self.device,
            max_length=length,
            truncation=truncation,
            batch_size=as_int(batch_size, "batch_size", 1) or default_size,
            max_batch_tokens=budget,
        )
        self.attributes = plan.attributes

    def _settings(self) -> dict[str, Any]:
        """Everything that changes a score (the device does not: cpu and cuda float32 agree to ~1e-6)."""
        return {
            "model": self.model_identity,
            "dtype": self.dtype,
            "max_length": self.engine.max_length,
            "truncation": self.engine.truncation,
            "plan": self.engine.plan.describe(),
        }

    def _set_version(self, label: str) -> None:
        self.version = f"{label}-{config_digest(self._settings())}"

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            **self._settings(),
            "device": self.device,
            "batch_size": self.engine.batch_size,
            "max_batch_tokens": self.engine.max_batch_tokens,
        }

    def score_batch(self, texts: Sequence[str], langs: Sequence[str]) -> list[Score]:
        return self.engine.predict(texts)

    def close(self) -> None:
        engine = getattr(self, "engine", None)
        if engine is not None:
            engine.model.to("cpu")
            if str(self.device).startswith("cuda"):
                import torch

                torch.cuda.empty_cache()


class HfClassifierScorer(LocalClassifierScorer):
    """Any ``AutoModelForSequenceClassification`` checkpoint; options in the module docstring."""

    OPTIONS: ClassVar[dict[str, Option]] = {
        "model": Option("str", default="", help="required: a Hub id or a folder of a sequence classifier"),
        "revision": Option("str", default="", help="model revision"),
        "label_map": Option("str", default="", help="LABEL=attribute pairs, comma-separated"),
        "toxicity_label": Option("str", default="", help="the label read as toxicity"),
        "attributes": Option("str", default="", help="comma-separated attributes kept"),
        "activation": Option("str", default="auto", help="auto, sigmoid, softmax or none"),
        **ENGINE_OPTIONS,
        "languages": Option("str", default="any", help="comma-separated languages it supports (any: all)"),
        "trust_remote_code": Option("bool", default=False, help="run the model repository's own code"),
    }

    name = "hf"

    def __init__(
        self,
        model: str = OPTIONS["model"].default,
        revision: str = OPTIONS["revision"].default,
        label_map: str = OPTIONS["label_map"].default,
        toxicity_label: str = OPTIONS["toxicity_label"].default,
        attributes: str = OPTIONS["attributes"].default,
        activation: str = OPTIONS["activation"].default,
        max_length: str | int | None = None,
        truncation: str = OPTIONS["truncation"].default,
        batch_size: str | int | None = None,
        max_batch_tokens: str | int | None = None,
        device: str = OPTIONS["device"].default,
        dtype: str = OPTIONS["dtype"].default,
        languages: str = OPTIONS["languages"].default,
        trust_remote_code: str | bool = OPTIONS["trust_remote_code"].default,
    ) -> None:
        if not model:
            raise PolytoxError(
                "the hf scorer needs --scorer-opt model=HUB_ID_OR_FOLDER "
                "(e.g. textdetox/xlmr-large-toxicity-classifier)"
            )
        check_truncation(truncation)
        self.languages = as_languages(languages, None)
        self.device = pick_device(device)
        torch_dtype = pick_dtype(dtype, self.device)
        self.dtype = dtype_name(torch_dtype)
        clf, tokenizer = load_sequence_classifier(
            model,
            revision=revision,
            device=self.device,
            dtype=torch_dtype,
            trust_remote_code=as_bool(trust_remote_code, "trust_remote_code"),
        )
        config = clf.config
        plan = build_label_plan(
            config.id2label,
            activation=choose_activation(activation, config.problem_type, config.num_labels),
            label_map=label_map,
            toxicity_label=toxicity_label,
            keep=[a.strip() for a in attributes.split(",") if a.strip()],
        )
        self.model_identity = checkpoint_identity(model, getattr(config, "_commit_hash", None), revision)
        self._make_engine(
            clf,
            tokenizer,
            plan,
            max_length=max_length,
            truncation=truncation,
            batch_size=batch_size,
            max_batch_tokens=max_batch_tokens,
        )
        self._set_version(self.model_identity.split(":")[0].replace("/", "--"))
