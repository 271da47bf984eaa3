"""Canned CPU measurements for the tests of the cached CPU profile and its physics check: a MeasureResult
built by the real `summarize` from a handful of points, with the environment of this configuration (so
the cache takes it for this CPU, thread count and torch), and a stand-in for `runner.measure` that hands
them out in turn and records how it was called. Nothing is timed.

The figures are the development VM's (docs/readme/measure.md): AVX-512 with AMX-BF16 and AVX512-FP16,
2,600 MHz in /proc/cpuinfo and no cpufreq; caches L1 48 KiB, L2 2 MiB, L3 480 MiB.
"""

from __future__ import annotations

from typing import Any

GB = 1e9
KIB, MIB = 1024, 1024 * 1024
SPR_FLAGS = ["amx_bf16", "amx_tile", "avx", "avx2", "avx512_bf16", "avx512_fp16", "avx512f", "fma", "sse2"]
CACHES = {"l1": 48 * KIB, "l2": 2 * MIB, "l3": 480 * MIB}

# one thread, quiet machine (docs/readme/measure.md, the --threads 1 run): passes the physics check
GOOD = {"fp32": 118.5 * GB, "fp16": 146.0 * GB, "bf16": 844.9 * GB,
        "l1": 139.6 * GB, "l2": 47.3 * GB, "l3": 10.1 * GB, "dram": 7.8 * GB}
# the user's report: l1 2.1 GB/s under dram 21 GB/s, with l2 and l3 in between (fails "order l1>=l2" only)
INVERTED = {**GOOD, "l1": 2.1 * GB, "l2": 60 * GB, "l3": 30 * GB, "dram": 21 * GB}


def canned(figures: dict[str, float] = GOOD, *, sections: tuple[str, ...] = ("gemm", "stream", "ladder"),
           **env: Any) -> Any:
    """A quick CPU MeasureResult whose peaks and level bandwidths are `figures`: one 1024³ GEMM point per
    dtype, one triad stream (DRAM), one ladder point inside each cache level's window (16 KiB in L1's,
    512 KiB in L2's, 64 MiB in L3's); only the points of `sections` (`--only`)."""
    from nsroof.collectors.measure.cache import key_fields
    from nsroof.collectors.measure.plan import make_plan
    from nsroof.collectors.measure.runner import DEFAULT_CPU_DTYPES, summarize

    environment = {"device": "cpu", **key_fields(), "arch": "x86_64", "isa_flags": SPR_FLAGS,
                   "clock_mhz_at_start": 2600.0, "clock_max_mhz": None, "logical_cpus": 2,
                   "caches": {k: {"bytes": v, "source": "test"} for k, v in CACHES.items()},
                   "measured_at": "2026-12-01T10:00:00+00:00", "timer": "perf_counter", **env}
    plan = make_plan("cpu", quick=True, dtypes=DEFAULT_CPU_DTYPES, last_cache_bytes=CACHES["l3"],
                     free_memory_bytes=64 << 30, sections=sections)
    points: list[dict[str, Any]] = [
        {"kind": "gemm", "status": "measured", "dtype": d, "label": "square", "m": 1024, "n": 1024, "k": 1024,
         "flop": 2 * 1024**3, "path": "torch.matmul", "flop_per_s": figures[d]} for d in DEFAULT_CPU_DTYPES]
    points.append({"kind": "stream", "status": "measured", "kernel": "triad", "description": "a = b + 3·c",
                   "buffer_bytes": 960 * MIB, "bytes": 3 * 960 * MIB, "bytes_per_s": figures["dram"]})
    points += [{"kind": "ladder", "status": "measured", "working_set_bytes": ws, "bytes_per_s": figures[lv]}
               for lv, ws in (("l1", 16 * KIB), ("l2", 512 * KIB), ("l3", 64 * MIB))]
    return summarize(plan, environment, [p for p in points if p["kind"] in sections], {})


class FakeMeasure:
    """runner.measure's stand-in: returns `results` in turn; `calls` records each call's longer_run."""

    def __init__(self, *results: Any) -> None:
        self.results = list(results)
        self.calls: list[bool] = []

    def __call__(self, device: Any = None, *, longer_run: bool = False, **_: Any) -> Any:
        self.calls.append(longer_run)
        if not self.results:
            raise AssertionError("measured more often than the test expected")
        return self.results.pop(0)
