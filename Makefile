# Two commands for a fresh clone: `make gate` (the fairness gate) and `make test` (the project's tests).
# Both set up .venv on first use, from requirements.lock: exactly the locked versions, hashes checked
# (docs/lock.md). pyproject.toml keeps ranges for users; `make lock` re-resolves the lock from it.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
LOCKED := $(VENV)/.locked
STAMP := $(VENV)/.installed
UV_VERSION := 0.13.9
export HF_HUB_OFFLINE ?= 1
# pytest's exit status passes through unchanged; exit 5 (no test collected) is said in words too.
NO_TESTS = { rc=$$?; [ $$rc -ne 5 ] || echo "make: pytest collected no tests (exit 5): nothing was checked" >&2; exit $$rc; }

.PHONY: install gate test test-latest lock lock-upgrade bench gpu clean-cache

# The locked environment: a new venv (--clear: nothing left from an earlier lock), every package at its
# pinned version with its sha256 checked; pip refuses a lock that is incomplete for this Python.
$(LOCKED): requirements.lock
	$(PYTHON) -m venv --clear $(VENV)
	$(PY) -m pip install --quiet --require-hashes -r requirements.lock
	touch $(LOCKED)

# The project itself, editable, without dependencies (they are the lock's) and built with the locked setuptools.
$(STAMP): $(LOCKED) pyproject.toml
	$(PY) tools/lock.py verify
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	$(PY) -m pip freeze --all > $(VENV)/freeze.txt
	$(PY) tools/lock.py check-freeze $(VENV)/freeze.txt
	touch $(STAMP)

install: $(STAMP)

# The main job: every fairness gate on the built-in tiny smoke model, against thresholds/tiny.yaml.
gate: $(STAMP)
	$(PY) -m pytest fairness_tests $(ARGS) || $(NO_TESTS)

# The project's own tests (metrics, cache, plugin through pytester, adapters), docstring examples, and the
# architecture contracts of pyproject.toml (import-linter).
test: $(STAMP)
	$(VENV)/bin/lint-imports
	$(PY) -m pytest tests plugin/t2i_fairness --doctest-modules $(ARGS) || $(NO_TESTS)

# Not in CI: the tests in a separate venv (.venv-latest) against the newest releases inside pyproject's
# ranges, so drift is seen before it is locked. It first lists how the newest releases differ from the lock.
test-latest:
	$(PYTHON) -m venv --clear .venv-latest
	.venv-latest/bin/python -m pip install --quiet --upgrade pip
	.venv-latest/bin/python -m pip install --quiet --upgrade --upgrade-strategy eager -e '.[dev,ray]'
	.venv-latest/bin/python -m pip freeze --all > .venv-latest/freeze.txt
	-.venv-latest/bin/python tools/lock.py check-freeze .venv-latest/freeze.txt
	.venv-latest/bin/lint-imports
	.venv-latest/bin/python -m pytest tests plugin/t2i_fairness --doctest-modules $(ARGS) || $(NO_TESTS)

# Re-resolve requirements.lock from pyproject.toml (uv pip compile --universal, hashes), keeping today's
# pins where they still fit; `make lock-upgrade` takes the newest releases. uv lives in .venv-lock.
.venv-lock/bin/uv:
	$(PYTHON) -m venv --clear .venv-lock
	.venv-lock/bin/python -m pip install --quiet uv==$(UV_VERSION)

lock: .venv-lock/bin/uv
	.venv-lock/bin/python tools/lock.py compile

lock-upgrade: .venv-lock/bin/uv
	.venv-lock/bin/python tools/lock.py compile --upgrade

# Benchmarks (not part of `make test`): each prints ratios measured side by side in one run.
# `--quick` keeps each under 3 minutes on 2 CPU cores; run a script without it for the full sizes.
bench: $(STAMP)
	$(PY) bench/bench_manifold.py --quick
	$(PY) bench/bench_generation.py --quick
	$(PY) bench/bench_suite.py --quick
	$(PY) bench/bench_features.py --quick
	$(PY) bench/bench_distributed.py --quick
	$(PY) bench/bench_gate_kinds.py --quick
	$(PY) bench/bench_precision.py --images 16
	$(PY) bench/bench_sequential.py --runs 200
	$(PY) bench/bench_futility.py --quick

# Rewrite the options table of docs/options.md from the Option records (tests/test_docs.py fails while it is stale).
.PHONY: docs
docs: $(STAMP) ; $(PY) -m t2i_fairness.cli options --write docs/options.md

# The GPU lane (docs/gpu.md): every adapter at its CUDA precision, the real-model command on sd15-random /
# paper-random, the generation bench and the tiny suite on CUDA. Without CUDA every test skips, saying why.
gpu: $(STAMP)
	$(PY) -m pytest tests/test_gpu_lane.py -m gpu -rs $(ARGS)

clean-cache:
	rm -rf .t2i-cache t2i-artifacts
