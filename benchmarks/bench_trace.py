"""A real DDP training trace at the scale of real runs: nsroof vs Meta's Holistic Trace Analysis, and
nsroof's memory and linearity on a trace four times larger.

The trace is the public HTA test trace of a DDP run on an A100 (kineto JSON, rank 3 of 8, six
ProfilerSteps, 8,568 kernels; facebookresearch/HolisticTraceAnalysis tests/data/trace_diff/control),
replicated COPIES times in a temporary folder: every copy's events shifted by the trace's span in time
and by the largest id in External id / correlation / flow id / Profiler Event Index / Sequence number,
ProfilerStep#N renumbered, metadata events written once. Five copies make the issue's "10×" trace (135
MB of JSON, 43k kernels), twenty its "40×" trace (540 MB, 171k kernels).

- nsroof: nsroof.pipeline.analyze + Report.write (what `nsroof analyze TRACE -o X.parquet` does after
  its imports), in a fresh interpreter set up as the command sets up its own (nsroof.cli.prepare_table_process);
- HTA (HolisticTraceAnalysis, the `bench` extra): TraceAnalysis(trace_files={rank: path}) + the
  kernel breakdown (get_gpu_kernel_breakdown(visualize=False)), in a fresh interpreter, after imports.

Targets: nsroof >= 5x faster than HTA on the small trace; on the large one, nsroof's peak RSS <= 2x
the file (the largest of its runs) and its time <= 4.5x the small trace's (four times the bytes: linear, with
some slack; the fastest run of each size, as many runs a size); the HTML
page of the large trace's report (load_report + html.write, what `nsroof report` does after its imports)
no slower than the analysis that wrote the report.

    python benchmarks/bench_trace.py        # NSROOF_BENCH_TRACE_COPIES=5, NSROOF_BENCH_TRACE_BIG_COPIES=20,
                                            # NSROOF_BENCH_TRACE_ROUNDS=3 (fresh runs per side, alternated;
                                            # the fastest of each side counted),
                                            # NSROOF_BENCH_TRACE_BIG_ROUNDS (as many, for the large trace)
"""

from __future__ import annotations

import gzip
import json
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import child, env_int, load_average, shared, target

SOURCE = ("traces", "hta__trace_diff_control.json.gz")
TARGET_SPEEDUP = 5.0
TARGET_RSS_OVER_FILE = 2.0
TARGET_LINEARITY = 4.5
TARGET_PAGE_OVER_ANALYZE = 1.0  # drawing a report takes no longer than computing it

_ID_ARGS = ("External id", "correlation")
_STEP = re.compile(r"^ProfilerStep#(\d+)$")

_NSROOF = r"""
import json, sys, time
from nsroof.cli import prepare_table_process
prepare_table_process()  # as `nsroof analyze` runs: one BLAS thread, Arrow's freed memory back to the system
import nsroof.pipeline
import_rss = peak_rss_bytes()
t0 = time.perf_counter()
report = nsroof.pipeline.analyze([sys.argv[1]])
report.write(sys.argv[2])
dt = time.perf_counter() - t0
print(json.dumps({"seconds": dt, "peak_rss": peak_rss_bytes(), "import_rss": import_rss,
                  "rows": int(len(report.frame))}))
"""

_PAGE = r"""
import json, os, sys, time
from nsroof.report import html
from nsroof.report.load import load_report
t0 = time.perf_counter()
frame, metadata = load_report(sys.argv[1])
html.write(frame, sys.argv[2], metadata=metadata)
dt = time.perf_counter() - t0
print(json.dumps({"seconds": dt, "peak_rss": peak_rss_bytes(), "bytes": os.path.getsize(sys.argv[2])}))
"""

_HTA = r"""
import json, logging, sys, time
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
t0 = time.perf_counter()
analyzer = TraceAnalysis(trace_files={int(sys.argv[2]): sys.argv[1]}, trace_dir=sys.argv[3])
kernel_types, kernels = analyzer.get_gpu_kernel_breakdown(visualize=False)
dt = time.perf_counter() - t0
print(json.dumps({"seconds": dt, "peak_rss": peak_rss_bytes(), "rows": int(len(kernels))}))
"""


