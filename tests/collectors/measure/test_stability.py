"""What makes two quick CPU measurements agree: each point is the fastest of its samples (another process can
only slow a sample down), a cache level the median of its fastest points, and a failed physics check buys
one longer run. Fake timers and hand-made points: nothing is timed."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from nsroof.collectors.measure.ladder import level_bandwidths
from nsroof.collectors.measure.plan import CPU_LEVEL_TOP_K, CPU_QUICK_REPS, MIB, longer, make_plan
from nsroof.collectors.measure.runner import summarize
from nsroof.collectors.measure.timing import Timing

KIB = 1024


def cpu_plan(**changes: Any) -> Any:
    plan = make_plan("cpu", quick=True, dtypes=("fp32",), last_cache_bytes=32 * MIB,
                     free_memory_bytes=8 << 30)
    return dataclasses.replace(plan, **changes)


def test_the_cpu_takes_the_best_of_15_short_samples_and_a_level_the_median_of_its_3_fastest() -> None:
    quick = cpu_plan()
    assert (quick.statistic, quick.reps, quick.level_top_k) == ("best", CPU_QUICK_REPS, CPU_LEVEL_TOP_K)
    assert (CPU_QUICK_REPS, CPU_LEVEL_TOP_K, quick.min_sample_s, quick.stream_chunk_bytes) == \
        (15, 3, 2e-3, 8 * MIB)
    assert quick.timing == "best of 15"
    gpu = make_plan("cuda", quick=True, dtypes=("bf16",), last_cache_bytes=50 * MIB,
                    free_memory_bytes=80 << 30)
    # CUDA events: as before
    assert (gpu.statistic, gpu.level_top_k, gpu.timing) == ("median", 0, "median of 7")


def test_a_point_reports_the_statistic_its_plan_asks_for() -> None:
    t = Timing(median_s=2e-3, min_s=1e-3, max_s=9e-3, reps=5, inner=1, clock="perf_counter")
    assert t.of("best") == 1e-3 and t.of("median") == 2e-3


def test_streams_and_the_ladder_time_with_the_fastest_sample() -> None:
    torch = pytest.importorskip("torch")
    from nsroof.collectors.measure.ladder import run_ladder
    from nsroof.collectors.measure.stream import run_streams

    class Fixed:
        """Every call: samples of 1 ms at best, 2 ms in the middle (a shared CPU)."""

        clock = "fake"

        def time(self, fn: Any, *, warmup: int, reps: int) -> Timing:
            fn(0)
            return Timing(median_s=2e-3, min_s=1e-3, max_s=5e-3, reps=reps, inner=1, clock=self.clock)

        def synchronize(self) -> None:
            return None

    plan = cpu_plan(stream_buffer_bytes=4 * KIB, ladder_sizes=(16 * KIB,), ladder_bytes_per_call=64 * KIB)
    pool = torch.ones(3 * 4 * KIB // 4 + 4 * KIB)
    copy = next(p for p in run_streams(pool, plan, Fixed()) if p["kernel"] == "copy")
    # 4 KiB read + 4 KiB written in the fastest sample's 1 ms: 8,192 B / 1e-3 s = 8,192,000 B/s
    assert copy["time_s"] == 1e-3 and copy["time_median_s"] == 2e-3 and copy["statistic"] == "best"
    assert copy["bytes_per_s"] == pytest.approx(8_192_000)
    (point,) = run_ladder(pool, plan, Fixed())
    # 64 KiB / 16 KiB = 4 passes of 16 KiB = 65,536 B in 1 ms = 65,536,000 B/s
    assert point["bytes_per_s"] == pytest.approx(65_536_000)
    median_plan = dataclasses.replace(plan, statistic="median")
    (slow,) = run_ladder(pool, median_plan, Fixed())
    assert slow["bytes_per_s"] == pytest.approx(32_768_000)  # the same bytes in the median's 2 ms


def test_cpu_streams_time_one_chunk_per_call_walking_through_the_buffers() -> None:
    torch = pytest.importorskip("torch")
    from nsroof.collectors.measure.stream import run_streams

    class Walk:
        """Runs every sample's call once (call i = sample i) and reports 1 ms per call."""

        clock = "fake"

        def time(self, fn: Any, *, warmup: int, reps: int) -> Timing:
            for i in range(reps):
                fn(i)
            return Timing(median_s=1e-3, min_s=1e-3, max_s=1e-3, reps=reps, inner=1, clock=self.clock)

        def synchronize(self) -> None:
            return None

    # buffers of 16 KiB in chunks of 4 KiB: 4 chunks, so 15 samples walk through them 3¾ times
    plan = cpu_plan(stream_buffer_bytes=16 * KIB, stream_chunk_bytes=4 * KIB)
    pool = torch.zeros(3 * 16 * KIB // 4)
    points = {p["kernel"]: p for p in run_streams(pool, plan, Walk())}
    fill = points["fill"]
    assert (fill["buffer_bytes"], fill["chunk_bytes"], fill["bytes"], fill["reps"]) == (16 * KIB, 4 * KIB,
                                                                                      4 * KIB, 15)
    assert bool((pool[2 * 4096:] == 1.25).all())  # c = 1.25 reached every chunk of c
    # copy: one 4 KiB chunk read + one written per call, 8,192 B in 1 ms
    assert points["copy"]["bytes_per_s"] == pytest.approx(8_192_000)


def test_a_level_is_the_median_of_its_three_fastest_points() -> None:
    from nsroof.collectors.measure.environment import CacheLevel

    # six working sets inside L2's window (48 KiB, 1 MiB]: one descheduled (2 GB/s), one lucky (200 GB/s)
    ws = [64 * KIB, 128 * KIB, 192 * KIB, 256 * KIB, 512 * KIB, 1 * MIB]
    bw = [10e9, 50e9, 48e9, 2e9, 200e9, 52e9]
    caches = [CacheLevel("l1", 48 * KIB, "t"), CacheLevel("l2", 2 * MIB, "t")]
    (_l1, l2, _dram) = level_bandwidths(ws, bw, caches, top_k=3)
    # fastest three: 200, 52, 50 -> median 52 (neither the lucky 200 nor the descheduled 2 sets it)
    assert l2.bytes_per_s == 52e9 and (l2.used, l2.points) == (3, 6)
    assert l2.how == "median read rate of the 3 fastest of 6 points"
    # all six: sorted 2, 10, 48, 50, 52, 200 -> median (48 + 50) / 2 = 49
    assert level_bandwidths(ws, bw, caches)[1].bytes_per_s == 49e9
    env = {"device": "cpu", "device_name": "x",
           "caches": {"l1": {"bytes": 48 * KIB}, "l2": {"bytes": 2 * MIB}}}
    points = [{"kind": "ladder", "status": "measured", "working_set_bytes": w, "bytes_per_s": b}
              for w, b in zip(ws, bw, strict=True)]
    result = summarize(cpu_plan(), env, points, {})
    assert result.bandwidth_bytes_per_s["l2"] == 52e9
    assert result.sources["bandwidth_bytes_per_s.l2"].startswith(
        "measured: cache ladder, median read rate of the 3 fastest of 6 points, working sets in")
    assert result.sources["bandwidth_bytes_per_s.l2"].endswith("perf_counter best of 15")


def test_the_second_try_runs_longer() -> None:
    plan = cpu_plan()
    again = longer(plan)
    # 2 × 15 samples of 2 ms after 2 warm-ups; 2 × 0.5 s spin-up; 1.5 × 20 s of GEMM budget
    assert (again.reps, again.warmup, again.min_sample_s) == (30, 2, 2e-3)
    assert (again.spin_up_s, again.gemm_budget_s) == (1.0, 30.0)
    assert again.notes[-1] == "a second, longer run: the first failed its physics check"
    assert (again.squares, again.ladder_sizes) == (plan.squares, plan.ladder_sizes)  # the same sweep
