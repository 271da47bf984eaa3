"""`nsroof analyze` of Nsight Compute details-page exports: a large one against a polars pipeline, and a
small one's whole command.

Large: two real details exports, each replicated with new kernel IDs up to NSROOF_BENCH_ANALYZE_MB (122):
a GEMM on an RTX 5090 (ncu 2025 layout with Rule and Estimated Speedup columns, auto-scaled units, "n/a"
values, 48 rows a kernel; CodeGandee/llm-perf-opt, reports/.../ncu.details.csv, 13.6 kB: 9,155 copies)
and a BERT flash-attention run on an A100 (old layout, ragged rows ending in a trailing comma, kernel
names up to 1,444 characters; leleucas/Actual-Parameter-Collection-for-Machine-Learning-Operators,
attention/.../bert_flashattn_nsight.csv, 605 kB, 10 kernels: 201 copies). Each side runs in a fresh
interpreter, timed after its imports and a first call on the small export below (first-call costs: lazy
imports, the machine table, thread pools), alternating for NSROOF_BENCH_ANALYZE_ROUNDS rounds (5); the best
run of each counts.
- polars: read_csv (every column text) + the value's digit grouping removed and cast to float + pivot
  (one row per kernel, one column per metric) + write_parquet. It does not convert units, resolve
  ceilings or classify anything: the least a script must do to get a table out of the export.
- nsroof: nsroof.pipeline.analyze + Report.write with --machine the export's GPU (import, units,
  quantities, ceilings, classification at three levels, metadata with the input's SHA-256, atomic
  Parquet), in a process set up as `nsroof analyze` sets up its own (nsroof.cli.prepare_table_process).
Targets: polars time / nsroof time >= 1; nsroof's peak RSS <= 1x the file (printed beside it: the peak RSS of
a bare `import pandas, pyarrow.parquet, ...`, which no run of the pipeline can go below).

Small: `python -m nsroof analyze tests/data/ncu/details_new.csv -o X.parquet -q` (the repo's own 7.7 kB
new-layout export), the whole command in a fresh process (interpreter start, imports, analysis, Parquet,
summary), median of NSROOF_BENCH_SMALL_RUNS (9). Target: <= 0.3 s; a bare `python -c pass` and a
`python -c "import pandas"` are timed beside it (what no command can go below).

    python benchmarks/bench_analyze.py [--keep DIR] [--reader auto|scan|python|robust]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import REPO, child, env_int, load_average, median, package_bytecode, shared, target

# (fixture, what it is): the target is checked on each
# (fixture, what it is, the --machine its GPU is in nsroof's table)
SOURCES = (("csv/llmperfopt__k0016_gemm_ncu.details.csv", "ncu 2025 layout, 48 rows a kernel", "RTX 5090"),
           ("csv/leleucas__bert_flashattn_nsight.csv", "old layout, kernel names to 1.4 kB", "A100 SXM4 40GB"))
SMALL = REPO / "tests" / "data" / "ncu" / "details_new.csv"
TARGET_RATIO = 1.0
TARGET_RSS_OVER_FILE = 1.0
TARGET_SMALL_S = 0.3

_POLARS = r"""
import json, sys, time
import polars as pl
src, dst, warm = sys.argv[1], sys.argv[2], sys.argv[3]
def pipeline(src):
    df = pl.read_csv(src, infer_schema=False, truncate_ragged_lines=True)
    df = df.with_columns(pl.col("Metric Value").str.replace_all(",", "").cast(pl.Float64, strict=False))
    wide = df.pivot(on="Metric Name", index=["ID", "Kernel Name"], values="Metric Value", aggregate_function="first")
    wide.write_parquet(dst)
    return wide
pipeline(warm)  # first-call costs (lazy imports, thread pools) out of the timing, as on nsroof's side
t0 = time.perf_counter()
wide = pipeline(src)
dt = time.perf_counter() - t0
print(json.dumps({"seconds": dt, "peak_rss": peak_rss_bytes(), "kernels": wide.height}))
"""

# what no run of nsroof's pipeline can go below: the resident set of its libraries, imported
_LIBRARIES = r"""
import json
import pandas, pyarrow.parquet, pyarrow.compute, pyarrow.csv
print(json.dumps({"peak_rss": peak_rss_bytes()}))
"""

_NSROOF = r"""
import json, sys, time
src, dst, reader, machine, warm = sys.argv[1:6]
from nsroof.cli import prepare_table_process
prepare_table_process()  # as `nsroof analyze` runs: one BLAS thread, freed memory back to the system
import nsroof.importers, nsroof.importers.ncu.csv_export, nsroof.pipeline
spent = {"read": 0.0}
used = []
def timed_read(path, **_):
    # the same call, timed (how much of the path the importer takes), with the details-page reader chosen
    # (the keywords nsroof.importers.read takes, captures, are for traces only)
    t = time.perf_counter()
    try:
        kernels, facts = nsroof.importers.ncu.csv_export.read(path, reader=reader)
        used.append(facts.reader)
        return kernels, facts
    finally:
        spent["read"] += time.perf_counter() - t
