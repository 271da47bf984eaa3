"""`make bench`: every benchmark module in this folder, each timing nsroof against a peer or baseline run
in the same command, then one table of every target: the measured ratio, its target, PASS/FAIL/SKIP
(never absolute pass/fail timings inside unit tests).

Each module runs in its own interpreter: one benchmark's imports (torch) and threads must not skew
another's timings. The modules record their targets (benchmarks/_common.py: target) in a file this
runner names in NSROOF_BENCH_RESULTS. Exit code 1 when a target failed or a module broke.

    python benchmarks/run.py [NAME ...]     # only the modules whose name contains one of NAMEs
Sizes: NSROOF_BENCH_TRACE_COPIES, NSROOF_BENCH_TRACE_BIG_COPIES, NSROOF_BENCH_ANALYZE_MB, ... (each
module's docstring lists its own).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import RESULTS_ENV, table  # noqa: E402

_CHILD = "import sys, {name} as m; r = m.main(); sys.exit(0 if r in (None, 0, True) else 1)"


def run_filtered(argv: list[str], env: dict[str, str]) -> int:
    """A child process whose stderr is passed on without kineto's `USDT: … profiler_start/stop` lines (two per
    profiler session, from C++: hundreds in the overhead bench), filtered here, outside the process being
    timed. Returns its exit code."""
    from nsroof.collectors.script import KINETO_NOISE

    child = subprocess.Popen(argv, cwd=HERE, env=env, stderr=subprocess.PIPE)
    assert child.stderr is not None
    for line in child.stderr:
        if not KINETO_NOISE.match(line):
            sys.stderr.buffer.write(line)
            sys.stderr.buffer.flush()
    return child.wait()


def main() -> int:
    names = sorted(p.stem for p in HERE.glob("bench_*.py"))
    only = sys.argv[1:]
    broken = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="nsroof-bench-results-") as tmp:
        sink = Path(tmp) / "targets.jsonl"
        sink.touch()
        for name in names:
            if only and not any(o in name for o in only):
                continue
            print(f"== {name}", flush=True)
            rc = run_filtered([sys.executable, "-c", _CHILD.format(name=name)], {**os.environ, RESULTS_ENV: str(sink)})
            if rc:
                broken.append(name)
        rows = [json.loads(line) for line in sink.read_text(encoding="utf-8").splitlines() if line.strip()]
    print(f"\n== targets ({time.perf_counter() - t0:.0f} s in all)")
    print(table(rows))
    failed = [r for r in rows if r["status"] == "FAIL"]
    print(f"{len(rows) - len(failed)} of {len(rows)} targets met or skipped"
          + (f"; modules that exited non-zero (a missed target or an error): {', '.join(broken)}" if broken else ""))
    return 1 if failed or broken else 0


if __name__ == "__main__":
    raise SystemExit(main())
