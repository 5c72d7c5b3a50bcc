"""The balanced toxic / non-toxic training corpus of RTP Appendix B.2, disjoint from evaluated prompts.

From any scored JSONL corpus (``polytox score`` output, the shared scorer-train files, ...) take the
bottom and top ``percentile`` percent of documents by a score field as non-toxic and toxic, drop every
document that overlaps an evaluated prompt file (same normalised text, or the same first 40 characters,
against each prompt's text and, for RTP records, its continuation), balance the two sides, and hold out
a share of each side for the perplexity check of RTP Table 10.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import constants as C
from .._util import jsondepth
from .._util.atomic import atomic_write_text
from ..errors import PolytoxError
from ..prompts.records import dig

OVERLAP_PREFIX = 40  # characters of normalised text that make two documents "the same passage"
NONTOXIC, TOXIC = 0, 1


def normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()


@dataclass
class Corpus:
    """Labelled training documents (label 0 non-toxic, 1 toxic), a held-out split, and how they were made."""

    train: list[tuple[str, int]]
    heldout: list[tuple[str, int]]
    stats: dict[str, Any] = field(default_factory=dict)

    def texts(self, label: int | None = None, heldout: bool = False) -> list[str]:
        docs = self.heldout if heldout else self.train
        return [t for t, y in docs if label is None or y == label]

    def write(self, folder: Path) -> None:
        """``train.jsonl``, ``heldout.jsonl`` and ``corpus.json`` (the statistics) in ``folder``."""
        folder.mkdir(parents=True, exist_ok=True)
        for name, docs in (("train", self.train), ("heldout", self.heldout)):
            atomic_write_text(
                folder / f"{name}.jsonl",
                "".join(
                    json.dumps({"text": t, "label": "toxic" if y == TOXIC else "nontoxic"}) + "\n" for t, y in docs
                ),
            )
        atomic_write_text(folder / "corpus.json", json.dumps(self.stats, indent=2) + "\n")


def prompt_keys(paths: Iterable[str | Path]) -> set[str]:
    """Normalised texts and 40-character prefixes of every prompt (and RTP continuation) in ``paths``."""
    keys: set[str] = set()
    for path in paths:
        if not Path(path).is_file():
            raise PolytoxError(
                f"prompt file to exclude not found: {path} (pass --exclude FILE for the prompts "
                "that must not be trained on)"
            )
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if not line.strip():
                    continue
                try:
                    record = jsondepth.loads(line)
                except ValueError:
                    continue  # the prompt loader reports bad prompt records; here only overlap matters
                for key in ("prompt.text", "continuation.text", "text", "Prompt"):
                    value = dig(record, key)
                    if isinstance(value, str) and value.strip():
                        norm = normalise(value)
                        keys.update((norm, norm[:OVERLAP_PREFIX]))
    return keys


def jsonl_records(path: str | Path, lang: str | None, problems: list[str]) -> Iterator[tuple[int, Any]]:
    """(line number, record) of each JSON line of ``path`` in language ``lang`` (a record without ``lang``
    counts as it). A line that is not JSON becomes one ``file:line: reason`` in ``problems``, never a stop."""
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                record = jsondepth.loads(line)
            except json.JSONDecodeError as exc:
                problems.append(f"{path}:{lineno}: invalid JSON ({exc.msg})")
                continue
            except jsondepth.TooDeepError as exc:
                problems.append(f"{path}:{lineno}: invalid JSON ({exc})")
                continue
            if lang and isinstance(record, dict) and record.get("lang", lang) != lang:
                continue
            yield lineno, record


def read_scored(
    path: str | Path, text_field: str, score_field: str, lang: str | None
) -> tuple[list[tuple[str, float]], list[str]]:
    """(text, score) pairs of a JSONL file, and one ``file:line: reason`` per record that was skipped."""
    docs: list[tuple[str, float]] = []
    problems: list[str] = []
    for lineno, record in jsonl_records(path, lang, problems):
        text, score = dig(record, text_field), dig(record, score_field)
        if not isinstance(text, str) or not text.strip():
            problems.append(f"{path}:{lineno}: no text in {text_field!r}")
        elif isinstance(score, bool) or not isinstance(score, int | float):
            problems.append(f"{path}:{lineno}: no numeric score in {score_field!r}")
        else:
            docs.append((text, float(score)))
    return docs, problems


def select_corpus(
    paths: Sequence[str | Path],
    exclude: Sequence[str | Path] = (),
    text_field: str = "text",
    score_field: str = "perspective",
    percentile: float = C.DETOX_CORPUS_PERCENTILE,
    lang: str | None = "en",
    heldout_share: float = 0.1,
    min_chars: int = 1,
    seed: int = 0,
) -> Corpus:
    """Bottom / top ``percentile`` % by ``score_field``, overlap with ``exclude`` removed, balanced."""
    if not 0 < percentile <= 50:
        raise PolytoxError(f"percentile must be in (0, 50], got {percentile}")
    docs: list[tuple[str, float]] = []
    problems: list[str] = []
    for path in paths:
        if not Path(path).is_file():
            raise PolytoxError(f"corpus file not found: {path}")
        got, bad = read_scored(path, text_field, score_field, lang)
        docs += got
        problems += bad
    keys = prompt_keys(exclude)
    unique: dict[str, tuple[str, float]] = {}
    overlapping = 0
    for text, score in docs:
        norm = normalise(text)
        if len(norm) < min_chars:
            continue
        if norm in keys or norm[:OVERLAP_PREFIX] in keys:
            overlapping += 1
            continue
        unique.setdefault(norm, (text, score))
    pool = sorted(unique.values(), key=lambda d: (d[1], d[0]))
    n = max(1, int(len(pool) * percentile / 100))
    if len(pool) < 2 * n or not pool:
        raise PolytoxError(f"corpus too small: {len(pool)} usable documents for two {percentile}% tails")
    nontoxic, toxic = pool[:n], pool[-n:]
    rng = random.Random(seed)
    sides = []
    for side in (nontoxic, toxic):
        texts = [t for t, _ in side]
        rng.shuffle(texts)
        sides.append(texts)
    n_held = int(n * heldout_share)
    train = [(t, y) for y, side in enumerate(sides) for t in side[n_held:]]
    heldout = [(t, y) for y, side in enumerate(sides) for t in side[:n_held]]
    rng.shuffle(train)
    stats = {
        "sources": [str(p) for p in paths],
        "score_field": score_field,
        "lang": lang,
        "percentile": percentile,
        "n_documents": len(docs),
        "n_skipped_records": len(problems),
        "skipped_records": problems[:100],
        "n_overlapping_prompts_removed": overlapping,
        "excluded_prompt_files": [str(p) for p in exclude],
        "n_per_side": n,
        "nontoxic_max_score": nontoxic[-1][1],
        "toxic_min_score": toxic[0][1],
        "n_train": len(train),
        "n_heldout": len(heldout),
        "seed": seed,
    }
    return Corpus(train=train, heldout=heldout, stats=stats)


def read_corpus(folder: str | Path) -> Corpus:
    """A corpus written by ``Corpus.write``."""
    root = Path(folder)

    def load(name: str) -> list[tuple[str, int]]:
        out = []
        with open(root / f"{name}.jsonl", encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                try:
                    record = jsondepth.loads(line)
                    out.append((str(record["text"]), TOXIC if record["label"] == "toxic" else NONTOXIC))
                except (ValueError, KeyError) as exc:
                    raise PolytoxError(f"{root / name}.jsonl:{lineno}: bad corpus record ({exc})") from None
        return out

    if not (root / "train.jsonl").is_file():
        raise PolytoxError(f"{root}: no train.jsonl (build one with: polytox detox corpus)")
    stats = json.loads((root / "corpus.json").read_text()) if (root / "corpus.json").is_file() else {}
    return Corpus(
        train=load("train"), heldout=load("heldout") if (root / "heldout.jsonl").is_file() else [], stats=stats
    )
