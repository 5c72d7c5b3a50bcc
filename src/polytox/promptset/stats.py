"""Statistics of a prompt set, per language (PTP Figures 10 and 11, RTP Table 1).

Reads a build directory (its ``ptp.parquet``) or any PTP- or RTP-schema JSONL / Parquet file, streaming
it once, and reports per language: counts by toxicity bin; histograms of unit and prompt toxicity;
prompt (and continuation) length in GPT-4 tokens; the document-year histogram from timestamps; the 10
most frequent URL domains; the share of toxic prompts and continuations (toxicity >= 0.5, RTP §2 /
PTP §4), with the number unscored; exact and near-duplicate counts (RTP Appendix D).
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..constants import (
    NEAR_DUP_JACCARD,
    NEAR_DUP_PERMUTATIONS,
    NEAR_DUP_SHINGLE_CHARS,
    TOXIC_THRESHOLD,
    toxicity_bucket,
)
from ..errors import PolytoxError
from ..prompts.readers import read_records
from .dedup import DuplicateCounter
from .tokens import TokenCounter, gpt4_token_counter

HIST_BINS = 20
_YEAR = re.compile(r"^\s*((?:19|20)\d{2})")


@dataclass(frozen=True)
class SetRow:
    """The fields statistics need, from either schema."""

    lang: str
    text: str
    prompt: str
    continuation: str
    toxicity: float | None
    prompt_toxicity: float | None
    continuation_toxicity: float | None
    url: str | None
    timestamp: str | None
    translated: bool


def _persp_value(value: Any) -> float | None:
    if isinstance(value, Mapping):
        node: Any = value
        for part in ("attributeScores", "TOXICITY", "summaryScore", "value"):
            node = node.get(part) if isinstance(node, Mapping) else None
        return float(node) if isinstance(node, int | float) else None
    return None


def row_from_record(rec: Mapping[str, Any]) -> SetRow:
    """Normalise a PTP- or RTP-schema record."""
    meta = rec.get("meta_data") if isinstance(rec.get("meta_data"), Mapping) else {}
    assert isinstance(meta, Mapping)
    if isinstance(rec.get("prompt"), Mapping):  # RTP schema
        p, c = rec["prompt"], rec.get("continuation") or {}
        prompt, cont = str(p.get("text") or ""), str(c.get("text") or "")
        pt, ct = p.get("toxicity"), c.get("toxicity")
        tox = rec.get("toxicity", pt)
        return SetRow(
            lang=str(rec.get("lang") or meta.get("lang") or "en"),
            text=prompt + cont,
            prompt=prompt,
            continuation=cont,
            toxicity=tox,
            prompt_toxicity=pt,
            continuation_toxicity=ct,
            url=meta.get("url"),
            timestamp=meta.get("timestamp"),
            translated=bool(meta.get("translated_from")),
        )
    if "prompt" not in rec:
        raise PolytoxError(f"not a PTP or RTP record (keys: {sorted(rec)[:8]})")
    prompt, cont = str(rec.get("prompt") or ""), str(rec.get("continuation") or "")
    return SetRow(
        lang=str(meta.get("lang") or rec.get("lang") or "?"),
        text=str(rec.get("text") or prompt + cont),
        prompt=prompt,
        continuation=cont,
        toxicity=rec.get("toxicity"),
        prompt_toxicity=_persp_value(rec.get("prompt_perspective"))
        if rec.get("prompt_perspective")
        else rec.get("prompt_toxicity"),
        continuation_toxicity=_persp_value(rec.get("continuation_perspective")),
        url=meta.get("url"),
        timestamp=meta.get("timestamp"),
        translated=bool(meta.get("translated_from")),
    )


def resolve_set_path(path: Path) -> Path:
    if path.is_dir():
        for name in ("ptp.parquet", "ptp.jsonl", "rtp.parquet", "rtp.jsonl"):
            if (path / name).exists():
                return path / name
        raise PolytoxError(f"{path} holds no built prompt set (ptp.parquet / ptp.jsonl / rtp.*)")
    if not path.exists():
        raise PolytoxError(f"no such file or directory: {path}")
    return path


def iter_set(path: Path) -> Iterator[SetRow]:
    for raw in read_records(resolve_set_path(path)):
        if raw.error is not None:
            raise PolytoxError(f"{raw.location}: {raw.error}")
        try:
            yield row_from_record(raw.record)
        except (PolytoxError, TypeError, ValueError) as exc:
            raise PolytoxError(f"{raw.location}: {exc}") from None


def domain(url: str | None) -> str | None:
    if not url:
        return None
    host = urlsplit(url if "//" in url else f"//{url}").hostname
    if not host:
        return None
    return host[4:] if host.startswith("www.") else host


def year(timestamp: str | None) -> int | None:
    m = _YEAR.match(timestamp) if timestamp else None
    return int(m.group(1)) if m else None


def _hist_index(value: float) -> int:
    return min(HIST_BINS - 1, max(0, int(value * HIST_BINS)))


@dataclass
class LangStats:
    """Running statistics of one language."""

    n: int = 0
    translated: int = 0
    buckets: Counter[int] = field(default_factory=Counter)
    tox_hist: list[int] = field(default_factory=lambda: [0] * HIST_BINS)
    prompt_tox_hist: list[int] = field(default_factory=lambda: [0] * HIST_BINS)
    prompt_tokens: list[int] = field(default_factory=list)
    continuation_tokens: list[int] = field(default_factory=list)
    years: Counter[int] = field(default_factory=Counter)
    domains: Counter[str] = field(default_factory=Counter)
    no_timestamp: int = 0
    no_url: int = 0
    toxic_prompts: int = 0
    scored_prompts: int = 0
    toxic_continuations: int = 0
    scored_continuations: int = 0
    dups: DuplicateCounter = field(default_factory=DuplicateCounter)

    def add(self, row: SetRow, tokens: TokenCounter, threshold: float, dedup: bool) -> None:
        self.n += 1
        self.translated += int(row.translated)
        if row.toxicity is not None:
            self.buckets[toxicity_bucket(row.toxicity)] += 1
            self.tox_hist[_hist_index(row.toxicity)] += 1
        if row.prompt_toxicity is not None:
            self.prompt_tox_hist[_hist_index(row.prompt_toxicity)] += 1
            self.scored_prompts += 1
            self.toxic_prompts += int(row.prompt_toxicity >= threshold)
        if row.continuation_toxicity is not None:
            self.scored_continuations += 1
            self.toxic_continuations += int(row.continuation_toxicity >= threshold)
        self.prompt_tokens.append(tokens.count(row.prompt))
        self.continuation_tokens.append(tokens.count(row.continuation))
        y = year(row.timestamp)
        if y is None:
            self.no_timestamp += 1
        else:
            self.years[y] += 1
        d = domain(row.url)
        if d is None:
            self.no_url += 1
        else:
            self.domains[d] += 1
        if dedup:
            self.dups.add(str(self.n), row.text)

    def to_dict(self, dedup: bool) -> dict[str, Any]:
        def dist(values: list[int]) -> dict[str, Any]:
            if not values:
                return {"n": 0}
            return {
                "n": len(values),
                "mean": statistics.fmean(values),
                "std": statistics.pstdev(values),
                "median": statistics.median(values),
                "min": min(values),
                "max": max(values),
            }

        out: dict[str, Any] = {
            "n": self.n,
            "translated": self.translated,
            "by_bucket": {str(b): self.buckets.get(b, 0) for b in range(4)},
            "toxicity_hist": self.tox_hist,
            "prompt_toxicity_hist": self.prompt_tox_hist,
            "prompt_tokens": dist(self.prompt_tokens),
            "continuation_tokens": dist(self.continuation_tokens),
            "years": {str(k): v for k, v in sorted(self.years.items())},
            "no_timestamp": self.no_timestamp,
            "top_domains": self.domains.most_common(10),
            "no_url": self.no_url,
            "toxic_prompts": self.toxic_prompts,
            "scored_prompts": self.scored_prompts,
            "toxic_prompt_share": self.toxic_prompts / self.scored_prompts if self.scored_prompts else None,
            "toxic_continuations": self.toxic_continuations,
            "scored_continuations": self.scored_continuations,
            "toxic_continuation_share": (
                self.toxic_continuations / self.scored_continuations if self.scored_continuations else None
            ),
        }
        if dedup:
            out["exact_duplicates"] = self.dups.exact
            out["near_duplicates"] = self.dups.near
        return out


def compute_stats(
    path: Path, threshold: float = TOXIC_THRESHOLD, dedup: bool = True, tokens: TokenCounter | None = None
) -> dict[str, Any]:
    """Statistics of the prompt set at ``path``: ``{"settings", "overall", "by_lang"}``."""
    tokens = tokens or gpt4_token_counter()
    source = resolve_set_path(path)
    per_lang: dict[str, LangStats] = {}
    overall = LangStats()
    for row in iter_set(path):
        per_lang.setdefault(row.lang, LangStats()).add(row, tokens, threshold, dedup)
        overall.add(row, tokens, threshold, dedup=False)
    if not overall.n:
        raise PolytoxError(f"{source} holds no records")
    over = overall.to_dict(dedup=False)
    if dedup:
        over["exact_duplicates"] = sum(s.dups.exact for s in per_lang.values())
        over["near_duplicates"] = sum(s.dups.near for s in per_lang.values())
    return {
        "settings": {
            "source": str(source),
            "threshold": threshold,
            "comparison": ">=",
            "hist_bins": HIST_BINS,
            "tokenizer": tokens.backend,
            "tokens_exact": tokens.exact,
            "tokens_note": tokens.note,
            "dedup": (
                {
                    "shingle_chars": NEAR_DUP_SHINGLE_CHARS,
                    "num_perm": NEAR_DUP_PERMUTATIONS,
                    "jaccard": NEAR_DUP_JACCARD,
                    "scope": "per language",
                }
                if dedup
                else None
            ),
        },
        "overall": over,
        "by_lang": {lang: s.to_dict(dedup) for lang, s in sorted(per_lang.items())},
    }