nsroof.importers.read = timed_read
# first-call costs out of the timing: the modules analyze imports when first called, the machine table
nsroof.pipeline.analyze([warm], machine=machine or None).write(dst)
used.clear()
spent["read"] = 0.0
import_rss = peak_rss_bytes()
t0 = time.perf_counter()
report = nsroof.pipeline.analyze([src], machine=machine or None)
t1 = time.perf_counter()
report.write(dst)
dt = time.perf_counter() - t0
print(json.dumps({"seconds": dt, "read_seconds": spent["read"], "write_seconds": time.perf_counter() - t1,
                  "peak_rss": peak_rss_bytes(), "import_rss": import_rss,
                  "kernels": int(report.frame["kernel_id"].nunique()),
                  "reader": "+".join(used) or "?"}))
"""


def scale_export(src: Path, dst: Path, megabytes: int) -> dict[str, int]:
    """Copies of the export's rows under new kernel IDs (the first field, "N") until `megabytes`."""
    lines = src.read_bytes().splitlines(keepends=True)
    start = next(i for i, ln in enumerate(lines) if ln.startswith(b'"ID",'))
    head, rows = lines[: start + 1], [ln for ln in lines[start + 1 :] if ln.strip()]
    ids = [int(r[1 : r.index(b'"', 1)]) for r in rows]
    step = max(ids) + 1
    tails = [r[r.index(b'"', 1) :] for r in rows]
    copy_bytes = sum(len(r) for r in rows)
    copies = max(1, int(megabytes * 1e6 // copy_bytes))
    with open(dst, "wb") as out:
        out.writelines(head)
        for k in range(copies):
            out.write(b"".join(b'"%d%s' % (i + k * step, t) for i, t in zip(ids, tails, strict=True)))
    return {"bytes": dst.stat().st_size, "copies": copies, "kernels": copies * len(set(ids))}


CPU_S: list[float] = []  # user + system CPU of each command run by _command_s, in order


def _command_s(args: list[str]) -> float:
    """Wall seconds of one command; its CPU seconds go to CPU_S (less blurred by a loaded machine)."""
    package_bytecode()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, *args], cwd=REPO, check=True, capture_output=True,
                   env={**os.environ, "PYTHONPATH": str(REPO)})
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU_S.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return wall


def bench_small(folder: Path) -> bool:
    runs = env_int("NSROOF_BENCH_SMALL_RUNS", 9)
    out = folder / "small.parquet"
    command = ["-m", "nsroof", "analyze", str(SMALL), "-o", str(out), "-q"]
    _command_s(command)  # warm: the page cache and the bytecode cache, as a user's second run
    ours, bare, pandas, cpu = [], [], [], []
    for _ in range(runs):
        bare.append(_command_s(["-c", "pass"]))
        pandas.append(_command_s(["-c", "import pandas"]))
        ours.append(_command_s(command))
        cpu.append(CPU_S[-1])
    t = median(ours)
    print(f"small export ({SMALL.name}, {SMALL.stat().st_size / 1e3:.1f} kB), whole `nsroof analyze`: median {t:.3f} s "
          f"(min {min(ours):.3f}) of {runs}, CPU {median(cpu):.3f} s; beside it `python -c pass` {median(bare):.3f} s, "
          f"`python -c 'import pandas'` {median(pandas):.3f} s; {load_average()}", flush=True)
    return target("analyze 7.7 kB export, whole command", t, TARGET_SMALL_S, at_least=False, what="seconds (median)",
                  detail=f"CPU {median(cpu):.3f} s; python startup {median(bare):.3f} s, import pandas {median(pandas):.3f} s")


