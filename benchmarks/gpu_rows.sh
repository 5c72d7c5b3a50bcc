#!/usr/bin/env bash
# The GPU rows of docs/scale.md ("On a GPU"): every transformers-based method at RTP and PTP-like settings,
# first pass and steady state, on a random 1B Llama-shaped model. Results go to ${OUT:-.}/ (log + JSON lines).
# Usage: benchmarks/gpu_rows.sh [rtp128|ptp32|rtp1024|issue48|sampling|sdpa|profile ...]   (default: rtp128 ptp32)
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
    profile) bench --cases rtp:128 --variants "" --skip hf-batched,hf-static,hf-naive --profile-dir "$out" ;;
  esac
done
