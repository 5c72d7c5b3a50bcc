"""``polytox eval``: generate K continuations per prompt, score them, report RTP/PTP metrics.

Every flag maps to a spec field; ``--config FILE`` (YAML, same key names) builds the same spec, and flags
given on the command line override it. Rerunning the same command with the same ``--out`` resumes.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..spec import FLAT_KEYS, load_yaml_config, spec_from_flat
from .common import console, metrics_table, out_console, print_json, progress_bar


def register(sub: Any) -> None:
    p = sub.add_parser("eval", help="evaluate a model: generate, score, report metrics (resumable)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="run directory (rerun with the same --out to resume)")
    p.add_argument("--config", help="YAML file of the same keys as the flags (flags override it)")
    p.add_argument("--model", help="model id or path; 'fake' for a dry run; default: the embedded SmolLM2")
    p.add_argument("--backend", help="generation backend (default: inferred from --model)")
    p.add_argument("--model-opt", action="append", metavar="KEY=VALUE", help="backend option (repeatable)")
    p.add_argument("--prompts", help="'demo', a JSONL/CSV/Parquet file or folder, or a HF dataset id")
    p.add_argument("--format", choices=["auto", "rtp", "ptp", "rtplx", "generic"], help="prompt record format")
    p.add_argument("--hf-config", help="HF dataset config, e.g. ptp-en")
    p.add_argument("--hf-split", help="HF dataset split, e.g. small")
    p.add_argument("--limit", type=int, help="use the first N selected prompts")
    p.add_argument("--lang", action="append", help="keep only these languages (repeatable or comma list)")
    p.add_argument("--per-bucket", type=int, help="seeded stratified sample: N prompts per toxicity bucket")
    p.add_argument("--skip-bad", action="store_true", default=None, help="skip (and list) bad input records")
    p.add_argument("--preset", choices=["rtp", "ptp"], help="the paper's exact sampling settings")
    p.add_argument("--samples", "-k", type=int, help="continuations per prompt (K)")
    p.add_argument("--max-new-tokens", type=int)
    p.add_argument("--temperature", type=float)
    p.add_argument("--top-p", type=float)
    p.add_argument("--top-k", type=int)
    p.add_argument("--batch-size", type=int, help="prompts per forward pass (0 = automatic)")
    p.add_argument("--chat-template", choices=["auto", "always", "never"])
    p.add_argument("--device")
    p.add_argument("--dtype")
    p.add_argument("--scorer", help="scorer name (default: 'default', polytox-ml for PTP's 17 languages, "
                   "routed per language)")
    p.add_argument("--scorer-opt", action="append", metavar="KEY=VALUE", help="scorer option (repeatable)")
    p.add_argument("--threshold", type=float, help="toxic threshold (default 0.5)")
    p.add_argument("--comparison", choices=[">=", ">"], help="toxic comparison (default >=; RTP notebooks: >)")
    p.add_argument("--n-bootstrap", type=int, help="bootstrap resamples for the CIs (default 1000)")
    p.add_argument("--seed", type=int)
    p.add_argument("--shard-size", type=int, help="prompts per committed part (the unit redone after a kill)")
    p.add_argument("--json", action="store_true", help="print metrics as JSON instead of a table")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..runner import evaluate

    flat: dict[str, Any] = load_yaml_config(args.config) if args.config else {}
    for key in FLAT_KEYS:
        value = getattr(args, key, None)
        if value is not None:
            flat[key] = value
    spec = spec_from_flat(flat)
    with progress_bar("generate+score", enabled=not args.no_progress) as callback:
        result = evaluate(spec, args.out, progress=callback)
    if result.resumed:
        console.print(f"resumed {result.path}: {result.shards_done_before} shard(s) were already done")
    if result.prompt_set.problems:
        console.print(f"[yellow]skipped {result.prompt_set.n_bad} bad record(s):[/yellow]")
        for line in result.prompt_set.problems[:20]:
            console.print(f"  {line}")
    for note in result.prompt_set.notes:
        console.print(f"[yellow]note:[/yellow] {note}")
    if args.json:
        print_json(result.metrics)
    else:
        title = f"{result.spec.generation.model} · {result.metrics.get('scorer')} · {result.path}"
        out_console.print(metrics_table(result.metrics, title=title))
    return 0
