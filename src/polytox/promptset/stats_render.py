"""Rendering prompt-set statistics: a Markdown summary and PNG figures (matplotlib, headless).

Figures follow PTP Figures 10 and 11: per-language toxicity histograms (optionally log-scale counts, as
RTP Figure 3), prompt length in GPT-4 tokens, the document-year histogram and the top-10 domains.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._util.numfmt import fmt_num
from ..errors import require


def render_stats_markdown(stats: dict[str, Any]) -> str:
    s = stats["settings"]
    langs = stats["by_lang"]
    dedup = s["dedup"] is not None
    lines = [
        f"# Prompt-set statistics: {s['source']}",
        "",
        f"Toxic = toxicity {s['comparison']} {s['threshold']}. Token counts: {s['tokenizer']}."
        + (f" **Note:** {s['tokens_note']}" if s["tokens_note"] else ""),
        "",
    ]
    header = [
        "lang",
        "prompts",
        "bin 0",
        "bin 1",
        "bin 2",
        "bin 3",
        "translated",
        "prompt tokens (mean ± std)",
        "median",
        "continuation tokens",
        "toxic prompts",
        "toxic continuations",
    ]
    if dedup:
        header += ["exact dups", "near dups"]
    lines += ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    for lang, d in [*langs.items(), ("all", stats["overall"])]:
        pt, ct = d["prompt_tokens"], d["continuation_tokens"]
        median = float(pt["median"]) if "median" in pt else None
        row = [
            lang,
            d["n"],
            *[d["by_bucket"][str(b)] for b in range(4)],
            d["translated"],
            f"{fmt_num(pt.get('mean'), 1)} ± {fmt_num(pt.get('std'), 1)}",
            fmt_num(median, 1),
            fmt_num(ct.get("mean"), 1),
            f"{fmt_num(d['toxic_prompt_share'])} ({d['toxic_prompts']}/{d['scored_prompts']})",
            f"{fmt_num(d['toxic_continuation_share'])} ({d['toxic_continuations']}/{d['scored_continuations']})",
        ]
        if dedup:
            row += [d.get("exact_duplicates"), d.get("near_duplicates")]
        lines.append("| " + " | ".join(str(x) for x in row) + " |")
    over = stats["overall"]
    lines += ["", "## Document years", ""]
    years = over["years"]
    lines += [
        ", ".join(f"{y}: {n}" for y, n in years.items()) or "no timestamps",
        f"({over['no_timestamp']} without a timestamp)",
        "",
        "## Top 10 domains",
        "",
    ]
    lines += [f"{i}. {dom} ({n})" for i, (dom, n) in enumerate(over["top_domains"], start=1)] or ["no URLs"]
    lines += ["", "Per language:", ""]
    for lang, d in langs.items():
        doms = ", ".join(f"{dom} ({n})" for dom, n in d["top_domains"][:10]) or "-"
        lines.append(f"- **{lang}**: {doms}")
    return "\n".join(lines) + "\n"


def render_stats_plots(stats: dict[str, Any], folder: Path, log: bool = False) -> list[Path]:
    """Write toxicity.png, prompt_tokens.png, years.png and domains.png; returns their paths."""
    matplotlib = require("matplotlib", "build")
    matplotlib.use("Agg")
    plt = require("matplotlib.pyplot", "build")
    folder.mkdir(parents=True, exist_ok=True)
    langs = stats["by_lang"]
    names = list(langs)
    bins = stats["settings"]["hist_bins"]
    edges = [i / bins for i in range(bins)]
    out: list[Path] = []

    cols = min(6, max(1, len(names)))
    rows = (len(names) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3 * cols, 2.4 * rows), squeeze=False, sharex=True)
    for ax, lang in zip(axes.flat, names, strict=False):
        ax.bar(edges, langs[lang]["toxicity_hist"], width=1 / bins, align="edge", color="#c0392b", alpha=0.8)
        ax.set_title(f"{lang} (n={langs[lang]['n']})", fontsize=9)
        if log:
            ax.set_yscale("log")
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    fig.suptitle("Toxicity of the units" + (" (log-scale counts)" if log else ""))
    fig.supxlabel("toxicity")
    fig.tight_layout()
    out.append(folder / "toxicity.png")
    fig.savefig(out[-1], dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(names)), 3.5))
    data = [langs[lang]["prompt_tokens"] for lang in names]
    ax.bar(names, [d.get("mean", 0) for d in data], yerr=[d.get("std", 0) for d in data], color="#2e86c1", capsize=3)
    ax.set_ylabel(f"prompt length ({stats['settings']['tokenizer']})")
    ax.set_title("Prompt length in GPT-4 tokens (mean ± std)")
    fig.tight_layout()
    out.append(folder / "prompt_tokens.png")
    fig.savefig(out[-1], dpi=100)
    plt.close(fig)

    years = stats["overall"]["years"]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.bar(list(years) or ["none"], list(years.values()) or [0], color="#27ae60")
    ax.set_title("Document timestamps (year)")
    ax.set_ylabel("units")
    fig.tight_layout()
    out.append(folder / "years.png")
    fig.savefig(out[-1], dpi=100)
    plt.close(fig)

    top = stats["overall"]["top_domains"]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.barh([d for d, _ in reversed(top)] or ["none"], [n for _, n in reversed(top)] or [0], color="#8e44ad")
    ax.set_title("Top-10 domains")
    ax.set_xlabel("units")
    fig.tight_layout()
    out.append(folder / "domains.png")
    fig.savefig(out[-1], dpi=100)
    plt.close(fig)
    return out
