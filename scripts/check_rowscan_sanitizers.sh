#!/usr/bin/env bash
# The compiled splitter (nsroof/importers/_rowscan.c) under AddressSanitizer and UndefinedBehaviorSanitizer:
# built into a copy of the package and its tests in a temporary folder (the installed extension is left alone),
# then the tests that drive it — fixtures (../shared too), edge rows and hypothesis mixes — run there; any report
# stops the run. Needs gcc with libasan/libubsan (Debian: gcc). Usage: scripts/check_rowscan_sanitizers.sh
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
PY=${PY:-$repo/.venv/bin/python}
PY="$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")"  # absolute, the venv's own (not the symlink's target)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$repo/nsroof" "$repo/tests" "$repo/pyproject.toml" "$tmp/"
rm -f "$tmp"/nsroof/importers/_rowscan*.so
include=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
suffix=$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
gcc -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fPIC -shared -I"$include" \
    "$repo/nsroof/importers/_rowscan.c" -o "$tmp/nsroof/importers/_rowscan$suffix"
cd "$tmp"
export NSROOF_SHARED_FIXTURES=${NSROOF_SHARED_FIXTURES:-$(dirname "$repo")/shared/fixtures}
export LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
"$PY" -c 'import nsroof.importers._rowscan as r; print("sanitized build:", r.__file__)' | grep "$tmp" \
    || { echo "the sanitized build was not the one imported" >&2; exit 1; }
# -s: a sanitizer report goes to stderr, which pytest would otherwise capture and lose when the process stops
"$PY" -m pytest -q -s -p no:cacheprovider \
    tests/importers/ncu/csv_export/test_ncu_csv_scan.py tests/importers/ncu/csv_export/test_ncu_csv_tails.py tests/importers/ncu/csv_export/test_ncu_csv_readers.py
