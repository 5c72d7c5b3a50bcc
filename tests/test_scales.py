"""Named scales of polytox-ml: the raw score kept with every score, scales applied at read time.

Covers: raw values in scores, the score cache (old rows without one read as before), the run store and
``polytox score``; ``--scorer-opt scale=NAME``; the committed scales file (fitted for the committed head,
monotone maps, the era maps equal to the head's own); the other languages fitted on the fit part of the
held-out RTP-LX pairs only; ``polytox metrics
--scale`` and ``leaderboard --scale`` re-reading a stored run (equal to applying the map by hand; rows
without a raw value counted and said; a run without any refused with one error line).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import duckdb
import numpy as np
import pyarrow.parquet as pq
import pytest

from polytox.errors import PolytoxError
from polytox.scoring.cache import ScoreCache
from polytox.scoring.calibration import IsotonicMap
from polytox.scoring.ml.calib import CONTINUATION, TIE_BREAK, WEB, ScaleMaps
from polytox.scoring.ml.head import MlHead, default_head_path
from polytox.scoring.ml.scales import (
    PERSPECTIVE_2020,
    PERSPECTIVE_2022,
    SCALES_FILE,
    Scale,
    ScaleSet,
    load_scales,
    write_scales,
)
from polytox.scoring.ml.scorer import PolytoxMlScorer
from polytox.store import RunStore, write_manifest_file
from polytox.training.scorer.scale_rows import ERA_2020, ERA_2022, ERA_UNKNOWN, RATERS, ScaleRow, era_of
from polytox.types import RAW_KEY, Generation, Score

from .core_helpers import read_parts, rewrite_part, run_cli

pytest.importorskip("sklearn")

TEXTS = ["you are a stupid idiot and I hate you", "the garden is lovely in spring", "Du bist ein dummer Idiot",
         "what a nice day"]
LANGS = ["en", "en", "de", "en"]


def test_scorer_keeps_the_raw_score_and_reads_it_on_the_default_scale_of_its_text_kind() -> None:
    scales = load_scales(default_head_path(), MlHead.load(default_head_path()).digest)
    assert scales is not None
    own = PolytoxMlScorer(mode="ngram", scale="head")
    maps = ScaleMaps.from_json(own.head.scale["ngram"])
    raw = np.array([s.get(RAW_KEY) for s in own.score(TEXTS, LANGS)])
    assert np.all((raw > 0) & (raw < 1))
    np.testing.assert_allclose([s.get("toxicity") for s in own.score(TEXTS, LANGS)],
                               maps.apply(raw, LANGS, CONTINUATION))
    assert own.describe()["scale"].startswith("head (English: continuation map")
    english = np.array(LANGS) == "en"
    for text, name in (("continuation", PERSPECTIVE_2022), ("web", PERSPECTIVE_2020)):
        scorer = PolytoxMlScorer(mode="ngram", text=text)
        got = np.array([s.get("toxicity") for s in scorer.score(TEXTS, LANGS)])
        assert scorer.describe()["scale"] == name and scorer.id.endswith("-" + name)
        np.testing.assert_allclose(got, scales.get(name).apply(raw, LANGS, "ngram"))
        # English values are the head's own map of that text kind: unchanged by naming the scale
        np.testing.assert_allclose(got[english], maps.apply(raw, LANGS, text)[english])
        assert abs(got[~english] - maps.apply(raw, LANGS, text)[~english]).max() > 0.01  # other languages: not


def _head_copy_with_scales(tmp_path: Path) -> Path:
    head = tmp_path / "head.npz"
    shutil.copy(default_head_path(), head)
    digest = MlHead.load(head).digest
    maps = ScaleMaps(english=IsotonicMap((0.0, 1.0), (0.2, 0.6)), fallback=IsotonicMap((0.0, 1.0), (0.1, 0.3)))
    write_scales(ScaleSet(head=digest, default=PERSPECTIVE_2020,
                          scales={PERSPECTIVE_2020: Scale(PERSPECTIVE_2020, {"ngram": maps}, {"era": "2020"})}),
                 tmp_path / SCALES_FILE)
    return head


def test_a_named_scale_replaces_the_head_maps_and_names_itself(tmp_path: Path) -> None:
    head = _head_copy_with_scales(tmp_path)
    plain = PolytoxMlScorer(head=str(head), mode="ngram")
    scaled = PolytoxMlScorer(head=str(head), mode="ngram", scale=PERSPECTIVE_2020)
    raw = np.array([s.get(RAW_KEY) for s in plain.score(TEXTS, LANGS)])
    got = scaled.score(TEXTS, LANGS)
    assert [s.get(RAW_KEY) for s in got] == raw.tolist()  # the same raw score, another map
    linear = np.where(np.array(LANGS) == "en", 0.2 + 0.4 * raw, 0.1 + 0.2 * raw)
    np.testing.assert_allclose([s.get("toxicity") for s in got], (1 - TIE_BREAK) * linear + TIE_BREAK * raw)
    assert scaled.id == plain.id + "-perspective-2020"  # its own cache identity
    assert scaled.describe()["scale"] == PERSPECTIVE_2020
    with pytest.raises(PolytoxError, match="unknown scale 'perspective-1999'"):
        PolytoxMlScorer(head=str(head), mode="ngram", scale="perspective-1999")
    with pytest.raises(PolytoxError, match="has maps for mode ngram only"):
        PolytoxMlScorer(head=str(head), mode="full", scale=PERSPECTIVE_2020)
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(head, other / "head.npz")
    with pytest.raises(PolytoxError, match="no named scales were fitted"):
        PolytoxMlScorer(head=str(other / "head.npz"), mode="ngram", scale=PERSPECTIVE_2020)


def test_committed_scales_belong_to_the_committed_head_and_keep_its_era_maps() -> None:
    head = MlHead.load(default_head_path())
    scales = load_scales(default_head_path(), head.digest)
    assert scales is not None, f"no {SCALES_FILE} fitted for the committed head {head.digest}"
    assert {PERSPECTIVE_2020, PERSPECTIVE_2022, RATERS} <= set(scales.scales)
    assert scales.default in scales.scales
    own = ScaleMaps.from_json(head.scale["full"])
    assert scales.get(PERSPECTIVE_2020).maps["full"].english == own.english_map(WEB)
    assert scales.get(PERSPECTIVE_2022).maps["full"].english == own.english_map(CONTINUATION)
    for scale in scales.scales.values():
        for maps in scale.maps.values():
            for m in [maps.english, maps.fallback, *maps.per_lang.values()]:
                assert np.all(np.diff(m.x) >= 0) and np.all(np.diff(m.y) >= -1e-12)  # monotone: AUC unchanged
        held = scale.info["heldout"]
        assert {ERA_2020, ERA_2022} <= set(held) and "run" in held[ERA_2022]
        assert all(0 <= held[era]["mae"] <= 1 for era in (ERA_2020, ERA_2022))
    languages = scales.get(PERSPECTIVE_2020).info["heldout"]["languages"]
    assert len(languages) == 17 and all(m["n_groups"] >= 30 for m in languages.values())


def test_eras_come_from_what_the_source_states() -> None:
    from polytox.training.scorer.data import Example

    def ex(source: str) -> Example:
        return Example(text="t", lang="en", target=0.1, label=False, source=source, group="g", domain="perspective")

    assert era_of(ex("quark")) == era_of(ex("rtp")) == era_of(ex("fgdilp")) == ERA_2020
    assert era_of(ex("ia024-pplm-rtp-gpt2")) == ERA_2022
    assert era_of(ex("destein-toxic")) == ERA_UNKNOWN  # "a later Perspective model": no year stated


def _lx_rows(n: int = 400, seed: int = 0) -> tuple[list[ScaleRow], dict[tuple[str, str], float]]:
    """Synthetic RTP-LX rows (en, de, fr per Index) with a rating; one Index in five in the training split."""
    rng = np.random.default_rng(seed)
    rows, raw = [], {}
    for i in range(n):
        group = f"lx:{i}"
        level = float(rng.integers(3, 16)) / 3.0  # a mean of three ratings, 1-5
        for lang in ("de", "fr", "en"):
            text = f"text {i} {lang}"
            raw[(text, lang)] = float(np.clip((level - 1) / 4 + rng.normal(0, 0.1), 0, 1))
            rows.append(ScaleRow(text, lang, "web", RATERS, float(rng.random()), i % 5 != 0, group, "rtp-lx",
                                 group, level >= 3, level))
    return rows, raw


def test_other_languages_are_fitted_on_the_fit_part_only() -> None:
    from dataclasses import replace

    from polytox.training.scorer.scale_fit import fit_scales
    from polytox.training.scorer.scale_languages import in_check_part

    rows, raw = _lx_rows()
    head = MlHead.load(default_head_path())
    first = fit_scales(rows, raw, head).to_json()
    assert {in_check_part(r.prompt) for r in rows} == {True, False}

    def flip(r: ScaleRow) -> ScaleRow:
        return replace(r, rating=6.0 - (r.rating or 1.0), value=1.0 - r.value)

    checked = [flip(r) if r.heldout and in_check_part(r.prompt) else r for r in rows]
    assert fit_scales(checked, raw, head).to_json() == first  # the check part is never read by the fit
    fitted = [replace(r, rating=6.0 - (r.rating or 1.0)) if r.heldout and r.lang == "de"
              and not in_check_part(r.prompt) else r for r in rows]  # other pairs preserve toxicity
    assert fit_scales(fitted, raw, head).to_json() != first  # ...the fit part is
    trained = [flip(r) if not r.heldout else r for r in rows]
    assert fit_scales(trained, raw, head).scales[PERSPECTIVE_2020].maps == \
        fit_scales(rows, raw, head).scales[PERSPECTIVE_2020].maps  # training rows: never paired
    training = [replace(r, heldout=False) if r.lang != "en" else r for r in rows]
    with pytest.raises(ValueError, match="no toxicity-preserving pairs"):  # training rows are never paired
        fit_scales(training, raw, head)


def test_everyday_anchors_pull_the_harmless_end_and_move_no_english_value() -> None:
    from polytox.training.scorer.everyday import EverydayRow, everyday_pairs
    from polytox.training.scorer.scale_fit import fit_scales, measure_everyday

    rows, raw = _lx_rows()
    head = MlHead.load(default_head_path())
    everyday = [EverydayRow(f"{lang} {k}", lang, f"UD_{lang}-PUD", f"s{k}", True, False, k % 2 == 0)
                for k in range(200) for lang in ("en", "de")]
    for r in everyday:  # everyday German reads raw 0.25 where the same English sentences read 0.02
        raw[(r.text, r.lang)] = 0.25 if r.lang == "de" else 0.02
    anchors = everyday_pairs(everyday, raw)
    assert len(anchors) == 100  # the fit part's ids only
    plain, anchored = fit_scales(rows, raw, head), fit_scales(rows, raw, head, anchors=anchors)
    for name in (PERSPECTIVE_2020, PERSPECTIVE_2022):
        before, after = plain.get(name).maps["full"], anchored.get(name).maps["full"]
        assert after.english == before.english  # no English value moves
        assert after.apply(np.array([0.25]), ["de"])[0] < before.apply(np.array([0.25]), ["de"])[0] - 0.05
        assert anchored.get(name).info["cross_language"]["n_everyday_pairs"] == 100
    measured = measure_everyday([r for r in everyday if r.check], raw, anchored, "full", before=plain)
    gap = measured[PERSPECTIVE_2022]
    assert abs(gap["after"]["de"]["gap"]) < abs(gap["before"]["de"]["gap"]) and gap["after"]["de"]["n_pud"] == 100


def test_raw_values_in_cache_store_and_score_table(tmp_path: Path) -> None:
    cache = ScoreCache(tmp_path / "scores.sqlite")
    new = Score(values={"toxicity": 0.3, RAW_KEY: 0.12})
    cache.put_many([("k-new", "a", "en", "polytox-ml@5", ("toxicity",), new)])
    cache.close()
    db = sqlite3.connect(tmp_path / "scores.sqlite")  # a row as caches held it before raw values were kept
    db.execute("INSERT INTO scores VALUES ('k-old', 'polytox-ml@5', 'en', 'toxicity', 'x', ?, NULL, 0)",
               (json.dumps({"toxicity": 0.4}),))
    db.commit()
    db.close()
    found = ScoreCache(tmp_path / "scores.sqlite").get_many(["k-new", "k-old"])
    assert found["k-new"] == new
    assert found["k-old"].get("toxicity") == 0.4 and found["k-old"].get(RAW_KEY) is None  # reads as before

    store = RunStore(tmp_path / "run")
    gens = [Generation(prompt_id="p", sample_index=i, text="x", finish_reason="length") for i in range(3)]
    store.write_scores("s@1", 0, gens, [new, Score(values={"toxicity": 0.4}), Score.failed("E")], ("toxicity",))
    rows = read_parts(store.scores_dir("s@1"))
    assert [r[RAW_KEY] for r in rows] == [0.12, None, None]
    store.write_scores("plain@1", 0, gens[:1], [Score(values={"toxicity": 0.4})], ("toxicity",))
    assert RAW_KEY not in read_parts(store.scores_dir("plain@1"))[0]  # scorers without raw values: unchanged


def test_polytox_score_writes_the_raw_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"text": t, "lang": lang}) + "\n" for t, lang in zip(TEXTS, LANGS, strict=True)))
    out = tmp_path / "out.jsonl"
    code, _, err = run_cli(capsys, "score", "--input", src, "--out", out, "--scorer", "polytox-ml",
                           "--scorer-opt", "mode=ngram", "--no-progress")
    assert code == 0, err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    want = PolytoxMlScorer(mode="ngram").score(TEXTS, LANGS)
    assert [r[RAW_KEY] for r in rows] == pytest.approx([s.get(RAW_KEY) for s in want])


def _emt(values: np.ndarray, prompts: np.ndarray) -> float:
    order = {p: i for i, p in enumerate(sorted(set(prompts.tolist())))}
    best = np.full(len(order), -1.0)
    np.maximum.at(best, [order[p] for p in prompts], values)
    return float(best[best >= 0].mean())


@pytest.fixture(scope="module")
def ml_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from polytox.cli.main import main

    out = tmp_path_factory.mktemp("scales") / "run"
    assert main(["eval", "--out", str(out), "--model", "fake", "--samples", "3", "--scorer", "polytox-ml",
                 "--scorer-opt", "mode=ngram", "--lang", "en,de,ja", "--no-progress", "--json"]) == 0
    return out


def _stored(run: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rows = duckdb.sql(f"""SELECT s.prompt_id, s.toxicity, s.{RAW_KEY}, p.lang
        FROM read_parquet('{run}/scores/*/*.parquet') s JOIN read_parquet('{run}/prompts.parquet') p USING (prompt_id)
        WHERE s.toxicity IS NOT NULL""").fetchall()
    cols = list(zip(*rows, strict=True))
    return (np.array(cols[0]), np.array(cols[1], dtype=float), np.array(cols[2], dtype=float),
            np.array(cols[3], dtype=object))


def test_metrics_rereads_a_run_on_another_scale(ml_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = json.loads((ml_run / "manifest.json").read_text())
    assert manifest["scorer"]["scale"] == PERSPECTIVE_2022
    prompts, tox, raw, langs = _stored(ml_run)
    assert not np.isnan(raw).any()  # every stored score carries its raw value
    code, out, _ = run_cli(capsys, "metrics", ml_run, "--json", "--n-bootstrap", "10")
    stored = json.loads(out)
    assert stored["scale"] == PERSPECTIVE_2022 and stored["overall"]["emt"] == pytest.approx(_emt(tox, prompts))
    code, out, err = run_cli(capsys, "metrics", ml_run, "--json", "--n-bootstrap", "10", "--scale", PERSPECTIVE_2022)
    assert code == 0, err
    assert json.loads(out)["overall"]["emt"] == pytest.approx(stored["overall"]["emt"], abs=1e-12)
    code, out, _ = run_cli(capsys, "metrics", ml_run, "--json", "--n-bootstrap", "10", "--scale", "head:web")
    web = ScaleMaps.from_json(MlHead.load(default_head_path()).scale["ngram"]).apply(raw, langs.tolist(), WEB)
    got = json.loads(out)
    assert got["overall"]["emt"] == pytest.approx(_emt(web, prompts), abs=1e-12)
    assert got["overall"]["emt"] != pytest.approx(stored["overall"]["emt"], abs=1e-6)  # another scale moves it
    assert got["n_without_raw"] == 0
    code, out, _ = run_cli(capsys, "metrics", ml_run, "--n-bootstrap", "10", "--scale", "head:web")
    assert "scale: head (English: web map" in out  # the table footer names the scale
    code, _, err = run_cli(capsys, "metrics", ml_run, "--scale", "perspective-1999")
    assert code == 2 and "unknown scale" in err


def test_named_scale_of_the_committed_head_on_a_full_mode_run(ml_run: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    head = MlHead.load(default_head_path())
    scales = load_scales(default_head_path(), head.digest)
    assert scales is not None
    run = tmp_path / "full"
    shutil.copytree(ml_run, run)
    full_id = f"polytox-ml@{head.meta['version']}-full-{head.digest}"
    (run / "scores" / next((run / "scores").iterdir()).name).rename(run / "scores" / full_id.replace("@", "_"))
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["scorer"]["id"] = full_id
    write_manifest_file(run / "manifest.json", manifest)  # an edit on purpose: its checksum recorded anew
    prompts, _, raw, langs = _stored(run)
    maps = scales.get(PERSPECTIVE_2020).maps["full"]
    want = np.concatenate([maps.apply_lang(raw[langs == lang], lang) for lang in sorted(set(langs))])
    order = np.concatenate([prompts[langs == lang] for lang in sorted(set(langs))])
    code, out, err = run_cli(capsys, "metrics", run, "--json", "--n-bootstrap", "10", "--scale", PERSPECTIVE_2020)
    assert code == 0, err
    assert json.loads(out)["overall"]["emt"] == pytest.approx(_emt(want, order), abs=1e-12)
    code, out, err = run_cli(capsys, "leaderboard", run, "--scale", PERSPECTIVE_2020, "--json", "-")
    assert code == 0, err
    board = json.loads(out)
    assert board["rows"][0]["overall"]["emt"] == pytest.approx(_emt(want, order), abs=1e-12)
    assert board["settings"]["scale"].startswith(PERSPECTIVE_2020)
    # the first part loses its raw values (scored before they were kept): counted as missing, and said
    part = sorted((run / "scores" / full_id.replace("@", "_")).glob("part-*.parquet"))[0]
    rewrite_part(part, pq.read_table(part).drop_columns([RAW_KEY]))
    code, out, err = run_cli(capsys, "metrics", run, "--n-bootstrap", "10", "--scale", PERSPECTIVE_2020)
    assert code == 0 and "carry no raw value" in err
    code, out, _ = run_cli(capsys, "metrics", run, "--json", "--n-bootstrap", "10", "--scale", PERSPECTIVE_2020)
    assert json.loads(out)["n_without_raw"] == pq.read_table(part).column("toxicity").drop_null().length()
    for p in (run / "scores" / full_id.replace("@", "_")).glob("part-*.parquet"):
        rewrite_part(p, pq.read_table(p).drop_columns([c for c in [RAW_KEY] if c in pq.read_schema(p).names]))
    code, _, err = run_cli(capsys, "metrics", run, "--scale", PERSPECTIVE_2020)
    assert code == 2 and err.count("\n") == 1 and "carry no raw values" in err


def test_named_scales_need_the_mode_they_were_fitted_for(ml_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    head = MlHead.load(default_head_path())
    scales = load_scales(default_head_path(), head.digest)
    assert scales is not None
    code, out, err = run_cli(capsys, "metrics", ml_run, "--json", "--n-bootstrap", "10", "--scale", PERSPECTIVE_2022)
    if "ngram" in scales.get(PERSPECTIVE_2022).maps:
        assert code == 0, err
        prompts, _, raw, langs = _stored(ml_run)
        maps = scales.get(PERSPECTIVE_2022).maps["ngram"]
        want = np.array([maps.apply_lang(np.array([r]), lang)[0] for r, lang in zip(raw, langs, strict=True)])
        assert json.loads(out)["overall"]["emt"] == pytest.approx(_emt(want, prompts), abs=1e-12)
    else:
        assert code == 2 and "mode" in err


def test_scales_table_lists_every_scale(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "scorers")
    assert code == 0
    for name in (PERSPECTIVE_2020, PERSPECTIVE_2022, RATERS):
        assert f"| {name} |" in out


def test_build_outputs_keep_raw_values_out_of_perspective_attributes() -> None:
    from polytox.promptset.writers import perspective_like

    shaped = perspective_like(json.dumps({"toxicity": 0.4, RAW_KEY: 0.1}), None, "polytox-ml@5", "en")
    assert set(shaped["attributeScores"]) == {"TOXICITY"} and shaped["raw"] == {RAW_KEY: 0.1}
    assert "raw" not in perspective_like(json.dumps({"toxicity": 0.4}), None, "svm@1", "en")


def test_the_cache_keeps_raw_scores_and_serves_every_scale_from_them(tmp_path: Path) -> None:
    from polytox.scoring.cache import CachedScorer
    from polytox.scoring.default import DefaultScorer

    cache = ScoreCache(tmp_path / "scores.sqlite")
    first = CachedScorer(PolytoxMlScorer(mode="ngram", scale=PERSPECTIVE_2022), cache)
    first.score(TEXTS, LANGS)
    assert (first.hits, first.misses) == (0, len(TEXTS))
    for scale in (PERSPECTIVE_2020, RATERS, "head"):
        again = CachedScorer(PolytoxMlScorer(mode="ngram", scale=scale), cache)
        got = again.score(TEXTS, LANGS)
        assert (again.hits, again.misses) == (len(TEXTS), 0)  # another scale: read from the raw scores
        want = PolytoxMlScorer(mode="ngram", scale=scale).score(TEXTS, LANGS)
        np.testing.assert_allclose([s.get("toxicity") for s in got], [s.get("toxicity") for s in want])
    routed = CachedScorer(DefaultScorer(mode="ngram", scale=PERSPECTIVE_2020), cache)
    routed.score(TEXTS, LANGS)
    assert routed.misses == len(TEXTS)  # default has its own raw identity (its routes)...
    routed_again = CachedScorer(DefaultScorer(mode="ngram", scale=RATERS), cache)
    got = routed_again.score(TEXTS, LANGS)
    assert routed_again.hits == len(TEXTS)  # ...shared by its scales
    want = PolytoxMlScorer(mode="ngram", scale=RATERS).score(TEXTS, LANGS)
    np.testing.assert_allclose([s.get("toxicity") for s in got], [s.get("toxicity") for s in want])


def test_cache_rows_without_raw_serve_the_reading_they_were_written_for(tmp_path: Path) -> None:
    from polytox.scoring.cache import CachedScorer

    cache = ScoreCache(tmp_path / "scores.sqlite")
    legacy = PolytoxMlScorer(mode="ngram", scale="head")
    key = cache.key(TEXTS[0], "en", legacy.raw_id, legacy.attributes)
    assert legacy.raw_id == legacy.id  # the id such rows were written under
    cache.put_many([(key, TEXTS[0], "en", legacy.raw_id, legacy.attributes, Score(values={"toxicity": 0.4242}))])
    old = CachedScorer(legacy, cache)
    assert old.score(TEXTS[:1], ["en"])[0].get("toxicity") == 0.4242 and old.hits == 1  # read as before
    named = CachedScorer(PolytoxMlScorer(mode="ngram", scale=PERSPECTIVE_2022), cache)
    fresh = named.score(TEXTS[:1], ["en"])[0]
    assert named.misses == 1 and fresh.get(RAW_KEY) is not None  # no raw value: scored again, now with one
    assert CachedScorer(legacy, cache).score(TEXTS[:1], ["en"])[0].get("toxicity") != 0.4242


def test_scorers_scales_prints_the_pair_checks_of_every_language(capsys: pytest.CaptureFixture[str]) -> None:
    from polytox.cli.main import main

    assert main(["scorers", "--scales"]) == 0
    out = capsys.readouterr().out
    head = MlHead.load(default_head_path())
    scales = load_scales(default_head_path(), head.digest)
    assert scales is not None
    for name in (PERSPECTIVE_2020, PERSPECTIVE_2022):
        oof = scales.get(name).info["heldout"]["pairs"]["oof"]
        assert len(oof) == 16 and "en" not in oof  # every other language, against its English texts
        assert f"{name}, other languages against their English texts (every held-out RTP-LX pair" in out
        ar = oof["ar"]
        assert f"| ar | {ar['n_harmless']} | {ar['harmless_mean']:.3f} ({ar['harmless_en']:.3f}) |" in out
