"""Everyday text and the language prior: the head's parts on ud-sentences, per language (log.md, "Everyday
text and the language prior").

``raw``: every ud-sentences row through a head (default: the committed one), with the outputs of its parts
(n-gram ridge, mean-pool ridge, attention probe) and the combined raw output, written to an ``.npz``. The
backbone pass goes through the embedding cache, so the pools and probe scores also serve ``train-scorer``.

``parts``: per language, on the **fit part's** PUD ids only, each part's mean output minus English's on the
same ids (in the combiner's logit units: each part's output times its combiner weight), which says where the
prior sits. It reads no check-part row.

``measure``: per language, on the **check part**, the PUD mean minus English's on the same ids and the share
>= 0.5 minus English's (PUD, other sentences), for the head's raw output and each named scale of the head's
scales file (or ``--scales FILE``), with a constant guess beside it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from polytox.scoring.ml.head import MlHead, default_head_path
from polytox.scoring.ml.ngrams import hashed_counts, tfidf
from polytox.training.scorer.everyday import EverydayRow, everyday_gaps, everyday_pairs, load_everyday
from polytox.training.scorer.pack import unit_hash

PARTS = ("ngram", "emb", "probe", "raw")
THREADS = 1  # one torch thread: on a shared, loaded 2-core machine two threads mostly wait on each other


def raw_outputs(head: MlHead, rows: Sequence[Any], batch: int = 256) -> dict[str, np.ndarray]:
    """Each part's output and the combined raw output of every row (``text``, ``lang``; mode full, float32
    backbone)."""
    from polytox.scoring.ml.embed_cache import EmbeddingCache
    from polytox.scoring.ml.embedder import HiddenStateEmbedder

    assert head.backbone is not None
    cache = EmbeddingCache(None)
    embedder = HiddenStateEmbedder(
        head.backbone, head.layers, max_tokens=head.max_tokens, batch_size=32, cache=cache, threads=THREADS
    )
    out = {k: np.full(len(rows), np.nan) for k in PARTS}
    try:
        for start in range(0, len(rows), batch):
            chunk = rows[start : start + batch]
            texts, langs = [r.text for r in chunk], [r.lang for r in chunk]
            s_ngram = head.ngram_output(tfidf(hashed_counts(texts, head.ngram), head.idf), langs)
            read = head.row_probes("full", langs)
            pools, probe_scores = embedder.embed_and_probe(texts, [p for p, _ in read])
            s_emb = head.emb_output(pools, langs)
            s_probe = head.probe_inputs(read, probe_scores)
            sl = slice(start, start + len(chunk))
            out["ngram"][sl], out["emb"][sl] = s_ngram, s_emb
            if s_probe is not None:
                out["probe"][sl] = s_probe
            out["raw"][sl] = head.raw_probability(s_ngram, s_emb, "full", langs, s_probe)
            print(f"{start + len(chunk)}/{len(rows)} computed={embedder.computed}", flush=True)
    finally:
        embedder.close()
        cache.close()
    return out


def pud_gaps(rows: Sequence[EverydayRow], values: np.ndarray, check: bool) -> dict[str, dict[str, Any]]:
    return everyday_gaps(rows, values, check)


def part_gaps(head: MlHead, rows: Sequence[EverydayRow], outs: dict[str, np.ndarray]) -> dict[str, Any]:
    """On the fit part's PUD ids, each part's mean minus English's, in logit units of its combiner."""
    out: dict[str, Any] = {}
    for part, k in (("ngram", 1), ("emb", 2), ("probe", 3)):
        weights = np.array([head.combine["full:other" if r.lang != "en" else "full"][k] for r in rows])  # type: ignore[index]
        contrib = outs[part] * weights
        gaps = pud_gaps(rows, contrib, check=False)
        out[part] = {lang: g.get("gap") for lang, g in gaps.items()}
    bias = {lang: head.combine["full:other" if lang != "en" else "full"][0] for lang in sorted({r.lang for r in rows})}  # type: ignore[index]
    out["bias"] = {lang: round(float(b - bias["en"]), 4) for lang, b in bias.items()}
    logit = np.log(np.clip(outs["raw"], 1e-6, 1 - 1e-6) / np.clip(1 - outs["raw"], 1e-6, 1))
    out["logit"] = {lang: g.get("gap") for lang, g in pud_gaps(rows, logit, check=False).items()}
    out["raw"] = {lang: g.get("gap") for lang, g in pud_gaps(rows, outs["raw"], check=False).items()}
    return out


