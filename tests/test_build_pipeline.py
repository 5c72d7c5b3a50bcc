"""End-to-end PTP-mode builds on the real RTP-LX prompts (17 languages) as documents, with the fake scorer.

Bin counts, the exact sampled ids, split positions, the schemas' round trips and resume after an
interruption are asserted against values computed independently in the test.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, ClassVar

import pyarrow.parquet as pq
import pytest

from polytox import registry
from polytox._util.options import Option
from polytox.cli.main import main
from polytox.constants import toxicity_bucket
from polytox.langs import PTP_LANGUAGES, normalize_lang
from polytox.langs.detect import detect_language
from polytox.prompts import load_prompts
from polytox.promptset import BuildSpec, CorpusSource, build
from polytox.promptset.select import small_subset
from polytox.scoring.fake import FakeScorer
from polytox.spec import PromptSpec
from polytox.types import Score

from .build_corpus import rtplx_records

PER_BIN = 12


def expected_units(data: Path, langs: tuple[str, ...]) -> dict[tuple[str, int], list[str]]:
    """Independently: the ids per (lang, bin) that survive the language check, with their fake scores."""
    scorer = FakeScorer()
    out: dict[tuple[str, int], list[str]] = defaultdict(list)
    for lang in langs:
        for rec in rtplx_records(data, lang):
            text = rec["Prompt"]
            if detect_language(text) != normalize_lang(rec["Locale"]):
                continue
            tox = scorer.score([text], [lang])[0].get("toxicity")
            assert tox is not None
            out[(lang, toxicity_bucket(tox))].append(f"{lang}:{rec['Index']}")
    return out


def bottom_k(ids: list[str], k: int, seed: int) -> set[str]:
    return set(sorted(set(ids), key=lambda i: hashlib.md5(f"{seed}:{i}".encode()).hexdigest())[:k])


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_none(v) for v in value]
    return value


@pytest.fixture(scope="module")
def full_build(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("ptp-build")
    spec = BuildSpec(source=CorpusSource(paths=(str(shared_data / "rtp-lx"),)), scorer="fake",
                     scorer_options=(("cache", str(out / "cache.sqlite")),), per_bin=PER_BIN, small_per_lang=10,
                     seed=7, shard_size=3000)
    result = build(spec, out / "set")
    return out / "set", result.report


def test_bin_counts_and_sampled_ids_are_exact(full_build: tuple[Path, dict[str, Any]], shared_data: Path) -> None:
    out, report = full_build
    expected = expected_units(shared_data, PTP_LANGUAGES)
    rows = read_jsonl(out / "ptp.jsonl")
    got: dict[tuple[str, int], set[str]] = defaultdict(set)
    for r in rows:
        got[(r["meta_data"]["lang"], r["toxicity_bucket"])].add(r["meta_data"]["id"])
    for lang in PTP_LANGUAGES:
        for b in range(4):
            ids = expected.get((lang, b), [])
            assert got.get((lang, b), set()) == bottom_k(ids, PER_BIN, seed=7), (lang, b)
    # The shortfall report says exactly which bins were short, and by how much.
    bins = {(r["lang"], r["bucket"]): r for r in report["selection"]["bins"]}
    for lang in PTP_LANGUAGES:
        for b in range(4):
            n = len(expected.get((lang, b), []))
            assert bins[(lang, b)]["available"] == n
            assert bins[(lang, b)]["selected"] == min(n, PER_BIN)
            assert bins[(lang, b)]["shortfall"] == max(0, PER_BIN - n)
    assert sum(1 for r in report["selection"]["bins"] if r["shortfall"]) == len(report["selection"]["short"])
    # Every input record is accounted for: kept + rejected (with a reason) = read.
    scan = report["scan"]
    assert scan["records"] == sum(len(rtplx_records(shared_data, lang)) for lang in PTP_LANGUAGES) == 12_824
    assert scan["kept"] + scan["rejected"] == scan["records"]
    assert scan["kept"] == sum(len(v) for v in expected.values())
    rejected = pq.read_table(out / "scan" / "rejected").to_pylist()
    assert len(rejected) == scan["rejected"] > 0
    assert all(r["reason"].startswith("LANG_MISMATCH: declared ") and r["text"] for r in rejected)
    assert scan["counters"]["lang_check"]["mismatch"] == scan["rejected"]


def test_ptp_split_positions_and_half_scores(full_build: tuple[Path, dict[str, Any]]) -> None:
    out, _ = full_build
    scorer = FakeScorer()
    for r in read_jsonl(out / "ptp.jsonl"):
        text = r["text"]
        assert r["prompt"] == text[: len(text) // 2] and r["continuation"] == text[len(text) // 2 :]
        lang = r["meta_data"]["lang"]
        want_p, want_c, want_doc = scorer.score([r["prompt"], r["continuation"], text], [lang] * 3)
        persp = r["prompt_perspective"]["attributeScores"]["TOXICITY"]["summaryScore"]["value"]
        assert persp == want_p.get("toxicity")
        assert r["continuation_perspective"]["attributeScores"]["TOXICITY"]["summaryScore"]["value"] == \
            want_c.get("toxicity")
        assert r["toxicity"] == want_doc.get("toxicity")
        assert r["toxicity_bucket"] == toxicity_bucket(r["toxicity"])
        assert r["perspective"]["scorer"].startswith("fake@")


def test_manifest_records_versions_and_platform(full_build: tuple[Path, dict[str, Any]]) -> None:
    """A build's scores depend on package versions and, in their last bits, on the CPU; both are kept
    beside its outputs, as for runs and the scorer card."""
    import platform as stdlib_platform

    manifest = json.loads((full_build[0] / "build.json").read_text())
    assert {"polytox", "numpy", "python"} <= set(manifest["versions"])
    assert manifest["platform"]["machine"] == stdlib_platform.machine()
    assert manifest["platform"]["cpu_count"] == os.cpu_count()


def test_schemas_round_trip_through_the_eval_readers(full_build: tuple[Path, dict[str, Any]]) -> None:
    out, _ = full_build
    ptp_jsonl = read_jsonl(out / "ptp.jsonl")
    ptp_parquet = pq.read_table(out / "ptp.parquet").to_pylist()
    assert [drop_none(r) for r in ptp_parquet] == [drop_none(r) for r in ptp_jsonl]
    rtp_jsonl = read_jsonl(out / "rtp.jsonl")
    assert [drop_none(r) for r in pq.read_table(out / "rtp.parquet").to_pylist()] == [drop_none(r) for r in rtp_jsonl]
    sets = {name: load_prompts(PromptSpec(source=str(out / name))) for name in
            ("ptp.jsonl", "ptp.parquet", "rtp.jsonl", "rtp.parquet")}
    base = [(p.text, p.lang, p.toxicity, p.meta["continuation"]) for p in sets["ptp.jsonl"].prompts]
    assert len(base) == len(ptp_jsonl)
    for name, ps in sets.items():
        assert ps.n_bad == 0, name
        assert [(p.text, p.lang, p.toxicity, p.meta["continuation"]) for p in ps.prompts] == base, name
    # Prompt toxicity read back is the prompt's own score; PTP keeps the document bucket.
    for p, rec in zip(sets["ptp.parquet"].prompts, ptp_jsonl, strict=True):
        assert p.bucket == rec["toxicity_bucket"]
        assert p.toxicity == rec["prompt_perspective"]["attributeScores"]["TOXICITY"]["summaryScore"]["value"]
    for p, rec in zip(sets["rtp.jsonl"].prompts, rtp_jsonl, strict=True):
        assert p.id == f"rtp:{rec['filename']}:{rec['begin']}:{rec['end']}"
        assert rec["end"] - rec["begin"] == len(rec["prompt"]["text"]) + len(rec["continuation"]["text"])


def test_small_subset_is_stratified_and_seeded(full_build: tuple[Path, dict[str, Any]]) -> None:
    out, _ = full_build
    full = read_jsonl(out / "ptp.jsonl")
    small = read_jsonl(out / "small" / "ptp.jsonl")
    units = [(r["meta_data"]["id"], r["meta_data"]["lang"], r["toxicity_bucket"]) for r in full]
    assert {r["meta_data"]["id"] for r in small} == small_subset(units, 10, seed=7)
    per_lang = Counter(r["meta_data"]["lang"] for r in small)
    assert per_lang == dict.fromkeys(PTP_LANGUAGES, 10)
    # Quotas: 10 / 4 -> 3, 3, 2, 2 per bin, shortfalls refilled from the other bins in key order.
    for lang in PTP_LANGUAGES:
        bins = Counter(r["toxicity_bucket"] for r in small if r["meta_data"]["lang"] == lang)
        avail = Counter(b for _, lg, b in units if lg == lang)
        for b, quota in zip(range(4), (3, 3, 2, 2), strict=True):
            assert bins[b] >= min(quota, avail[b])
    assert len(read_jsonl(out / "small" / "rtp.jsonl")) == len(small)


def test_unit_small_subset_quota_arithmetic() -> None:
    units = [(f"u{i}", "xx", i % 4) for i in range(100)]
    keep = small_subset(units, 10, seed=1)
    counts = Counter(i % 4 for i in (int(u[1:]) for u in keep))
    assert len(keep) == 10 and counts == {0: 3, 1: 3, 2: 2, 3: 2}
    scarce = [(f"u{i}", "xx", 0) for i in range(20)] + [("t0", "xx", 3)]
    keep = small_subset(scarce, 10, seed=1)
    assert len(keep) == 10 and "t0" in keep
    assert small_subset(units, 10, seed=1) == small_subset(list(reversed(units)), 10, seed=1)


class Interrupt(Exception):
    pass


def _spec(data: Path, cache: Path, **kw: Any) -> BuildSpec:
    base: dict[str, Any] = {"source": CorpusSource(paths=(str(data / "rtp-lx"),)), "scorer": "fake",
                            "scorer_options": (("cache", str(cache)),), "per_bin": 6, "small_per_lang": 4,
                            "langs": ("de", "en", "hi", "ja"), "shard_size": 1500, "seed": 3}
    base.update(kw)
    return BuildSpec(**base)


def test_interrupted_build_resumes_to_the_same_output(shared_data: Path, tmp_path: Path) -> None:
    spec = _spec(shared_data, tmp_path / "cache.sqlite")
    reference = build(spec, tmp_path / "ref")

    seen: list[int] = []

    def killer(stage: str, done: int, total: int | None) -> None:
        if stage.startswith("scan"):
            seen.append(done)
            if len(seen) == 3:
                raise Interrupt  # as if the process died after the third shard was committed

    with pytest.raises(Interrupt):
        build(spec, tmp_path / "run", progress=killer)
    markers = sorted((tmp_path / "run" / "scan" / "done").glob("*.json"))
    assert len(markers) == 3
    assert not (tmp_path / "run" / "ptp.jsonl").exists()
    resumed = build(spec, tmp_path / "run")
    assert resumed.resumed
    assert resumed.report["scan"]["shards_skipped"] == 3
    assert resumed.report["scan"]["counters"] == reference.report["scan"]["counters"]
    for name in ("ptp.jsonl", "rtp.jsonl", "small/ptp.jsonl"):
        assert (tmp_path / "run" / name).read_bytes() == (tmp_path / "ref" / name).read_bytes(), name
    # A third run redoes nothing.
    again = build(spec, tmp_path / "run")
    assert again.report["scan"]["shards_skipped"] == again.report["scan"]["shards"]
    assert again.report["split"]["shards"] == 0


def test_changed_spec_refuses_to_resume(shared_data: Path, tmp_path: Path) -> None:
    from polytox.errors import SpecMismatchError

    build(_spec(shared_data, tmp_path / "c.sqlite", langs=("de",)), tmp_path / "run")
    with pytest.raises(SpecMismatchError, match="per_bin"):
        build(_spec(shared_data, tmp_path / "c.sqlite", langs=("de",), per_bin=7), tmp_path / "run")


class FlakyScorer(FakeScorer):
    """Crashes (a transient error) on German texts while the flag file exists."""

    name = "flaky"
    # a scorer that declares OPTIONS (here inherited) is checked against them: a new option is a new row
    OPTIONS: ClassVar[dict[str, Option]] = {
        **FakeScorer.OPTIONS,
        "flag": Option(kind="str", default="", help="the flag file"),
    }

    def __init__(self, flag: str = OPTIONS["flag"].default, **kw: Any) -> None:
        super().__init__(**kw)
        self.flag = Path(flag)

    def score_batch(self, texts: Any, langs: Any) -> list[Score]:
        if self.flag.exists() and "de" in langs:
            raise ConnectionError("service unavailable")
        return super().score_batch(texts, langs)


def test_transient_failures_are_recorded_then_retried(shared_data: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.SCORERS, "flaky", FlakyScorer)  # type: ignore[arg-type]
    flag = tmp_path / "down"
    flag.write_text("x")
    opts = (("cache", str(tmp_path / "c.sqlite")), ("flag", str(flag)), ("batch_size", "16"))
    spec = _spec(shared_data, tmp_path / "c.sqlite", scorer="flaky", scorer_options=opts, langs=("de", "en"))
    first = build(spec, tmp_path / "run")
    scan = first.report["scan"]
    assert scan["transient_failures"] > 0
    assert first.report["selected_by_lang"].get("de", 0) == 0  # no German unit was scored
    rejected = pq.read_table(tmp_path / "run" / "scan" / "rejected").to_pylist()
    failed = [r for r in rejected if r["reason"].startswith("SCORE_FAILED")]
    # A crash loses its whole batch (German and English units scored together), as recorded errors.
    assert failed and all("service unavailable" in r["reason"] for r in failed)
    assert "de" in {r["lang"] for r in failed}
    flag.unlink()
    second = build(spec, tmp_path / "run")
    assert second.report["scan"]["transient_failures"] == 0
    assert second.report["selected_by_lang"]["de"] > 0
    fresh = build(spec, tmp_path / "fresh")
    assert (tmp_path / "run" / "ptp.jsonl").read_bytes() == (tmp_path / "fresh" / "ptp.jsonl").read_bytes()
    assert second.report["scan"]["counters"] == fresh.report["scan"]["counters"]


def test_cli_build_then_eval_reads_the_set(shared_data: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "set"
    code = main(["build", "--out", str(out), "--input", str(shared_data / "rtp-lx" / "RTP_LX_DE.jsonl"),
                 "--input", str(shared_data / "rtp-lx" / "RTP_LX_EN.jsonl"), "--scorer", "fake", "--per-bin", "5",
                 "--small-per-lang", "4", "--lang-policy", "keep", "--no-progress", "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["scan"]["rejected"] == 0 and report["scan"]["counters"]["lang_check"]["mismatch"] > 0
    n = report["outputs"]["full"]["ptp.parquet"]
    assert n == sum(report["selected_by_lang"].values())
    for name in ("ptp.parquet", "rtp.jsonl"):
        run = tmp_path / f"eval-{name}"
        assert main(["eval", "--prompts", str(out / name), "--model", "fake", "--scorer", "fake", "-k", "2",
                     "--out", str(run), "--no-progress", "--json"]) == 0
        metrics = json.loads(capsys.readouterr().out)
        assert metrics["overall"]["n_prompts"] == n
        assert set(metrics["by"]["lang"]) == {"de", "en"}
    assert main(["build", "--input", "x", "--scorer", "fake"]) == 2  # no --out: a clear error, exit 2


def test_steps_pickle_and_compose_per_shard(shared_data: Path, tmp_path: Path) -> None:
    """The steps are plain picklable objects: a copy (as a Ray/multiprocessing worker would get) run on one
    shard gives what the original gives, and per-shard counters sum to the whole."""
    import pickle

    from polytox.promptset.builder import batched, scan_steps
    from polytox.promptset.pipeline import StepContext, compose, merge_counters
    from polytox.promptset.readers import FieldMap, iter_source, parse_records
    from polytox.promptset.scoring import ScoreDocuments

    spec = _spec(shared_data, tmp_path / "c.sqlite", langs=("ko", "pl"))
    score = ScoreDocuments("fake", {"cache": "off"})
    steps = scan_steps(spec, score)
    score.scorer  # noqa: B018 - build the scorer, which pickling must leave behind
    clone = pickle.loads(pickle.dumps(steps))
    whole, parts = StepContext(), []
    all_docs = list(compose(steps, parse_records(iter_source(spec.source), FieldMap(), whole), whole))
    shard_docs = []
    for chunk in batched(iter_source(spec.source), 2000):
        ctx = StepContext()
        shard_docs += list(compose(clone, parse_records(iter(chunk), FieldMap(), ctx), ctx))
        parts.append(ctx.counters_dict())
    assert shard_docs == all_docs
    assert merge_counters(parts) == whole.counters_dict()


@pytest.mark.slow
def test_sigkill_mid_scan_then_resume(shared_data: Path, tmp_path: Path) -> None:
    """A real SIGKILL while the scan is scoring; the rerun continues from the committed shards."""
    import os
    import signal
    import subprocess
    import sys
    import time

    root = Path(__file__).resolve().parents[1]
    cache = tmp_path / "c.sqlite"
    out = tmp_path / "run"
    code = f"""
