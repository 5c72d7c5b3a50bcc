"""``build``: a web-text corpus in, an RTP- or PTP-style prompt set out, in one straight line.

Read top to bottom, it is the papers' method (PTP §3.2 and Appendix A; RTP §4.1 and Appendix A):

1. scan: read the corpus in shards; check each document's language; in RTP mode cut it into sentence
   spans of 64-1,024 characters; drop units that cannot be split; score the rest (cut to 20,480 bytes,
   through the score cache). Each shard's kept units, rejected records (with reasons) and counters are
   written atomically, the marker last, so a killed build resumes at the first unfinished shard;
2. augment (optional): machine-translate toxic units into languages short of toxic data (PTP §3.2);
3. select: a seeded stratified sample of N units per language and toxicity bin, with a shortfall report;
4. split each selected unit into prompt and continuation (PTP: character halves; RTP: word halves,
   prompt <= 128 tokens) and score both halves;
5. write the set in the PTP and RTP schemas (JSONL + Parquet), and a PTP_SMALL-like subset;
6. write the report: per-step counters, rejections by reason, shortfall, translation correlation.
"""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from .._util.atomic import atomic_write_json, atomic_write_text
from .._util.runlock import OutputLock
from ..errors import PolytoxError
from ..scoring import check_languages
from ..store import now
from .augment import Translator, run_augmentation, translation_report
from .halves import iter_split_batches, split_and_score
from .langcheck import LanguageCheck, LanguageFilter
from .pipeline import Step, StepContext, compose, merge_counters
from .readers import iter_source, parse_records
from .report import rejected_summary, render_markdown
from .scoring import ScoreDocuments
from .select import small_subset, stratified_select
from .spec import BuildSpec
from .store import BuildStore, iter_parquet_rows
from .writers import write_prompt_set

Progress = Callable[[str, int, int | None], None]
T = TypeVar("T")


@dataclass
class BuildResult:
    path: Path
    spec: BuildSpec
    resumed: bool
    report: dict[str, Any]


def batched(items: Iterable[T], size: int) -> Iterator[list[T]]:
    it = iter(items)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


def scan_steps(spec: BuildSpec, score: ScoreDocuments) -> list[Step]:
    """The per-document steps of stage 1, in order."""
    from .splittable import Splittable

    steps: list[Step] = []
    if spec.langs:
        steps.append(LanguageFilter(spec.langs))
    steps.append(LanguageCheck(spec.lang_policy))
    if spec.mode == "rtp":
        from .sentences import SentenceSpans

        steps.append(SentenceSpans(spec.span_min_chars, spec.span_max_chars))
    steps.append(Splittable(spec.mode, spec.prompt_max_tokens))
    steps.append(score)
    return steps


def scan(store: BuildStore, spec: BuildSpec, steps: list[Step], progress: Progress) -> dict[str, Any]:
    """Stage 1 over the corpus, shard by shard; finished shards are skipped (their counters reused)."""
    markers: list[dict[str, Any]] = []
    records = skipped = 0
    for shard, chunk in enumerate(batched(iter_source(spec.source), spec.shard_size)):
        done = store.scan_done(shard)
        if done is not None and not done.get("transient_failures"):
            markers.append(done)
            skipped += 1
        else:
            ctx = StepContext()
            docs = list(compose(steps, parse_records(iter(chunk), spec.fields, ctx), ctx))
            marker = {
                "records": len(chunk),
                "kept": len(docs),
                "rejected": len(ctx.rejected),
                "transient_failures": ctx.transient_failures,
                "counters": ctx.counters_dict(),
            }
            store.write_scan(shard, docs, ctx.rejected, marker)
            markers.append(marker)
        records += len(chunk)
        progress("scan: read, check, score", records, None)
    return {
        "shards": len(markers),
        "shards_skipped": skipped,
        "records": records,
        "kept": sum(m["kept"] for m in markers),
        "rejected": sum(m["rejected"] for m in markers),
        "transient_failures": sum(m["transient_failures"] for m in markers),
        "counters": merge_counters(m["counters"] for m in markers),
    }