def load_parts(path: Path | str, rows: Sequence[EverydayRow]) -> tuple[list[EverydayRow], dict[str, np.ndarray]]:
    """The rows of ``rows`` that ``path`` (``raw``'s output) holds, and their part outputs."""
    data = np.load(path)
    index = {k: i for i, k in enumerate(data["keys"].tolist())}
    sel = [r for r in rows if row_key(r) in index]
    take = np.array([index[row_key(r)] for r in sel], dtype=int)
    return sel, {k: data[k][take] for k in PARTS}


def row_key(r: EverydayRow) -> str:
    return f"{r.lang}\t{r.source}\t{r.sent_id}"


def level_cuts(values: np.ndarray, ratings: np.ndarray) -> np.ndarray:
    """Cut points of a 0-1 score into RTP-LX's 5 levels, fitted so the levels' shares match the annotators'
    (mean rating rounded) on the fitting texts: DATA.md, "a continuous score needs cut points; fit them on
    your split only"."""
    levels = np.clip(np.rint(ratings), 1, 5)
    shares = np.array([(levels <= k).mean() for k in (1, 2, 3, 4)])
    return np.quantile(values, shares)


def fitted_kappa(ratings: np.ndarray, values: np.ndarray, cuts: np.ndarray) -> float | None:
    """Linear-weighted Cohen's kappa (labels 1-5) of the annotators' level against the score cut at ``cuts``."""
    from sklearn.metrics import cohen_kappa_score

    if not len(values):
        return None
    human = np.clip(np.rint(ratings), 1, 5).astype(int)
    pred = 1 + np.searchsorted(cuts, values, side="right")
    return round(float(cohen_kappa_score(human, pred, weights="linear", labels=[1, 2, 3, 4, 5])), 4)


def measure(
    head: MlHead,
    rows: Sequence[EverydayRow],
    raw: np.ndarray,
    shared: Path,
    lx_raw: str | None,
    refit: bool,
    sanity: str | None = None,
) -> dict[str, Any]:
    """The check part's everyday gaps on each Perspective scale (the shipped scales, and with ``refit`` the
    maps refitted with the fit part's PUD ids as harmless anchors), and the RTP-LX pair checks of both on the
    check part of the head's held-out split (``lx_raw``: its raw outputs, ``lx_raw.py --heldout-only``)."""
    from polytox.scoring.ml.calib import CONTINUATION, WEB, ScaleMaps
    from polytox.scoring.ml.scales import PERSPECTIVE_2020, PERSPECTIVE_2022, load_scales
    from polytox.training.scorer.scale_fit import SHRINK, language_maps, load_raw, lx_pairs
    from polytox.training.scorer.scale_languages import Pairs, fit_equated, language_checks, summarise
    from polytox.training.scorer.scale_rows import scale_rows

    shipped = load_scales(default_head_path(), head.digest)
    assert shipped is not None
    langs = [r.lang for r in rows]
    out: dict[str, Any] = {"raw": pud_gaps(rows, raw, check=True)}
    constant = np.full(len(rows), float(np.median(raw)))
    out["constant"] = pud_gaps(rows, constant, check=True)
    maps: dict[str, dict[str, ScaleMaps]] = {"V0": {}, "V0m": {}}
    lx = load_raw(lx_raw, "full") if lx_raw else {}
    srows = scale_rows(str(shared)) if lx else []
    for name in (PERSPECTIVE_2022, PERSPECTIVE_2020):
        maps["V0"][name] = shipped.get(name).maps["full"]
        if refit and lx:
            anchors = everyday_pairs(rows, {(r.text, r.lang): float(v) for r, v in zip(rows, raw, strict=True)})
            pairs = Pairs.concat(lx_pairs(srows, lx, check=False), anchors)
            english = maps["V0"][name].english
            others = sorted(set(head.languages) - {"en"})
            per_lang, fallback = language_maps(fit_equated(pairs, SHRINK), english, others)
            maps["V0m"][name] = ScaleMaps(english=english, fallback=fallback, per_lang=per_lang)
    for variant, by_scale in maps.items():
        for name, m in by_scale.items():
            values = m.apply(raw, langs, CONTINUATION if name == PERSPECTIVE_2022 else WEB)
            block: dict[str, Any] = {"everyday": pud_gaps(rows, values, check=True)}
            if lx:
                check = lx_pairs(srows, lx, check=True)
                checks = language_checks(
                    check, m.apply(check.r_t, check.lang.tolist()), m.apply(check.r_e, ["en"] * len(check))
                )
                fit = lx_pairs(srows, lx, check=False)
                cuts = level_cuts(
                    np.concatenate([m.apply(fit.r_t, fit.lang.tolist()), m.apply(fit.r_e, ["en"] * len(fit))]),
                    np.concatenate([fit.h_t, fit.h_e]),
                )
                for lang, row in checks.items():
                    sel = check.lang == lang
                    row["kappa_fitted"] = fitted_kappa(
                        check.h_t[sel], m.apply(check.r_t[sel], [lang] * sel.sum()), cuts
                    )
                    row["kappa_fitted_en"] = fitted_kappa(
                        check.h_e[sel], m.apply(check.r_e[sel], ["en"] * sel.sum()), cuts
                    )
                block["pairs"], block["pairs_summary"] = checks, summarise(checks)
                block["pairs_summary"]["kappa_fitted_mean"] = round(
                    float(np.mean([r["kappa_fitted"] for r in checks.values()])), 4
                )
            if sanity:
                s_rows, s_raw = sanity_rows(), np.load(sanity)["raw"]
                block["sanity"] = sanity_checks(
                    s_rows, m.apply(s_raw, [r.lang for r in s_rows], CONTINUATION if name == PERSPECTIVE_2022 else WEB)
                )
            out[f"{variant}:{name}"] = block
    return out


