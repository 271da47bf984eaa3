"""`make bench`: every benchmark module in this folder, each timing nsroof against a baseline run in the
same process, printing ratios (never absolute pass/fail timings inside unit tests)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    sys.path.insert(0, str(HERE))
    names = sorted(p.stem for p in HERE.glob("bench_*.py"))
    only = sys.argv[1:]
    failed = 0
    for name in names:
        if only and not any(o in name for o in only):
            continue
        print(f"== {name}", flush=True)
        module = importlib.import_module(name)
        ok = module.main()
        failed += 0 if ok in (None, 0, True) else 1
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