def _spans(events: list[dict[str, Any]]) -> dict[str, int]:
    """How far each copy is shifted: past the last timestamp, id, event index and step number."""
    ends = [e["ts"] + e.get("dur", 0) for e in events if "ts" in e]
    starts = [e["ts"] for e in events if "ts" in e]
    ids = [e["args"][k] for e in events for k in _ID_ARGS if k in e.get("args", {})]
    ids += [e["id"] for e in events if isinstance(e.get("id"), int)]
    steps = [int(m.group(1)) for e in events if (m := _STEP.match(str(e.get("name", ""))))]
    index = [e["args"].get("Profiler Event Index", 0) for e in events if "args" in e]
    seq = [e["args"].get("Sequence number", 0) for e in events if "args" in e]
    return {"ts": max(ends) - min(starts) + 1, "id": max(ids) + 1, "index": max(index) + 1,
            "seq": max(seq) + 1, "step": (max(steps) - min(steps) + 1) if steps else 0}


def _shift(events: list[dict[str, Any]], span: dict[str, int]) -> None:
    """Move every event of one copy one span on (in place: the next copy shifts the result again)."""
    for e in events:
        e["ts"] += span["ts"]
        if isinstance(e.get("id"), int):
            e["id"] += span["id"]
        args = e.get("args")
        if args:
            for k in _ID_ARGS:
                if k in args:
                    args[k] += span["id"]
            if "Profiler Event Index" in args:
                args["Profiler Event Index"] += span["index"]
            if "Sequence number" in args:
                args["Sequence number"] += span["seq"]
        m = _STEP.match(str(e.get("name", "")))
        if m:
            e["name"] = f"ProfilerStep#{int(m.group(1)) + span['step']}"


def scale_trace(src: Path, dst: Path, copies: int) -> dict[str, int]:
    """Write `copies` shifted copies of the trace's events (metadata once) as one JSON file."""
    with gzip.open(src, "rt", encoding="utf-8") as fh:
        trace = json.load(fh)
    events = trace.pop("traceEvents")
    once = [e for e in events if e.get("ph") in ("M", "i") or e.get("cat") == "Trace"]
    timed = [e for e in events if not (e.get("ph") in ("M", "i") or e.get("cat") == "Trace")]
    span = _spans(timed)
    kernels = sum(1 for e in timed if e.get("cat") == "kernel")
    with open(dst, "w", encoding="utf-8") as out:
        head = json.dumps(trace, separators=(",", ":"))
        out.write(head[:-1] + ',"traceEvents":[')
        parts = [once] if once else []
        sep = ""
        for part in parts:
            out.write(json.dumps(part, separators=(",", ":"))[1:-1])
            sep = ","
        for _ in range(copies if timed else 0):  # a trace without metadata events starts with its first copy
            out.write(sep + json.dumps(timed, separators=(",", ":"))[1:-1])
            sep = ","
            _shift(timed, span)
        out.write("]}")
    rank = (trace.get("distributedInfo") or {}).get("rank", 0)
    return {"bytes": dst.stat().st_size, "kernels": kernels * copies, "rank": int(rank)}


def _best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return min(runs, key=lambda r: r["seconds"])


