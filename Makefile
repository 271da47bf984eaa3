# nsroof developer tasks. A fresh clone needs `make demo` and `make test`: each creates the
# environment, or refreshes it when pyproject.toml or setup.py is newer than its stamp.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.stamp
BENCH_STAMP := $(VENV)/.bench-stamp
# torch is pinned: any other spec pulls a multi-GB CUDA build on this kind of machine.
TORCH_SPEC := torch==2.13.0

.PHONY: setup test lint bench demo gpu-check clean fuzz same-outputs

setup: $(STAMP)

# the stamp is written last, so an install that fails part-way is redone by the next make
$(STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)" -e ".[dev,torch,plot,ncu-rep,dask]"
	touch $@

# pytest exits 5 when it collects no test: make fails then too, so an empty run is never green.
# -n auto: pytest-xdist, one worker per CPU (at most 4, tests/conftest.py); --dist loadfile keeps each test
# module on one worker, so a module's fixtures run once
test: $(STAMP)
	$(PY) -m pytest -q -n auto --dist loadfile

lint: $(STAMP)
	$(PY) -m ruff check nsroof tests
	$(PY) -m mypy nsroof

# the bench extra (HTA, the trace benchmark's peer) on top of the environment; torch stays pinned
$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install -q "$(TORCH_SPEC)" -e ".[bench]"
	touch $@

bench: $(BENCH_STAMP)
	$(PY) benchmarks/run.py

# the importer fuzz harness (tests/fuzz): FUZZ_COUNT cases of seed FUZZ_SEED, over ../shared/fixtures when present
FUZZ_COUNT ?= 10000
FUZZ_SEED ?= 1
FUZZ_JOBS ?= 1
fuzz: $(STAMP)
	$(PY) -m tests.fuzz --count $(FUZZ_COUNT) --seed $(FUZZ_SEED) --jobs $(FUZZ_JOBS)

demo: $(STAMP)
	$(PY) -m nsroof demo

# on a GPU machine as it is: its python3 (PYTHON=… picks another), no venv, nsroof run from this tree; outputs
# in $$OUT. GPU_CHECK_FAKE=1 runs the same steps on a CPU machine (simulated device, stand-in ncu).
gpu-check:
	bash scripts/gpu_check.sh

# a refactor changes no output: every input the repo and ../shared/fixtures hold (exports, traces, files nsroof
# refuses, input-free commands) through nsroof's public API and CLI, by the tree at BEFORE (a git revision,
# checked out into a temporary worktree) and by this working tree; prints each output that differs and fails
# on any. BEFORE defaults to origin/main when the clone has it, else HEAD~1.
BEFORE ?= $(shell git rev-parse --verify -q origin/main >/dev/null && echo origin/main || echo HEAD~1)
same-outputs: $(STAMP)
	$(PY) scripts/same_outputs.py --before $(BEFORE)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
