"""The augmentation stage: plan which toxic units to translate into which languages, run it resumably,
and report the source/translation toxicity correlation (PTP §3.2).

Plan: for every target language, the number of translations is its shortfall in the toxic bins
(toxicity >= 0.5, bins 2 and 3), capped by ``max_per_lang`` when set. Sources are the natural toxic units
of ``from_lang`` in a seeded order, the same order for every target.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import duckdb

from ..constants import PTP_TRANSLATION_PEARSON_R
from .document import Document, Rejected, document_from_row
from .pipeline import Step, StepContext, compose, merge_counters
from .select import _sql_list
from .spec import BuildSpec
from .store import BuildStore, iter_parquet_rows
from .translate import pearson

TOXIC_BINS = (2, 3)
STEP = "translate"


class Translator(Protocol):
    def translate_documents(self, texts: Sequence[str], src: str, tgt: str) -> list[str]: ...
    def describe(self) -> dict[str, Any]: ...
    def close(self) -> None: ...


def natural_counts(parts: Sequence[Path]) -> dict[tuple[str, int], int]:
    """Distinct natural units per (language, bin) in the scan parts."""
    if not parts:
        return {}
    con = duckdb.connect()
    try:
        rows = con.execute(f"""SELECT lang, bucket, count(DISTINCT id) FROM read_parquet({_sql_list(parts)})
                               WHERE bucket IS NOT NULL AND translated_from IS NULL GROUP BY lang, bucket""").fetchall()
    finally:
        con.close()
    return {(str(lang), int(b)): int(n) for lang, b, n in rows}


def plan(spec: BuildSpec, counts: dict[tuple[str, int], int]) -> dict[str, int]:
    """Translations wanted per target language."""
    assert spec.translate is not None
    t = spec.translate
    langs = t.to_langs or tuple(sorted({lang for lang, _ in counts} | set(spec.langs)))
    wanted: dict[str, int] = {}
    for lang in langs:
        if lang == t.from_lang:
            continue
        need = sum(max(0, spec.bin_size - counts.get((lang, b), 0)) for b in TOXIC_BINS)
        if t.max_per_lang:
            need = min(need, t.max_per_lang)
        if need > 0:
            wanted[lang] = need
    return wanted


def source_units(parts: Sequence[Path], from_lang: str, seed: int, limit: int) -> list[Document]:
    """The first ``limit`` natural toxic units of ``from_lang`` in seeded order."""
    if not parts or limit <= 0:
        return []
    con = duckdb.connect()
    try:
        table = con.sql(
            f"""
        SELECT * EXCLUDE (_key) FROM (
          SELECT *, md5('{int(seed)}:translate:' || id) AS _key,
                 row_number() OVER (PARTITION BY id ORDER BY filename, file_row_number) AS _occ
          FROM read_parquet({_sql_list(parts)}, filename = true, file_row_number = true)
          WHERE lang = ? AND bucket IN {TOXIC_BINS} AND translated_from IS NULL)
        WHERE _occ = 1 ORDER BY _key LIMIT {int(limit)}
    """,
            params=[from_lang],
        ).to_arrow_table()
    finally:
        con.close()
    assert table is not None
    return [document_from_row(r) for r in table.to_pylist()]


def _digest(ids: Sequence[str]) -> str:
    return hashlib.sha256("\x1f".join(ids).encode()).hexdigest()[:16]


def translate_shard(
    translator: Translator, sources: Sequence[Document], target: str, steps: Sequence[Step], ctx: StepContext
) -> list[Document]:
    """Translate, tag, then run the steps (split check, scoring) on one shard of sources."""
    by_lang: dict[str, list[Document]] = {}
    for doc in sources:
        by_lang.setdefault(doc.lang, []).append(doc)
    made: list[Document] = []
    for src_lang, docs in by_lang.items():
        try:
            texts = translator.translate_documents([d.text for d in docs], src_lang, target)
        except Exception as exc:  # a model failure loses this shard as recorded, retried rejects
            ctx.transient_failures += len(docs)
            for d in docs:
                ctx.reject(
                    Rejected.of(
                        STEP, f"TRANSLATION_FAILED: {type(exc).__name__}: {exc}", d, target=target, transient=True
                    )
                )
            continue
        for d, text in zip(docs, texts, strict=True):
            ctx.count(STEP, "translated")
            if not text.strip():
                ctx.reject(Rejected.of(STEP, "TRANSLATION_EMPTY: the model returned no text", d, target=target))
                continue
            made.append(
                Document(
                    id=f"{target}:mt:{d.id}",
                    text=text,
                    lang=target,
                    declared_lang=target,
                    url=d.url,
                    timestamp=d.timestamp,
                    location=d.location,
                    data_category=d.data_category,
                    pile_set_name=d.pile_set_name,
                    translated_from=d.id,
                    source_lang=d.lang,
                    source_toxicity=d.toxicity,
                    extra={"translation_model": translator.describe().get("model")},
                )
            )
    return list(compose(steps, made, ctx))


def run_augmentation(
    store: BuildStore,
    spec: BuildSpec,
    translator_factory: Callable[[], Translator],
    steps: Sequence[Step],
    progress: Callable[[str, int, int | None], None],
) -> dict[str, Any]:
    """Translate what the plan asks for, resumably; returns the plan and counters."""
    assert spec.translate is not None
    scan_parts = store.scan_doc_parts()
    wanted = plan(spec, natural_counts(scan_parts))
    sources = source_units(scan_parts, spec.translate.from_lang, spec.seed, max(wanted.values(), default=0))
    report: dict[str, Any] = {
        "from_lang": spec.translate.from_lang,
        "wanted": wanted,
        "toxic_sources_available": len(sources),
        "shards": 0,
        "shards_skipped": 0,
        "transient_failures": 0,
    }
    translator: Translator | None = None
    markers: list[dict[str, Any]] = []
    total = sum(min(n, len(sources)) for n in wanted.values())
    done = 0
    try:
        for target, need in sorted(wanted.items()):
            todo = sources[:need]
            for shard, start in enumerate(range(0, len(todo), spec.shard_size)):
                chunk = todo[start : start + spec.shard_size]
                digest = _digest([d.id for d in chunk])
                marker = store.translated_marker(target, shard)
                if marker and marker.get("ids") == digest and not marker.get("transient_failures"):
                    report["shards_skipped"] += 1
                    markers.append(marker)
                else:
                    if translator is None:
                        translator = translator_factory()
                    ctx = StepContext()
                    made = translate_shard(translator, chunk, target, steps, ctx)
                    marker = {
                        "ids": digest,
                        "counters": ctx.counters_dict(),
                        "transient_failures": ctx.transient_failures,
                    }
                    store.write_translated(target, shard, made, ctx.rejected, marker)
                    markers.append(marker)
                    report["shards"] += 1
                    report["transient_failures"] += ctx.transient_failures
                done += len(chunk)
                progress(f"translate -> {target}", done, total)
    finally:
        if translator is not None:
            translator.close()
    report["counters"] = merge_counters(m.get("counters", {}) for m in markers)
    return report


def translation_report(store: BuildStore) -> dict[str, Any]:
    """Pearson r between source and translated toxicity, overall and per target language."""
    pairs: dict[str, tuple[list[float], list[float]]] = {}
    for row in iter_parquet_rows(store.translated_parts(), ["lang", "toxicity", "source_toxicity"]):
        if row["toxicity"] is None or row["source_toxicity"] is None:
            continue
        xs, ys = pairs.setdefault(row["lang"], ([], []))
        xs.append(row["source_toxicity"])
        ys.append(row["toxicity"])
    all_x = [x for xs, _ in pairs.values() for x in xs]
    all_y = [y for _, ys in pairs.values() for y in ys]
    return {
        "overall": pearson(all_x, all_y),
        "by_lang": {k: pearson(*v) for k, v in sorted(pairs.items())},
        "paper_r": PTP_TRANSLATION_PEARSON_R,
    }
