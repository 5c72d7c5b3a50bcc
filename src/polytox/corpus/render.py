"""Corpus statistics and provenance as Markdown and PNG (matplotlib, Agg backend, optional)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from .._util.numfmt import fmt_share
from ..constants import RTP_OPENAI_WT_TOXIC_SHARE, RTP_OWTC_TOXIC_SHARE, RTP_RELIABILITY_SPEARMAN
from ..errors import MissingDependencyError, require


def _table(title: str, rows: list[dict[str, Any]], key: str) -> list[str]:
    lines = [
        f"### {title}",
        "",
        f"| {key} | documents | toxic | toxic share [95% CI] | mean toxicity |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        mean = r.get("mean_toxicity")
        share = fmt_share(r.get("share"), r.get("ci"))
        lines.append(f"| {r['key']} | {r['n']} | {r['toxic']} | {share} | {'-' if mean is None else f'{mean:.3f}'} |")
    return [*lines, ""]


def attribute_table(corpora: list[dict[str, Any]]) -> str:
    """RTP Appendix D.1 Table 12's layout: one row per attribute, one column per corpus, each cell the share of
    documents scoring >= the threshold on that attribute (``-`` where a corpus was not scored with it)."""
    names = [Path(str(c["corpus"])).name or str(c["corpus"]) for c in corpora]
    attributes = list(dict.fromkeys(a for c in corpora for a in c["share_toxic"]))
    thresholds = sorted({c["settings"]["threshold"] for c in corpora})
    lines = [
        "## Toxic share per attribute (RTP Table 12)",
        "",
        f"Share of documents with score >= {', '.join(map(str, thresholds))} under each attribute, "
        f"{int(100 * corpora[0]['settings']['ci_level'])}% bootstrap CI.",
        "",
        "| attribute | " + " | ".join(names) + " |",
        "| --- |" + " ---: |" * len(names),
    ]
    for attr in attributes:
        cells = []
        for c in corpora:
            block = c["share_toxic"].get(attr)
            cells.append(fmt_share(block.get("share"), block.get("ci")) if block else "-")
        lines.append(f"| {attr.upper()} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def stats_markdown(stats: dict[str, Any]) -> str:
    s = stats["settings"]
    lines = [
        f"## Corpus toxicity: {stats['source']}",
        "",
        f"Scorer `{stats['scorer']}`; toxic = score >= {s['threshold']}; {int(100 * s['ci_level'])}% "
        f"bootstrap CI ({s['n_bootstrap']} resamples). RTP §6.1 found {100 * RTP_OWTC_TOXIC_SHARE:.1f}% "
        f"of OWTC and {100 * RTP_OPENAI_WT_TOXIC_SHARE:.1f}% of OpenAI-WT toxic (Perspective).",
        "",
        f"{stats['n_documents']} documents, {stats['n_scored']} scored; not scored: "
        + ", ".join(f"{k} {v}" for k, v in stats["status_counts"].items() if k != "ok")
        + f"; truncated to the scorer's byte budget: {stats['n_truncated']}; without URL: "
        f"{stats['n_missing_url']}; unknown language: {stats['n_unknown_language']}; "
        f"{stats['n_domains']} domains.",
        "",
        "| attribute | toxic documents | share [95% CI] |",
        "| --- | ---: | ---: |",
    ]
    for attr, block in stats["share_toxic"].items():
        lines.append(f"| {attr} | {block['toxic']} / {block['n']} | {fmt_share(block.get('share'), block.get('ci'))} |")
    lines.append("")
    edges, counts = stats["histogram"]["edges"], stats["histogram"]["counts"]
    lines += [
        "### Toxicity histogram (Figure 3; plot on a log scale)",
        "",
        "| toxicity | documents |",
        "| --- | ---: |",
    ]
    lines += [f"| [{lo:.2f}, {hi:.2f}) | {n} |" for lo, hi, n in zip(edges, edges[1:], counts, strict=False)]
    lines.append("")
    lines += _table("By length (characters)", stats["by_length"], "length")
    lines += _table("By language", stats["by_language"], "language")
    lines += _table(
        "Domains holding the most toxic documents (Figure 6)", stats["domains_most_toxic_documents"], "domain"
    )
    lines += _table(
        f"Most toxic domains, at least {s['min_domain_docs']} documents (Figure 5)",
        stats["domains_highest_toxic_share"],
        "domain",
    )
    return "\n".join(lines)


def _pyplot() -> Any:
    matplotlib = require("matplotlib", "report")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def stats_plots(stats: dict[str, Any], folder: Path) -> list[Path]:
    """``toxicity_hist.png`` (log-scale counts, Figure 3) and ``toxic_domains.png`` (Figure 6)."""
    try:
        plt = _pyplot()
    except MissingDependencyError:
        return []
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    edges, counts = stats["histogram"]["edges"], stats["histogram"]["counts"]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    colors = plt.cm.coolwarm([(lo + hi) / 2 for lo, hi in itertools.pairwise(edges)])
    ax.bar(edges[:-1], counts, width=edges[1] - edges[0], align="edge", color=colors)
    ax.set_yscale("log")
    ax.axvline(stats["settings"]["threshold"], color="black", lw=0.8, ls="--")
    share = stats["share_toxic"]["toxicity"]["share"]
    ax.set_title(f"{100 * (share or 0):.1f}% toxic ({stats['n_scored']} documents)")
    ax.set_xlabel("toxicity")
    ax.set_ylabel("documents (log scale)")
    fig.tight_layout()
    written.append(folder / "toxicity_hist.png")
    fig.savefig(written[-1], dpi=120)
    plt.close(fig)
    rows = stats["domains_most_toxic_documents"]
    if rows:
        fig, ax = plt.subplots(figsize=(6, 0.3 * len(rows) + 1))
        ax.barh([str(r["key"]) for r in rows][::-1], [r["toxic"] for r in rows][::-1], color="tab:red")
        ax.set_xlabel("toxic documents")
        ax.set_title("domains holding the most toxic documents")
        fig.tight_layout()
        written.append(folder / "toxic_domains.png")
        fig.savefig(written[-1], dpi=120)
        plt.close(fig)
    return written


def provenance_markdown(result: dict[str, Any]) -> str:
    lines = [
        f"## Provenance: {result['key']} joined to {result['labels_file']}",
        "",
        f"Coverage: {result['coverage']['matched']} of {result['coverage']['scored']} scored documents "
        f"({100 * (result['coverage']['share'] or 0):.2f}%) have a label; "
        f"{result['label_table']['rows']} label rows read, {len(result['label_table']['problems'])} "
        "malformed (listed in the JSON).",
        "",
    ]
    lines += _table("Toxic share per label", result["by_label"], "label")
    sp = result.get("spearman")
    if sp and sp.get("rho") is None:
        lines += [f"Spearman rho: undefined ({sp.get('note')}).", ""]
    elif sp:
        lines += [
            f"Spearman rho between the ordinal label ({' < '.join(sp['order'])}) and the toxic share of "
            f"each {result['key']} with at least {sp['min_docs']} documents: rho = {sp['rho']:.3f} "
            f"(p = {sp['p_value']:.3g}, {sp['n_keys']} {result['key']}s; RTP Figure 4: "
            f"{RTP_RELIABILITY_SPEARMAN}).",
            "",
        ]
    return "\n".join(lines)
