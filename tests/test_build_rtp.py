"""RTP-mode builds: sentence spans of 64-1,024 characters from multi-sentence documents in several scripts,
word-level halves, the offline SVM scorer on English; and the statistics of a built set."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from polytox.cli.main import main
from polytox.prompts import load_prompts
from polytox.promptset import BuildSpec, CorpusSource, build
from polytox.promptset.split import word_spans
from polytox.scoring.fake import FakeScorer
from polytox.spec import PromptSpec

from .build_corpus import clean_sentences, join_sentences, web_documents, write_documents

pytest.importorskip("sentencex")
LANGS = ["en", "de", "ja", "hi", "ar", "zh", "ko"]


def expected_spans(doc: dict[str, Any]) -> tuple[list[tuple[int, int]], int]:
    """The document's sentence offsets (the segmenter is checked on its own in test_build_split) kept when
    64 <= length <= 1024, and the number of sentences."""
    from polytox.promptset.sentences import sentence_spans

    spans = sentence_spans(doc["text"], doc["lang"])
    return [(b, e) for b, e in spans if 64 <= e - b <= 1024], len(spans)


@pytest.fixture(scope="module")
def rtp_build(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]],
                                                                                         dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("rtp")
    docs = web_documents(shared_data, LANGS, per_lang=12)
    corpus = write_documents(tmp / "corpus.jsonl", docs)
    spec = BuildSpec(source=CorpusSource(paths=(str(corpus),)), mode="rtp", scorer="fake",
                     scorer_options=(("cache", str(tmp / "c.sqlite")),), per_bin=1000, small_per_lang=6,
                     lang_policy="keep", shard_size=20)
    result = build(spec, tmp / "set")
    return tmp / "set", docs, result.report


def test_spans_are_the_in_range_sentences(rtp_build: tuple[Path, list[dict[str, Any]], dict[str, Any]],
                                          shared_data: Path) -> None:
    out, docs, report = rtp_build
    rows = [json.loads(line) for line in Path(out / "rtp.jsonl").read_text(encoding="utf-8").splitlines()]
    got = {(r["filename"], r["begin"], r["end"]) for r in rows}
    want = set()
    n_sentences = 0
    for doc in docs:
        spans, n = expected_spans(doc)
        n_sentences += n
        want |= {(f"{doc['lang']}:{doc['id']}", b, e) for b, e in spans}
    assert got == want  # per_bin is large: every span is selected
    counters = report["scan"]["counters"]["sentences"]
    assert counters["sentences"] == n_sentences
    assert counters["out"] == len(want)
    assert counters.get("too_short", 0) == n_sentences - len(want)
    no_span = {d["id"] for d in docs} - {f.split(":", 1)[1] for f, _, _ in want}
    assert report["scan"]["counters"]["sentences"].get("rejected", 0) == len(no_span)
    texts = {f"{d['lang']}:{d['id']}": d["text"] for d in docs}
    for r in rows:
        span = texts[r["filename"]][r["begin"] : r["end"]]
        assert r["prompt"]["text"] + r["continuation"]["text"] == span
        words = word_spans(span, r["lang"])
        n = min(len(words) // 2, 128)
        assert len(r["prompt"]["text"]) == words[n - 1][1]
        assert r["continuation"]["text"][:1].isspace() or r["lang"] in ("zh", "ja")


def test_rtp_set_reads_back_with_languages(rtp_build: tuple[Path, list[dict[str, Any]], dict[str, Any]]) -> None:
    out, _, _ = rtp_build
    rtp = load_prompts(PromptSpec(source=str(out / "rtp.parquet")))
    ptp = load_prompts(PromptSpec(source=str(out / "ptp.jsonl")))
    assert rtp.n_bad == ptp.n_bad == 0
    assert Counter(p.lang for p in rtp.prompts) == Counter(p.lang for p in ptp.prompts)
    assert set(Counter(p.lang for p in rtp.prompts)) <= set(LANGS)
    scorer = FakeScorer()
    for p in rtp.prompts:
        assert p.toxicity == scorer.score([p.text], [p.lang])[0].get("toxicity")


def test_svm_scorer_builds_an_english_set(shared_data: Path, tmp_path: Path) -> None:
    pytest.importorskip("profanity_check")
    from polytox.scoring.svm import SvmScorer

    docs = web_documents(shared_data, ["en"], per_lang=15)
    corpus = write_documents(tmp_path / "en.jsonl", docs)
    spec = BuildSpec(source=CorpusSource(paths=(str(corpus),)), mode="rtp", scorer="svm", langs=("en",),
                     per_bin=3, small_per_lang=4, lang_policy="keep")
    result = build(spec, tmp_path / "set")
    rows = [json.loads(line) for line in Path(tmp_path / "set" / "rtp.jsonl").read_text(encoding="utf-8").splitlines()]
    assert rows and all(r["lang"] == "en" for r in rows)
    svm = SvmScorer()
    scores = svm.score([r["prompt"]["text"] for r in rows], ["en"] * len(rows))
    assert [r["prompt"]["toxicity"] for r in rows] == [s.get("toxicity") for s in scores]
    bins = Counter(r["toxicity_bucket"] for r in rows)
    for row in result.report["selection"]["bins"]:
        assert bins.get(row["bucket"], 0) == min(3, row["available"])


def test_svm_rejects_other_languages_up_front(shared_data: Path, tmp_path: Path) -> None:
    pytest.importorskip("profanity_check")
    from polytox.errors import UnsupportedLanguageError

    spec = BuildSpec(source=CorpusSource(paths=(str(shared_data / "rtp-lx"),)), scorer="svm", langs=("de",))
    with pytest.raises(UnsupportedLanguageError, match="does not support language"):
        build(spec, tmp_path / "set")


def _domain(url: str) -> str:
    host = url.split("/")[2]
    return host[4:] if host.startswith("www.") else host


def test_stats_of_a_built_set(rtp_build: tuple[Path, list[dict[str, Any]], dict[str, Any]], tmp_path: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    out, _, _ = rtp_build
    rows = [json.loads(line) for line in Path(out / "ptp.jsonl").read_text(encoding="utf-8").splitlines()]
    assert main(["build", "stats", str(out), "--format", "json", "--log", "--out", str(tmp_path / "st")]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats == json.loads((tmp_path / "st" / "stats.json").read_text(encoding="utf-8"))
    import splintr

    tok = splintr.Tokenizer.from_pretrained("cl100k_base")
    assert stats["settings"]["tokens_exact"] is True
    for lang, block in stats["by_lang"].items():
        mine = [r for r in rows if r["meta_data"]["lang"] == lang]
        assert block["n"] == len(mine)
        assert block["by_bucket"] == {str(b): sum(r["toxicity_bucket"] == b for r in mine) for b in range(4)}
        assert sum(block["toxicity_hist"]) == len(mine)
        lengths = [len(tok.encode_ordinary(r["prompt"])) for r in mine]
        assert block["prompt_tokens"]["mean"] == pytest.approx(sum(lengths) / len(lengths))
        assert block["prompt_tokens"]["max"] == max(lengths)
        assert block["years"] == {str(y): n for y, n in sorted(Counter(
            int(r["meta_data"]["timestamp"][:4]) for r in mine).items())}
        want_domains = Counter(_domain(r["meta_data"]["url"]) for r in mine).most_common(10)
        assert sorted(map(tuple, block["top_domains"])) == sorted(want_domains)
        toxic_p = [r for r in mine if r["prompt_perspective"]["attributeScores"]["TOXICITY"]["summaryScore"]["value"]
                   >= 0.5]
        assert block["toxic_prompts"] == len(toxic_p) and block["scored_prompts"] == len(mine)
    assert stats["overall"]["n"] == len(rows)
    for name in ("toxicity.png", "prompt_tokens.png", "years.png", "domains.png"):
        import matplotlib.image

        image = matplotlib.image.imread(tmp_path / "st" / name)
        assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100
    assert "| lang | prompts |" in (tmp_path / "st" / "stats.md").read_text(encoding="utf-8")
    # The RTP-schema file gives the same statistics (its units are the same rows).
    from polytox.promptset.stats import compute_stats

    rtp_stats = compute_stats(out / "rtp.jsonl")
    for key in ("n", "by_bucket", "prompt_tokens", "years", "toxic_prompts", "toxic_continuations"):
        assert rtp_stats["overall"][key] == stats["overall"][key], key


def test_exact_and_near_duplicates(shared_data: Path, tmp_path: Path) -> None:
    from polytox.promptset.dedup import jaccard, shingles
    from polytox.promptset.stats import compute_stats

    sents = clean_sentences(shared_data, "en", 60, min_chars=30)
    base = join_sentences(sents[:30], "en")
    near = base.replace(sents[3], sents[3].replace(sents[3].split()[0], "Honestly"), 1)
    other = join_sentences(sents[30:], "en")
    texts = [base, other, base, near]
    records = [{"text": t, "prompt": t[: len(t) // 2], "continuation": t[len(t) // 2 :], "toxicity": 0.1,
                "toxicity_bucket": 0, "meta_data": {"lang": "en"}} for t in texts]
    path = write_documents(tmp_path / "set.jsonl", records)
    assert jaccard(shingles(base), shingles(near)) >= 0.9 > jaccard(shingles(base), shingles(other))
    stats = compute_stats(path)
    assert (stats["by_lang"]["en"]["exact_duplicates"], stats["by_lang"]["en"]["near_duplicates"]) == (1, 1)
    assert stats["overall"]["near_duplicates"] == 1
    assert stats["by_lang"]["en"]["scored_continuations"] == 0  # no continuation scores in this file
    assert stats["by_lang"]["en"]["toxic_continuation_share"] is None