def write_outputs(store: BuildStore, spec: BuildSpec, n_shards: int, attributes: tuple[str, ...]) -> dict[str, Any]:
    """Stage 5: the full set and the small subset, both schemas, JSONL and Parquet."""
    full = write_prompt_set(store.path, lambda: iter_split_batches(store, n_shards), attributes)
    units = [
        (r["id"], r["lang"], r["bucket"]) for r in iter_parquet_rows([store.selected_path], ["id", "lang", "bucket"])
    ]
    keep = small_subset(units, spec.small_per_lang, spec.seed)
    small = write_prompt_set(store.path / "small", lambda: iter_split_batches(store, n_shards, keep), attributes)
    return {"full": full, "small": small, "small_per_lang": spec.small_per_lang}


def build(
    spec: BuildSpec,
    out: str | Path,
    progress: Progress | None = None,
    translator_factory: Callable[[], Translator] | None = None,
) -> BuildResult:
    """Run (or resume) a build into ``out``; returns its report."""
    report_progress: Progress = progress or (lambda stage, done, total: None)
    spec = spec.validate()
    spec.source.check()  # the input, the scorer and its languages are checked before the build folder exists
    score = ScoreDocuments(spec.scorer, dict(spec.scorer_options), spec.score_batch_size, spec.max_bytes)
    if spec.langs:
        check_languages(score.scorer, spec.langs)
    store = BuildStore(out)
    lock = OutputLock(store.path)  # one writer per build folder; refused at once, naming the holder
    try:
        lock.acquire()
        resumed = store.open(spec)
    except BaseException:
        score.close()
        lock.release()
        raise
    try:
        return _build_locked(spec, store, score, resumed, report_progress, translator_factory)
    finally:
        lock.release()


def _build_locked(
    spec: BuildSpec,
    store: BuildStore,
    score: ScoreDocuments,
    resumed: bool,
    report_progress: Progress,
    translator_factory: Callable[[], Translator] | None,
) -> BuildResult:
    store.update_manifest(scorer=score.scorer.describe())
    try:
        scanned = scan(store, spec, scan_steps(spec, score), report_progress)
        if not scanned["records"]:
            if not resumed:  # a refusal leaves nothing behind: the corrected command starts afresh
                store.discard()
            raise PolytoxError(f"no records in {spec.source.describe()}: the input is empty")
        augmented = None
        if spec.translate is not None:
            from .splittable import Splittable

            factory = translator_factory or _nllb_factory(spec)
            augmented = run_augmentation(
                store, spec, factory, [Splittable(spec.mode, spec.prompt_max_tokens), score], report_progress
            )
            augmented["correlation"] = translation_report(store)
        spill = store.path / ".duckdb-tmp"
        shortfall = stratified_select(
            store.doc_parts(), store.selected_path, spec.bin_size, spec.seed, spec.langs, temp_dir=spill
        )
        shutil.rmtree(spill, ignore_errors=True)
        split = split_and_score(
            store, score.scorer, spec.mode, spec.shard_size, spec.prompt_max_tokens, spec.max_bytes, report_progress
        )
        outputs = write_outputs(store, spec, split["n_shards"], tuple(score.scorer.attributes))
    finally:
        score.close()
    report = {
        "build": str(store.path),
        "mode": spec.mode,
        "scorer": score.scorer.id,
        "seed": spec.seed,
        "source": spec.source.describe(),
        "scan": scanned,
        "rejected": rejected_summary(store.rejected_parts()),
        "selection": shortfall.to_dict(),
        "selected_by_lang": shortfall.selected_by_lang(),
        "translation": augmented,
        "split": split,
        "outputs": outputs,
    }
    json_path, md_path = store.report_paths()
    atomic_write_json(json_path, report)
    atomic_write_text(md_path, render_markdown(report))
    store.update_manifest(status="complete", finished_at=now(), report="report.json")
    return BuildResult(path=store.path, spec=spec, resumed=resumed, report=report)


def _nllb_factory(spec: BuildSpec) -> Callable[[], Translator]:
    assert spec.translate is not None
    t = spec.translate

    def make() -> Translator:
        from .translate import NllbTranslator

        return NllbTranslator(
            t.model, batch_size=t.batch_size, max_new_tokens=t.max_new_tokens, num_beams=t.num_beams, device=t.device
        )

    return make