def main() -> bool:
    src = shared(*SOURCE)
    work_small, work_big = "trace ~135 MB vs HTA", "trace ~540 MB"
    if src is None:
        why = f"public fixture {'/'.join(SOURCE)} absent"
        print(f"bench_trace: skipped ({why})")
        target(work_small, None, TARGET_SPEEDUP, at_least=True, what="HTA time / nsroof time", detail=why)
        target(work_big, None, TARGET_RSS_OVER_FILE, at_least=False, what="nsroof peak RSS / file", detail=why)
        target(work_big, None, TARGET_LINEARITY, at_least=False, what="time big / time small", detail=why)
        target(work_big, None, TARGET_PAGE_OVER_ANALYZE, at_least=False, what="HTML page time / analyze time",
               detail=why)
        return True
    copies, big_copies = env_int("NSROOF_BENCH_TRACE_COPIES", 5), env_int("NSROOF_BENCH_TRACE_BIG_COPIES", 20)
    rounds = env_int("NSROOF_BENCH_TRACE_ROUNDS", 3)  # one run of each was ±15% on a 2-core VM
    big_rounds = max(1, env_int("NSROOF_BENCH_TRACE_BIG_ROUNDS", rounds))
    with tempfile.TemporaryDirectory(prefix="nsroof-bench-trace-") as tmp:
        folder = Path(tmp)
        small = folder / "rank3_small.json"
        t0 = time.perf_counter()
        facts = scale_trace(src, small, copies)
        mb = facts["bytes"] / 1e6
        print(f"trace: {copies} copies of {src.name} = {mb:.0f} MB JSON, {facts['kernels']:,} kernels "
              f"(generated in {time.perf_counter() - t0:.1f} s); {load_average()}", flush=True)
        ours, peers = [], []
        hta_error = ""
        for _ in range(rounds):
            ours.append(child(_NSROOF, str(small), str(folder / "small.parquet")))
            try:
                peers.append(child(_HTA, str(small), str(facts["rank"]), str(folder)))
            except RuntimeError as exc:  # HTA absent (no `bench` extra) or failing: say so, keep the rest
                hta_error = str(exc).strip().splitlines()[-1][:200]
                break
        o = _best(ours)
        print(f"  nsroof analyze: {o['seconds']:.2f} s ({mb / o['seconds']:.0f} MB/s), peak RSS "
              f"{o['peak_rss'] / 1e6:.0f} MB ({o['peak_rss'] / facts['bytes']:.2f}x the file), {o['rows']:,} report rows")
        if peers:
            p = _best(peers)
            print(f"  HTA TraceAnalysis + kernel breakdown: {p['seconds']:.2f} s, peak RSS {p['peak_rss'] / 1e6:.0f} MB")
            ok = target(work_small, p["seconds"] / o["seconds"], TARGET_SPEEDUP, at_least=True,
                        what="HTA time / nsroof time", detail=f"nsroof {o['seconds']:.2f} s, HTA {p['seconds']:.2f} s")
        else:
            ok = target(work_small, None, TARGET_SPEEDUP, at_least=True, what="HTA time / nsroof time",
                        detail=f"HTA did not run: {hta_error} (pip install -e '.[bench]')")
        small.unlink()
        if big_copies <= 0:
            return ok
        big = folder / "rank3_big.json"
        facts_big = scale_trace(src, big, big_copies)
        # the fastest of as many runs as the small trace's side: one run against the best of three read a
        # noisy VM's slow run as growth (5.07x one run, 3.7x stage by stage in one process)
        bigs = [child(_NSROOF, str(big), str(folder / "big.parquet")) for _ in range(big_rounds)]
        b = _best(bigs) | {"peak_rss": max(r["peak_rss"] for r in bigs)}
        mb_big = facts_big["bytes"] / 1e6
        times = ", ".join(f"{r['seconds']:.2f}" for r in bigs)
        print(f"  {big_copies} copies: {mb_big:.0f} MB, {facts_big['kernels']:,} kernels: nsroof {b['seconds']:.2f} s "
              f"({mb_big / b['seconds']:.0f} MB/s; runs {times} s), "
              f"peak RSS {b['peak_rss'] / 1e6:.0f} MB (the largest of the runs); {load_average()}", flush=True)
        pages = [child(_PAGE, str(folder / f"{size}.parquet"), str(folder / f"{size}.html")) for size in ("small", "big")]
        for size, page in zip(("small", "big"), pages, strict=True):
            print(f"  nsroof report of the {size} trace's report: {page['seconds']:.2f} s, page {page['bytes'] / 1e6:.1f} MB, "
                  f"peak RSS {page['peak_rss'] / 1e6:.0f} MB", flush=True)
    ok &= target(work_big, b["peak_rss"] / facts_big["bytes"], TARGET_RSS_OVER_FILE, at_least=False,
                 what="nsroof peak RSS / file", detail=f"{b['peak_rss'] / 1e6:.0f} MB for {mb_big:.0f} MB "
                                                       f"(the imports alone {b['import_rss'] / 1e6:.0f} MB)")
    growth = b["seconds"] / o["seconds"]
    ok &= target(work_big, growth, TARGET_LINEARITY * big_copies / (4 * copies), at_least=False,
                 what=f"time {big_copies}/{copies} copies",
                 detail=f"{b['seconds']:.2f} s / {o['seconds']:.2f} s for {facts_big['bytes'] / facts['bytes']:.2f}x the bytes")
    ok &= target(work_big, pages[1]["seconds"] / b["seconds"], TARGET_PAGE_OVER_ANALYZE, at_least=False,
                 what="HTML page time / analyze time",
                 detail=f"page {pages[1]['seconds']:.2f} s ({pages[1]['bytes'] / 1e6:.1f} MB) for the analysis's "
                        f"{b['seconds']:.2f} s; {pages[1]['seconds'] / pages[0]['seconds']:.2f}x the small report's "
                        f"{pages[0]['seconds']:.2f} s")
    return ok


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
