#!/usr/bin/env bash
# `make gpu-check`: everything nsroof can only prove on a GPU, in one call of at most 8 minutes, on a GPU
# machine as it is: its own python3 (PYTHON overrides; no venv, nothing installed: nsroof runs from this
# tree through PYTHONPATH, so its python needs torch with CUDA, click, pandas, pyarrow and pytest), no
# package registry. Steps, each capped by its budget (printed as it starts):
#   1. pytest   every GPU-marked test (pytest -m gpu, in the files that have one); the speed    110 s
#               figures they record against their targets go to the report, never fail a step
#   2. measure  `nsroof measure --quick --device cuda --budget 60` (before ncu: a killed ncu      140 s
#               cannot leave clocks locked for it; its profile is cached and read by the next steps)
#   3. profile  `nsroof profile` of nsroof/examples/train_tiny.py on CUDA                          50 s
#   4. ncu      `nsroof ncu --clock-control none -c 120` of the same example: one step after     120 s
#               warm-up (the clocks are left alone: never lock them on a shared machine)
#   5. nsys     `nsroof nsys` of the same example, one step after warm-up: only where nsys is     40 s
#               there (NSROOF_NSYS or nsys on PATH; never in GPU_CHECK_FAKE): the timeline's kernels,
#               NVTX paths and emit_nvtx ops of a real capture
#   6. report   the summary and the docs/measurements.md entry                                     15 s
# Fails loudly (exit 2, before any step) without torch, without a CUDA device or without ncu
# (NSROOF_NCU or ncu on PATH); exit 1 when a step fails. $OUT (a fresh temporary folder when unset) gets
# 7 files (8 with nsys.parquet where nsys ran): summary.txt, measurements-entry.md (to commit:
# scripts/gpu_check_report.py --insert measurements-entry.md docs/measurements.md), machine.json, points.csv,
# profile.parquet, ncu.parquet, logs.txt; everything else stays in a scratch folder.
#
# GPU_CHECK_FAKE=1 runs the same control flow on a CPU machine: measure on a simulated CUDA device
# (scripts/gpu_check_fake/sitecustomize.py), ncu as a stand-in (scripts/gpu_check_fake/ncu), the example
# on the CPU; its entry says it is simulated. tests/collectors/test_gpu_check.py runs it.
set -uo pipefail
cd "$(dirname "$0")/.."

PY="${PYTHON:-python3}"
FAKE="${GPU_CHECK_FAKE:-}"
DEST="${OUT:-$(mktemp -d -t nsroof-gpu-check.XXXXXX)}"
WORK="$(mktemp -d -t nsroof-gpu-work.XXXXXX)"
TOTAL_S=480
START=$(date +%s)
mkdir -p "$DEST"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export NSROOF_CACHE_DIR="$WORK/cache" PYTHONUNBUFFERED=1
# the GPU tests record their speed figures here (never pass/fail); the report prints them
export NSROOF_SPEED_RECORD="$WORK/speed.jsonl"

die() {
  echo "gpu-check: FAILED before any step: $*" >&2
  printf 'gpu-check FAILED before any step: %s\n' "$*" >"$DEST/summary.txt"
  exit 2
}

"$PY" -c 'import torch' 2>/dev/null || die "$PY has no torch (it needs a CUDA build of torch)"
"$PY" -c 'import click, pandas, pyarrow, pytest' 2>/dev/null || die "$PY lacks click, pandas, pyarrow or pytest"
if [ -n "$FAKE" ]; then
  DEVICE=cpu
  export NSROOF_NCU="$PWD/scripts/gpu_check_fake/ncu"
  MEASURE_ENV=(env "PYTHONPATH=$PWD/scripts/gpu_check_fake:$PYTHONPATH" GPU_CHECK_FAKE_CUDA=1)
  MEASURE_EXTRA=(--budget 2 --threads 1)
  # not the CPU's roofline, which would be measured first (a minute); one recorded step of 3: on the CPU
  # a step is thousands of rows to analyze, and the control flow is the same for one as for two
  PROFILE_EXTRA=(--machine h100-sxm --warmup 1 --steps 1)
  PROFILE_APP_STEPS=3
  echo "gpu-check: GPU_CHECK_FAKE=1: simulated device, stand-in ncu, the example on the CPU" >&2