import sys
from polytox import registry
from polytox._util.options import Option
from polytox.promptset import BuildSpec, CorpusSource, build
from tests.build_corpus import slow_fake_scorer
registry.SCORERS["slowfake"] = slow_fake_scorer
spec = BuildSpec(source=CorpusSource(paths=({str(shared_data / 'rtp-lx')!r},)), scorer="slowfake",
                 scorer_options=(("cache", {str(cache)!r}), ("batch_size", "50")), per_bin=6, small_per_lang=4,
                 langs=("de", "en", "hi", "ja"), shard_size=1500, seed=3)
build(spec, {str(out)!r})
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), str(root)])}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=root)
    done = out / "scan" / "done"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list(done.glob("*.json"))) < 2 and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "the build finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    n_done = len(list(done.glob("*.json")))
    assert 2 <= n_done < 9 and not (out / "ptp.jsonl").exists()
    # No torn files: every committed part reads back.
    for part in (out / "scan" / "docs").glob("part-*.parquet"):
        pq.read_table(part)
    spec = _spec(shared_data, cache, scorer="slowfake", scorer_options=(("cache", str(cache)), ("batch_size", "50")))
    from .build_corpus import slow_fake_scorer

    registry.SCORERS["slowfake"] = slow_fake_scorer  # type: ignore[assignment]
    try:
        resumed = build(spec, out)
        reference = build(spec, tmp_path / "ref")
    finally:
        registry.SCORERS.pop("slowfake", None)
    assert resumed.resumed and resumed.report["scan"]["shards_skipped"] >= n_done
    assert (out / "ptp.jsonl").read_bytes() == (tmp_path / "ref" / "ptp.jsonl").read_bytes()
    assert resumed.report["scan"]["counters"] == reference.report["scan"]["counters"]


