#!/usr/bin/env bash
# `make gpu-check`: nsroof measure --quick on the CUDA device, then the GPU-marked measure tests, then a
# short table. Needs a CUDA build of torch; runs within 4 minutes on an H100/H200 (each step is capped).
# Outputs (machine.json, points.csv, logs) go to $OUT when set (the lent device machine returns it),
# otherwise to a fresh temporary folder. Record each run in docs/measurements.md.
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

t0=$(date +%s)
timeout 150 "$PY" -m nsroof measure --quick --device cuda -o "$DEST/machine.json" --csv "$DEST/points.csv" \
  >"$DEST/measure.txt" 2>"$DEST/measure.log"
measure_rc=$?
t1=$(date +%s)
timeout 80 "$PY" -m pytest -q -m gpu tests/collectors/test_measure_gpu.py -p no:cacheprovider >"$DEST/pytest.txt" 2>&1
pytest_rc=$?
t2=$(date +%s)

"$PY" - "$DEST/machine.json" <<'PYEOF'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except (OSError, ValueError) as exc:
    print(f"no machine profile: {exc}")
    raise SystemExit(0)
env = d.get("environment", {})
eff = env.get("derived", {}).get("efficiency", {})
print(f"{env.get('device_name')}  CC {env.get('compute_capability')}  {env.get('sm_count')} SMs  "
      f"driver {env.get('driver_version')}  CUDA {env.get('cuda_runtime')}  torch {env.get('torch')}  "
      f"{env.get('measured_at')}")
print(f"{'roof':<28}{'measured':>16}{'datasheet':>14}")
for dtype, v in d.get("peak_flop_per_s", {}).items():
    e = eff.get(f"peak_flop_per_s.{dtype}")
    print(f"{'peak ' + dtype:<28}{v / 1e12:>10.1f} TF/s{(format(e['fraction'], '.0%') if e else '—'):>14}")
for level, v in d.get("bandwidth_bytes_per_s", {}).items():
    e = eff.get(f"bandwidth_bytes_per_s.{level}")
    print(f"{'bandwidth ' + level:<28}{v / 1e12:>10.2f} TB/s{(format(e['fraction'], '.0%') if e else '—'):>14}")
for dtype, why in env.get("not_measured", {}).items():
    print(f"{'peak ' + dtype:<28}  not measured: {why}")
PYEOF
echo "measure: rc=$measure_rc in $((t1 - t0)) s; gpu tests: rc=$pytest_rc in $((t2 - t1)) s — $(tail -1 "$DEST/pytest.txt")"
echo "files: $DEST"
[ "$measure_rc" -eq 0 ] && [ "$pytest_rc" -eq 0 ]
