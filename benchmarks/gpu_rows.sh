#!/usr/bin/env bash
# The GPU rows of docs/decoding.md ("On a GPU"): every transformers-based method at RTP and PTP-like settings,
# first pass and steady state, on a random 1B Llama-shaped model. Results go to ${OUT:-.}/ (log + JSON lines).
# Usage: benchmarks/gpu_rows.sh [rtp128|ptp32|rtp1024|issue48|round5|ablation5|sampling|sdpa|profile ...]
#        (default: rtp128 ptp32)
# ablation5 (about 4 minutes): RTP 1,024 on the same model, the default against each of its round-5 choices undone
# (the fallback test read on the host, the full sort, torch's own SDPA kernel), no HF rows.
# round5: one H200 window of at most 9 minutes, each part under its own timeout (a part cut short keeps what it
# wrote: bench_gpu.py appends every measured part to results.jsonl as it comes), in the order of their weight:
# the sampler and SDPA kernels alone (50 s), RTP 1,024 prompts: the default with a torch-profiler table of its
# steady pass beside HF static + compile (200 s), PTP-like 128 prompts with every method (200 s, one model build
# for both), serve with the default scorer on a random gemma-3-270m-shaped backbone at concurrency 1/8/64 (80 s).
# serve reads RTP prompts from ${RTP_DIR:-.gpu/rtp} (../shared does not travel to a GPU host: copy toxic.jsonl
# and nontoxic.jsonl there, 1.7 MB, and carry .gpu), else from ../shared/data/rtp.
set -o pipefail
out=${OUT:-.}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name(0))" | tee -a "$out/versions.txt"
bench() { python3 benchmarks/bench_gpu.py --skip-vllm --hf-fraction 1 --skip hf-naive --json "$out/results.jsonl" "$@" 2>&1 | grep -v -i warn | tee -a "$out/bench.log"; }
for what in ${@:-rtp128 ptp32}; do
  case $what in
    rtp128) bench --cases rtp:128 --variants ";compile=false;compile=true" ;;
    ptp32) bench --cases ptp:32 --variants ";compile=false;compile=false,read_bucket=0" ;;
    rtp1024) bench --cases rtp:1024 --variants ";compile=true" ;;
    issue48) bench --vocab-size 128256 --logit-scale 5 --cases "$(python3 -c 'import sys; sys.path.insert(0, "benchmarks"); import bench_gpu; print(bench_gpu.ROW_PLAN)')" \
               --variants ";sampler=candidates" ;;  # the default samples by sort on a GPU
    sampling) python3 benchmarks/bench_sampling.py --device cuda --reps 20 2>&1 | tee -a "$out/sampling.log" ;;
    sdpa) python3 benchmarks/bench_sdpa.py 2>&1 | tee -a "$out/sdpa.log" ;;
    round5)
      model=$(mktemp -d)
      big=(--vocab-size 128256 --logit-scale 5 --model-cache "$model")
      timeout 25 python3 benchmarks/bench_sampling.py --device cuda --reps 10 2>&1 | tee -a "$out/sampling.log"
      timeout 25 python3 benchmarks/bench_sdpa.py --reps 30 2>&1 | tee -a "$out/sdpa.log"
      timeout 200 python3 benchmarks/bench_gpu.py --skip-vllm --hf-fraction 1 --json "$out/results.jsonl" "${big[@]}" \
        --cases rtp:1024 --skip hf-naive,hf-batched --profile-dir "$out" 2>&1 | grep -v -i warn | tee -a "$out/bench.log"
      timeout 200 python3 benchmarks/bench_gpu.py --skip-vllm --hf-fraction 1 --json "$out/results.jsonl" "${big[@]}" \
        --cases ptp:128 2>&1 | grep -v -i warn | tee -a "$out/bench.log"
      rtp=${RTP_DIR:-.gpu/rtp}; [ -f "$rtp/toxic.jsonl" ] || rtp=../shared/data/rtp
      timeout 80 python3 benchmarks/bench_serve.py --random-backbone --servers micro --seconds 5 --warmup-seconds 3 \
        --texts 256 --rtp "$rtp" --json "$out/serve.json" 2>&1 | tee -a "$out/serve.log"
      rm -rf "$model" ;;
    ablation5) bench --vocab-size 128256 --logit-scale 5 --cases rtp:1024 --skip hf-naive,hf-batched,hf-static \
                 --variants ";sampler_fallback=host;sampler=sort;attention=torch" ;;
    profile) bench --cases rtp:128 --variants "" --skip hf-batched,hf-static,hf-naive --profile-dir "$out" ;;
  esac
done
