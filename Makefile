# Two commands for a fresh clone: `make gate` (the fairness gate) and `make test` (the project's tests).
# Both set up .venv on first use. torch/torchvision are pinned: these builds import together on
# the project's machines (CPU-only here; the same wheels run on CUDA machines).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TORCH_PINS := torch==2.14.1 torchvision==0.29.1
export HF_HUB_OFFLINE ?= 1

.PHONY: install gate test bench gpu clean-cache

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(TORCH_PINS)
	$(PY) -m pip install --quiet -e '.[dev,ray]' $(TORCH_PINS)
	touch $(STAMP)

install: $(STAMP)

# The main job: every fairness gate on the built-in tiny smoke model, against thresholds/tiny.yaml.
gate: $(STAMP)
	$(PY) -m pytest fairness_tests $(ARGS)

# The project's own tests (metrics, cache, plugin through pytester, adapters), docstring examples, and the
# architecture contracts of pyproject.toml (import-linter).
test: $(STAMP)
	$(VENV)/bin/lint-imports
	$(PY) -m pytest tests plugin/t2i_fairness --doctest-modules $(ARGS)

# Benchmarks (not part of `make test`): each prints ratios measured side by side in one run.
# `--quick` keeps each under 3 minutes on 2 CPU cores; run a script without it for the full sizes.
bench: $(STAMP)
	$(PY) bench/bench_manifold.py --quick
	$(PY) bench/bench_generation.py --quick
	$(PY) bench/bench_suite.py --quick
	$(PY) bench/bench_features.py --quick
	$(PY) bench/bench_distributed.py --quick

# Rewrite the options table of docs/options.md from the Option records (tests/test_docs.py fails while it is stale).
.PHONY: docs
docs: $(STAMP) ; $(PY) -m t2i_fairness.cli options --write docs/options.md

# The GPU lane (docs/gpu.md): every adapter at its CUDA precision, the real-model command on sd15-random /
# paper-random, the generation bench and the tiny suite on CUDA. Without CUDA every test skips, saying why.
gpu: $(STAMP)
	$(PY) -m pytest tests/test_gpu_lane.py -m gpu -rs $(ARGS)

clean-cache:
	rm -rf .t2i-cache t2i-artifacts
