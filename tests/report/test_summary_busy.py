"""The summary's profiled time: kernel time summed over streams, and the GPU's busy time with kernels that
overlap on streams (NCCL beside compute) counted once (nsroof.report.summary.gpu_busy_s)."""

from __future__ import annotations

import math
from pathlib import Path

from nsroof.pipeline import analyze
from nsroof.report.summary import analytic_coverage, gpu_busy_s, per_kernel, render
from tests.roofs.test_classify_link import write_trace


def test_kernels_overlapping_on_streams_count_once_in_the_busy_time(tmp_path: Path) -> None:
    report = analyze(write_trace(tmp_path, "NVIDIA H100 80GB HBM3"))
    # the NCCL kernel [100, 120) µs on stream 20 and the GEMM [110, 130) µs on stream 7: 40 µs summed,
    # [100, 130) = 30 µs busy
    assert math.isclose(gpu_busy_s(per_kernel(report.frame)), 30e-6, rel_tol=1e-12)
    text = render(report, width=200)
    assert ("(2 launches, 40 us summed; the GPU busy 30 us, "
            "kernels overlapping on streams counted once)") in text
    c = analytic_coverage(report.frame, ["ar.json"]).iloc[0]
    assert math.isclose(c["time_s"], 40e-6, rel_tol=1e-12) and math.isclose(c["busy_s"], 30e-6, rel_tol=1e-12)
    assert math.isclose(c["costed_busy_s"], 30e-6, rel_tol=1e-12)  # both ops have formulas


def test_merged_launches_have_no_one_start_so_no_busy_time() -> None:
    import pandas as pd

    from nsroof.roofs.aggregate import aggregate

    kernels = pd.DataFrame({"source": ["t"] * 3, "device": [""] * 3, "kernel_name": ["k", "k", "m"],
                            "nvtx_path": [""] * 3, "kernel_id": [0, 1, 2], "start_us": [0.0, 10.0, 20.0]})
    merged, quantities = aggregate(kernels, pd.DataFrame({"duration_s": [1e-6, 1e-6, 2e-6]}))
    # k's two launches become one row (2 µs over [0, 1) and [10, 11)): no single start; m keeps its own
    assert math.isnan(merged["start_us"][0]) and merged["start_us"][1] == 20.0
    frame = merged.assign(duration_s=quantities["duration_s"], device_id=pd.NA)
    assert math.isnan(gpu_busy_s(frame))  # unknown, never a guess from the first launch
