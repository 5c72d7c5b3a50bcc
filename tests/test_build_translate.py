"""Translation augmentation (PTP §3.2) with a tiny randomly initialised M2M100 (NLLB architecture) model and a
tiny NLLB tokenizer built in the test, through the same transformers loading code as facebook/nllb-200-*."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from polytox.cli.main import main

from .build_corpus import rtplx_records, write_documents

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("sentencex")


def make_tiny_nllb(folder: Path, texts: list[str]) -> Path:
    """A character-level NllbTokenizer and a 1-layer M2M100 model, saved like a hub checkpoint."""
    from transformers import M2M100Config, M2M100ForConditionalGeneration, NllbTokenizer

    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "▁": 4}
    for ch in sorted({c for t in texts for c in t if not c.isspace()}):
        vocab.setdefault(ch, len(vocab))
    tok = NllbTokenizer(vocab=vocab, merges=[])
    config = M2M100Config(vocab_size=len(tok), d_model=16, encoder_layers=1, decoder_layers=1,
                          encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
                          decoder_ffn_dim=32, max_position_embeddings=256, pad_token_id=1, bos_token_id=0,
                          eos_token_id=2, decoder_start_token_id=2)
    torch.manual_seed(0)
    model = M2M100ForConditionalGeneration(config).eval()
    # Random weights: keep the decoder off special and language tokens, so every output has some text.
    keep = {tok.convert_tokens_to_ids(code) for code in ("deu_Latn", "jpn_Jpan")}  # targets are forced first
    special = sorted((set(range(len(vocab), len(tok))) | {0, 1, 3, 4}) - keep)
    model.generation_config.suppress_tokens = special
    model.generation_config.min_new_tokens = 3
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.mark.slow
def test_translation_fills_toxic_bins_and_reports_pearson(shared_data: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    en = [r["Prompt"] for r in rtplx_records(shared_data, "en")]
    de = [r["Prompt"] for r in rtplx_records(shared_data, "de")][:150]
    docs = [{"id": f"e{i}", "lang": "en", "text": t} for i, t in enumerate(en)]
    docs += [{"id": f"d{i}", "lang": "de", "text": t} for i, t in enumerate(de)]
    corpus = write_documents(tmp_path / "corpus.jsonl", docs)
    model = make_tiny_nllb(tmp_path / "tiny-nllb", en)
    out = tmp_path / "set"
    argv = ["build", "--out", str(out), "--input", str(corpus), "--scorer", "fake", "--per-bin", "6",
            "--small-per-lang", "8", "--lang-policy", "keep", "--translate", "--translate-model", str(model),
            "--translate-to", "de", "--translate-max", "5", "--translate-batch-size", "4",
            "--translate-max-new-tokens", "12", "--no-progress", "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    tr = report["translation"]
    assert tr["from_lang"] == "en" and tr["wanted"] == {"de": 5}
    assert tr["counters"]["translate"]["translated"] == 5 and tr["counters"]["score"]["out"] == 5

    translated = [row for part in sorted((out / "translated" / "de").glob("part-*.parquet"))
                  for row in pq.read_table(part).to_pylist()]
    scan_en = [r for r in pq.read_table(out / "scan" / "docs").to_pylist() if r["lang"] == "en"]
    toxic_en = {r["id"]: r["toxicity"] for r in scan_en if r["bucket"] >= 2}
    assert len(translated) == 5
    for row in translated:
        assert row["lang"] == "de" and row["source_lang"] == "en"
        assert row["id"] == f"de:mt:{row['translated_from']}"
        assert row["source_toxicity"] == toxic_en[row["translated_from"]] >= 0.5
        assert row["text"].strip() and row["toxicity"] is not None
        assert json.loads(row["extra_json"])["translation_model"] == str(model)

    # Pearson r over the stored pairs, recomputed here.
    xs = [r["source_toxicity"] for r in translated]
    ys = [r["toxicity"] for r in translated]
    r = float(np.corrcoef(xs, ys)[0, 1])
    assert tr["correlation"]["overall"]["r"] == pytest.approx(r)
    assert tr["correlation"]["overall"]["n"] == 5 and tr["correlation"]["paper_r"] == 0.725
    from scipy import stats

    assert tr["correlation"]["overall"]["p"] == pytest.approx(stats.pearsonr(xs, ys).pvalue)

    # Natural units first: translations only fill what German lacks in each bin.
    bins = {(b["lang"], b["bucket"]): b for b in report["selection"]["bins"]}
    mt_bins = Counter(toxicity_bucket_of(r["toxicity"]) for r in translated)
    for b in range(4):
        row = bins[("de", b)]
        assert row["translated"] == mt_bins.get(b, 0)
        assert row["selected_translated"] == min(max(0, 6 - row["natural"]), row["translated"])
    rows = [json.loads(line) for line in Path(out / "ptp.jsonl").read_text(encoding="utf-8").splitlines()]
    tagged = [r for r in rows if r["meta_data"]["translated_from"]]
    assert len(tagged) == sum(bins[("de", b)]["selected_translated"] for b in range(4))
    assert all(r["meta_data"]["source_lang"] == "en" for r in tagged)
    assert "Pearson r between source and translated toxicity" in (out / "report.md").read_text(encoding="utf-8")

    # Rerun: nothing is translated again.
    assert main(argv) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["translation"]["shards"] == 0 and again["translation"]["shards_skipped"] == 1
    assert again["translation"]["counters"] == tr["counters"]


def toxicity_bucket_of(value: float) -> int:
    from polytox.constants import toxicity_bucket

    return toxicity_bucket(value)


def test_translator_rejects_unknown_language() -> None:
    from polytox.errors import PolytoxError
    from polytox.promptset.translate import nllb_code

    assert nllb_code("zh") == "zho_Hans" and nllb_code("hi") == "hin_Deva"
    with pytest.raises(PolytoxError, match="no NLLB code"):
        nllb_code("xx")


def test_pearson_edge_cases() -> None:
    from polytox.promptset.translate import pearson

    assert pearson([0.1, 0.2], [0.3, 0.4])["r"] is None
    assert pearson([0.5, 0.5, 0.5], [0.1, 0.2, 0.3])["note"] == "one side is constant"
    assert pearson([0.1, 0.2, 0.3], [0.2, 0.4, 0.6])["r"] == pytest.approx(1.0)