def test_offline_lexicon_scorer_in_17_languages(shared_data: Path, tmp_path: Path) -> None:
    """A real offline scorer (LDNOOBW word lists, 17 languages) where the lexicon scorer is installed."""
    if "lexicon" not in registry.names("scorer"):
        pytest.skip("the lexicon scorer is not part of this checkout")
    from polytox.scoring import build_scorer

    opts = (("dir", str(shared_data / "ldnoobw")), ("cache", str(tmp_path / "c.sqlite")))
    spec = BuildSpec(source=CorpusSource(paths=(str(shared_data / "rtp-lx"),)), scorer="lexicon",
                     scorer_options=opts, per_bin=15, small_per_lang=8, lang_policy="keep", shard_size=4000)
    result = build(spec, tmp_path / "set")
    lexicon = build_scorer("lexicon", {"dir": str(shared_data / "ldnoobw"), "cache": "off"})
    rows = read_jsonl(tmp_path / "set" / "ptp.jsonl")
    bins = {(r["lang"], r["bucket"]): r for r in result.report["selection"]["bins"]}
    for lang in PTP_LANGUAGES:
        recs = rtplx_records(shared_data, lang)
        scores = lexicon.score([r["Prompt"] for r in recs], [lang] * len(recs))
        values = [s.get("toxicity") for s in scores]
        avail = Counter(toxicity_bucket(v) for v in values if v is not None)
        got = Counter(r["toxicity_bucket"] for r in rows if r["meta_data"]["lang"] == lang)
        for b in range(4):
            assert bins[(lang, b)]["available"] == avail.get(b, 0), (lang, b)
            assert got.get(b, 0) == min(15, avail.get(b, 0)), (lang, b)
    assert load_prompts(PromptSpec(source=str(tmp_path / "set" / "rtp.parquet"))).n_bad == 0
