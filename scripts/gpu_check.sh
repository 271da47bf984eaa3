#!/usr/bin/env bash
# `make gpu-check`: everything nsroof can only prove on a GPU, in one call of under 8 minutes:
#   1. every GPU-marked test (pytest -m gpu), capped at 120 s;
#   2. `nsroof profile` of the shipped example (nsroof/examples/train_tiny.py on CUDA), capped at 60 s;
#   3. `nsroof ncu` of the same example when Nsight Compute is there (NSROOF_NCU or ncu on PATH), 120 s;
#   4. `nsroof measure --quick --device cuda`, capped at 150 s;
# then writes what it saw (device, date, each step's status and numbers) as a new entry at the top of
# docs/measurements.md's "GPU runs", and copies it to $OUT. Needs a CUDA build of torch. Outputs go to $OUT
# when set (the lent device machine returns it), otherwise to a fresh temporary folder.
set -uo pipefail
cd "$(dirname "$0")/.."

PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ] && .venv/bin/python -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    PY=.venv/bin/python
  else
    PY=python3  # e.g. a GPU image whose python3 carries a CUDA torch
  fi
fi
DEST="${OUT:-$(mktemp -d -t nsroof-gpu-check.XXXXXX)}"
mkdir -p "$DEST"

if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "gpu-check: $PY's torch sees no CUDA device; nothing to check" >&2
  exit 2
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
STEPS="$DEST/steps.tsv"
: >"$STEPS"

step() {  # step NAME SECONDS CMD...: run capped, log to $DEST/NAME.txt, record "name rc seconds"
  local name=$1 cap=$2; shift 2
  local t0; t0=$(date +%s)
  timeout "$cap" "$@" >"$DEST/$name.txt" 2>&1
  local rc=$?
  printf '%s\t%s\t%s\n' "$name" "$rc" "$(($(date +%s) - t0))" >>"$STEPS"
  echo "gpu-check: $name rc=$rc in $(($(date +%s) - t0)) s" >&2
}

step pytest 120 "$PY" -m pytest -q -m gpu tests -p no:cacheprovider
step profile 60 "$PY" -m nsroof profile --warmup 1 --steps 2 -o "$DEST/profile.parquet" -- \
  python -m nsroof.examples.train_tiny --steps 4 --device cuda
NCU="${NSROOF_NCU:-$(command -v ncu || true)}"
if [ -n "$NCU" ]; then
  NSROOF_NCU="$NCU" step ncu 120 "$PY" -m nsroof ncu --set minimal -o "$DEST/ncu" -- \
    "$PY" -m nsroof.examples.train_tiny --steps 1 --device cuda
else
  printf 'ncu\tskipped\t0\n' >>"$STEPS"
fi
step measure 150 "$PY" -m nsroof measure --quick --device cuda -o "$DEST/machine.json" --csv "$DEST/points.csv"

"$PY" scripts/gpu_check_report.py "$DEST" docs/measurements.md
cp docs/measurements.md "$DEST/measurements.md"
echo "files: $DEST"
! grep -qvP '\t(0|skipped)\t' "$STEPS"
