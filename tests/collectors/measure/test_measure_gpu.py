"""`nsroof measure` on a CUDA device (marked `gpu`: skipped without one; `make gpu-check` runs them).

Targets from issue 4: the DRAM copy reaches at least 85 % of the datasheet bandwidth (H200: 4.8 TB/s)
and the bf16 GEMM peak is within 5 % of the best plain `torch.matmul` over the same shapes. fp8 is
either a real torch._scaled_mm figure, clearly above bf16, or reported as not measured.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def gpu_run() -> Any:
    from nsroof.collectors.measure import measure

    # 40 s of GEMMs: the whole file fits the 110 s `make gpu-check` gives its pytest step
    return measure("cuda", quick=True, dtypes=("fp64", "bf16", "fp8"), sections=("gemm", "stream", "ladder"),
                   gemm_budget_s=40.0)


def _plain_matmul_flop_per_s(m: int, n: int, k: int) -> float:
    """Plain torch.matmul(a, b) of fresh bf16 operands, CUDA events, median of 20 after 5 warm-ups."""
    import torch

    a = torch.randn((m, k), device="cuda", dtype=torch.bfloat16)
    b = torch.randn((k, n), device="cuda", dtype=torch.bfloat16)
    for _ in range(5):
        torch.matmul(a, b)
    torch.cuda.synchronize()
    times = []
    for _ in range(20):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.matmul(a, b)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    return 2 * m * n * k / statistics.median(times)


def test_environment_is_recorded(gpu_run: Any) -> None:
    env = gpu_run.environment
    assert env["device"] == "cuda" and env["device_name"]
    assert env["compute_capability"] and env["sm_count"] > 0 and env["memory_bytes"] > 0
    assert env["timer"] == "cuda-events+queued-sleep"  # CudaTimer.clock: events behind a queued sleep
    assert env["torch"] and env["cuda_runtime"]


def test_dram_copy_reaches_85_percent_of_the_datasheet(gpu_run: Any) -> None:
    from nsroof.roofs.machines import lookup_device

    spec = lookup_device(gpu_run.environment["device_name"])
    if spec is None or "dram" not in spec.bandwidth_bytes_per_s:
        pytest.skip(f"no datasheet bandwidth for {gpu_run.environment['device_name']!r}")
    copy = next(p for p in gpu_run.points if p.get("kernel") == "copy" and p["status"] == "measured")
    fraction = copy["bytes_per_s"] / spec.bandwidth_bytes_per_s["dram"]
    assert fraction >= 0.85, f"copy {copy['bytes_per_s'] / 1e12:.2f} TB/s = {fraction:.0%} of {spec.label}"


def test_bf16_peak_is_within_5_percent_of_the_best_plain_matmul(gpu_run: Any) -> None:
    bf16 = sorted((p for p in gpu_run.points
                   if p["kind"] == "gemm" and p["dtype"] == "bf16" and p["status"] == "measured"),
                  key=lambda p: p["flop_per_s"], reverse=True)
    assert bf16, "no bf16 point measured"
    best_plain = max(_plain_matmul_flop_per_s(p["m"], p["n"], p["k"]) for p in bf16[:6])
    ratio = gpu_run.peak_flop_per_s["bf16"] / best_plain
    assert 0.95 <= ratio <= 1.05, (f"measure {gpu_run.peak_flop_per_s['bf16'] / 1e12:.0f} vs plain "
                                   f"{best_plain / 1e12:.0f} TFLOP/s")


def test_fp8_is_a_scaled_mm_figure_or_not_measured(gpu_run: Any) -> None:
    import torch

    if torch.cuda.get_device_capability() >= (8, 9) and "fp8" in gpu_run.peak_flop_per_s:
        assert "torch._scaled_mm" in gpu_run.sources["peak_flop_per_s.fp8"]
        # fp8 tensor cores run about twice the bf16 rate: a relabelled bf16 product would not
        assert gpu_run.peak_flop_per_s["fp8"] > 1.2 * gpu_run.peak_flop_per_s["bf16"]
    else:
        assert "fp8" in gpu_run.not_measured
        assert gpu_run.sources["peak_flop_per_s.fp8"].startswith("not measured: ")


def test_fp64_gemm_runs_on_the_fp64_tensor_cores_of_a_gh100(gpu_run: Any) -> None:
    """H100/H200 SXM: FP64 tensor cores 67 TFLOP/s, CUDA cores 34 (NVIDIA's H100 datasheet). A DGEMM above
    40 TFLOP/s can only be the tensor-core path, which the profile then stores as the FP64 tensor roof."""
    import torch

    from nsroof.collectors.measure import to_machine
    from nsroof.collectors.measure.runner import peak_keys

    assert "fp64" in gpu_run.peak_flop_per_s, gpu_run.not_measured.get("fp64")
    assert "torch.matmul" in gpu_run.sources["peak_flop_per_s.fp64"]
    assert set(peak_keys("fp64", gpu_run.environment)) <= set(to_machine(gpu_run).peak_flop_per_s)
    if torch.cuda.get_device_capability() == (9, 0):
        assert gpu_run.peak_flop_per_s["fp64"] > 40e12, gpu_run.peak_flop_per_s["fp64"]


def test_ladder_finds_the_l2_above_dram(gpu_run: Any) -> None:
    bw = gpu_run.bandwidth_bytes_per_s
    assert "l2" in bw, gpu_run.derived.get("ladder_levels")
    assert bw["l2"] > 1.3 * bw["dram"], (bw, gpu_run.derived.get("plateaus"))


def test_profile_round_trips(gpu_run: Any, tmp_path: Path) -> None:
    from nsroof.collectors.measure import to_machine
    from nsroof.roofs.machines import load

    to_machine(gpu_run).save(tmp_path / "gpu.json")
    machine = load(tmp_path / "gpu.json")
    assert machine.source == "measured" and machine.label == "measured:gpu.json"
    assert machine.peak_flop_per_s["bf16"] == pytest.approx(gpu_run.peak_flop_per_s["bf16"])
    assert machine.bandwidth_bytes_per_s["dram"] == pytest.approx(gpu_run.bandwidth_bytes_per_s["dram"])
