"""Everyday sentences (``../shared/data/ud-sentences``): presumed-harmless text in all 17 PTP languages.

Universal Dependencies sentences (news, Wikipedia, nonfiction, blogs, reviews, e-mail; the folder's README
gives sources and licences). They are not annotated for toxicity: they are read as *presumed harmless*, with
noise. Two uses, on two parts cut once here and never re-cut:

- the **fit part** may anchor the harmless end of the cross-language maps and (rows without
  ``noncommercial``) train a head;
- the **check part** is only ever measured: no fit, map or choice reads it.

The cut (``CHECK_SHARE`` of the rows): Parallel UD rows by their ``sent_id`` (the same id is the same
meaning in every language, so a PUD sentence and all its translations fall on the same side), every other
row by its treebank and ``sent_id`` (its text where it has none). Both by a SHA-256 of the key
(``pack.unit_hash``), the same on every machine. Italian ISDT and Polish PDB rows are CC BY-NC-SA
(``noncommercial``): measure and fit maps with them, never train shipped weights on them (``trainable``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...constants import TOXIC_THRESHOLD
from ...errors import BadInputError
from ...langs import normalize_lang
from .data import EVERYDAY_DOMAIN, Example, jsonl_records
from .pack import unit_hash
from .scale_languages import Pairs

CHECK_SHARE = 0.5  # share of PUD ids (and of the other sentences) in the check part
SALT = "ud-check"
FILE = "sentences.jsonl"


@dataclass(frozen=True)
class EverydayRow:
    """One everyday sentence with its part of the cut."""

    text: str
    lang: str
    source: str  # treebank, e.g. "UD_German-GSD"; "*-PUD" = Parallel UD
    sent_id: str
    parallel: bool
    noncommercial: bool
    check: bool  # True: the check part (measured only); False: the fit part

    @property
    def key(self) -> str:
        """What the cut hashes: the PUD id alone for parallel rows (one meaning, every language)."""
        return split_key(self.source, self.sent_id, self.parallel)

    @property
    def trainable(self) -> bool:
        """May train weights that ship: the fit part, and not a noncommercial treebank."""
        return not self.check and not self.noncommercial


def split_key(source: str, sent_id: str, parallel: bool) -> str:
    return f"pud:{sent_id}" if parallel else f"{source}:{sent_id}"


def in_check(source: str, sent_id: str, parallel: bool) -> bool:
    """Whether a sentence belongs to the check part (fixed by its key's hash)."""
    return unit_hash(split_key(source, sent_id, parallel), SALT) < CHECK_SHARE


def load_everyday(folder: Path | str, langs: Iterable[str] = ()) -> list[EverydayRow]:
    """Every sentence of the folder (optionally some languages), each marked with its part."""
    path = Path(folder) / FILE
    if not path.exists():
        raise BadInputError(f"{path}: missing (the ud-sentences folder, see its README)")
    wanted = set(langs)
    out: list[EverydayRow] = []
    for number, record in jsonl_records(path):
        where = f"{path}:{number}"
        text, source, sent_id = record.get("text"), record.get("source"), record.get("sent_id")
        if not isinstance(text, str) or not text.strip():
            raise BadInputError(f"{where}: missing text")
        if not isinstance(source, str):
            raise BadInputError(f"{where}: missing source")
        if not isinstance(sent_id, str) or not sent_id:  # one Bosque row has none: its text is its key
            sent_id = f"text:{text}"
        lang = normalize_lang(str(record.get("lang", "")))
        if wanted and lang not in wanted:
            continue
        parallel = bool(record.get("parallel", False))
        out.append(
            EverydayRow(
                text=text,
                lang=lang,
                source=source,
                sent_id=sent_id,
                parallel=parallel,
                noncommercial=bool(record.get("noncommercial", False)),
                check=in_check(source, sent_id, parallel),
            )
        )
    return out


def part(rows: Sequence[EverydayRow], check: bool) -> list[EverydayRow]:
    return [r for r in rows if r.check == check]


EVERYDAY_SOURCE = "ud"


def everyday_examples(folder: Path | str) -> list[Example]:
    """The fit part's trainable sentences as training rows: presumed harmless (target 0, label false) in
    every language, so a head fitted on them cannot read which language a text is in as toxicity. A Parallel
    UD id and its translations share one group (they fall in one cross-validation fold). A sentence whose
    text is also in the check part (a line repeated under another id) is left out: the check part stays
    unread by any fit."""
    rows = load_everyday(folder)
    checked = {(r.text, r.lang) for r in rows if r.check}
    return [
        Example(
            text=r.text,
            lang=r.lang,
            target=0.0,
            label=False,
            source=EVERYDAY_SOURCE,
            group=f"ud:{r.key}",
            kind="sentence",
            domain=EVERYDAY_DOMAIN,
        )
        for r in rows
        if r.trainable and (r.text, r.lang) not in checked
    ]


EVERYDAY_RATING = 1.0  # the RTP-LX level an everyday sentence is presumed to have on both sides (not toxic)


def everyday_pairs(rows: Sequence[EverydayRow], raw: Mapping[tuple[str, str], float]) -> Pairs:
    """The fit part's Parallel UD ids as toxicity-preserving pairs at the harmless end: each translation
    with its English sentence (the same id is the same meaning), both at ``EVERYDAY_RATING``. They anchor the
    cross-language maps' harmless end (``scale_fit``), as RTP-LX's preserving pairs anchor the rest. Rows
    without a raw output in ``raw`` ((text, lang) -> raw) are left out."""
    english = {r.sent_id: r for r in rows if r.parallel and not r.check and r.lang == "en" and (r.text, "en") in raw}
    sel = [
        r
        for r in rows
        if r.parallel and not r.check and r.lang != "en" and r.sent_id in english and (r.text, r.lang) in raw
    ]
    return Pairs(
        np.array([f"pud:{r.sent_id}" for r in sel], dtype=object),
        np.array([r.lang for r in sel], dtype=object),
        np.array([raw[(r.text, r.lang)] for r in sel], dtype=float),
        np.full(len(sel), EVERYDAY_RATING),
        np.array([raw[(english[r.sent_id].text, "en")] for r in sel], dtype=float),
        np.full(len(sel), EVERYDAY_RATING),
        np.full(len(sel), np.nan),
    )


def everyday_gaps(rows: Sequence[EverydayRow], values: np.ndarray, check: bool = True) -> dict[str, dict[str, Any]]:
    """Per language, on one part (the check part by default): the mean over its Parallel UD ids minus English's
    on the same ids (``gap``), their share >= 0.5 minus English's (``share_gap``), and on the other sentences
    the share >= 0.5 minus English EWT's (``other_share_gap``). A scale that reads everyday text alike in
    every language has every gap near 0."""
    en = {r.sent_id: v for r, v in zip(rows, values, strict=True) if r.parallel and r.lang == "en" and r.check == check}
    en_other = np.array(
        [v for r, v in zip(rows, values, strict=True) if not r.parallel and r.lang == "en" and r.check == check]
    )
    out: dict[str, dict[str, Any]] = {}
    for lang in sorted({r.lang for r in rows}):
        pud = np.array(
            [
                (v, en[r.sent_id])
                for r, v in zip(rows, values, strict=True)
                if r.parallel and r.lang == lang and r.check == check and r.sent_id in en
            ]
        ).reshape(-1, 2)
        other = np.array(
            [v for r, v in zip(rows, values, strict=True) if not r.parallel and r.lang == lang and r.check == check]
        )
        block: dict[str, Any] = {"n_pud": len(pud), "n_other": len(other)}
        if len(pud):
            t, e = pud[:, 0], pud[:, 1]
            block.update(
                pud_mean=round(float(t.mean()), 4),
                gap=round(float(t.mean() - e.mean()), 4),
                share=round(float((t >= TOXIC_THRESHOLD).mean()), 4),
                share_gap=round(float((t >= TOXIC_THRESHOLD).mean() - (e >= TOXIC_THRESHOLD).mean()), 4),
            )
        if len(other):
            block.update(
                other_mean=round(float(other.mean()), 4),
                other_share=round(float((other >= TOXIC_THRESHOLD).mean()), 4),
            )
            if len(en_other):
                block["other_share_gap"] = round(
                    float((other >= TOXIC_THRESHOLD).mean() - (en_other >= TOXIC_THRESHOLD).mean()), 4
                )
        out[lang] = block
    return out
