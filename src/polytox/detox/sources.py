"""A detoxification corpus from several sources, each with its own label rule (``polytox detox corpus``).

A source is ``PATH[:key=value,...]``. Its rule says which records are toxic and which non-toxic:

- ``score=FIELD,toxic=X,nontoxic=Y``: a numeric score (dotted path), toxic when ``>= X``, non-toxic when
  ``<= Y``, the records in between left out;
- ``score=FIELD,percentile=P``: the bottom / top ``P`` percent of that source by score (RTP Appendix B.2);
- ``label=FIELD``: a boolean (or 0/1) field, true = toxic (human labels).

Other keys: ``text=FIELD`` (default ``text``; ``a+b`` joins two fields, e.g. an RTP record's
``prompt.text+continuation.text``), ``lang=xx`` (default: the corpus language), ``by=FIELD`` (the field
that names a record's original dataset, default ``source``; reported and balanced on), ``name=NAME``.

Every document overlapping an evaluated prompt file is dropped (same normalised text or the same first 40
characters as a prompt or RTP continuation). With ``balance="per-source"`` (the default) each dataset
gives both sides the same number of documents, so the two sides differ in toxicity and not in where
their text comes from (a side made mostly of one dataset teaches DAPT and VOCAB-SHIFT that dataset's
style); ``balance="total"`` only equalises the two sides' totals. The held-out split is drawn by record
group (``group`` field, else the text), so a toxic sentence and its paraphrases stay on one side of it.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import PolytoxError
from ..prompts.records import dig
from .corpus import NONTOXIC, OVERLAP_PREFIX, TOXIC, Corpus, jsonl_records, normalise, prompt_keys

KEYS = ("score", "toxic", "nontoxic", "percentile", "label", "text", "lang", "by", "name")


@dataclass(frozen=True)
class Source:
    """One input file and the rule that labels its records."""

    path: str
    name: str
    text: str = "text"
    score: str | None = None
    toxic_min: float | None = None
    nontoxic_max: float | None = None
    percentile: float | None = None
    label: str | None = None
    lang: str | None = None
    by: str = "source"

    def rule(self) -> str:
        if self.label:
            return f"{self.label} is true"
        if self.percentile is not None:
            return f"{self.score}: bottom / top {self.percentile:g}%"
        return f"{self.score} <= {self.nontoxic_max:g} non-toxic, >= {self.toxic_min:g} toxic"


def parse_source(spec: str, default_lang: str | None = "en") -> Source:
    """``PATH[:key=value,...]`` -> a checked ``Source`` (one clear error per mistake)."""
    path, sep, rest = spec.partition(":")
    if not path:
        raise PolytoxError(f"--source {spec!r}: no file")
    opts: dict[str, str] = {}
    for item in filter(None, (x.strip() for x in rest.split(","))) if sep else ():
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or key not in KEYS:
            raise PolytoxError(f"--source {spec!r}: {item!r} is not one of {', '.join(k + '=...' for k in KEYS)}")
        opts[key] = value.strip()

    def number(key: str) -> float | None:
        if key not in opts:
            return None
        try:
            return float(opts[key])
        except ValueError:
            raise PolytoxError(f"--source {spec!r}: {key}={opts[key]!r} is not a number") from None

    src = Source(
        path=path,
        name=opts.get("name") or Path(path).stem,
        text=opts.get("text") or "text",
        score=opts.get("score"),
        toxic_min=number("toxic"),
        nontoxic_max=number("nontoxic"),
        percentile=number("percentile"),
        label=opts.get("label"),
        lang=opts["lang"] or None if "lang" in opts else default_lang,
        by=opts.get("by") or "source",
    )
    if bool(src.label) == bool(src.score):
        raise PolytoxError(f"--source {spec!r}: give exactly one rule, label=FIELD or score=FIELD")
    if src.score:
        thresholds = src.toxic_min is not None and src.nontoxic_max is not None
        if thresholds == (src.percentile is not None):
            raise PolytoxError(f"--source {spec!r}: score needs toxic=X and nontoxic=Y, or percentile=P")
        if src.percentile is not None and not 0 < src.percentile <= 50:
            raise PolytoxError(f"--source {spec!r}: percentile must be in (0, 50]")
        if thresholds and src.nontoxic_max >= src.toxic_min:  # type: ignore[operator]
            raise PolytoxError(f"--source {spec!r}: nontoxic={src.nontoxic_max} must be below toxic={src.toxic_min}")
    if not Path(path).is_file():
        raise PolytoxError(f"corpus source not found: {path}")
    return src


@dataclass
class _Doc:
    text: str
    label: int
    dataset: str
    group: str


def _text(record: Any, fields: str) -> str | None:
    parts = [dig(record, f) for f in fields.split("+")]
    if not all(isinstance(p, str) for p in parts):
        return None
    joined = "".join(parts)  # type: ignore[arg-type]
    return joined if joined.strip() else None


def read_source(src: Source, problems: list[str]) -> tuple[list[_Doc], int]:
    """The labelled documents of one source and the number of its records the rule left out."""
    scored: list[tuple[float, _Doc]] = []
    docs: list[_Doc] = []
    left_out = 0
    for lineno, record in jsonl_records(src.path, src.lang, problems):
        text = _text(record, src.text)
        if text is None:
            problems.append(f"{src.path}:{lineno}: no text in {src.text!r}")
            continue
        dataset = f"{src.name}/{record.get(src.by)}" if isinstance(record.get(src.by), str) else src.name
        group = str(record.get("group") or normalise(text))
        if src.label:
            value = dig(record, src.label)
            if isinstance(value, bool) or value in (0, 1):
                docs.append(_Doc(text, TOXIC if value else NONTOXIC, dataset, group))
            else:
                problems.append(f"{src.path}:{lineno}: no boolean label in {src.label!r}")
            continue
        score = dig(record, src.score or "")
        if isinstance(score, bool) or not isinstance(score, int | float):
            problems.append(f"{src.path}:{lineno}: no numeric score in {src.score!r}")
            continue
        if src.percentile is not None:
            scored.append((float(score), _Doc(text, NONTOXIC, dataset, group)))
        elif score >= src.toxic_min:  # type: ignore[operator]
            docs.append(_Doc(text, TOXIC, dataset, group))
        elif score <= src.nontoxic_max:  # type: ignore[operator]
            docs.append(_Doc(text, NONTOXIC, dataset, group))
        else:
            left_out += 1
    if src.percentile is not None:
        scored.sort(key=lambda d: (d[0], d[1].text))
        n = int(len(scored) * src.percentile / 100)
        tails = (scored[:n], scored[-n:]) if n else ([], [])
        docs = [d for _, d in tails[0]] + [_Doc(d.text, TOXIC, d.dataset, d.group) for _, d in tails[1]]
        left_out += len(scored) - 2 * n
    return docs, left_out


def _heldout(group: str, share: float) -> bool:
    digest = hashlib.blake2b(group.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 < share


def build_corpus(
    sources: Sequence[Source],
    exclude: Sequence[str | Path] = (),
    balance: str = "per-source",
    heldout_share: float = 0.1,
    seed: int = 0,
) -> Corpus:
    """The balanced toxic / non-toxic corpus of ``sources``, disjoint from ``exclude``'s prompts."""
    if balance not in ("per-source", "total"):
        raise PolytoxError(f"balance must be per-source or total, got {balance!r}")
    keys = prompt_keys(exclude)
    problems: list[str] = []
    seen: set[str] = set()
    pools: dict[str, dict[int, list[_Doc]]] = defaultdict(lambda: {NONTOXIC: [], TOXIC: []})
    per_source: dict[str, dict[str, Any]] = {}
    for src in sources:
        docs, left_out = read_source(src, problems)
        overlap = dupes = 0
        for d in docs:
            norm = normalise(d.text)
            if norm in keys or norm[:OVERLAP_PREFIX] in keys:
                overlap += 1
            elif norm in seen:
                dupes += 1
            else:
                seen.add(norm)
                pools[d.dataset][d.label].append(d)
        per_source[src.name] = {
            "path": src.path,
            "rule": src.rule(),
            "labelled": len(docs),
            "left_out_by_rule": left_out,
            "overlapping_prompts_removed": overlap,
            "duplicates_removed": dupes,
        }
    rng = random.Random(seed)
    chosen: list[_Doc] = []
    if balance == "per-source":
        for dataset in sorted(pools):
            sides = pools[dataset]
            n = min(len(sides[NONTOXIC]), len(sides[TOXIC]))
            for label in (NONTOXIC, TOXIC):
                chosen += rng.sample(sides[label], n)
    else:
        sides_all = {label: [d for ds in sorted(pools) for d in pools[ds][label]] for label in (NONTOXIC, TOXIC)}
        n = min(len(s) for s in sides_all.values())
        for label in (NONTOXIC, TOXIC):
            chosen += rng.sample(sides_all[label], n)
    if not any(d.label == TOXIC for d in chosen):
        raise PolytoxError("corpus empty: no source gives documents on both sides after excluding prompts")
    held = [d for d in chosen if _heldout(d.group, heldout_share)]
    train = [d for d in chosen if not _heldout(d.group, heldout_share)]
    rng.shuffle(train)
    counts: dict[str, dict[str, int]] = {}
    for d in chosen:
        row = counts.setdefault(d.dataset, {"nontoxic": 0, "toxic": 0, "available_nontoxic": 0, "available_toxic": 0})
        row["toxic" if d.label == TOXIC else "nontoxic"] += 1
    for dataset, sides in pools.items():
        row = counts.setdefault(dataset, {"nontoxic": 0, "toxic": 0})
        row["available_nontoxic"], row["available_toxic"] = len(sides[NONTOXIC]), len(sides[TOXIC])
    side = Counter(d.label for d in chosen)
    stats = {
        "sources": per_source,
        "datasets": dict(sorted(counts.items())),
        "balance": balance,
        "n_per_side": side[NONTOXIC],
        "n_nontoxic": side[NONTOXIC],
        "n_toxic": side[TOXIC],
        "n_train": len(train),
        "n_heldout": len(held),
        "heldout_share": heldout_share,
        "n_overlapping_prompts_removed": sum(s["overlapping_prompts_removed"] for s in per_source.values()),
        "excluded_prompt_files": [str(p) for p in exclude],
        "n_skipped_records": len(problems),
        "skipped_records": problems[:100],
        "seed": seed,
    }
    return Corpus(train=[(d.text, d.label) for d in train], heldout=[(d.text, d.label) for d in held], stats=stats)