def _f(x: Any, signed: bool = True, pct: bool = False) -> str:
    if x is None:
        return "-"
    if pct:
        return f"{100 * x:+.1f}" if signed else f"{100 * x:.1f}"
    return f"{x:+.3f}" if signed else f"{x:.3f}"


def markdown(result: dict[str, Any], scale: str) -> str:
    """Per language, on the check part: the raw head, the shipped maps (V0) -> the maps refitted with everyday
    anchors (V0m), on ``scale``."""
    v0, v0m = result[f"V0:{scale}"], result.get(f"V0m:{scale}", {})

    def get(block: dict[str, Any], key: str, lang: str, sub: str) -> Any:
        return block.get(key, {}).get(lang, {}).get(sub) if block else None

    def both(key: str, sub: str, lang: str, pct: bool = False, signed: bool = True) -> str:
        a, b = get(v0, key, lang, sub), get(v0m, key, lang, sub)
        return _f(a, signed, pct) + ("" if not v0m else f" -> {_f(b, signed, pct)}")

    lines = [
        "| lang | raw head: PUD mean - en | PUD mean - en | PUD share >= 0.5 - en, pt | other sentences: share "
        ">= 0.5 - en, pt | sanity set: harmless - en (>= 0.5) | RTP-LX toxic pairs - en | RTP-LX harmless pairs "
        "- en | human AUC | kappa, cut points fitted (en) |",
        "| --- | ---: | --- | --- | --- | --- | --- | --- | ---: | --- |",
    ]
    for lang in sorted(v0["everyday"]):
        if lang == "en":
            continue
        ev = v0["everyday"][lang]
        sanity = "-"
        if "sanity" in v0:
            a, b = v0["sanity"][lang], v0m.get("sanity", {}).get(lang) if v0m else None
            sanity = f"{a['harmless_gap']:+.3f} ({a['harmless_high']})"
            if b:
                sanity += f" -> {b['harmless_gap']:+.3f} ({b['harmless_high']})"
        pairs = v0.get("pairs", {}).get(lang, {})
        raw_gap = result["raw"].get(lang, {}).get("gap")
        lines.append(
            f"| {lang} | {_f(raw_gap)} | {both('everyday', 'gap', lang) if ev.get('n_pud') else '-'} "
            f"| {both('everyday', 'share_gap', lang, pct=True) if ev.get('n_pud') else '-'} "
            f"| {both('everyday', 'other_share_gap', lang, pct=True) if ev.get('n_other') else '-'} "
            f"| {sanity} | {both('pairs', 'toxic_diff', lang)} | {both('pairs', 'harmless_diff', lang)} "
            f"| {_f(pairs.get('auc'), signed=False)} | {both('pairs', 'kappa_fitted', lang, signed=False)} "
            f"({_f(pairs.get('kappa_fitted_en'), signed=False)}) |"
        )
    return "\n".join(lines)


SANITY = Path(__file__).resolve().parents[2] / "tests" / "data" / "lang_sanity.jsonl"


@dataclass(frozen=True)
class SanityRow:
    text: str
    lang: str
    kind: str
    id: str


def sanity_rows() -> list[SanityRow]:
    lines = SANITY.read_text(encoding="utf-8").splitlines()
    return [SanityRow(r["text"], r["lang"], r["kind"], r["id"]) for r in map(json.loads, filter(str.strip, lines))]


