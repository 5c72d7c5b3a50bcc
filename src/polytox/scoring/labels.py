"""Which classifier output becomes which polytox attribute, and how logits become probabilities.

A sequence-classification checkpoint names its outputs in ``config.id2label`` (``toxic``,
``severe_toxic``, ``LABEL_1``, ``neutral``...). polytox needs one of them called ``toxicity`` (the
column every metric reads) and plain snake_case names for the others. The rules, in order:

1. an explicit ``label_map`` (``SRC:DST`` pairs, SRC a label name or an index) wins;
2. a ``toxicity_label`` option names the output that is ``toxicity``;
3. Detoxify's standard renames (``toxic`` -> ``toxicity``, ``severe_toxic`` -> ``severe_toxicity``,
   ``identity_hate`` -> ``identity_attack``) and common names of the positive class (``toxic``,
   ``hate``, ``offensive``, ``unsafe``...) find it;
4. a two-output checkpoint with generic names (``LABEL_0``/``LABEL_1``) or a single output: the
   positive class (index 1, or the only logit) is ``toxicity``.

Otherwise building the plan fails and says which option to set: guessing would silently score the
wrong class. The activation follows the config like ``transformers.pipeline`` does (multi-label or one
output: sigmoid; single-label: softmax), overridable, because many toxicity checkpoints (Detoxify's
among them) were trained multi-label but do not say so in their config.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from ..errors import PolytoxError

Activation = Literal["sigmoid", "softmax", "none"]
ACTIVATIONS: tuple[str, ...] = ("auto", "sigmoid", "softmax", "none")

# Detoxify's standardisation of the Jigsaw 2018 class names (detoxify.load_checkpoint's change_names).
DETOXIFY_RENAMES: dict[str, str] = {
    "toxic": "toxicity",
    "severe_toxic": "severe_toxicity",
    "identity_hate": "identity_attack",
}

# Names that checkpoints in the wild give to their positive (toxic) class.
POSITIVE_NAMES: frozenset[str] = frozenset(
    {
        "toxicity",
        "toxic",
        "hate",
        "hateful",
        "hate_speech",
        "offensive",
        "abusive",
        "unsafe",
        "harmful",
    }
)

_GENERIC = re.compile(r"^label_(\d+)$")


def normalize_label(label: str) -> str:
    """``Severe Toxic`` / ``severe-toxic`` -> ``severe_toxic`` -> (Detoxify rename) ``severe_toxicity``."""
    name = re.sub(r"[^0-9a-z]+", "_", str(label).strip().lower()).strip("_")
    return DETOXIFY_RENAMES.get(name, name)


@dataclass(frozen=True)
class LabelPlan:
    """Output attribute ``attributes[j]`` is probability number ``indices[j]`` after ``activation``."""

    attributes: tuple[str, ...]
    indices: tuple[int, ...]
    activation: Activation
    num_labels: int

    def describe(self) -> dict[str, object]:
        return {
            "attributes": dict(zip(self.attributes, self.indices, strict=True)),
            "activation": self.activation,
            "num_labels": self.num_labels,
        }


def parse_label_map(spec: str) -> dict[str, str]:
    """``"toxic:toxicity, 3:insult"`` -> ``{"toxic": "toxicity", "3": "insult"}``."""
    out: dict[str, str] = {}
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        src, sep, dst = part.rpartition(":")
        if not sep or not src.strip() or not dst.strip():
            raise PolytoxError(f"label_map entry {part!r} is not SRC:DST (SRC a label name or index)")
        out[src.strip()] = dst.strip()
    return out


def choose_activation(requested: str, problem_type: str | None, num_labels: int) -> Activation:
    """``auto`` follows the config as ``transformers.pipeline`` does; anything else is taken as given."""
    if requested not in ACTIVATIONS:
        raise PolytoxError(f"activation must be one of {', '.join(ACTIVATIONS)}, got {requested!r}")
    if requested != "auto":
        return requested  # type: ignore[return-value]
    if problem_type == "multi_label_classification" or num_labels == 1:
        return "sigmoid"
    if problem_type == "regression":
        return "none"
    return "softmax"


def build_label_plan(
    id2label: Mapping[int, str],
    *,
    activation: Activation,
    label_map: str = "",
    toxicity_label: str = "",
    keep: Sequence[str] = (),
) -> LabelPlan:
    """Map a checkpoint's outputs to attributes (rules in the module docstring).

    ``keep`` restricts the outputs to these attribute names (in this order); ``toxicity`` is always kept.
    """
    num = len(id2label)
    if num == 0:
        raise PolytoxError("the checkpoint's config has no labels (id2label is empty)")
    raw = {int(i): str(name) for i, name in id2label.items()}
    if sorted(raw) != list(range(num)):
        raise PolytoxError(f"id2label indices must be 0..{num - 1}, got {sorted(raw)}")
    names = {i: normalize_label(raw[i]) for i in range(num)}

    overrides = list(parse_label_map(label_map).items())
    if toxicity_label:
        overrides.append((toxicity_label, "toxicity"))
    for src, dst in overrides:
        index, target = _find_label(src, raw, names), normalize_label(dst)
        # An output that already carried the target name is displaced to ``<name>_orig``.
        names = {i: (f"{n}_orig" if n == target and i != index else n) for i, n in names.items()}
        names[index] = target

    if "toxicity" not in names.values():
        guess = _guess_toxicity(names)
        if guess is None:
            raise PolytoxError(
                f"cannot tell which output of the checkpoint is toxicity (labels: "
                f"{', '.join(raw[i] for i in range(num))}); pass --scorer-opt toxicity_label=NAME "
                f"or --scorer-opt label_map=NAME:toxicity"
            )
        names[guess] = "toxicity"

    if len(set(names.values())) != num:
        raise PolytoxError(
            f"labels collide after normalisation: {[names[i] for i in range(num)]}; "
            f"rename them with --scorer-opt label_map=SRC:DST"
        )

    order = list(range(num))
    if num == 2 and activation == "softmax":
        # The other class of a two-way softmax is 1 - toxicity: no information, so not an attribute.
        order = [i for i in order if names[i] == "toxicity"]
    if keep:
        wanted = ["toxicity", *[normalize_label(k) for k in keep if normalize_label(k) != "toxicity"]]
        by_name = {names[i]: i for i in range(num)}
        missing = [w for w in wanted if w not in by_name]
        if missing:
            raise PolytoxError(
                f"attribute(s) {', '.join(missing)} not among the checkpoint's outputs "
                f"({', '.join(names[i] for i in range(num))})"
            )
        order = [by_name[w] for w in wanted]
    else:
        order.sort(key=lambda i: (names[i] != "toxicity", i))
    return LabelPlan(
        attributes=tuple(names[i] for i in order), indices=tuple(order), activation=activation, num_labels=num
    )


def _find_label(src: str, raw: Mapping[int, str], names: Mapping[int, str]) -> int:
    """Index of the output called ``src`` (raw name, normalised name, or index)."""
    if src.isdigit() and int(src) in raw:
        return int(src)
    for i in raw:
        if src == raw[i] or normalize_label(src) in (names[i], normalize_label(raw[i])):
            return i
    raise PolytoxError(
        f"no output called {src!r}; the checkpoint's labels are: {', '.join(f'{i}={raw[i]}' for i in sorted(raw))}"
    )


def _guess_toxicity(names: Mapping[int, str]) -> int | None:
    num = len(names)
    positive = [i for i in range(num) if names[i] in POSITIVE_NAMES]
    if len(positive) == 1:
        return positive[0]
    generic = all(_GENERIC.match(names[i]) for i in range(num))
    if num == 1:
        return 0
    if num == 2 and generic:
        return 1
    return None