def _describe(o: dict[str, Any], p: dict[str, Any], mb: float, reader: str) -> None:
    print(f"  polars read_csv+cast+pivot+write_parquet: {p['seconds']:.3f} s ({mb / p['seconds']:.0f} MB/s), "
          f"peak RSS {p['peak_rss'] / 1e6:.0f} MB, {p['kernels']} kernels")
    print(f"  nsroof analyze: {o['seconds']:.3f} s ({mb / o['seconds']:.0f} MB/s), peak RSS {o['peak_rss'] / 1e6:.0f} MB, "
          f"{o['kernels']} kernels; of which the importer {o['read_seconds']:.3f} s, the Parquet write "
          f"{o['write_seconds']:.3f} s (details-page reader: {o['reader']}, --reader {reader})")


def _seconds(runs: list[dict[str, Any]]) -> str:
    return ", ".join(f"{r['seconds']:.2f}" for r in runs)


def bench_large(folder: Path, reader: str, source: str, label: str, machine: str) -> bool:
    src = shared(*source.split("/"))
    work = f"analyze 122 MB ncu export ({label})"
    if src is None:
        why = f"public fixture {source} absent"
        print(f"large export: skipped ({why})")
        target(work, None, TARGET_RATIO, at_least=True, what="polars time / nsroof time", detail=why)
        target(work, None, TARGET_RSS_OVER_FILE, at_least=False, what="nsroof peak RSS / file", detail=why)
        return True
    path = folder / f"scaled_{src.name}"
    t0 = time.perf_counter()
    facts = scale_export(src, path, env_int("NSROOF_BENCH_ANALYZE_MB", 122))
    mb = facts["bytes"] / 1e6
    print(f"large export: {facts['copies']} copies of {src.name} = {mb:.0f} MB, {facts['kernels']:,} kernels "
          f"(generated in {time.perf_counter() - t0:.1f} s); {load_average()}", flush=True)
    ours, peers = [], []
    for _ in range(env_int("NSROOF_BENCH_ANALYZE_ROUNDS", 5)):
        # alternating: a change in the machine's load weighs on both sides
        peers.append(child(_POLARS, str(path), str(folder / "polars.parquet"), str(SMALL)))
        ours.append(child(_NSROOF, str(path), str(folder / "nsroof.parquet"), reader, machine, str(SMALL)))
    o, p = (min(runs, key=lambda r: r["seconds"]) for runs in (ours, peers))
    floor = child(_LIBRARIES)["peak_rss"]
    _describe(o, p, mb, reader)
    print(f"  the libraries alone (import pandas, pyarrow.parquet/compute/csv): peak RSS {floor / 1e6:.0f} MB = "
          f"{floor / facts['bytes']:.2f}x the file")
    print(f"  all runs: polars {_seconds(peers)} s; nsroof {_seconds(ours)} s")
    ok = target(work, p["seconds"] / o["seconds"], TARGET_RATIO, at_least=True, what="polars time / nsroof time",
                detail=f"nsroof {o['seconds']:.3f} s, polars {p['seconds']:.3f} s (best of each)")
    above = (o["peak_rss"] - o["import_rss"]) / facts["bytes"]
    return target(work, o["peak_rss"] / facts["bytes"], TARGET_RSS_OVER_FILE, at_least=False,
                  what="nsroof peak RSS / file",
                  detail=f"{o['peak_rss'] / 1e6:.0f} MB for {mb:.0f} MB; the libraries alone {floor / 1e6:.0f} MB; after "
                         f"the imports and a first call on the small export {o['import_rss'] / 1e6:.0f} MB, the "
                         f"analysis {above:.2f}x the file above that") and ok


def main(argv: list[str] | None = None) -> bool:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", type=Path, default=None, help="write the generated export here and keep it")
    ap.add_argument("--reader", choices=("auto", "scan", "python", "robust"), default="auto",
                    help="details-page reader (nsroof.importers.ncu.csv_export.read's reader=)")
    args = ap.parse_args(argv if argv is not None else [])
    with tempfile.TemporaryDirectory(prefix="nsroof-bench-analyze-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        ok = bench_small(folder)
        # another real export of the collection instead: NSROOF_BENCH_ANALYZE_SOURCE=csv/NAME.csv
        chosen = os.environ.get("NSROOF_BENCH_ANALYZE_SOURCE")
        for source, label, machine in ((chosen, "chosen", ""),) if chosen else SOURCES:
            ok = bench_large(folder, args.reader, source, label, machine) and ok
        return ok


if __name__ == "__main__":
    raise SystemExit(0 if main(sys.argv[1:]) else 1)
