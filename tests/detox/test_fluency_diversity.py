"""Distinct-n, perplexity of continuations, the corpus selection and the comparison table."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from polytox.analysis.detox_compare import compare, markdown
from polytox.detox.corpus import NONTOXIC, TOXIC, select_corpus
from polytox.detox.diversity import distinct_n, diversity
from polytox.errors import PolytoxError


def test_distinct_n_counts_unique_ngrams_per_word() -> None:
    d = distinct_n(["a b a", "a b c"])
    assert d is not None
    # 6 words; unigrams {a,b,c}; bigrams {ab, ba, bc}; trigrams {aba, abc}
    assert d[1] == pytest.approx(3 / 6) and d[2] == pytest.approx(3 / 6) and d[3] == pytest.approx(2 / 6)
    out = diversity({"p": ["a b a", "a b c", None], "q": ["x y"]})
    assert out["dist_1"] == pytest.approx((0.5 + 1.0) / 2)
    assert out["n_failed_generations"] == 1 and out["n_prompts"] == 2


def _write(path: Path, rows: list[dict[str, object]], bad_line: bool = False) -> Path:
    lines = [json.dumps(r) for r in rows]
    if bad_line:
        lines.insert(2, "{not json")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_corpus_tails_are_disjoint_from_prompts_and_balanced(tmp_path: Path) -> None:
    rows = [{"text": f"document number {i} says something", "perspective": i / 100, "lang": "en"}
            for i in range(100)]
    rows.append({"text": "Prompt text that is evaluated later on", "perspective": 0.0, "lang": "en"})
    rows.append({"text": "bonjour", "perspective": 0.0, "lang": "fr"})
    rows.append({"text": "no score here", "lang": "en"})
    src = _write(tmp_path / "scored.jsonl", rows, bad_line=True)
    prompts = _write(tmp_path / "prompts.jsonl", [{"prompt": {"text": "prompt text that is  evaluated later on"},
                                                   "continuation": {"text": "x"}}])
    corpus = select_corpus([src], [prompts], percentile=10, heldout_share=0.2, seed=1)
    s = corpus.stats
    assert s["n_overlapping_prompts_removed"] == 1 and s["n_per_side"] == 10
    assert s["n_skipped_records"] == 2
    assert any(p.startswith(f"{src}:3: invalid JSON") for p in s["skipped_records"])
    non, tox = corpus.texts(NONTOXIC) + corpus.texts(NONTOXIC, True), corpus.texts(TOXIC) + corpus.texts(TOXIC, True)
    assert sorted(non) == sorted(f"document number {i} says something" for i in range(10))
    assert sorted(tox) == sorted(f"document number {i} says something" for i in range(90, 100))
    assert len(corpus.heldout) == 4 and not set(corpus.texts(heldout=True)) & set(corpus.texts())
    with pytest.raises(PolytoxError, match="percentile"):
        select_corpus([src], percentile=0)


def test_perplexity_scorer_matches_a_manual_computation(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from polytox.detox.fluency import PerplexityScorer

    from ..tiny_hf import one_torch_thread
    from ..tiny_models import make_tiny_lm

    path = make_tiny_lm(tmp_path / "lm", arch="gpt2")
    scorer = PerplexityScorer(str(path), device="cpu", batch_size=2)
    with one_torch_thread():
        got = scorer.nll(["the weather", "shut up and", "my"], [" was cold", " listen", ""])
        ctx = scorer.tok("the weather")["input_ids"]
        cont = scorer.tok(" was cold", add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logp = torch.log_softmax(scorer.model(input_ids=torch.tensor([ctx + cont])).logits[0], -1)
    manual = -sum(float(logp[len(ctx) - 1 + i, t]) for i, t in enumerate(cont))
    assert got[0][0] == pytest.approx(manual, rel=1e-4) and got[0][1] == len(cont)
    assert got[2] == (0.0, 0)  # an empty continuation has nothing to score
    assert math.isfinite(got[1][0])


def _fake_run(root: Path, detox: str | None, emt: tuple[float, float], ppl: float | None) -> Path:
    root.mkdir(parents=True)
    block = {"emt": 0.5, "ep": 0.5, "n_generations": 10, "n_failed_generations": 0}
    metrics = {"model": "m", "detox": detox, "overall": block,
               "by": {"prompt_toxicity": {"toxic": {"emt": emt[0], "emt_std": 0.1, "ep": 0.6},
                                          "nontoxic": {"emt": emt[1], "emt_std": 0.2, "ep": 0.1}}},
               "diversity": {"dist_1": 0.5, "dist_2": 0.8, "dist_3": 0.9}}
    if ppl is not None:
        metrics["fluency"] = {"model": "f", "mean_ppl": ppl}
    (root / "metrics.json").write_text(json.dumps(metrics))
    (root / "manifest.json").write_text(json.dumps({"executor": {"generate_seconds": 5.0, "shards_total": 1,
                                                                 "shards_generated": 1}}))
    return root


def test_compare_lays_out_rtp_table3(tmp_path: Path) -> None:
    a = _fake_run(tmp_path / "a", None, (0.7, 0.3), 20.0)
    b = _fake_run(tmp_path / "b", "word-filter", (0.5, 0.2), None)
    rows = compare([a, b])
    assert [r.method for r in rows] == ["none", "word-filter"]
    assert rows[0].emt_toxic == 0.7 and rows[1].emt_nontoxic == 0.2 and rows[1].ppl is None
    assert rows[0].seconds_per_generation == pytest.approx(0.5)
    md = markdown(rows)
    assert "| none | m | 0.700 ± 0.10 | 0.300 ± 0.20 | 0.600 | 0.100 |" in md
    with pytest.raises(PolytoxError, match=r"no metrics\.json"):
        compare([tmp_path])


def test_heldout_perplexity_scores_every_token_after_bos(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from polytox.detox.fluency import heldout_perplexity

    from ..tiny_hf import one_torch_thread
    from ..tiny_models import make_tiny_lm

    path = make_tiny_lm(tmp_path / "lm", arch="gpt2")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok, model = AutoTokenizer.from_pretrained(path), AutoModelForCausalLM.from_pretrained(path)
    text = "the weather this morning was cold"
    with one_torch_thread():
        got = heldout_perplexity(str(path), [text])
        ids = [tok.bos_token_id, *tok(text, add_special_tokens=False)["input_ids"]]
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0], -1)
    manual = -sum(float(logp[i - 1, ids[i]]) for i in range(1, len(ids))) / (len(ids) - 1)
    assert got["n_tokens"] == len(ids) - 1
    assert got["ppl"] == pytest.approx(math.exp(manual), rel=1e-4)
