"""Linear time on hostile input (issue 15): a raw-page export holding a million blank lines (2 MB of
`" \\n"`) read in about the time of a raw-page export of 2 MB of real rows.

Both exports are generated from the repo's tests/data/spine/tiny_raw.csv: the rows one holds its
launches repeated under new IDs up to 2 MB; the blank one holds the two launches with a million
whitespace-only lines between them (before the fix each took pyarrow's invalid-row path: > 10 s).
Each read (nsroof.importers.read) runs in a fresh subprocess, alternating, best of --repeat.
Target: blank-lines time <= 2 x rows time.

    python benchmarks/bench_hostile.py [--repeat R]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import package_bytecode, target

REPO = Path(__file__).resolve().parents[1]
TARGET = 2.0
BLANK_LINES = 1_000_000
ROWS_BYTES = 2 << 20

_CHILD = r"""
import json, sys, time
import nsroof.importers
t = time.perf_counter()
kernels, facts = nsroof.importers.read(sys.argv[1])
print(json.dumps({"seconds": time.perf_counter() - t, "kernels": len(kernels)}))
"""


def generate(folder: Path) -> tuple[Path, Path]:
    lines = (REPO / "tests" / "data" / "spine" / "tiny_raw.csv").read_bytes().split(b"\n")
    head, launches = lines[:4], [ln for ln in lines[4:] if ln]
    rows: list[bytes] = []
    size, kid = 0, 0
    while size < ROWS_BYTES:
        for launch in launches:
            row = b'"' + str(kid).encode() + launch[launch.index(b'",'):]
            rows.append(row)
            size += len(row) + 1
            kid += 1
    dense = folder / "rows_2mb.csv"
    dense.write_bytes(b"\n".join(head + rows) + b"\n")
    blank = folder / "blank_lines.csv"
    blank.write_bytes(b"\n".join(head + launches[:1] + [b" "] * BLANK_LINES + launches[1:]) + b"\n")
    return dense, blank


def _run(path: Path) -> dict[str, float]:
    package_bytecode()
    out = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, cwd=REPO,
                         check=True)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> bool:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv if argv is not None else [])
    with tempfile.TemporaryDirectory(prefix="nsroof-bench-hostile-") as tmp:
        dense, blank = generate(Path(tmp))
        print(f"rows: {dense.stat().st_size / 1e6:.1f} MB; blank: {blank.stat().st_size / 1e6:.1f} MB "
              f"({BLANK_LINES:,} whitespace-only lines between two launches)", flush=True)
        dense_runs, blank_runs = [], []
        for _ in range(args.repeat):
            dense_runs.append(_run(dense))
            blank_runs.append(_run(blank))
    d = min(r["seconds"] for r in dense_runs)
    b = min(r["seconds"] for r in blank_runs)
    ratio = b / d
    print(f"read 2 MB of rows: {d:.3f} s ({int(dense_runs[0]['kernels'])} launches); "
          f"read 1M blank lines: {b:.3f} s (best of {args.repeat} each)")
    return target("1M blank lines vs 2 MB of rows (raw page)", ratio, TARGET, at_least=False,
                  what="blank time / rows time", detail=f"{b:.3f} s vs {d:.3f} s")


if __name__ == "__main__":
    raise SystemExit(0 if main(sys.argv[1:]) else 1)
