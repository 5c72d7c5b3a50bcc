"""``detoxify``: the three Detoxify checkpoints (Hanu & Unitary, 2020) with their label sets.

``--scorer detoxify --scorer-opt model=original|unbiased|multilingual``:

- ``original``: bert-base-uncased, Jigsaw Toxic Comment Classification (2018); outputs toxicity,
  severe_toxicity, obscene, threat, insult, identity_attack; English.
- ``unbiased``: roberta-base, Jigsaw Unintended Bias in Toxicity Classification (2019); outputs
  toxicity, severe_toxicity, obscene, identity_attack, insult, threat, sexual_explicit; English.
- ``multilingual``: xlm-roberta-base, Jigsaw Multilingual Toxic Comment Classification (2020); the
  unbiased outputs; en, fr, es, it, pt, tr, ru.

Detoxify applies a sigmoid to every output and names them as above (``toxic`` -> ``toxicity``...); so
does this scorer, whatever the checkpoint's config says. The identity outputs of the unbiased and
multilingual models (``male``, ``muslim``...) are mentions, not toxicity, and are dropped as Detoxify
drops them. Texts in other languages become ``LANGUAGE_NOT_SUPPORTED`` errors (Detoxify itself scores
them silently); ``languages=any`` lifts that at your own risk.

Where the weights come from (``source``):

- ``hf``: the Hugging Face mirrors (``unitary/toxic-bert``, ``unitary/unbiased-toxic-roberta``,
  ``unitary/multilingual-toxic-xlm-roberta``) or ``path=FOLDER`` of a saved copy, through transformers;
- ``detoxify``: the ``detoxify`` package's own release checkpoints (``pip install 'polytox[detoxify]'``),
  or ``checkpoint=FILE.ckpt`` (with ``hf_config=FOLDER`` to load offline);
- ``auto`` (default): ``detoxify`` when the package is installed and no ``path`` is given, else ``hf``.

The mirrors are not guaranteed to hold the latest release weights (Detoxify updated ``unbiased`` in
2021-09 and ``multilingual`` in 2021-10); the source and the weights' identity are part of the cache key,
so scores from the two are never mixed. Batching, truncation, device and dtype options are the ``hf``
scorer's (``max_length``, ``truncation``, ``batch_size``, ``max_batch_tokens``, ``device``, ``dtype``).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from .._util.options import Option
from .._util.torch_device import dtype_name, pick_device, pick_dtype
from ..errors import PolytoxError, require
from .hf_classifier import (
    ENGINE_OPTIONS,
    LocalClassifierScorer,
    as_languages,
    check_truncation,
    load_sequence_classifier,
)
from .hf_load import quiet_transformers
from .labels import LabelPlan, normalize_label
from .model_identity import checkpoint_identity, local_fingerprint

JIGSAW_2018 = ("toxicity", "severe_toxicity", "obscene", "threat", "insult", "identity_attack")
JIGSAW_2019 = (
    "toxicity",
    "severe_toxicity",
    "obscene",
    "identity_attack",
    "insult",
    "threat",
    "sexual_explicit",
)


@dataclass(frozen=True)
class DetoxifyModel:
    """One Detoxify checkpoint: where it lives, what it outputs, which languages it was trained on."""

    name: str
    hub_id: str
    release: str  # the release checkpoint the detoxify package downloads (its hash names the weights)
    classes: tuple[str, ...]
    languages: frozenset[str]


MODELS: dict[str, DetoxifyModel] = {
    "original": DetoxifyModel(
        "original", "unitary/toxic-bert", "toxic_original-c1212f89", JIGSAW_2018, frozenset({"en"})
    ),
    "unbiased": DetoxifyModel(
        "unbiased",
        "unitary/unbiased-toxic-roberta",
        "toxic_debiased-c7548aa0",
        JIGSAW_2019,
        frozenset({"en"}),
    ),
    # Detoxify README: "trained on 7 different languages so it should only be tested on: english, french,
    # spanish, italian, portuguese, turkish or russian".
    "multilingual": DetoxifyModel(
        "multilingual",
        "unitary/multilingual-toxic-xlm-roberta",
        "multilingual_debiased-0b549669",
        JIGSAW_2019,
        frozenset({"en", "fr", "es", "it", "pt", "tr", "ru"}),
    ),
}
SOURCES = ("auto", "hf", "detoxify")


def detoxify_plan(id2label: Mapping[int, str], classes: Sequence[str]) -> LabelPlan:
    """Detoxify's outputs of a checkpoint: by name when its config names them, else by position."""
    num = len(id2label)
    names = [normalize_label(id2label[i]) for i in range(num)]
    if "toxicity" in names:
        attributes = [c for c in classes if c in names]
        indices = [names.index(c) for c in attributes]
    elif all(n.startswith("label_") for n in names):
        attributes = list(classes[: min(num, len(classes))])
        indices = list(range(len(attributes)))
    else:
        raise PolytoxError(
            f"this checkpoint's outputs ({', '.join(names)}) are not Detoxify's "
            f"({', '.join(classes)}); use the hf scorer with a label_map instead"
        )
    return LabelPlan(attributes=tuple(attributes), indices=tuple(indices), activation="sigmoid", num_labels=num)


