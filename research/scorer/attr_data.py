"""The attribute heads' data (rule: research/scorer/attributes-rule.md): every text, its part and its labels.

One row per (text, language) with the Perspective attribute values (English pack rows, shared RTP) or the
RTP-LX human ratings, or neither (everyday sentences, presumed 0 on every attribute). The parts are the
existing ones, never re-cut: ``pack.heldout_mask`` over the head-6 training pool (so the toxicity head's
held-out rows are the attribute heads' held-out rows too) and ``everyday.py``'s check part.

Embedding order (``embed``): measurement rows first, then the fit rows interleaved by a fixed hash, so a
stopped extraction still leaves every part represented. Run in the background::

    PYTHONPATH=src python -m research.scorer.attr_data --shared ../shared/data --cache .scratch/attr-emb.sqlite
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from polytox.training.scorer.data import Example, jsonl_records
from polytox.training.scorer.everyday import load_everyday
from polytox.training.scorer.pack import heldout_mask, unit_hash
from polytox.training.scorer.pool import training_pool

# Perspective's seven other attributes (lower case), as the pack and shared RTP store them
OTHER = ("severe_toxicity", "identity_attack", "insult", "profanity", "threat", "sexually_explicit", "flirtation")
# RTP-LX's human categories read as each attribute (the rule's table)
LX_OF = {
    "toxicity": "Toxicity",
    "identity_attack": "IdentityAttack",
    "insult": "Insult",
    "threat": "Violence",
    "sexually_explicit": "SexualContent",
}


@dataclass
class Row:
    text: str
    lang: str
    part: str  # "fit" | "heldout" (pack/RTP/RTP-LX) | "ud-fit" | "ud-check"
    source: str  # "pack" | "rtp" | "rtp-lx" | "ud"
    persp: dict[str, float] = field(default_factory=dict)  # Perspective's eight, lower case
    lx: dict[str, float] = field(default_factory=dict)  # RTP-LX mean rating 1-5 per category
    lx_raw: dict[str, list[float]] = field(default_factory=dict)
    sent_id: str = ""  # everyday rows: the UD id (Parallel UD: the same meaning in every language)
    parallel: bool = False
    index: str = ""  # RTP-LX Index


def _pack_attributes(folder: Path) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for _, record in jsonl_records(folder / "en-perspective.jsonl"):
        attrs = record.get("attributes")
        if isinstance(attrs, dict):
            values = {k: float(attrs[k]) for k in OTHER}
            values["toxicity"] = float(record["perspective"])  # type: ignore[arg-type]
            out[str(record["text"])] = values
    return out


def _rtp_attributes(folder: Path) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for path in sorted(folder.glob("*.jsonl")):
        for _, record in jsonl_records(path):
            for part in ("prompt", "continuation"):
                block = record.get(part)
                if isinstance(block, dict) and all(block.get(k) is not None for k in (*OTHER, "toxicity")):
                    out[str(block["text"])] = {k: float(block[k]) for k in (*OTHER, "toxicity")}
    return out


def _lx_ratings(folder: Path) -> dict[tuple[str, str], tuple[str, dict[str, float], dict[str, list[float]]]]:
    from polytox.langs import normalize_lang
    from polytox.training.scorer.data import RTPLX_PATTERN

    out = {}
    for path in sorted(folder.iterdir()):
        match = RTPLX_PATTERN.search(path.name)
        if not match:
            continue
        lang = normalize_lang(match["locale"])
        for _, record in jsonl_records(path):
            raw = record["AnnotationsRaw"]
            assert isinstance(raw, dict)
            cats = {k: [float(x) for x in v] for k, v in raw.items()}
            means = {k: sum(v) / len(v) for k, v in cats.items() if v}
            out[(str(record["Prompt"]), lang)] = (str(record["Index"]).strip(), means, cats)
    return out


def load_rows(shared: Path | str) -> list[Row]:
    """Every row of the study: the head-6 pool's pack (Perspective attributes), RTP and RTP-LX rows with their
    held-out flag, and every everyday sentence with its part."""
    shared = Path(shared)
    pool: list[Example] = training_pool(shared, everyday=True)
    held = heldout_mask(pool)
    pack = _pack_attributes(shared / "scorer-train")
    rtp = _rtp_attributes(shared / "rtp")
    lx = _lx_ratings(shared / "rtp-lx")
    rows: list[Row] = []
    seen: set[tuple[str, str]] = set()
    for ex, h in zip(pool, held, strict=True):
        key = (ex.text, ex.lang)
        if ex.domain == "everyday" or key in seen:
            continue
        part = "heldout" if h else "fit"
        if ex.source == "rtp-lx":
            index, means, cats = lx[key]
            rows.append(Row(ex.text, ex.lang, part, "rtp-lx", lx=means, lx_raw=cats, index=index))
        elif ex.source == "rtp" and ex.text in rtp:
            rows.append(Row(ex.text, "en", part, "rtp", persp=rtp[ex.text]))
        elif ex.domain == "perspective" and ex.text in pack:
            rows.append(Row(ex.text, "en", part, "pack", persp=pack[ex.text]))
        else:
            continue
        seen.add(key)
    for r in load_everyday(shared / "ud-sentences"):
        if (r.text, r.lang) in seen:
            continue
        if r.check or r.trainable:
            part = "ud-check" if r.check else "ud-fit"
            rows.append(Row(r.text, r.lang, part, "ud", sent_id=r.sent_id, parallel=r.parallel))
            seen.add((r.text, r.lang))
    return rows


# Share of each part embedded (the CPU budget: about 4 texts/s on the shared 2-core machine): a row is kept when
# its hash is under its part's rate, and rows go in the order hash / rate, so an extraction stopped early has
# covered the same share of every part's quota. RTP-LX and the everyday sentences hash their translation unit
# (Index, Parallel UD id), so a kept prompt is kept in every language.
RATES = {
    ("rtp-lx", "heldout"): 0.5,
    ("ud", "ud-check"): 0.2,  # Parallel UD rows only (the everyday check)
    ("pack", "heldout"): 0.35,
    ("rtp-lx", "fit"): 0.45,
    ("pack", "fit"): 0.2,
    ("ud", "ud-fit"): 0.12,
}


def unit_key(row: Row) -> str:
    if row.source == "rtp-lx":
        return f"lx:{row.index}"
    if row.source == "ud" and row.parallel:
        return f"pud:{row.sent_id}"
    return f"{row.lang}:{row.text}"


def position(row: Row) -> float:
    """Where ``row`` falls in the embedding order (inf: not embedded)."""
    rate = RATES.get((row.source, row.part), 0.0)
    if row.part == "ud-check" and not row.parallel:
        rate = 0.0
    h = unit_hash(unit_key(row), "attr-embed")
    return h / rate if rate > 0 and h < rate else float("inf")


def embed(rows: Sequence[Row], cache_path: str, threads: int | None, chunk: int = 256) -> None:
    """Pools and both attention probes' scores (so TOXICITY's shipped value, the proxy, is read from the
    cache too) of the kept rows, in ``position`` order; rows whose pools are already cached go last."""
    from polytox.scoring.ml.embed_cache import EmbeddingCache
    from polytox.scoring.ml.embedder import HiddenStateEmbedder
    from polytox.scoring.ml.head import MlHead, default_head_path
    from polytox.types import text_hash

    head = MlHead.load(default_head_path())
    assert head.backbone is not None and head.probe is not None and head.probe_en is not None
    cache = EmbeddingCache(cache_path)
    embedder = HiddenStateEmbedder(head.backbone, head.layers, max_tokens=head.max_tokens, cache=cache, threads=threads)
    ordered = sorted((r for r in rows if position(r) < float("inf")), key=position)
    pooled = cache.get_many(embedder.key, head.layers[-1], [text_hash(r.text) for r in ordered])
    texts = [r.text for r in ordered if text_hash(r.text) not in pooled]
    texts += [r.text for r in ordered if text_hash(r.text) in pooled]
    started = time.perf_counter()
    try:
        for start in range(0, len(texts), chunk):
            embedder.embed_and_probe(texts[start : start + chunk], [head.probe_en, head.probe])
            elapsed = time.perf_counter() - started
            print(
                f"{min(start + chunk, len(texts))}/{len(texts)} computed={embedder.computed} "
                f"{embedder.computed / max(elapsed, 1e-9):.1f} texts/s",
                flush=True,
            )
    finally:
        embedder.close()
        cache.close()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shared", required=True)
    p.add_argument("--cache", required=True)
    p.add_argument("--threads", type=int, default=None)
    args = p.parse_args(argv)
    rows = load_rows(args.shared)
    from collections import Counter

    print(Counter((r.source, r.part) for r in rows), flush=True)
    embed(rows, args.cache, args.threads)
    return 0


if __name__ == "__main__":
    sys.exit(main())
