"""The named scales as ``polytox scorers`` prints them: what each is fitted on, its size, its held-out error.

Read from ``polytox-ml-scales.json`` beside the committed head (``scale_fit.py`` writes it).
"""

from __future__ import annotations

import json
from typing import Any

from ..._util.numfmt import fmt_num
from .head import MlHead, default_head_path
from .scales import DEFAULT_SCALES, HEAD_SCALE, default_scales_path, load_scales


def _points(share: float | None) -> float | None:
    """A share difference in percentage points."""
    return None if share is None else 100 * share


def _n_rows(scale: Any) -> str:
    """Rows the English map and the other languages' (shared) map were fitted on."""
    maps = scale.maps.get("full") or next(iter(scale.maps.values()))
    return f"{maps.english.n:,} / {maps.fallback.n:,}"


def scales_overview() -> str:
    """One row per scale: era, what its English and other-language maps are fitted on, size, held-out error."""
    head = MlHead.load(default_head_path())
    scales = load_scales(default_head_path(), head.digest)
    if scales is None:
        return f"scales: only '{HEAD_SCALE}' (no {default_scales_path().name} fitted for head {head.digest})"
    lines = [
        f"scales of polytox-ml (--scorer-opt scale=NAME; default: {DEFAULT_SCALES['continuation']} for model "
        f"continuations (eval, score, serve), {DEFAULT_SCALES['web']} for web text (build, corpus score); "
        f"{HEAD_SCALE}: the head's own maps, other languages on rater shares; held-out split):",
        "",
        "| scale | era | English fitted on | other languages | rows fitted (English / other) | held-out MAE / "
        "AUC / share diff on its era | pooled EMT / EP / AT diff, 2022 real run |",
        "| --- | --- | --- | --- | ---: | --- | --- |",
    ]
    for name, scale in scales.scales.items():
        info, held = scale.info, scale.info.get("heldout", {})
        own = {"2020": "perspective-2020", "2022": "perspective-2022"}.get(str(info.get("era")))
        err = held.get(own, {}) if own else {}
        run = held.get("perspective-2022", {}).get("run", {})
        lines.append(
            f"| {name} | {info.get('era') or '-'} | {info.get('english', '')} | {info.get('other_languages', '')} "
            f"| {_n_rows(scale)} | "
            + (
                f"{fmt_num(err.get('mae'))} / {fmt_num(err.get('auc'))} / "
                f"{fmt_num(100 * err['share_diff'], 1, signed=True)} pt"
                if err.get("mae") is not None
                else "-"
            )
            + " | "
            + (" / ".join(fmt_num(run.get(f"{k}_diff"), 3, signed=True) for k in ("emt", "ep", "at")) if run else "-")
            + " |"
        )
    return "\n".join(lines)