class DetoxifyScorer(LocalClassifierScorer):
    """Detoxify original / unbiased / multilingual; options in the module docstring."""

    OPTIONS: ClassVar[dict[str, Option]] = {
        "model": Option(
            choices=tuple(MODELS),
            default="original",
            help="original, unbiased or multilingual",
            message="unknown Detoxify model {value!r}; choose one of {choices}",
        ),
        "source": Option(choices=SOURCES, default="auto", help="where the weights come from"),
        "path": Option("str", default="", help="a local checkpoint file"),
        "checkpoint": Option("str", default="", help="a checkpoint URL or file"),
        "hf_config": Option("str", default="", help="the transformers config the checkpoint needs"),
        "revision": Option("str", default="", help="model revision"),
        **ENGINE_OPTIONS,
        "languages": Option("str", default="", help="comma-separated languages (default: the model's)"),
    }

    name = "detoxify"

    def __init__(
        self,
        model: str = OPTIONS["model"].default,
        source: str = OPTIONS["source"].default,
        path: str = OPTIONS["path"].default,
        checkpoint: str = OPTIONS["checkpoint"].default,
        hf_config: str = OPTIONS["hf_config"].default,
        revision: str = OPTIONS["revision"].default,
        max_length: str | int | None = None,
        truncation: str = OPTIONS["truncation"].default,
        batch_size: str | int | None = None,
        max_batch_tokens: str | int | None = None,
        device: str = OPTIONS["device"].default,
        dtype: str = OPTIONS["dtype"].default,
        languages: str = OPTIONS["languages"].default,
    ) -> None:
        spec = MODELS[model]
        check_truncation(truncation)
        self.detoxify_model = spec
        self.languages = as_languages(languages, spec.languages)
        self.source = resolve_source(source, path=path, checkpoint=checkpoint)
        self.device = pick_device(device)
        torch_dtype = pick_dtype(dtype, self.device)
        self.dtype = dtype_name(torch_dtype)
        if self.source == "hf":
            location = path or spec.hub_id
            clf, tokenizer = load_sequence_classifier(
                location, revision=revision, device=self.device, dtype=torch_dtype
            )
            plan = detoxify_plan(clf.config.id2label, spec.classes)
            self.model_identity = "hf:" + checkpoint_identity(
                location, getattr(clf.config, "_commit_hash", None), revision
            )
        else:
            clf, tokenizer, class_names = load_with_detoxify(spec.name, checkpoint, hf_config, self.device)
            clf = clf.to(device=self.device, dtype=torch_dtype).eval()
            plan = detoxify_plan({i: c for i, c in enumerate(class_names)}, spec.classes)
            self.model_identity = "detoxify:" + (
                f"{Path(checkpoint).name}:{local_fingerprint(checkpoint)}" if checkpoint else spec.release
            )
        self._make_engine(
            clf,
            tokenizer,
            plan,
            max_length=max_length,
            truncation=truncation,
            batch_size=batch_size,
            max_batch_tokens=max_batch_tokens,
        )
        self._set_version(f"{spec.name}-{self.source}")

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "detoxify_model": self.detoxify_model.name, "source": self.source}


def resolve_source(source: str, *, path: str, checkpoint: str) -> str:
    """``auto`` -> ``detoxify`` if the package is installed (and no HF folder was named), else ``hf``."""
    if source not in SOURCES:
        raise PolytoxError(f"source must be one of {', '.join(SOURCES)}, got {source!r}")
    if path and checkpoint:
        raise PolytoxError("give path=FOLDER (transformers format) or checkpoint=FILE (Detoxify .ckpt), not both")
    if checkpoint:
        if source == "hf":
            raise PolytoxError("checkpoint=FILE is a Detoxify .ckpt: use source=detoxify (or auto)")
        return "detoxify"
    if path:
        if source == "detoxify":
            raise PolytoxError("path=FOLDER is a transformers checkpoint: use source=hf, or checkpoint=FILE.ckpt")
        return "hf"
    if source == "auto":
        return "detoxify" if importlib.util.find_spec("detoxify") is not None else "hf"
    return source


def load_with_detoxify(model: str, checkpoint: str, hf_config: str, device: str) -> tuple[Any, Any, list[str]]:
    """``(model, tokenizer, class names)`` through the ``detoxify`` package (downloads unless given files)."""
    detoxify = require("detoxify", "detoxify")
    quiet_transformers()
    try:
        loaded = detoxify.Detoxify(
            model_type=model,
            checkpoint=checkpoint or None,
            device=device,
            huggingface_config_path=hf_config or None,
        )
    except Exception as exc:  # network, missing file, incompatible checkpoint: all a user can act on
        raise PolytoxError(
            f"the detoxify package could not load {model!r}"
            f"{f' from {checkpoint}' if checkpoint else ''}: {type(exc).__name__}: {exc}. It downloads its "
            f"release weights and a base config on first use; offline, pass checkpoint=FILE.ckpt with "
            f"hf_config=FOLDER, or source=hf with path=FOLDER of a saved transformers checkpoint."
        ) from exc
    return loaded.model, loaded.tokenizer, list(loaded.class_names)
