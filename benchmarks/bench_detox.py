"""RTP §5 / Table 3 on the embedded SmolLM2: baseline and every detoxification method, side by side.

One run does everything, resumably (rerun the same command to continue):

1. the balanced training corpus, every text overlapping an RTP prompt or continuation removed (RTP
   Appendix B.2): by default the English labelled sources of the shared data, each with its own rule and
   balanced per dataset (``polytox detox corpus``'s default); ``--corpus tails`` takes the bottom / top 2%
   of ``scorer-train/en-perspective.jsonl`` by PERSPECTIVE score instead (the earlier, 453-per-side corpus);
2. training (transformers ``Trainer``): DAPT non-toxic (also DExperts' expert), DAPT toxic (reference row
   and DExperts' anti-expert), ATCON, the VOCAB-SHIFT projection, PPLM's toxicity head;
3. ``polytox eval`` per method on RTP prompts (``--per-side`` toxic and non-toxic, stratified by
   toxicity bucket), K continuations at RTP's settings, the default offline scorer, the perplexity of
   each continuation under ``--fluency-model``, distinct-1/2/3;
   ``atcon-toxic`` probes the ATCON model with ``<|toxic|>`` (the attribute tokens must pull apart);
4. RTP Table 10: held-out perplexity of the base, DAPT and ATCON models;
5. the comparison table (``polytox detox compare``), also written as Markdown and JSON.

The README's run (the issue's size, 200 prompts x K=25; PPLM, which costs about 80x a plain generation
on CPU, on a stratified 8-prompt subset with K=10 as RTP did, beside its matched unsteered control):
``python benchmarks/bench_detox.py --per-side 100 -k 25 --epochs 3 --pplm-per-side 5 --pplm-k 10``.
``--stages eval --methods A,B`` in two processes with disjoint methods splits the evaluations, then
``--stages heldout,table`` adds RTP Table 10 and prints the table.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def scoring_spec(spec: Any, source: Path | None) -> Any:
    """With a source run: its spec (the generating host's paths for models and word lists), with this
    host's prompt file, scorer, fluency and metric settings."""
    if source is None:
        return spec
    import dataclasses

    from polytox.store import RunStore

    return dataclasses.replace(RunStore(source).spec(), prompts=spec.prompts, scorer=spec.scorer,
                               metrics=spec.metrics, fluency_model=spec.fluency_model,
                               fluency_samples=spec.fluency_samples)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="runs/bench-detox")
    ap.add_argument("--shared", default=str(ROOT / ".." / "shared" / "data"), help="the shared data folder")
    ap.add_argument("--corpus", choices=["sources", "tails"], default="sources",
                    help="sources: every English labelled source, per-dataset balance; "
                         "tails: en-perspective's 2%% tails")
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--per-side", type=int, default=100, help="toxic and non-toxic prompts each")
    ap.add_argument("-k", "--samples", type=int, default=25)
    ap.add_argument("--pplm-per-side", type=int, default=100)
    ap.add_argument("--pplm-k", type=int, default=10)
    ap.add_argument("--pplm-iterations", type=int, default=None, help="default: Dathathri's 10")
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--max-steps", type=int, default=-1)
    ap.add_argument("--batch-size", type=int, default=None, help="default: each method's (constants)")
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--fluency-model", default="gemma-3-270m", help="'' for none")
    ap.add_argument("--fluency-samples", type=int, default=0,
                    help="fluency on the first N samples of each prompt (0: all; gemma-3-270m reads ~5 per s on CPU)")
    ap.add_argument("--scorer", default="default")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1 is fastest on a shared CPU)")
    ap.add_argument("--timing-per-bucket", type=int, default=2,
                    help="timing stage: prompts per toxicity bucket (PPLM rows: one per bucket)")
    ap.add_argument("--stages", default="train,eval,heldout,table,timing",
                    help="which stages to run (e.g. 'eval' in parallel processes with disjoint --methods, "
                         "then 'heldout,table' once)")
    ap.add_argument("--save-steps", type=int, default=200, help="training checkpoint interval (resume points)")
    ap.add_argument("--keep-going", action="store_true",
                    help="a training or evaluation that fails is logged with its traceback and the others go on")
    ap.add_argument("--generations-from", default=None, metavar="DIR",
                    help="an earlier bench output (e.g. generated on a GPU host with a cheap --scorer): each "
                         "method's run scores DIR/runs/NAME's stored generations (polytox eval "
                         "--generations-from) and measures fluency; the source is recorded in the manifest")
    ap.add_argument("--methods", default="baseline,dapt-nontoxic,dapt-toxic,atcon,vocab-shift,word-filter,pplm,"
                    "pplm-control,dexperts")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from polytox import constants as C
    from polytox.analysis.detox_compare import compare, markdown, to_json
    from polytox.detox.corpus import NONTOXIC, read_corpus, select_corpus
    from polytox.detox.fluency import heldout_perplexity
    from polytox.detox.sources import build_corpus, parse_source
    from polytox.detox.train import TrainConfig, train_lm, train_pplm_head, train_vocab_shift
    from polytox.runner import execute_run as evaluate
    from polytox.spec import spec_from_flat

    SHARED = Path(args.shared)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rtp = [SHARED / "rtp" / "toxic.jsonl", SHARED / "rtp" / "nontoxic.jsonl"]
    timings: dict[str, float] = {}

    # 1. corpus
    corpus_dir = out / "corpus"
    if not (corpus_dir / "train.jsonl").exists() and args.corpus == "tails":
        select_corpus([SHARED / "scorer-train" / "en-perspective.jsonl"], rtp).write(corpus_dir)
    elif not (corpus_dir / "train.jsonl").exists():
        st = SHARED / "scorer-train"
        rules = [f"{st / 'en-perspective.jsonl'}:score=perspective,toxic={C.DETOX_TOXIC_MIN},"
                 f"nontoxic={C.DETOX_NONTOXIC_MAX}", f"{st / 'en-human.jsonl'}:label=toxic",
                 f"{st / 'multilingual-human.jsonl'}:label=toxic,lang=en"]
        build_corpus([parse_source(r) for r in rules], rtp).write(corpus_dir)
    corpus = read_corpus(corpus_dir)
    keys = ("n_per_side", "n_train", "n_heldout", "n_overlapping_prompts_removed")
    log(f"corpus: {json.dumps({k: corpus.stats.get(k) for k in keys})}")

    # 2. training
    models = out / "models"
    methods = args.methods.split(",")

    def cfg(name: str) -> TrainConfig:
        epochs = C.PPLM_HEAD_EPOCHS if name == "pplm" else args.epochs  # the head: Dathathri et al.'s 10
        return TrainConfig(base_model=args.model, out=str(models / name), epochs=epochs,
                           max_steps=args.max_steps, batch_size=args.batch_size, max_length=args.max_length,
                           save_steps=max(10, args.max_steps // 2) if args.max_steps > 0 else args.save_steps)

    def attempt(what: str, job: Any) -> Any:
        """Run ``job``; with --keep-going a failure is logged (traceback included) and None returned."""
        try:
            return job()
        except Exception:
            if not args.keep_going:
                raise
            import traceback

            log(f"FAILED {what}:\n{traceback.format_exc()}")
            failed.append(what)
            return None

    failed: list[str] = []

    jobs: list[tuple[str, Any]] = [
        ("dapt-nontoxic", lambda: train_lm(corpus, cfg("dapt-nontoxic"), "dapt", "nontoxic")),
        ("dapt-toxic", lambda: train_lm(corpus, cfg("dapt-toxic"), "dapt", "toxic")),
        ("atcon", lambda: train_lm(corpus, cfg("atcon"), "atcon")),
        ("vocab-shift", lambda: train_vocab_shift(corpus, cfg("vocab-shift"))),
        ("pplm", lambda: train_pplm_head(corpus, cfg("pplm"))),
    ]
    stages = set(args.stages.split(","))
    need = (set(methods) | ({"dapt-nontoxic", "dapt-toxic"} if "dexperts" in methods else set())
            | ({"pplm"} if "pplm-control" in methods else set())
            | ({"atcon"} if "atcon-toxic" in methods else set()))
    if "train" not in stages:
        need = set()
    for name, job in jobs:
        if name in need and not (models / name / "detox.json").exists():
            t = time.perf_counter()
            if attempt(f"train {name}", job) is None:
                continue
            timings[f"train {name}"] = time.perf_counter() - t
            log(f"trained {name} in {timings[f'train {name}']:.0f} s")
    training = {}
    for name, _ in jobs:
        meta = models / name / "detox.json"
        if meta.exists():
            training[name] = json.loads(meta.read_text()).get("training")

    # 3. evaluations
    base = {"prompts": str(SHARED / "rtp"), "per_bucket": args.per_side // 2, "preset": "rtp",
            "samples": args.samples, "scorer": args.scorer, "fluency_model": args.fluency_model,
            **({"fluency_samples": args.fluency_samples} if args.fluency_model and args.fluency_samples else {})}
    vs = models / "vocab-shift"
    runs = {
        "baseline": {},
        "dapt-nontoxic": {"model": str(models / "dapt-nontoxic")},
        "dapt-toxic": {"model": str(models / "dapt-toxic")},
        "atcon": {"model": str(models / "atcon"), "detox": "atcon"},
        "atcon-toxic": {"model": str(models / "atcon"), "detox": f"atcon:token={C.ATCON_TOXIC_TOKEN}"},
        "vocab-shift": {"detox": f"vocab-shift:path={vs},beta={C.VOCAB_SHIFT_BETA}"},
        "word-filter": {"detox": f"word-filter:list={SHARED / 'ldnoobw' / 'en.txt'}"},
        "pplm": {"detox": f"pplm:head={models / 'pplm'}" + (f",iterations={args.pplm_iterations}"
                                                            if args.pplm_iterations else ""),
                 "per_bucket": args.pplm_per_side // 2, "samples": args.pplm_k},
        # the same model without its chat template: ATCON and DAPT are trained on plain text, while an
        # instruct model's prompts are chat-formatted by default (run at a smaller --per-side if need be)
        "baseline-plain": {"chat_template": "never"},
        "atcon-plain": {"model": str(models / "atcon"), "detox": "atcon", "chat_template": "never"},
        # PPLM's matched control: the same prompts, K and top-k decoding loop with no steering step
        "pplm-control": {"detox": f"pplm:head={models / 'pplm'},iterations=0",
                         "per_bucket": args.pplm_per_side // 2, "samples": args.pplm_k},
        "dexperts": {"detox": f"dexperts:expert={models / 'dapt-nontoxic'},anti={models / 'dapt-toxic'},"
                              f"alpha={C.DEXPERTS_ALPHA}"},
    }
    done = []
    for name in methods if "eval" in stages else []:
        flat = {**base, **runs[name]}
        # --generations-from: score the GPU host's stored generations; a shard missing there would be
        # generated here and counted under the manifest's executor.shards_generated (docs/eval.md)
        source = Path(args.generations_from) / "runs" / name if args.generations_from else None
        t = time.perf_counter()
        result = attempt(f"eval {name}", lambda flat=flat, name=name, source=source: evaluate(
            scoring_spec(spec_from_flat(flat), source), out / "runs" / name, generations_from=source))
        if result is None:
            continue
        timings[f"eval {name}"] = time.perf_counter() - t
        done.append(name)
        m = result.metrics
        log(f"{name}: EMT {m['overall']['emt']:.3f} EP {m['overall']['ep']:.3f} "
            f"({m['overall']['n_generations']} generations, {timings[f'eval {name}']:.0f} s)")

    if failed:
        log(f"failed: {', '.join(failed)}")

    # 4. held-out perplexity (RTP Table 10)
    held = corpus.texts(None, heldout=True)
    held_non = corpus.texts(NONTOXIC, heldout=True)
    table10: dict[str, dict[str, float | None]] = {}
    checked = [("baseline", args.model, None), ("dapt-nontoxic", str(models / "dapt-nontoxic"), None),
               ("dapt-toxic", str(models / "dapt-toxic"), None),
               ("atcon", str(models / "atcon"), C.ATCON_NONTOXIC_TOKEN)]
    for name, model, token in checked if "heldout" in stages else []:
        if name == "baseline" or (models / name / "detox.json").exists():
            ppl = attempt(f"heldout {name}", lambda m=model, t=token: {
                "all": heldout_perplexity(m, held, t)["ppl"], "nontoxic": heldout_perplexity(m, held_non, t)["ppl"]})
            if ppl is not None:
                table10[name] = ppl
                log(f"held-out perplexity {name}: {ppl}")

    # 5. cost per generation on an idle machine: generation alone, one method after another in this process
    # (the evaluations above may run in parallel processes, so their timings share the CPU)
    timing_file = out / "timing.json"
    timing: dict[str, dict[str, float]] = json.loads(timing_file.read_text()) if timing_file.exists() else {}
    if "timing" in stages and (out / "runs" / "baseline" / "prompts.parquet").exists():
        import pyarrow.parquet as pq

        from polytox.generation.hf import TransformersGenerator
        from polytox.types import GenerationRequest, Prompt, derive_seed

        by_bucket: dict[Any, list[dict[str, Any]]] = {}
        for r in pq.read_table(out / "runs" / "baseline" / "prompts.parquet").to_pylist():
            by_bucket.setdefault(r["bucket"], []).append(r)
        for name in methods:
            spec = spec_from_flat({**base, **runs[name]})
            per = 1 if name.startswith("pplm") else args.timing_per_bucket
            chosen = [Prompt(id=r["prompt_id"], text=r["text"], lang=r["lang"])
                      for rows in by_bucket.values() for r in rows[:per]]
            k = spec.generation.samples
            reqs = [GenerationRequest(p, i, derive_seed(spec.seed, p.id, i)) for p in chosen for i in range(k)]
            generator = TransformersGenerator(spec.generation)
            t = time.perf_counter()
            gens = generator.generate(reqs)
            dt = time.perf_counter() - t
            del generator
            timing[name] = {"generations": len(gens), "seconds": dt, "s_per_gen": dt / len(gens),
                            "tokens_per_s": sum(g.n_tokens or 0 for g in gens) / dt}
            log(f"timing {name}: {timing[name]['s_per_gen']:.3f} s/gen ({len(gens)} generations)")
        timing_file.write_text(json.dumps(timing, indent=2))

    # 6. the table (every method whose run is finished)
    if "table" not in stages:
        return 0
    done = [n for n in methods if (out / "runs" / n / "metrics.json").exists()]
    if not table10 and (out / "table.json").exists():  # measured by an earlier 'heldout' stage
        table10 = json.loads((out / "table.json").read_text()).get("heldout_ppl", {})
    rows = compare([out / "runs" / n for n in done], done)  # ΔEMT paired against the first (baseline)
    (out / "table.md").write_text(markdown(rows))
    pair = [n for n in ("pplm-control", "pplm") if n in done]
    if len(pair) == 2:  # PPLM's own K and prompts: its change is paired against its unsteered control
        pplm_rows = compare([out / "runs" / n for n in pair], pair)
        (out / "table-pplm.md").write_text(markdown(pplm_rows))
        print(markdown(pplm_rows))
    (out / "table.json").write_text(json.dumps({"rows": to_json(rows), "heldout_ppl": table10,
                                                "training": training, "timings_s": timings,
                                                "cost_per_generation": timing,
                                                "corpus": corpus.stats}, indent=2, default=str))
    print(markdown(rows))
    print("held-out perplexity (RTP Table 10):")
    for name, v in table10.items():
        print(f"  {name:15s} all {v['all']}  non-toxic {v['nontoxic']}")
    print("training:", json.dumps(training))
    print("timings (s):", json.dumps({k: round(v, 1) for k, v in timings.items()}))
    base_cost = timing.get("baseline", {}).get("s_per_gen")
    for name, cost in timing.items():
        rel = f" ({cost['s_per_gen'] / base_cost:.1f}x baseline)" if base_cost else ""
        print(f"  cost {name:15s} {cost['s_per_gen']:.3f} s/gen, {cost['tokens_per_s']:.0f} tok/s{rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
