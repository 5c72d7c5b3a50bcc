"""Training data for the polytox-ml head: RTP-LX human ratings (17 languages) and RTP Perspective scores.

RTP-LX (de Wynter et al. 2024): each prompt rated by 3 annotators on a 1-5 toxicity scale; ``Index`` is
the source prompt (the same Index is the same prompt translated into each locale; an int in some files,
a string in others, normalised here). RTP (Gehman et al. 2020): prompts and continuations with stored
Perspective TOXICITY. Some RTP-LX English prompts are RTP texts too; ``pack.join_components`` joins them,
so a text and all its translations always fall on the same side of every split.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...errors import BadInputError
from ...langs import normalize_lang

# The label domain of presumed-harmless everyday sentences (``everyday.py``): target 0, label false.
EVERYDAY_DOMAIN = "everyday"

RTPLX_PATTERN = re.compile(r"RTP_LX_(?P<locale>[A-Za-z]+(?:-[A-Za-z]+)?)\.jsonl?$")


@dataclass(frozen=True)
class Example:
    """One training text: its language, a 0-1 target and where it came from.

    ``target`` is the mean human rating mapped to 0-1 ((mean - 1) / 4) for RTP-LX, the Perspective
    TOXICITY for RTP. ``label`` is the binary label the quality targets use: mean rating >= 3 (RTP-LX),
    Perspective >= 0.5 (RTP). ``group`` is the cross-validation group before joining overlaps.
    """

    text: str
    lang: str
    target: float
    label: bool
    source: str  # "rtp-lx" | "rtp" | a scorer-train pack source ("quark", "toxichat", ...)
    group: str
    rating: float | None = None  # RTP-LX mean human rating (1-5)
    kind: str = ""  # "prompt" | "continuation" | "generation" (a model's text) | "comment" | ...
    # label type: "rtp-lx" (1-5 ratings), "perspective" (TOXICITY), "human" (binary/share), EVERYDAY_DOMAIN
    domain: str = "rtp-lx"
    share: float | None = None  # share of human raters calling the text toxic, where the source gives it


def jsonl_records(path: Path) -> Iterator[tuple[int, dict[str, object]]]:
    """(line number, object) per non-blank line of a JSON Lines file; a bad line stops with file:line."""
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise BadInputError(f"{path}:{number}: not valid JSON ({exc.msg})") from exc
            if not isinstance(record, dict):
                raise BadInputError(f"{path}:{number}: expected a JSON object")
            yield number, record


def normalize_index(value: object, where: str) -> int:
    """RTP-LX ``Index`` as an int (it is an int in some files and a string in others)."""
    try:
        return int(str(value).strip())
    except (TypeError, ValueError) as exc:
        raise BadInputError(f"{where}: Index {value!r} is not an integer") from exc


def load_rtplx(folder: Path | str, langs: Sequence[str] = (), threshold: float = 3.0) -> list[Example]:
    """All RTP-LX prompts in ``folder`` (``RTP_LX_<LOCALE>.jsonl``), optionally only some languages."""
    folder = Path(folder)
    files = sorted(p for p in folder.iterdir() if RTPLX_PATTERN.search(p.name))
    if not files:
        raise BadInputError(f"{folder}: no RTP_LX_<LOCALE>.jsonl files found")
    out: list[Example] = []
    for path in files:
        match = RTPLX_PATTERN.search(path.name)
        assert match is not None
        lang = normalize_lang(match["locale"])
        if langs and lang not in langs:
            continue
        for number, record in jsonl_records(path):
            where = f"{path}:{number}"
            text = record.get("Prompt")
            annotations = record.get("AnnotationsRaw")
            raw = annotations.get("Toxicity") if isinstance(annotations, dict) else None
            if not isinstance(text, str) or not text.strip():
                raise BadInputError(f"{where}: missing Prompt text")
            if not isinstance(raw, list) or not raw:
                raise BadInputError(f"{where}: missing AnnotationsRaw.Toxicity ratings")
            rating = float(np.mean([float(x) for x in raw]))
            index = normalize_index(record.get("Index"), where)
            out.append(
                Example(
                    text=text,
                    lang=lang,
                    target=(rating - 1.0) / 4.0,
                    label=rating >= threshold,
                    source="rtp-lx",
                    group=f"lx:{index}",
                    rating=rating,
                    kind="prompt",
                    share=float(np.mean([float(x) >= threshold for x in raw])),
                )
            )
    return out


def load_rtp(folder: Path | str, threshold: float = 0.5) -> list[Example]:
    """RTP prompts and continuations with a stored Perspective TOXICITY (texts without one are skipped)."""
    folder = Path(folder)
    files = sorted(folder.glob("*.jsonl"))
    if not files:
        raise BadInputError(f"{folder}: no RTP .jsonl files found")
    out: list[Example] = []
    for path in files:
        for number, record in jsonl_records(path):
            for part in ("prompt", "continuation"):
                block = record.get(part)
                if not isinstance(block, dict):
                    raise BadInputError(f"{path}:{number}: missing {part!r} object")
                text, tox = block.get("text"), block.get("toxicity")
                if not isinstance(text, str) or not text.strip() or tox is None:
                    continue
                out.append(
                    Example(
                        text=text,
                        lang="en",
                        target=float(tox),
                        label=float(tox) >= threshold,
                        source="rtp",
                        group=f"rtp:{path.stem}:{number}",
                        kind=part,
                        domain="perspective",
                    )
                )
    return out
