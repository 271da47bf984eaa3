"""`make bench`: every benchmark module in this folder, each timing nsroof against a baseline run in the
same command, printing ratios (never absolute pass/fail timings inside unit tests).

Each module runs in its own interpreter: one benchmark's imports (torch) and threads must not skew
another's timings, and peak RSS (ru_maxrss) survives fork + exec, so a big parent would inflate every
child's figure."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

_CHILD = "import sys, {name} as m; r = m.main(); sys.exit(0 if r in (None, 0, True) else 1)"


def main() -> int:
    names = sorted(p.stem for p in HERE.glob("bench_*.py"))
    only = sys.argv[1:]
    failed = []
    for name in names:
        if only and not any(o in name for o in only):
            continue
        print(f"== {name}", flush=True)
        rc = subprocess.run([sys.executable, "-c", _CHILD.format(name=name)], cwd=HERE).returncode
        if rc:
            failed.append(name)
    if failed:
        print(f"targets missed or errors in: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
