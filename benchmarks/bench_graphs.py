"""Graph-replayed decode traces: `nsroof analyze REPLAY --capture CAPTURE` in time linear in the kernels.

A public vLLM decode trace has 40 graph launches covering 41,960 kernels. Synthesized here (ROCm-style, as
the public vLLM/SGLang traces record them): a capture trace of one decode graph per batch size (BATCHES
sizes, LAYERS layers of GEMM + ReLU each, every launch naming its kernel, grid and block, the ops their
shapes), and replay traces of SMALL and BIG launches of the largest graph (2·LAYERS kernels each: 1,000 at
the default 500 layers), each in a step annotation of its own. Each is analyzed (nsroof.pipeline.analyze with
the capture + Report.write, after imports) in a fresh interpreter, ROUNDS times, the fastest counted.

Target: time(BIG launches) / time(SMALL launches) <= 1.15 × BIG / SMALL (10 → 40 launches: 10,000 → 40,000
replayed kernels, each replay with its own copies of the captured ops: <= 4.6), the small trace being the
baseline of the same command.

    python benchmarks/bench_graphs.py   # NSROOF_BENCH_GRAPHS_SMALL=10, NSROOF_BENCH_GRAPHS_BIG=40,
                                        # NSROOF_BENCH_GRAPHS_LAYERS=500, NSROOF_BENCH_GRAPHS_ROUNDS=3
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from _common import child, env_int, load_average, target

BATCHES = (32, 16, 8, 1)  # captured largest first, as vLLM does
SLACK = 1.15

_NSROOF = r"""
import json, sys, time
from nsroof.cli import prepare_table_process
prepare_table_process()
import nsroof.pipeline
t0 = time.perf_counter()
report = nsroof.pipeline.analyze([sys.argv[1]], captures=[sys.argv[2]])
report.write(sys.argv[3])
dt = time.perf_counter() - t0
k = report.frame.drop_duplicates("kernel_id")
print(json.dumps({"seconds": dt, "peak_rss": peak_rss_bytes(), "kernels": int((k["kind"] == "kernel").sum()),
                  "flops": float(k["flops"].sum())}))
"""

GEMM = "Cijk_Alik_Bljk_BBS_BH_MT64x64x64_MI16x16x16x1"
RELU = "void at::native::vectorized_elementwise_kernel<4, at::native::relu_functor>"
HIDDEN = 4096
DEVICE = "AMD Instinct MI300X"


def _event(cat: str, name: str, ts: float, dur: float, args: dict[str, Any], tid: int = 1) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1 if cat != "kernel" else 0, "tid": tid, "ts": ts,
            "dur": dur, "args": args}


def _write(path: Path, events: list[dict[str, Any]]) -> None:
    path.write_text(json.dumps({"traceEvents": events, "deviceProperties": [{"id": 0, "name": DEVICE}]}))


def _grids(batch: int) -> tuple[list[int], list[int]]:
    return [max(1, batch // 4), HIDDEN // 64, 1], [max(1, batch * HIDDEN // 1024), 1, 1]


def write_capture(path: Path, layers: int) -> None:
    events, corr, ts = [], 0, 0.0
    for batch in BATCHES:
        events.append(_event("user_annotation", f"capture_bs{batch}", ts, 40 * layers + 20, {}))
        corr += 1
        events.append(_event("cuda_runtime", "hipStreamBeginCapture", ts + 1, 1, {"correlation": corr}))
        grids = _grids(batch)
        for layer in range(layers):
            for j, (op, kernel, dims) in enumerate((
                    ("aten::mm", GEMM, [[batch, HIDDEN], [HIDDEN, HIDDEN]]),
                    ("aten::relu", RELU, [[batch, HIDDEN]]))):
                corr += 1
                t = ts + 5 + 40 * layer + 20 * j
                events.append(_event("cpu_op", op, t, 15, {"External id": corr, "Input Dims": dims,
                                                            "Input type": ["c10::BFloat16"] * len(dims)}))
                events.append(_event("cuda_runtime", "hipLaunchKernel", t + 2, 2, {
                    "correlation": corr, "External id": corr, "kernel": kernel, "grid": grids[j],
                    "block": [256, 1, 1]}))
        corr += 1
        events.append(_event("cuda_runtime", "hipStreamEndCapture", ts + 40 * layers + 10, 1,
                             {"correlation": corr}))
        ts += 40 * layers + 100
    _write(path, events)


def write_replay(path: Path, launches: int, layers: int) -> None:
    events, grids, ts = [], _grids(BATCHES[0]), 0.0
    for r in range(launches):
        span = 12 * layers + 20
        events.append(_event("user_annotation", f"decode_step_{r}", ts, span, {}))
        corr = r + 1
        events.append(_event("cuda_runtime", "hipGraphLaunch", ts + 1, 5, {"correlation": corr}))
        for layer in range(layers):
            for j, kernel in enumerate((GEMM, RELU)):
                events.append(_event("kernel", kernel, ts + 10 + 12 * layer + 8 * j, 7 - 4 * j, {
                    "device": 0, "stream": 0, "correlation": corr, "grid": grids[j], "block": [256, 1, 1]},
                    tid=0))
        ts += span + 10
    _write(path, events)


def _best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return min(runs, key=lambda r: r["seconds"])


def main() -> bool:
    small, big = env_int("NSROOF_BENCH_GRAPHS_SMALL", 10), env_int("NSROOF_BENCH_GRAPHS_BIG", 40)
    layers, rounds = env_int("NSROOF_BENCH_GRAPHS_LAYERS", 500), env_int("NSROOF_BENCH_GRAPHS_ROUNDS", 3)
    with tempfile.TemporaryDirectory(prefix="nsroof-bench-graphs-") as tmp:
        folder = Path(tmp)
        capture = folder / "capture.json"
        write_capture(capture, layers)
        results = {}
        for n in (small, big):
            replay = folder / f"replay_{n}.json"
            write_replay(replay, n, layers)
            runs = []
            for _ in range(rounds):
                runs.append(child(_NSROOF, str(replay), str(capture), str(folder / f"r{n}.parquet")))
            results[n] = _best(runs)
    print(f"graphs: capture of {len(BATCHES)} decode graphs × {2 * layers} kernels; {load_average()}")
    for n, r in results.items():
        # each replay's GEMMs whole: 2·batch·4096·4096 FLOP per layer, batch 32
        expected = n * layers * (2 * 32 * HIDDEN * HIDDEN + 32 * HIDDEN)
        print(f"  {n} launches, {r['kernels']:,} kernels: {r['seconds']:.2f} s "
              f"({r['seconds'] / r['kernels'] * 1e6:.1f} us a kernel), peak RSS {r['peak_rss'] / 1e6:.0f} MB,"
              f" FLOPs {r['flops']:.4g} (every replay whole: {expected:.4g})")
        if r["flops"] != expected:
            print("  bench_graphs: FLOPs are not every replay's whole cost")
            return False
    ratio = results[big]["seconds"] / results[small]["seconds"]
    return target(f"graph replays {big} vs {small} launches", ratio, SLACK * big / small, at_least=False,
                  what="time big / time small",
                  detail=f"{results[small]['seconds']:.2f} s vs {results[big]['seconds']:.2f} s for "
                         f"{big / small:g}x the kernels")


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
