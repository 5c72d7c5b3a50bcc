"""The ``polytox corpus`` subcommand and its steps (score, stats, provenance, overlap): argument parsing and
output; the work is in ``polytox.corpus``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .common import console, out_console, print_json
from .flags import CORPUS_LANG, add_lang, add_n_bootstrap, add_scorer_flags, add_seed, add_threshold

DESCRIPTION = """\
Pretraining-corpus analysis (RTP §6, Appendix D): score a corpus, its statistics, toxicity by source
reliability, and overlap with another corpus.

  polytox corpus score DATA... --out SCORES [--scorer NAME --scorer-opt K=V] [--executor ray]
  polytox corpus stats SCORES                       # stats.json, stats.md, PNGs in SCORES/stats
  polytox corpus provenance SCORES --labels news.csv --order low,mixed,high
  polytox corpus overlap A B --index IDX --out DIR [--scores-b SCORES_OF_B]

'score' resumes: rerun the same command with the same --out. 'polytox corpus STEP --help' for each step.
"""  # the user-facing text of --help (the module docstring is for developers)


def _source_args(p: argparse.ArgumentParser, paths: bool = True) -> None:
    if paths:
        p.add_argument(
            "inputs",
            nargs="*",
            metavar="PATH",
            help="JSONL/Parquet/CSV files, or folders of them and of .txt files (one document per file)",
        )
    p.add_argument("--hf-dataset", help="stream a Hugging Face dataset by id (e.g. Skylion007/openwebtext)")
    p.add_argument("--hf-config")
    p.add_argument("--hf-split", default="train")
    p.add_argument(
        "--hf-data-files",
        action="append",
        default=[],
        metavar="FILE",
        help="data files of a builder dataset (e.g. --hf-dataset json --hf-data-files a.jsonl)",
    )
    p.add_argument("--limit", type=int, help="use the first N records")
    p.add_argument("--text-field", help="dotted field of the text (default: text, content, document, Prompt)")
    p.add_argument("--id-field", help="dotted field of the document id (default: id, doc_id, Index)")
    p.add_argument("--url-field", help="dotted field of the URL (default: url, meta.url)")
    p.add_argument("--lang-field", help="dotted field of the language (default: lang, language, ...)")
    add_lang(p, CORPUS_LANG, dest="default_lang")


def _executor_args(p: argparse.ArgumentParser) -> None:
    from ..executors import EXECUTORS

    x = p.add_argument_group("execution (not part of the output's identity)")
    x.add_argument(
        "--executor",
        choices=[e for e in EXECUTORS if e != "pipelined"],
        default="serial",
        help="serial (default) or ray (Ray Data actor pool)",
    )
    x.add_argument("--ray-address", help="Ray cluster to join ('auto', 'ray://HOST:10001'); default: local")
    x.add_argument("--score-workers", type=int, default=1, help="ray: scoring actors")
    x.add_argument("--score-gpus-per-worker", type=float, default=0.0, help="ray: GPUs per scoring actor")
    x.add_argument("--cpus-per-worker", type=float, default=1.0, help="ray: CPUs per actor")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "corpus",
        help="pretraining-corpus toxicity, provenance and overlap (RTP §6)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    csub = p.add_subparsers(dest="corpus_command", required=True, metavar="STEP")

    s = csub.add_parser("score", help="score every document of a corpus into Parquet parts (resumable)")
    _source_args(s)
    s.add_argument("--out", required=True, help="output folder (rerun with the same --out to resume)")
    add_scorer_flags(s)
    s.add_argument(
        "--keep",
        action="append",
        default=[],
        metavar="FIELD",
        help="metadata field to keep as a column, e.g. subreddit (repeatable)",
    )
    s.add_argument("--shard-size", type=int, default=1000, help="documents per part (the unit redone after a kill)")
    s.add_argument("--no-detect-lang", action="store_true", help="undeclared languages stay 'und'")
    s.add_argument("--retry-transient", action="store_true", help="redo shards holding transient score failures")
    s.add_argument("--json", action="store_true")
    _executor_args(s)
    s.set_defaults(func=run_score)

    t = csub.add_parser("stats", help="toxic shares, histogram, length/language/domain tables")
    t.add_argument(
        "scores",
        nargs="+",
        help="a 'corpus score' output folder; several: also RTP Table 12's table (attributes x corpora)",
    )
    t.add_argument(
        "--out",
        dest="stats_out",
        help="where to write stats.json, stats.md, PNGs (default SCORES/stats); with several corpora, "
        "where table12.md and table12.json go (each corpus's own files stay in SCORES/stats)",
    )
    add_threshold(t)
    add_n_bootstrap(t)
    t.add_argument("--min-domain-docs", type=int, default=20)
    t.add_argument("--top", type=int, default=15)
    t.add_argument("--format", choices=["md", "json"], default="md")
    t.add_argument("--no-plots", action="store_true")
    t.set_defaults(func=run_stats)

    v = csub.add_parser("provenance", help="toxic share per label of a domain / metadata label table")
    v.add_argument("scores", help="a 'corpus score' output folder")
    v.add_argument("--labels", required=True, help="CSV (key,label) or .txt list of keys")
    v.add_argument("--key", default="domain", help="'domain' or a metadata field kept with --keep (e.g. subreddit)")
    v.add_argument("--key-column")
    v.add_argument("--label-column")
    v.add_argument("--order", help="ordinal labels, lowest first (e.g. low,mixed,high): adds Spearman rho")
    add_threshold(v)
    v.add_argument("--min-docs", type=int, default=10, help="documents a key needs to enter Spearman rho")
    add_n_bootstrap(v)
    v.add_argument("--out", dest="prov_out", help="where to write provenance.json/.md (default SCORES/provenance)")
    v.add_argument("--format", choices=["md", "json"], default="md")
    v.set_defaults(func=run_provenance)

    o = csub.add_parser("overlap", help="documents of corpus B that also appear in corpus A (MinHash LSH)")
    o.add_argument("a", nargs="?", help="corpus A (file or folder); omit to reuse --index")
    o.add_argument("b", help="corpus B (file or folder)")
    o.add_argument("--index", required=True, help="index folder of A: built when absent, reused when present")
    o.add_argument("--out", required=True, help="output folder (overlap.parquet, overlap.json)")
    o.add_argument("--scores-b", help="a 'corpus score' output of B: toxic share inside/outside the overlap")
    o.add_argument("--check-sample", type=int, default=500, help="B documents checked by exact Jaccard")
    add_seed(o)
    o.add_argument("--text-field")
    o.add_argument("--id-field")
    o.add_argument("--json", action="store_true")
    _executor_args(o)
    o.set_defaults(func=run_overlap)


def _fields(args: argparse.Namespace) -> Any:
    from ..promptset.readers import FieldMap

    return FieldMap(
        text=args.text_field,
        id=args.id_field,
        url=getattr(args, "url_field", None),
        lang=getattr(args, "lang_field", None),
        default_lang=getattr(args, "default_lang", None),
    )


def _executor(args: argparse.Namespace) -> Any:
    from ..executors import ExecutorConfig

    return ExecutorConfig(
        kind=args.executor,
        ray_address=args.ray_address,
        score_workers=args.score_workers,
        gpus_per_score_worker=args.score_gpus_per_worker,
        cpus_per_worker=args.cpus_per_worker,
    )


def _options(pairs: list[str]) -> dict[str, str]:
    from ..errors import PolytoxError

    out = {}
    for pair in pairs:
        if "=" not in pair:
            raise PolytoxError(f"--scorer-opt expects KEY=VALUE, got {pair!r}")
        key, value = pair.split("=", 1)
        out[key.strip()] = value
    return out


def run_score(args: argparse.Namespace) -> int:
    from ..corpus.score import ScoreJob
    from ..corpus.score import run_score as score
    from ..promptset.readers import CorpusSource
    from ..scoring.ml.scorer import text_kind_options

    source = CorpusSource(
        paths=tuple(args.inputs),
        hf_dataset=args.hf_dataset,
        hf_config=args.hf_config,
        hf_split=args.hf_split,
        hf_data_files=tuple(args.hf_data_files),
        limit=args.limit,
    )
    # corpus documents are web text: default / polytox-ml score them with the web-text map (scorer.py)
    options = text_kind_options(args.scorer, _options(args.scorer_opt or []))
    job = ScoreJob(
        source=source,
        fields=_fields(args),
        scorer=args.scorer,
        scorer_options=options,
        keep=tuple(args.keep),
        shard_size=args.shard_size,
        detect_lang=not args.no_detect_lang,
    )
    summary = score(job, args.out, executor=_executor(args), retry_transient=args.retry_transient)
    data = {
        "out": summary.out,
        "resumed": summary.resumed,
        "shards": summary.shards_total,
        "shards_done_before": summary.shards_done_before,
        "shards_scored_now": summary.shards_scored,
        "documents_scored_now": summary.documents_scored_now,
        "seconds": round(summary.seconds, 3),
        "docs_per_second": round(summary.docs_per_second, 1),
        "status_counts": summary.status_counts,
        "truncated": summary.truncated,
        "transient_failures": summary.transient,
        "executor": summary.executor,
    }
    if args.json:
        print_json(data)
    else:
        console.print(
            f"{'resumed' if summary.resumed else 'scored'} {summary.out}: {summary.shards_total} shards "
            f"({summary.shards_done_before} already done), {summary.documents_scored_now} documents now "
            f"in {summary.seconds:.1f}s; "
            + ", ".join(f"{k} {v}" for k, v in summary.status_counts.items())
            + f"; truncated {summary.truncated}",
            markup=False,
        )
        if summary.transient:
            console.print(f"{summary.transient} transient score failures: rerun with --retry-transient", markup=False)
    return 0


def run_stats(args: argparse.Namespace) -> int:
    from ..corpus.stats import compute_corpus_stats

    corpora = [
        compute_corpus_stats(
            scores,
            threshold=args.threshold,
            n_boot=args.n_bootstrap,
            top=args.top,
            min_domain_docs=args.min_domain_docs,
        )
        for scores in args.scores  # all computed before anything is written: a bad folder leaves nothing
    ]
    if len(corpora) == 1:
        return _write_stats(args, corpora[0], Path(args.stats_out or Path(args.scores[0]) / "stats"))
    from .._util.atomic import atomic_write_json, atomic_write_text
    from ..corpus.render import attribute_table

    for scores, stats in zip(args.scores, corpora, strict=True):
        _write_stats(args, stats, Path(scores) / "stats", quiet=True)
    table = attribute_table(corpora)
    folder = Path(args.stats_out) if args.stats_out else None
    if folder is not None:
        atomic_write_text(folder / "table12.md", table + "\n")
        atomic_write_json(folder / "table12.json", {"corpora": corpora})
    if args.format == "json":
        print_json({"corpora": corpora})
    else:
        out_console.print(table, markup=False)
    written = ", ".join(str(Path(s) / "stats") for s in args.scores)
    console.print(f"wrote {written}" + (f", {folder}/table12.md" if folder else ""), markup=False)
    return 0


def _write_stats(args: argparse.Namespace, stats: dict[str, Any], folder: Path, quiet: bool = False) -> int:
    from .._util.atomic import atomic_write_json, atomic_write_text
    from ..corpus.render import stats_markdown, stats_plots

    markdown = stats_markdown(stats)
    atomic_write_json(folder / "stats.json", stats)
    atomic_write_text(folder / "stats.md", markdown + "\n")
    plots = [] if args.no_plots else stats_plots(stats, folder)
    if quiet:
        return 0
    if args.format == "json":
        print_json(stats)
    else:
        out_console.print(markdown, markup=False)
    console.print(f"wrote {folder / 'stats.json'}, stats.md" + "".join(f", {p.name}" for p in plots), markup=False)
    return 0


def run_provenance(args: argparse.Namespace) -> int:
    from .._util.atomic import atomic_write_json, atomic_write_text
    from ..corpus.provenance import load_labels, provenance
    from ..corpus.render import provenance_markdown

    labels = load_labels(args.labels, key=args.key, key_column=args.key_column, label_column=args.label_column)
    for line in labels.problems[:20]:
        console.print(f"skipped label row: {line}", markup=False, highlight=False, soft_wrap=True)
    result = provenance(
        args.scores,
        labels,
        key=args.key,
        order=args.order.split(",") if args.order else None,
        threshold=args.threshold,
        min_docs=args.min_docs,
        n_boot=args.n_bootstrap,
    )
    folder = Path(args.prov_out) if args.prov_out else Path(args.scores) / "provenance"
    markdown = provenance_markdown(result)
    stem = Path(args.labels).stem
    atomic_write_json(folder / f"{stem}.json", result)
    atomic_write_text(folder / f"{stem}.md", markdown + "\n")
    if args.format == "json":
        print_json(result)
    else:
        out_console.print(markdown, markup=False)
    return 0


def run_overlap(args: argparse.Namespace) -> int:
    from .._util.atomic import atomic_write_json
    from ..corpus.overlap import OverlapIndex, build_index, query, toxic_split
    from ..errors import PolytoxError
    from ..promptset.readers import CorpusSource

    fields = _fields(args)
    index_dir = Path(args.index)
    if (index_dir / "meta.json").exists():
        index = OverlapIndex.load(index_dir)
        if args.a and index.meta["source"] != args.a:
            console.print(f"note: reusing the index of {index.meta['source']} in {index_dir}", markup=False)
    elif args.a:
        index = build_index(CorpusSource(paths=(args.a,)), fields, index_dir)
    else:
        raise PolytoxError(f"no index in {index_dir}: give corpus A to build it")
    result = query(
        index,
        CorpusSource(paths=(args.b,)),
        fields,
        args.out,
        check_sample=args.check_sample,
        seed=args.seed,
        executor=_executor(args),
    )
    if args.scores_b:
        result["toxicity"] = toxic_split(args.out, args.scores_b)
    atomic_write_json(Path(args.out) / "overlap.json", result)
    if args.json:
        print_json(result)
    else:
        chk = result.get("check", {})
        out_console.print(
            json.dumps({k: result[k] for k in ("overlap", "overlap_share", "counts")}, indent=1)
            + (
                f"\nexact check on {chk['sample']} sampled B documents: recall {chk['recall']}, "
                f"exact share {chk['exact_share']:.4f} {chk['exact_share_ci']}"
                if chk
                else ""
            ),
            markup=False,
        )
    return 0
