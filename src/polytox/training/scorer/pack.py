"""The scorer training pack (``../shared/data/scorer-train``) as ``Example`` rows, with a fixed held-out split.

Three files, three label types (the pack's README lists sources and licences):

- ``en-perspective.jsonl``: English RTP prompts / continuations and model generations (IA024) with a stored
  Perspective TOXICITY (``domain="perspective"``; target = the score, label = score >= 0.5);
- ``en-human.jsonl`` and ``multilingual-human.jsonl``: binary human labels (``domain="human"``; target =
  the rater share ``frac`` where the source gives it, else the label as 0/1).

Subsampling and the held-out split depend only on a SHA-256 of the row's ``group`` (never on file order or a
random state), so they are identical on every machine and every run. Rows sharing a group stay together;
rows in different files or datasets that share a normalised text are joined first (``join_components``),
so no text is ever on both sides of the split.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Mapping, Sequence
from pathlib import Path

from ...errors import BadInputError
from ...langs import normalize_lang
from .data import EVERYDAY_DOMAIN, Example, jsonl_records

PACK_FILES = ("en-perspective.jsonl", "en-human.jsonl", "multilingual-human.jsonl")

# Share of each source's groups kept in the training pool (1.0 = all). Chosen for the CPU embedding
# budget (about 80K texts): every Perspective-scored text and every model generation is kept; large or
# synthetic human-labelled sources are thinned, the template phrases most of all.
BASE_RATES: Mapping[str, float] = {
    "paradetox": 0.2,
    "mlma-en": 0.3,
    "told-br": 0.25,
    "kocohub": 0.4,
    "cold": 0.12,
    "ja-toxic": 1.0,
    "mlma-ar": 0.5,
    "mlma-fr": 0.4,
    "germeval2018": 0.35,
    "templates-de": 0.02,
    "templates-nl": 0.02,
    "templates-zh-cn": 0.02,
    "templates-hi-Latn": 0.02,
    "toxichat": 1.0,
    "wiki-fuzzed": 1.0,
}

# The multilingual human-labelled sources (embedding tier 4) were embedded up to this share of their
# subsample when the CPU budget ran out: the pool keeps exactly the embedded part (``pool.pool_position``).
TIER4_SHARE = 0.5806
TIER4_SOURCES = frozenset(
    {
        "told-br",
        "kocohub",
        "cold",
        "ja-toxic",
        "mlma-ar",
        "mlma-fr",
        "mlma-en",
        "germeval2018",
        "templates-de",
        "templates-nl",
        "templates-zh-cn",
        "templates-hi-Latn",
    }
)
POOL_RATES = {k: v * TIER4_SHARE if k in TIER4_SOURCES else v for k, v in BASE_RATES.items()}

# Embedding order: if the CPU budget runs out, what is embedded first is what matters most.
TIER_OF_FILE: Mapping[str, int] = {"en-perspective.jsonl": 1, "en-human.jsonl": 3, "multilingual-human.jsonl": 4}

HELDOUT_SHARE = 0.2  # share of (joined) groups held out: never fitted on, never used for any choice
# Perspective-scored model generations are the distribution polytox scores, but only 48 prompts carry
# them: a larger share
# is held out so the held-out EMT / EP / AT rest on enough prompts.
HELDOUT_SHARE_GENERATIONS = 0.4


def unit_hash(key: str, salt: str) -> float:
    """A number in [0, 1) fixed by ``salt`` and ``key`` (SHA-256, the same on every platform)."""
    digest = hashlib.sha256(f"{salt}\x00{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def normalise_text(text: str) -> str:
    """The pack's de-duplication key: NFKC, casefold, whitespace runs collapsed, stripped."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def load_pack(folder: Path | str, rates: Mapping[str, float] | None = POOL_RATES) -> list[Example]:
    """Rows of the pack, each source thinned to ``rates[source]`` of its groups (``None``: keep all)."""
    folder = Path(folder)
    out: list[Example] = []
    for name in PACK_FILES:
        path = folder / name
        if not path.exists():
            raise BadInputError(f"{path}: missing (the scorer training pack, see its README)")
        for number, record in jsonl_records(path):
            where = f"{path}:{number}"
            text, source, group = record.get("text"), record.get("source"), record.get("group")
            if not isinstance(text, str) or not text.strip():
                raise BadInputError(f"{where}: missing text")
            if not isinstance(source, str) or not isinstance(group, str):
                raise BadInputError(f"{where}: missing source or group")
            if rates is not None and unit_hash(group, "pool") >= rates.get(source, 1.0):
                continue
            kind = str(record.get("kind", ""))
            lang = normalize_lang(str(record.get("lang", "en"))) if record.get("lang") != "hi-Latn" else "hi-Latn"
            if "perspective" in record:
                try:
                    tox = float(record["perspective"])  # type: ignore[arg-type]
                except (TypeError, ValueError) as exc:
                    raise BadInputError(f"{where}: perspective {record['perspective']!r} is not a number") from exc
                out.append(
                    Example(
                        text=text,
                        lang=lang,
                        target=tox,
                        label=tox >= 0.5,
                        source=source,
                        group=group,
                        kind=kind,
                        domain="perspective",
                    )
                )
            else:
                toxic = record.get("toxic")
                if not isinstance(toxic, bool):
                    raise BadInputError(f"{where}: 'toxic' must be true or false")
                frac = record.get("frac")
                target = float(frac) if isinstance(frac, int | float) else float(toxic)  # type: ignore[arg-type]
                out.append(
                    Example(
                        text=text,
                        lang=lang,
                        target=target,
                        label=toxic,
                        source=source,
                        group=group,
                        kind=kind,
                        domain="human",
                        share=target if isinstance(frac, int | float) else None,
                    )
                )
    return out


def tier(example: Example) -> int:
    """Embedding priority: 1 Perspective-scored pack rows, 2 RTP / RTP-LX, 3 English human, 4 multilingual."""
    if example.source in ("rtp", "rtp-lx"):
        return 2
    if example.domain == "perspective":
        return 1
    return 3 if example.lang == "en" and not example.source.startswith("mlma-en") else 4


def join_components(examples: Sequence[Example]) -> list[str]:
    """Per example, the name of its joined group: groups merged when any two rows share a normalised text.

    The name is the lexicographically smallest group in the component, so it does not depend on row order.
    """
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    by_text: dict[str, str] = {}
    for ex in examples:
        find(ex.group)
        key = normalise_text(ex.text)
        other = by_text.setdefault(key, ex.group)
        a, b = find(other), find(ex.group)
        if a != b:
            parent[max(a, b)] = min(a, b)
    return [find(ex.group) for ex in examples]


def heldout_mask(
    examples: Sequence[Example], share: float = HELDOUT_SHARE, generation_share: float = HELDOUT_SHARE_GENERATIONS
) -> list[bool]:
    """True for rows of the held-out split: a fixed hash of the joined group, so groups never straddle it.
    Everyday sentences are never held out here: they have a check part of their own (``everyday.py``)."""
    names = join_components(examples)
    with_generations = {
        n for n, e in zip(names, examples, strict=True) if e.kind == "generation" and e.domain == "perspective"
    }
    return [
        e.domain != EVERYDAY_DOMAIN and unit_hash(n, "heldout") < (generation_share if n in with_generations else share)
        for n, e in zip(names, examples, strict=True)
    ]