else
  DEVICE=cuda
  MEASURE_ENV=()
  MEASURE_EXTRA=(--budget 60)
  PROFILE_EXTRA=(--warmup 1 --steps 2)
  PROFILE_APP_STEPS=4
  "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' \
    || die "$PY's torch sees no CUDA device; nothing to check"
  NCU="${NSROOF_NCU:-$(command -v ncu || true)}"
  [ -n "$NCU" ] && [ -x "$NCU" ] || die "ncu (Nsight Compute) not found: set NSROOF_NCU or put ncu on PATH"
  export NSROOF_NCU="$NCU"
  NSYS="${NSROOF_NSYS:-$(command -v nsys || true)}"
fi
NSYS="${NSYS:-}"
TOTAL_STEPS=$([ -n "$NSYS" ] && echo 6 || echo 5)
STEPS="$WORK/steps.tsv"
: >"$STEPS"
echo "gpu-check: budget ${TOTAL_S} s: pytest 110, measure 140, profile 50, ncu 120,${NSYS:+ nsys 40,} report 15;" \
  "outputs in $DEST" >&2

N=0
step() {  # step NAME SECONDS CMD...: run capped, log to $WORK/NAME.txt, record "name rc seconds budget"
  local name=$1 cap=$2; shift 2
  N=$((N + 1))
  local t0; t0=$(date +%s)
  echo "gpu-check: [$N/$TOTAL_STEPS] $name: budget $cap s ($((t0 - START)) s of $TOTAL_S used)" >&2
  timeout --kill-after=10 "$cap" "$@" >"$WORK/$name.txt" 2>&1
  local rc=$?
  [ "$rc" -eq 124 ] && echo "gpu-check: $name ran past its $cap s budget (stopped)" >>"$WORK/$name.txt"
  printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$(($(date +%s) - t0))" "$cap" >>"$STEPS"
  echo "gpu-check: $name rc=$rc in $(($(date +%s) - t0)) s" >&2
}

mapfile -t GPU_TESTS < <(grep -rlE 'pytest\.mark\.gpu' tests --include='test_*.py' | sort)
step pytest 110 "$PY" -m pytest -q -m gpu -p no:cacheprovider "${GPU_TESTS[@]}"
step measure 140 ${MEASURE_ENV[@]+"${MEASURE_ENV[@]}"} "$PY" -m nsroof measure --quick --device cuda ${MEASURE_EXTRA[@]+"${MEASURE_EXTRA[@]}"} \
  -o "$WORK/machine.json" --csv "$WORK/points.csv"
step profile 50 "$PY" -m nsroof profile "${PROFILE_EXTRA[@]}" -o "$WORK/profile.parquet" -- \
  "$PY" -m nsroof.examples.train_tiny --steps "$PROFILE_APP_STEPS" --device "$DEVICE"
step ncu 120 "$PY" -m nsroof ncu --clock-control none -c 120 -o "$WORK/ncu" -- \
  "$PY" -m nsroof.examples.train_tiny --steps 3 --device "$DEVICE"
if [ -n "$NSYS" ]; then
  step nsys 40 env "NSROOF_NSYS=$NSYS" "$PY" -m nsroof nsys -o "$WORK/nsys" -- \
    "$PY" -m nsroof.examples.train_tiny --steps 3 --device "$DEVICE"
fi
N=$((N + 1))
echo "gpu-check: [$N/$TOTAL_STEPS] report: budget 15 s ($(($(date +%s) - START)) s of $TOTAL_S used)" >&2
timeout 15 "$PY" scripts/gpu_check_report.py "$WORK" "$DEST" ${FAKE:+--fake} --elapsed "$(($(date +%s) - START))" \
  || echo "gpu-check: the report step failed" >&2
rm -rf "$WORK"
echo "gpu-check: $(ls "$DEST" | wc -l) files in $DEST, $(($(date +%s) - START)) s in all" >&2
if grep -q 'PASSED' "$DEST/summary.txt" 2>/dev/null; then
  echo "gpu-check: PASSED" >&2
  exit 0
fi
echo "gpu-check: FAILED (see $DEST/summary.txt)" >&2
exit 1