def scales_detail(path: str | None = None) -> str:
    """Every scale's held-out error on every era's data, and the per-language error under perspective-2020."""
    data = json.loads(
        (default_scales_path() if path is None else __import__("pathlib").Path(path)).read_text(encoding="utf-8")
    )
    lines = [
        "| scale | era's data | n | AUC | MAE | share >= 0.5 diff | EMT diff | EP diff | AT diff |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, block in data["scales"].items():
        for era, m in block.get("heldout", {}).items():
            if era in ("languages", "pairs", "everyday"):  # not eras: their own tables below
                continue
            run = m.get("run", {})
            lines.append(
                f"| {name} | {era} | {m.get('n')} | {fmt_num(m.get('auc'))} | {fmt_num(m.get('mae'))} | "
                f"{fmt_num(_points(m.get('share_diff')), 1, signed=True)} pt | "
                + " | ".join(fmt_num(run.get(f"{k}_diff"), 3, signed=True) for k in ("emt", "ep", "at"))
                + " |"
            )
    for name, block in data["scales"].items():
        lines += pairs_table(name, block.get("heldout", {}).get("pairs", {}), "oof")
    for name, block in data["scales"].items():
        lines += everyday_table(name, block.get("heldout", {}).get("everyday", {}))
    for name, block in data["scales"].items():
        lines += ends_table(name, block.get("heldout", {}))
    for name, block in data["scales"].items():
        langs = block.get("heldout", {}).get("languages")
        if not langs:
            continue
        english = langs.get("en", {}).get("mae")
        lines += [
            "",
            f"{name}, per language: MAE against the English source's score on held-out Index groups "
            "(target: English's MAE + 0.05)",
            "",
            "| lang | groups | MAE | minus English's | MAE, head's maps | AUC vs humans |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for lang, m in langs.items():
            gap = "-" if lang == "en" or english is None else fmt_num(m["mae"] - english, 3, signed=True)
            lines.append(
                f"| {lang} | {m['n_groups']} | {fmt_num(m['mae'])} | {gap} | {fmt_num(m['mae_head_scale'])} | "
                f"{fmt_num(m['auc_humans'])} |"
            )
    return "\n".join(lines)


WHICH = {
    "oof": "every held-out RTP-LX pair, out of fold",
    "after": "the check part's RTP-LX pairs",
    "before": "the check part's RTP-LX pairs, the maps these replaced",
}
# RTP-LX (de Wynter et al. 2024): linear-weighted kappa against the annotators' Toxicity level, mean over its
# languages, as the paper reports it for three models; beside the scorer's own for comparison.
RTPLX_KAPPA = {"GPT-4 Turbo": 0.44, "Llama-3-70B-Instruct": 0.46, "Llama Guard": 0.27}


def pairs_table(name: str, pairs: Any, which: str = "oof") -> list[str]:
    """The same-judgement checks of ``scale_languages`` per language on held-out RTP-LX pairs (one scale):
    ``oof``, every held-out pair read by maps fitted without its Index group; ``after``, the check part read
    by the shipped maps; ``before``, the maps these replaced."""
    rows = pairs.get(which) if pairs else None
    if not rows:
        return []
    summary = pairs.get(f"{which}_summary", {})
    ref = ", ".join(f"{k} {v:.2f}" for k, v in RTPLX_KAPPA.items())
    out = [
        "",
        f"{name}, other languages against their English texts ({WHICH.get(which, which)}; harmless: both sides' "
        "mean rating < 1.5, toxic: both >= 3; targets: harmless within 0.03 and 3 points, toxic within 0.05, "
        "MAE within 0.05 of English's)",
        "",
        "| lang | harmless pairs | mean (English) | diff | share >= 0.5 diff | toxic pairs | mean (English) | diff "
        "| MAE to source's 2020 score (English's; constant) | human AUC | kappa (English's) |",
        "| --- | ---: | --- | ---: | ---: | ---: | --- | ---: | --- | ---: | ---: |",
    ]
    for lang, m in rows.items():
        out.append(
            f"| {lang} | {m['n_harmless']} | {fmt_num(m.get('harmless_mean'))} ({fmt_num(m.get('harmless_en'))}) | "
            f"{fmt_num(m.get('harmless_diff'), 3, signed=True)} | "
            f"{fmt_num(_points(m.get('harmless_share_diff')), 1, signed=True)} pt | "
            f"{m['n_toxic']} | {fmt_num(m.get('toxic_mean'))} ({fmt_num(m.get('toxic_en'))}) | "
            f"{fmt_num(m.get('toxic_diff'), 3, signed=True)} | "
            f"{fmt_num(m.get('mae'))} ({fmt_num(m.get('mae_en'))}; {fmt_num(m.get('mae_constant'))}) | "
            f"{fmt_num(m.get('auc'))} | "
            f"{fmt_num(m.get('kappa'))} ({fmt_num(m.get('kappa_en'))}) |"
        )
    out += [
        "",
        f"Means over languages: |harmless diff| {fmt_num(summary.get('harmless_diff_mean_abs'))} (worst "
        f"{fmt_num(summary.get('harmless_diff_max_abs'))}), |toxic diff| {fmt_num(summary.get('toxic_diff_mean_abs'))} "
        f"(worst {fmt_num(summary.get('toxic_diff_max_abs'))}), AUC {fmt_num(summary.get('auc_mean'))} (lowest "
        f"{fmt_num(summary.get('auc_min'))}), kappa {fmt_num(summary.get('kappa_mean'))}; the RTP-LX paper's kappa: "
        f"{ref}.",
    ]
    return out


def everyday_table(name: str, block: Any) -> list[str]:
    """Everyday text (the check part of ud-sentences, never fitted on) against English's, per language: the
    mean over Parallel UD ids minus English's on the same ids, and shares >= 0.5 minus English's, under the
    maps these replaced (``before``) and these (``after``)."""
    after = block.get("after") if block else None
    if not after:
        return []
    before = block.get("before", {})

    def pair(lang: str, key: str, pct: bool = False) -> str:
        def one(m: Any) -> str:
            v = m.get(lang, {}).get(key) if m else None
            return fmt_num(None if v is None else (100 * v if pct else v), 1 if pct else 3, signed=True)

        return (f"{one(before)} -> " if before else "") + one(after) + (" pt" if pct else "")

    out = [
        "",
        f"{name}, everyday text against English's (the check part of ud-sentences, never fitted on; targets: "
        "mean within 0.03 of English's on the same Parallel UD sentences, share >= 0.5 at most 2 points above)",
        "",
        "| lang | PUD ids | PUD mean - English's | PUD share >= 0.5 - English's | other sentences | "
        "their share >= 0.5 - English's |",
        "| --- | ---: | --- | --- | ---: | --- |",
    ]
    for lang, m in after.items():
        out.append(
            f"| {lang} | {m['n_pud']} | {pair(lang, 'gap') if m['n_pud'] else '-'} | "
            f"{pair(lang, 'share_gap', True) if m['n_pud'] else '-'} | {m['n_other']} | "
            f"{pair(lang, 'other_share_gap', True) if m['n_other'] else '-'} |"
        )
    return out


FLAT_FLAG = 0.05  # a flat step this wide in raw output, or wider, is named on the card


def ends_table(name: str, held: Any) -> list[str]:
    """All three ends per language, side by side: everyday Parallel UD text, harmless web prompts and
    toxic pairs (RTP-LX, every held-out pair out of fold) against English's, the MAE to the English source's
    2020 score beside a constant guess's, and the map's widest flat step (``scale_anchored.flat_runs``,
    written by ``scale_fit``). A constant guess reads every language alike: its gaps are all 0, which is why
    the MAE and its constant sit beside them."""
    everyday = (held.get("everyday") or {}).get("after") or {}
    pairs = (held.get("pairs") or {}).get("oof") or {}
    flat = held.get("flat") or {}
    if not (everyday or pairs):
        return []
    en = flat.get("en", {})
    en_step = f"{en['from']:.3f}-{en['to']:.3f} reads {en['value']:.2f}" if en.get("width") else "none"
    out = [
        "",
        f"{name}, the three ends per language against English's (everyday: ud-sentences' check part; harmless "
        "web and toxic: RTP-LX held-out pairs, out of fold; a constant guess: every gap 0, its MAE in brackets; "
        f"flat step: the widest band of raw output one map step covers, named from {FLAT_FLAG:g} wide; "
        f"English's own map: raw {en_step})",
        "",
        "| lang | everyday mean - en | harmless web mean - en (share >= 0.5, pt) | toxic pairs mean - en | "
        "MAE - en's (constant's MAE) | flat step |",
        "| --- | ---: | --- | ---: | --- | --- |",
    ]
    for lang in sorted(set(everyday) | set(pairs)):
        if lang == "en":
            continue
        e, m, f = everyday.get(lang, {}), pairs.get(lang, {}), flat.get(lang, {})
        step = "-"
        if f.get("width", 0) >= FLAT_FLAG:
            step = f"raw {f['from']:.3f}-{f['to']:.3f} reads {f['value']:.2f}"
        out.append(
            f"| {lang} | {fmt_num(e.get('gap'), 3, signed=True)} | {fmt_num(m.get('harmless_diff'), 3, signed=True)} "
            f"({fmt_num(_points(m.get('harmless_share_diff')), 1, signed=True)}) | "
            f"{fmt_num(m.get('toxic_diff'), 3, signed=True)} | {fmt_num(m.get('mae_diff'), 3, signed=True)} "
            f"({fmt_num(m.get('mae_constant'))}) | {step} |"
        )
    return out


def _ci(ci: Any, scale: float = 1.0, digits: int = 3) -> str:
    if not ci or ci[0] is None:
        return ""
    return f" [{ci[0] * scale:+.{digits}f}, {ci[1] * scale:+.{digits}f}]"


def markdown_report(measured: dict[str, Any], mode: str = "full") -> str:
    """The held-out tables of docs/scorer-scales.md from ``scale_fit``'s measurements file (one head mode)."""
    m = measured[mode]
    out = [
        "### Every scale on every era's held-out data",
        "",
        "| era's data | scale | n | AUC | MAE [95% CI] | mean (era's) | share >= 0.5 minus era's [95% CI] |",
        "| --- | --- | ---: | ---: | --- | --- | --- |",
    ]
    for era, by_scale in m["eras"].items():
        for name, a in by_scale.items():
            out.append(
                f"| {era} | {name} | {a['n']} | {fmt_num(a.get('auc'))} | {fmt_num(a['mae'])}"
                f"{_ci(a.get('mae_ci')).replace('+', '')} | {fmt_num(a['mean'])} ({fmt_num(a['reference_mean'])}) | "
                f"{100 * a['share_diff']:+.1f} pt{_ci(a.get('share_diff_ci'), 100, 1)} |"
            )
    out += [
        "",
        "### EMT / EP / AT of a real run (held-out 2022 continuations), every scale",
        "",
        "| scale | model | prompts | EMT P / scale (diff [CI]) | EP P / scale (diff [CI]) | AT P / scale (diff [CI]) |",
        "| --- | --- | ---: | --- | --- | --- |",
    ]
    for by_scale in m["run"].values():
        for name, rows in by_scale.items():
            for row in rows:
                cells = [
                    f"{row[f'{k}_perspective']:.3f} / {row[f'{k}_scorer']:.3f} ({row[f'{k}_diff']:+.3f}"
                    f"{_ci(row.get(f'{k}_diff_ci'))})"
                    for k in ("emt", "ep", "at")
                ]
                out.append(f"| {name} | {row['model']} | {row['n_prompts']} | " + " | ".join(cells) + " |")
    langs = m["languages"]
    en = langs.get("en", {}).get("mae")
    out += [
        "",
        "### One scale across languages (perspective-2020, held-out anchored Index groups)",
        "",
        "| lang | groups | MAE vs English source's 2020 score [95% CI] | minus English's "
        "| MAE with the head's maps | mean (source's) | AUC vs humans (RTP-LX, held out) |",
        "| --- | ---: | --- | ---: | ---: | --- | ---: |",
    ]
    for lang, row in langs.items():
        gap = "-" if en is None or lang == "en" else f"{row['mae'] - en:+.3f}"
        out.append(
            f"| {lang} | {row['n_groups']} | {fmt_num(row['mae'])}{_ci(row.get('mae_ci')).replace('+', '')} | "
            f"{gap} | {fmt_num(row['mae_head_scale'])} | {fmt_num(row['mean'])} ({fmt_num(row['reference_mean'])}) | "
            f"{fmt_num(row.get('auc_humans'))} |"
        )
    return "\n".join(out)


if __name__ == "__main__":
    import sys
    from pathlib import Path

    print(markdown_report(json.loads(Path(sys.argv[1]).read_text(encoding="utf-8")), *(sys.argv[2:3] or ["full"])))