def sanity_checks(rows: Sequence[SanityRow], values: np.ndarray) -> dict[str, dict[str, Any]]:
    """``tests/test_lang_sanity.py``'s reading: per language, the harmless mean minus English's, harmless
    sentences at 0.5 or more, and the toxic mean."""

    def mean(lang: str, kind: str) -> float:
        return float(np.mean([v for r, v in zip(rows, values, strict=True) if r.lang == lang and r.kind == kind]))

    english = mean("en", "harmless")
    return {
        lang: {
            "harmless_mean": round(mean(lang, "harmless"), 4),
            "harmless_gap": round(mean(lang, "harmless") - english, 4),
            "harmless_high": int(
                sum(v >= 0.5 for r, v in zip(rows, values, strict=True) if r.lang == lang and r.kind == "harmless")
            ),
            "toxic_mean": round(mean(lang, "toxic"), 4),
        }
        for lang in sorted({r.lang for r in rows})
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=("raw", "sanity", "parts", "measure", "table", "export"))
    p.add_argument("--shared", default="../shared/data")
    p.add_argument("--head", default=str(default_head_path()))
    p.add_argument("--raw", required=True, help="the .npz of part outputs (written by raw, read by the others)")
    p.add_argument("--part", choices=("fit", "check", "all"), default="all", help="raw: which rows")
    p.add_argument("--parallel", choices=("yes", "no", "all"), default="all", help="raw: PUD rows, the others, all")
    p.add_argument("--per-lang", type=int, help="raw: at most this many rows per language (a fixed hash order)")
    p.add_argument("--out", help="write the result (JSON) here")
    p.add_argument("--lx-raw", help="measure: the held-out RTP-LX raw outputs (lx_raw.py --heldout-only)")
    p.add_argument("--refit", action="store_true", help="measure: also the maps refitted with PUD anchors (V0m)")
    p.add_argument("--sanity", help="sanity: where to write the sanity set's raw outputs; measure: read them")
    args = p.parse_args(argv)
    if args.command == "table":  # --raw: the result of measure
        result = json.loads(Path(args.raw).read_text(encoding="utf-8"))
        for scale in ("perspective-2022", "perspective-2020"):
            print(f"\n{scale}\n\n{markdown(result, scale)}")
        return 0
    head = MlHead.load(args.head)
    if args.command == "sanity":
        srows = sanity_rows()
        computed = raw_outputs(head, srows)
        np.savez(args.sanity, head=np.array(head.digest), **computed)  # type: ignore[arg-type]
        return 0
    rows = load_everyday(Path(args.shared) / "ud-sentences")
    if args.command == "raw":
        todo = [
            r
            for r in rows
            if (args.part == "all" or r.check == (args.part == "check"))
            and (args.parallel == "all" or r.parallel == (args.parallel == "yes"))
        ]
        if args.per_lang is not None:  # the first rows of each language in the order of a hash of their key
            todo = sorted(todo, key=lambda r: unit_hash(r.key, "everyday-sample"))
            by_lang: dict[str, list[EverydayRow]] = {}
            for r in todo:
                by_lang.setdefault(r.lang, []).append(r)
            todo = [r for rows_of in by_lang.values() for r in rows_of[: args.per_lang]]
        computed = raw_outputs(head, todo)
        np.savez(args.raw, head=np.array(head.digest), keys=np.array([row_key(r) for r in todo]), **computed)  # type: ignore[arg-type]
        return 0
    sel: list[EverydayRow] = []
    outs: dict[str, np.ndarray] = {}
    for path in args.raw.split(","):
        got, parts = load_parts(path, rows)
        sel += got
        outs = {k: np.concatenate([outs.get(k, np.zeros(0)), parts[k]]) for k in PARTS}
    if args.command == "export":  # --out: a folder; the raw outputs as scale_fit --raw reads them (both modes)
        import pyarrow as pa
        import pyarrow.parquet as pq

        texts, langs = [r.text for r in sel], [r.lang for r in sel]
        ngram_raw = head.raw_probability(outs["ngram"], None, "ngram", langs)
        for mode, values in (("full", outs["raw"]), ("ngram", ngram_raw)):
            table = pa.table({"text": texts, "lang": langs, "raw": np.asarray(values, dtype=float)})
            pq.write_table(table, str(Path(args.out) / f"part-everyday-{mode}.parquet"))
        return 0
    if args.command == "parts":
        result = part_gaps(head, sel, outs)
    else:
        result = measure(head, sel, outs["raw"], Path(args.shared), args.lx_raw, args.refit, args.sanity)
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
