"""Scaling of `analyze_many`: 64 copies of one real export analyzed with -j 1 and -j 2 (ratio), and the
parent's peak RSS with 8 vs 64 inputs (it must not grow with the number of inputs: each worker
writes its own partition and sends back only a small summary).

Every configuration runs in a fresh interpreter so that peak RSS (ru_maxrss of that process alone;
forkserver workers are not its children) and import costs are measured the same way each time.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import package_bytecode

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SHARED = Path(os.environ.get("NSROOF_SHARED_FIXTURES", REPO.parent / "shared" / "fixtures"))
# A real old-layout details export (A100, 10 kernels, ragged rows, 605 kB): parsing dominates the work.
SHARED_EXPORT = SHARED / "csv" / "leleucas__bert_flashattn_nsight.csv"
COPIES = 64

CHILD = r"""
import json, resource, sys, time
from nsroof.dataset import analyze_many
if __name__ == "__main__":
    files, out, jobs = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    t0 = time.perf_counter()
    result = analyze_many(files, out, jobs=jobs)
    wall = time.perf_counter() - t0
    print(json.dumps({"wall_s": wall, "failed": len(result.failures), "ok": len(result.ok),
                      "cpu_s": sum(o.cpu_s for o in result.outcomes),
                      "load": __import__("os").getloadavg()[0],
                      "rows": sum(o.rows for o in result.ok),
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def pick_export() -> Path | None:
    if SHARED_EXPORT.is_file():
        return SHARED_EXPORT
    from nsroof.dataset import discover

    examples = REPO / "nsroof" / "data" / "examples"
    found = discover([examples]).files if examples.is_dir() else []
    return found[0] if found else None


def run(files: list[Path], out: Path, jobs: int) -> dict[str, float]:
    package_bytecode()
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps([str(f) for f in files]), str(out), str(jobs)],
        capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"bench child failed ({proc.returncode}): {proc.stderr[-2000:]}")
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    export = pick_export()
    if export is None:
        print("bench_scaling: no export found (../shared/fixtures absent and nsroof/examples empty) — skipped")
        return 0
    with tempfile.TemporaryDirectory(prefix="nsroof-bench-") as tmp:
        root = Path(tmp)
        inputs = root / "inputs"
        inputs.mkdir()
        files = []
        for i in range(COPIES):
            dst = inputs / f"copy{i:02d}_{export.name}"
            shutil.copyfile(export, dst)
            files.append(dst)
        j1 = run(files, root / "ds-j1", 1)
        j2 = run(files, root / "ds-j2", 2)
        small = run(files[:8], root / "ds-8", 2)
    for r in (j1, j2, small):
        if r["failed"]:
            print(f"bench_scaling: {r['failed']} inputs failed — figures not comparable")
            return 1
    print(f"input: {COPIES} copies of {export.name} ({export.stat().st_size / 1e3:.0f} kB, {int(j1['rows'] / COPIES)} report rows each)")
    print(f"cores: {os.cpu_count()}")
    # cpu/wall = the cores the analysis actually got: on a shared machine other load caps it
    print(f"  -j 1: {j1['wall_s']:7.2f} s wall, {j1['cpu_s']:6.2f} s CPU in analysis (cores used {j1['cpu_s'] / j1['wall_s']:.2f};"
          f" 1-min load average {j1['load']:.1f}) — in-process")
    print(f"  -j 2: {j2['wall_s']:7.2f} s wall, {j2['cpu_s']:6.2f} s CPU in analysis (cores used {j2['cpu_s'] / j2['wall_s']:.2f};"
          f" 1-min load average {j2['load']:.1f}) — process pool")
    print(f"  speedup -j 2 / -j 1: {j1['wall_s'] / j2['wall_s']:.2f}x wall")
    print(f"  parent peak RSS at -j 2: {small['peak_rss_mb']:.0f} MB with 8 inputs, {j2['peak_rss_mb']:.0f} MB with {COPIES}"
          f" (ratio {j2['peak_rss_mb'] / small['peak_rss_mb']:.2f})")
    print(f"  parent peak RSS at -j 1 (the work runs in the parent): {j1['peak_rss_mb']:.0f} MB with {COPIES}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
