# nsroof developer tasks. A fresh clone needs `make setup` then `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# torch is pinned: any other spec pulls a multi-GB CUDA build on this kind of machine.
TORCH_SPEC := torch==2.13.0

.PHONY: setup test lint bench demo gpu-check clean fuzz

setup:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)" -e ".[dev,torch,plot,ncu-rep,dask]"

test:
	$(PY) -m pytest -q

lint:
	$(PY) -m ruff check nsroof tests
	$(PY) -m mypy nsroof

bench:
	$(PY) benchmarks/run.py

# the importer fuzz harness (tests/fuzz): FUZZ_COUNT cases of seed FUZZ_SEED, over ../shared/fixtures when present
FUZZ_COUNT ?= 10000
FUZZ_SEED ?= 1
FUZZ_JOBS ?= 1
fuzz:
	$(PY) -m tests.fuzz --count $(FUZZ_COUNT) --seed $(FUZZ_SEED) --jobs $(FUZZ_JOBS)

demo:
	$(PY) -m nsroof demo

gpu-check:
	bash scripts/gpu_check.sh

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
