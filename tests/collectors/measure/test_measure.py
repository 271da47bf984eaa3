"""`nsroof measure` on the CPU: the profile it writes (provenance, points, the cache), its round trip
through `machines`/`analyze`, and the pure arithmetic (bytes, FLOP, ridges, T*, plateaus, cache sizes)
giving the numbers worked out in the comments.

The one real measurement of this file runs once (module fixture) with one torch thread. Whether its
figures agree with plain timed torch ops is a timing comparison: benchmarks/bench_measure.py (make bench).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

torch = pytest.importorskip("torch")

from nsroof.cli import cli  # noqa: E402
from nsroof.collectors.measure import analysis  # noqa: E402
from nsroof.collectors.measure.environment import (  # noqa: E402
    CacheLevel,
    cpu_caches_from_lscpu,
    cpu_caches_from_sysfs,
    parse_size,
)
from nsroof.collectors.measure.gemm import (  # noqa: E402
    GemmShape,
    compulsory_bytes,
    make_call,
    predict_time_s,
    random_tensor,
    rotation_sets,
    shape_reason,
    sweep_shapes,
    unsupported_reason,
)
from nsroof.collectors.measure.ladder import find_plateaus, level_bandwidths, run_ladder  # noqa: E402
from nsroof.collectors.measure.plan import MIB, ladder_sizes, make_plan  # noqa: E402
from nsroof.collectors.measure.runner import json_safe, summarize  # noqa: E402
from nsroof.collectors.measure.stream import STREAM_KERNELS, stream_bytes  # noqa: E402
from nsroof.collectors.measure.timing import CpuTimer, inner_count  # noqa: E402
from nsroof.roofs.machines import Machine, load  # noqa: E402

KIB = 1024


# ------------------------------------------------------------------ the real quick run


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`nsroof measure --quick --dtype fp32` (GEMM + streams, 4 s GEMM budget, one thread). How its figures
    compare with plain timed torch ops is a timing question, measured by benchmarks/bench_measure.py."""
    out = tmp_path_factory.mktemp("measure")
    threads = torch.get_num_threads()
    cache = os.environ.get("NSROOF_CACHE_DIR")
    try:
        # measure caches its profile: not in the user's cache
        os.environ["NSROOF_CACHE_DIR"] = str(out / "cache")
        torch.set_num_threads(1)
        res = CliRunner().invoke(cli, ["measure", "--quick", "--device", "cpu", "--dtype", "fp32",
                                       "--threads", "1", "--budget", "4", "--only", "gemm", "--only",
                                       "stream", "-o", str(out / "machine.json"), "--csv",
                                       str(out / "points.csv")])
        assert res.exit_code == 0, res.output
    finally:
        torch.set_num_threads(threads)
        if cache is None:
            os.environ.pop("NSROOF_CACHE_DIR", None)
        else:
            os.environ["NSROOF_CACHE_DIR"] = cache
    return {"dir": out, "output": res.output}


def test_profile_is_a_measured_machine_with_provenance_and_points(quick_run: dict[str, Any]) -> None:
    raw = json.loads((quick_run["dir"] / "machine.json").read_text())
    machine = load(quick_run["dir"] / "machine.json")
    assert machine.source == "measured"
    assert machine.label == "measured:machine.json"
    assert raw["environment"]["threads_used"] == 1
    assert raw["environment"]["timer"] == "perf_counter"
    assert set(machine.bandwidth_bytes_per_s) == {"dram"}  # no ladder in this run: no cache levels invented
    assert machine.sources["peak_flop_per_s.fp32"].startswith("measured: best of")
    assert machine.sources["peak_flop_per_s.tf32"].startswith("not measured: no TF32 matmul mode on the CPU")
    assert machine.sources["peak_flop_per_s.bf16"] == "not measured: not requested (--dtype)"
    kinds = {p["kind"] for p in raw["points"]}
    assert kinds == {"gemm", "stream"}
    copy = next(p for p in raw["points"] if p.get("kernel") == "copy")
    assert copy["bytes"] == 2 * copy["chunk_bytes"] == 2 * 8 * MIB  # 1 read + 1 write of one 8 MiB chunk
    assert copy["bytes_per_s"] == pytest.approx(copy["bytes"] / copy["time_s"])
    # Every measured GEMM point: FLOP/s is 2·M·N·K over its median time.
    for p in raw["points"]:
        if p["kind"] == "gemm" and p["status"] == "measured":
            assert p["flop_per_s"] == pytest.approx(2 * p["m"] * p["n"] * p["k"] / p["time_s"])
        if p["kind"] == "gemm" and p["status"] == "skipped":
            assert p["reason"]
    # Buffers far larger than the last cache (2x in --quick on a CPU).
    l3 = raw["environment"]["caches"].get("l3", raw["environment"]["caches"].get("l2"))
    if l3:
        assert copy["buffer_bytes"] >= 2 * l3["bytes"] - 4 * KIB


def test_points_csv_has_every_point(quick_run: dict[str, Any]) -> None:
    import pandas as pd

    raw = json.loads((quick_run["dir"] / "machine.json").read_text())
    frame = pd.read_csv(quick_run["dir"] / "points.csv")
    assert len(frame) == len(raw["points"])
    assert {"kind", "status", "time_s", "flop_per_s", "bytes_per_s"} <= set(frame.columns)


def test_summary_prints_peak_streams_ridges_and_workloads(quick_run: dict[str, Any]) -> None:
    text = quick_run["output"]
    assert "GEMM peak per dtype" in text
    assert "copy: b = a (1 read + 1 write)" in text
    assert "Ridge I* = peak / bandwidth" in text
    assert "batch-1 decode weight GEMV" in text
    assert "not measured" in text  # tf32/fp16/bf16/fp8 were not asked for, and say so


def test_machines_command_reads_the_profile(quick_run: dict[str, Any]) -> None:
    res = CliRunner().invoke(cli, ["machines", "--machine", str(quick_run["dir"] / "machine.json")])
    assert res.exit_code == 0, res.output
    assert "measured:machine.json" in res.output


def test_a_cpu_profile_is_refused_for_a_gpu_export(quick_run: dict[str, Any], shared_fixtures: Path,
                                                  tmp_path: Path) -> None:
    # issue 14: a CPU roofline under GPU kernels put them at thousands of % of their roofs; now one clear line
    profile = quick_run["dir"] / "machine.json"
    out = tmp_path / "r.parquet"
    res = CliRunner().invoke(cli, ["analyze", str(shared_fixtures / "csv" / "gardenia__gemm.csv"),
                                   "--machine", str(profile), "-o", str(out)])
    assert res.exit_code == 2
    assert "is a CPU profile, but the export holds GPU kernels" in res.output and not out.exists()


# ------------------------------------------------------------------ errors


def test_cuda_without_a_gpu_is_one_clean_line() -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    res = CliRunner().invoke(cli, ["measure", "--device", "cuda", "--quick"])
    assert res.exit_code == 2
    assert "nsroof: error: --device cuda: torch" in res.output
    assert "sees no CUDA device" in res.output
    assert "Traceback" not in res.output


@pytest.mark.parametrize("args, message", [
    (["--threads", "-1"], "Invalid value for '--threads': -1 is not in the range x>=0"),
    (["--budget", "0"], "--budget 0.0: the GEMM sweep needs a positive number of seconds"),
])
def test_bad_numbers_are_one_clean_line(args: list[str], message: str) -> None:
    threads = torch.get_num_threads()
    try:
        res = CliRunner().invoke(cli, ["measure", "--device", "cpu", "--quick", *args])
    finally:
        torch.set_num_threads(threads)
    assert res.exit_code == 2, res.output
    assert f"nsroof: error: {message}" in res.output


# ------------------------------------------------------------------ GEMM arithmetic and paths


def test_flop_and_compulsory_bytes() -> None:
    s = GemmShape(128, 1024, 4096, "k_proj/v_proj")
    assert s.flop == 1_073_741_824  # 2·128·1024·4096
    # fp16: 2·(128·4096 + 4096·1024) + 2·128·1024 = 9,437,184 + 262,144
    assert compulsory_bytes(s, "fp16") == 9_699_328
    # fp8 operands are 1 byte, the bf16 output 2: (524,288 + 4,194,304) + 262,144
    assert compulsory_bytes(s, "fp8") == 4_980_736


def test_fp8_and_tf32_rules() -> None:
    # _scaled_mm needs K and N in multiples of 16; M (tokens of a decode step) is free
    assert shape_reason("fp8", GemmShape(1, 4096, 4096, "gemv")) is None
    assert (shape_reason("fp8", GemmShape(1, 4090, 4096, "gemv"))
            == "torch._scaled_mm needs K and N divisible by 16")
    assert shape_reason("fp8", GemmShape(16, 4096, 4096, "x")) is None
    assert shape_reason("bf16", GemmShape(1, 4096, 4096, "gemv")) is None
    assert "no TF32 matmul mode on the CPU" in (unsupported_reason("tf32", "cpu") or "")
    assert unsupported_reason("fp32", "cpu") is None


def test_each_timed_call_computes_the_product(tmp_path: Path) -> None:
    plan = make_plan("cpu", quick=True, dtypes=("fp32",), last_cache_bytes=4 * MIB, free_memory_bytes=8 << 30)
    call, n_sets = make_call("fp32", GemmShape(48, 40, 32, "t"), plan, seed=3)
    a = random_tensor((48, 32), torch.float32, "cpu", 3)
    b = random_tensor((32, 40), torch.float32, "cpu", 4)
    ref = a.double() @ b.double()
    for i in range(n_sets + 1):  # every rotating set holds the same operands
        assert torch.allclose(call(i).double(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not hasattr(torch, "_scaled_mm"), reason="torch without _scaled_mm")
def test_fp8_goes_through_scaled_mm_and_is_an_fp8_product() -> None:
    plan = make_plan("cpu", quick=True, dtypes=("fp8",), last_cache_bytes=4 * MIB, free_memory_bytes=8 << 30)
    try:
        call, _ = make_call("fp8", GemmShape(32, 32, 32, "t"), plan, seed=5)
        out = call(0)
    except (RuntimeError, NotImplementedError) as exc:
        pytest.skip(f"torch._scaled_mm refuses fp8 on this CPU build: {exc}")
    assert out.dtype == torch.bfloat16
    a = random_tensor((32, 32), torch.float32, "cpu", 5).to(torch.float8_e4m3fn).float()
    b = random_tensor((32, 32), torch.float32, "cpu", 6).to(torch.float8_e4m3fn).float()
    ref = a @ b  # the product of the fp8-rounded inputs: only the bf16 output rounding remains
    assert torch.allclose(out.float(), ref, rtol=2e-2, atol=2e-2)


def test_random_operands_are_never_zero_and_repeat_by_seed() -> None:
    x = random_tensor((3, 1000), torch.float32, "cpu", 11, block=256)
    y = random_tensor((3, 1000), torch.float32, "cpu", 11, block=256)
    assert x.shape == (3, 1000)
    assert torch.equal(x, y)
    assert bool((x != 0).all())
    assert float(x.abs().max()) <= 1.0


def test_rotation_sets_exceed_the_cache_within_the_cap() -> None:
    plan = make_plan("cpu", quick=True, dtypes=("fp32",), last_cache_bytes=300 * MIB,
                     free_memory_bytes=16 << 30)
    # 2x the 300 MiB cache = 600 MiB target, 128 MiB cap in --quick on a CPU
    assert rotation_sets(16 * MIB, plan) == 8  # min(ceil(600/16) = 38, 128/16 = 8)
    assert rotation_sets(700 * MIB, plan) == 1  # already past the target
    full = dataclasses.replace(plan, rotate_cap_bytes=1 << 40)
    assert rotation_sets(100 * MIB, full) == 6  # ceil(600/100)


def test_prediction_scales_from_the_nearest_smaller_product() -> None:
    anchors = [(1_000, 1e-3), (8_000, 2e-3)]
    assert predict_time_s(64_000, anchors) == pytest.approx(16e-3)  # 2 ms · 64000/8000
    assert predict_time_s(4_000, anchors) == pytest.approx(4e-3)  # from the 1000-FLOP anchor
    assert predict_time_s(500, anchors) == pytest.approx(0.5e-3)  # below all: the smallest


def test_sweep_runs_squares_first_then_projections_by_flop() -> None:
    plan = make_plan("cuda", quick=True, dtypes=("bf16",), last_cache_bytes=50 * MIB,
                     free_memory_bytes=80 << 30)
    shapes = sweep_shapes(plan)
    squares = [s for s in shapes if s.label == "square"]
    assert shapes[: len(squares)] == squares
    assert [s.m for s in squares] == sorted(s.m for s in squares)
    rest = shapes[len(squares):]
    assert [s.flop for s in rest] == sorted(s.flop for s in rest)
    # the Llama-3.1-8B projections as (K, N)
    assert {(s.k, s.n) for s in rest} == {(4096, 4096), (4096, 1024), (4096, 14336), (14336, 4096)}
    assert {s.m for s in rest} == set(plan.m_sweep) and min(plan.m_sweep) == 1


# ------------------------------------------------------------------ plan, streams, ladder


def test_spin_up_is_sized_for_the_device() -> None:
    """A GPU's clocks leave idle under 4096² bf16 products (~0.1 ms each on an H100); a CPU spins up on 1024²
    fp32, which every x86 core runs in well under a second (bf16 on a core without AVX512-BF16 is ~100x
    slower)."""
    gpu = make_plan("cuda", quick=True, dtypes=("bf16",), last_cache_bytes=50 * MIB,
                    free_memory_bytes=80 << 30)
    cpu = make_plan("cpu", quick=True, dtypes=("fp32",), last_cache_bytes=32 * MIB,
                    free_memory_bytes=16 << 30)
    assert (gpu.spin_up_size, gpu.spin_up_s) == (4096, 1.0)
    assert (cpu.spin_up_size, cpu.spin_up_s) == (1024, 0.5)


def test_spin_up_reads_the_clock_after_every_product(monkeypatch: pytest.MonkeyPatch) -> None:
    """0.05 s asked, each product taking 0.02 s on a clock the test holds: the loop stops after the first
    product that passes it (the third, at 0.06 s), not after a batch of them."""
    from types import SimpleNamespace

    from nsroof.collectors.measure import timing

    now = [100.0]
    products: list[int] = []

    def product(a: torch.Tensor, b: torch.Tensor) -> None:
        products.append(a.shape[0])
        now[0] += 0.02

    monkeypatch.setattr(timing, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    monkeypatch.setattr(torch, "matmul", product)
    assert timing.spin_up("cpu", 0.05, 64) == pytest.approx(0.06)
    assert products == [64, 64, 64]
    assert timing.spin_up("cpu", 0.0, 4096) == 0.0  # no time asked: no product run, no operands made
    assert products == [64, 64, 64]


def test_ladder_sizes_reach_four_times_the_last_cache() -> None:
    sizes = ladder_sizes(300 * MIB)
    assert sizes[0] == 16 * KIB
    assert sizes[-1] == 1200 * MIB  # 4 · 300 MiB
    assert sizes[-2] == 1024 * MIB  # 16 KiB · 2^16
    assert len(sizes) == 18


def test_plan_limits_buffers_by_free_memory_and_says_so() -> None:
    plan = make_plan("cpu", quick=False, dtypes=("fp32",), last_cache_bytes=300 * MIB,
                     free_memory_bytes=4 << 30)
    assert plan.stream_buffer_bytes == 512 * MIB  # 4 GiB / 8, not 4 · 300 MiB
    assert any("limited to 512 MiB by free memory" in n for n in plan.notes)
    roomy = make_plan("cpu", quick=True, dtypes=("fp32",), last_cache_bytes=300 * MIB,
                      free_memory_bytes=64 << 30)
    assert roomy.stream_buffer_bytes == 600 * MIB and not roomy.notes


def test_stream_bytes_are_exact() -> None:
    by_name = {k.name: stream_bytes(k, 1000) for k in STREAM_KERNELS}
    assert by_name == {"copy": (4000, 4000), "triad": (8000, 4000), "read": (4000, 4), "fill": (0, 4000)}


def test_ladder_counts_every_pass(tmp_path: Path) -> None:
    plan = dataclasses.replace(
        make_plan("cpu", quick=True, dtypes=("fp32",), last_cache_bytes=1 * MIB, free_memory_bytes=8 << 30),
        ladder_sizes=(16 * KIB, 64 * KIB), ladder_bytes_per_call=1 * MIB, reps=2, warmup=1,
    )
    pool = torch.rand(64 * KIB // 4)
    points = run_ladder(pool, plan, CpuTimer(1e-3))
    assert [p["working_set_bytes"] for p in points] == [16 * KIB, 64 * KIB]
    assert [p["passes"] for p in points] == [64, 16]  # 1 MiB / 16 KiB, 1 MiB / 64 KiB
    assert all(p["bytes"] == 1 * MIB and p["bytes_per_s"] > 0 for p in points)


def test_plateaus_split_on_lasting_drops_only() -> None:
    ws = [16 * KIB, 32 * KIB, 64 * KIB, 128 * KIB, 256 * KIB, 512 * KIB, 1 * MIB, 2 * MIB, 4 * MIB]
    bw = [100.0, 98.0, 50.0, 52.0, 20.0, 51.0, 49.0, 10.0, 11.0]  # the lone 20 at 256 KiB is noise
    plateaus = find_plateaus(ws, bw)
    assert [(p.first_bytes, p.last_bytes, p.points) for p in plateaus] == [
        (16 * KIB, 32 * KIB, 2), (64 * KIB, 1 * MIB, 5), (2 * MIB, 4 * MIB, 2)]
    assert plateaus[1].bytes_per_s == 50.0  # median of 50, 52, 20, 51, 49


def test_levels_take_working_sets_that_fit_in_half_of_each_cache() -> None:
    caches = [CacheLevel("l1", 48 * KIB, "t"), CacheLevel("l2", 2 * MIB, "t"),
              CacheLevel("l3", 32 * MIB, "t")]
    ws = [16 * KIB, 32 * KIB, 64 * KIB, 512 * KIB, 1 * MIB, 2 * MIB, 8 * MIB, 64 * MIB, 128 * MIB]
    bw = [140.0, 130.0, 80.0, 82.0, 78.0, 60.0, 40.0, 25.0, 20.0]
    levels = {lv.level: lv for lv in level_bandwidths(ws, bw, caches)}
    assert levels["l1"].bytes_per_s == 140.0  # 16 KiB only: <= 24 KiB
    assert levels["l2"].bytes_per_s == 80.0  # 64 KiB, 512 KiB, 1 MiB: (48 KiB, 1 MiB]
    assert levels["l3"].bytes_per_s == 40.0  # 8 MiB: (2 MiB, 16 MiB]
    assert levels["dram"].bytes_per_s == 20.0  # >= 4 · 32 MiB
    none = level_bandwidths([1 * MIB], [5.0], [CacheLevel("l1", 48 * KIB, "t")])
    assert math.isnan(none[0].bytes_per_s) and "no measured working set" in none[0].note


# ------------------------------------------------------------------ analysis


def test_t_star_and_reference_intensities_match_the_seed() -> None:
    # H100 SXM bf16 ridge ≈ 295 FLOP/B: T* = 295·4096 / (4096 − 2·295) = 1,208,320 / 3,506 = 344.6
    assert analysis.t_star(295.0, 4096, 2) == pytest.approx(344.64, abs=0.01)
    assert math.isnan(analysis.t_star(2100.0, 4096, 2))  # b·I* = 4200 >= d: never compute-bound
    rows = analysis.reference_workloads({"bf16": 989.4e12}, 3.35e12, d=4096, gqa_group=4, tokens=2048)
    by_name = {r["workload"]: r for r in rows}
    assert by_name["batch-1 decode weight GEMV"]["intensity_flop_per_byte"] == 1.0  # 2/b, b = 2
    assert by_name["decode attention, GQA g=4"]["intensity_flop_per_byte"] == 4.0  # 2g/b
    # 2·2048·4096 / (2·(2·2048 + 4096)) = 16,777,216 / 16,384
    assert by_name["prefill GEMM, T=2048, d=4096"]["intensity_flop_per_byte"] == 1024.0
    assert by_name["prefill GEMM, T=2048, d=4096"]["bound"] == "compute"
    # memory-bound GEMV attains bandwidth · intensity: 3.35e12 · 1.0
    assert by_name["batch-1 decode weight GEMV"]["attainable_flop_per_s"] == pytest.approx(3.35e12)
    t = by_name["T* for a square GEMM of width d=4096"]["t_star_tokens"]
    assert t == pytest.approx(analysis.t_star(989.4e12 / 3.35e12, 4096, 2))


@pytest.mark.parametrize("elem_bytes", [1, 2, 4])
def test_t_star_solves_the_prefill_intensity_for_every_dtype_width(elem_bytes: int) -> None:
    # T* is defined by 2Td / (b(2T + d)) = I*, so T* = b·I*·d / (2(d − b·I*)); the seed's
    # I*·d / (d − b·I*) is that solution only for b = 2.
    # fp32 (b = 4), I* = 12.05, d = 4096: 4·12.05·4096 / (2·(4096 − 48.2)) = 197,427.2 / 8,095.6 = 24.387
    ridge, d = 12.05, 4096
    t = analysis.t_star(ridge, d, elem_bytes)
    assert 2 * t * d / (elem_bytes * (2 * t + d)) == pytest.approx(ridge, rel=1e-12)
    if elem_bytes == 4:
        assert t == pytest.approx(24.387, abs=0.001)
    assert math.isnan(analysis.t_star(d / elem_bytes, d, elem_bytes))  # b·I* = d: never compute-bound


def test_ridges_and_efficiency_against_a_datasheet() -> None:
    ridges = analysis.ridges({"bf16": 800e12}, {"dram": 4e12, "l2": 10e12})
    assert ridges == {"dram": {"bf16": 200.0}, "l2": {"bf16": 80.0}}
    spec = Machine(name="Spec", peak_flop_per_s={"bf16": 1000e12}, bandwidth_bytes_per_s={"dram": 5e12})
    eff = analysis.efficiency({"bf16": 800e12, "fp8": 1.0}, {"dram": 4e12, "l2": 10e12}, spec)
    assert eff["datasheet"] == "spec:Spec"
    assert eff["peak_flop_per_s.bf16"]["fraction"] == pytest.approx(0.8)
    assert eff["bandwidth_bytes_per_s.dram"]["fraction"] == pytest.approx(0.8)
    assert "peak_flop_per_s.fp8" not in eff and "bandwidth_bytes_per_s.l2" not in eff
    assert analysis.efficiency({"bf16": 1.0}, {}, None) == {}


def _gemm(dtype: str, m: int, n: int, k: int, rate: float, label: str = "p") -> dict[str, Any]:
    flop = 2 * m * n * k
    return {"kind": "gemm", "status": "measured", "dtype": dtype, "label": label, "m": m, "n": n, "k": k,
            "flop": flop, "flop_per_s": rate, "time_s": flop / rate, "path": "torch.matmul"}


def test_saturation_finds_the_first_shape_near_the_peak() -> None:
    pts = [_gemm("bf16", m, 4096, 4096, r)
           for m, r in ((1, 1e12), (128, 50e12), (512, 95e12), (2048, 100e12))]
    sat = analysis.saturation(pts)["bf16"]
    assert (sat["m"], sat["flop_per_s"]) == (512, 95e12)  # first >= 0.9 · 100e12
    assert sat["projections"]["p"]["m"] == 512


def test_summarize_builds_peaks_bandwidths_and_sources_from_points() -> None:
    plan = make_plan("cpu", quick=True, dtypes=("fp32",), last_cache_bytes=32 * MIB,
                     free_memory_bytes=8 << 30)
    env = {"device": "cpu", "device_name": "Test CPU", "threads_used": 2,
           "caches": {"l1": {"bytes": 48 * KIB}, "l2": {"bytes": 2 * MIB}}}
    points = [
        _gemm("fp32", 1024, 1024, 1024, 100e9, "square"), _gemm("fp32", 2048, 2048, 2048, 120e9, "square"),
        {"kind": "gemm", "status": "skipped", "dtype": "fp32", "reason": "budget"},
        {"kind": "stream", "status": "measured", "kernel": "copy", "description": "b = a",
         "buffer_bytes": 64 * MIB, "bytes": 128 * MIB, "time_s": 0.01, "bytes_per_s": 10e9},
        {"kind": "stream", "status": "measured", "kernel": "read", "description": "sum(a)",
         "buffer_bytes": 64 * MIB, "bytes": 64 * MIB, "time_s": 0.004, "bytes_per_s": 12e9},
        {"kind": "ladder", "status": "measured", "working_set_bytes": 16 * KIB, "bytes_per_s": 100e9},
        {"kind": "ladder", "status": "measured", "working_set_bytes": 512 * KIB, "bytes_per_s": 60e9},
        {"kind": "ladder", "status": "measured", "working_set_bytes": 16 * MIB, "bytes_per_s": 11e9},
    ]
    r = summarize(plan, env, points, {"tf32": "no TF32 matmul mode on the CPU"})
    assert r.peak_flop_per_s == {"fp32": 120e9}
    assert r.bandwidth_bytes_per_s == {"l1": 100e9, "l2": 60e9, "dram": 12e9}  # dram: the best stream (read)
    assert "square M=2048 N=2048 K=2048" in r.sources["peak_flop_per_s.fp32"]
    assert "best of 2 torch.matmul points" in r.sources["peak_flop_per_s.fp32"]
    assert "'read'" in r.sources["bandwidth_bytes_per_s.dram"]
    assert r.sources["peak_flop_per_s.tf32"] == "not measured: no TF32 matmul mode on the CPU"
    assert r.derived["ridges_flop_per_byte"]["dram"]["fp32"] == pytest.approx(10.0)  # 120e9 / 12e9


def test_json_safe_turns_nan_into_null() -> None:
    assert (json_safe({"a": math.nan, "b": [1.0, math.inf], "c": (1, "x")})
            == {"a": None, "b": [1.0, None], "c": [1, "x"]})


def test_inner_count_batches_short_calls() -> None:
    assert inner_count(1e-6, 2e-3) == 2000
    assert inner_count(5e-3, 2e-3) == 1
    assert inner_count(0.0, 2e-3) == 10_000


# ------------------------------------------------------------------ environment


def test_sysfs_caches_skip_instruction_caches(tmp_path: Path) -> None:
    for i, (level, kind, size) in enumerate([(1, "Data", "48K"), (1, "Instruction", "32K"),
                                             (2, "Unified", "2048K"), (3, "Unified", "307200K")]):
        d = tmp_path / f"index{i}"
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
    caches = cpu_caches_from_sysfs(tmp_path)
    assert [(c.name, c.bytes) for c in caches] == [("l1", 48 * KIB), ("l2", 2 * MIB), ("l3", 300 * MIB)]


def test_lscpu_caches_are_per_instance() -> None:
    text = ("L1d cache:  96 KiB (2 instances)\nL1i cache:  64 KiB (2 instances)\n"
            "L2 cache:   4 MiB (2 instances)\nL3 cache:   300 MiB (1 instance)\n")
    assert [(c.name, c.bytes) for c in cpu_caches_from_lscpu(text)] == [("l1", 48 * KIB), ("l2", 2 * MIB),
                                                                         ("l3", 300 * MIB)]
    assert parse_size("2048K") == 2 * MIB and parse_size("bogus") is None


# ------------------------------------------------------------------ busy machines (the cache: test_cache.py)


def test_a_busy_machine_is_flagged() -> None:
    from nsroof.collectors.measure.runner import busy_note

    assert busy_note({"logical_cpus": 2, "load_average_at_start": [0.5, 0.4, 0.3],
                      "load_average_at_end": [1.9, 1, 1]}) is None
    note = busy_note({"logical_cpus": 2, "load_average_at_start": [0.5, 0.4, 0.3],
                      "load_average_at_end": [6.4, 5, 3]})
    assert note is not None and note.startswith("load average up to 6.4 on 2 CPUs")
    assert note.endswith("(rerun on an idle machine, or with --threads 1 for steadier ratios)")
    # a run that already used one thread is not told to use one (issue 41, "CPU runs speak CPU")
    one = busy_note({"logical_cpus": 2, "load_average_at_start": [0.5, 0.4, 0.3],
                     "load_average_at_end": [6.4, 5, 3], "threads_used": 1})
    assert one is not None and one.endswith("(rerun on an idle machine)") and "--threads" not in one
    assert busy_note({"logical_cpus": 2}) is None  # no load average known: no claim


def test_without_cache_sizes_the_plateaus_name_the_levels() -> None:
    from nsroof.collectors.measure.ladder import levels_from_plateaus

    ws = [16 * KIB, 32 * KIB, 1 * MIB, 2 * MIB, 512 * MIB, 1024 * MIB]
    bw = [100.0, 100.0, 40.0, 40.0, 8.0, 8.0]
    levels = levels_from_plateaus(find_plateaus(ws, bw))
    assert [(lv.level, lv.bytes_per_s) for lv in levels] == [("l1", 100.0), ("l2", 40.0), ("dram", 8.0)]
    assert "cache sizes unknown" in levels[0].note
    assert levels_from_plateaus(find_plateaus([16 * KIB], [5.0])) == []
    plan = make_plan("cpu", quick=True, dtypes=("fp32",), last_cache_bytes=32 * MIB,
                     free_memory_bytes=8 << 30)
    points = [{"kind": "ladder", "status": "measured", "working_set_bytes": w, "bytes_per_s": b}
              for w, b in zip(ws, bw, strict=True)]
    r = summarize(plan, {"device": "cpu", "device_name": "x", "caches": {}}, points, {})
    # no streams: DRAM from the ladder
    assert r.bandwidth_bytes_per_s == {"l1": 100.0, "l2": 40.0, "dram": 8.0}
    assert "cache sizes unknown" in r.sources["bandwidth_bytes_per_s.dram"]


def test_an_unwritable_output_fails_before_measuring(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import nsroof.collectors.measure as measure_package

    calls: list[str] = []
    monkeypatch.setattr(measure_package, "measure", lambda device, **_: calls.append(device))
    res = CliRunner().invoke(cli, ["measure", "--device", "cpu", "--quick", "-o", str(tmp_path)])
    assert res.exit_code == 2
    assert f"nsroof: error: {tmp_path}: is a folder" in res.output
    assert calls == []  # nothing was measured


def test_the_ladder_reduces_one_contiguous_dimension() -> None:
    """The timed call sums each row of the stride-0 view: one reduce dim over contiguous memory (CUDA
    vectorizes it), one partial sum per pass, each the sum of the working set."""
    from nsroof.collectors.measure.ladder import _summer

    x = torch.arange(8, dtype=torch.float32)
    view = x.expand(3, 8)
    out = _summer(view)(0)
    assert out.shape == (3,) and out.tolist() == [28.0, 28.0, 28.0]  # 0 + 1 + … + 7 = 28, once per pass


def test_fp64_is_a_float64_matmul() -> None:
    plan = make_plan("cpu", quick=True, dtypes=("fp64",), last_cache_bytes=4 * MIB, free_memory_bytes=8 << 30)
    call, _ = make_call("fp64", GemmShape(16, 8, 4, "t"), plan, seed=3)
    out = call(0)
    assert out.dtype == torch.float64 and out.shape == (16, 8)
    # 8 bytes per element: A 16·4 + B 4·8 read, C 16·8 written = 8·(64 + 32 + 128) = 1792 bytes
    assert compulsory_bytes(GemmShape(16, 8, 4, "t"), "fp64") == 1792


def test_an_fp64_gemm_is_the_fp64_tensor_roof_too_where_the_gpu_has_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from nsroof.collectors.measure import runner
    from nsroof.roofs import machines

    h100 = {"device": "cuda", "compute_capability": "9.0"}
    monkeypatch.setitem(machines.RATE_KEYS, "peak_flop_per_s", (*machines.DENSE_DTYPES, "fp64_tensor"))
    assert runner.peak_keys("fp64", h100) == ("fp64", "fp64_tensor")
    # Ada: no DMMA
    assert runner.peak_keys("fp64", {"device": "cuda", "compute_capability": "8.9"}) == ("fp64",)
    assert runner.peak_keys("fp64", {"device": "cpu"}) == ("fp64",)
    assert runner.peak_keys("bf16", h100) == ("bf16",)
    plan = make_plan("cuda", quick=True, dtypes=("fp64",), last_cache_bytes=50 * MIB,
                     free_memory_bytes=8 << 30)
    result = runner.MeasureResult(plan=plan, environment=h100, points=[], peak_flop_per_s={"fp64": 6.0e13},
                                  bandwidth_bytes_per_s={"dram": 4.0e12},
                                  sources={"peak_flop_per_s.fp64": "measured: x",
                                           "bandwidth_bytes_per_s.dram": "y"},
                                  not_measured={})
    machine = runner.to_machine(result)
    # one measurement, both meanings
    assert machine.peak_flop_per_s == {"fp64": 6.0e13, "fp64_tensor": 6.0e13}
    assert machine.sources["peak_flop_per_s.fp64"] == "measured: x"
    assert machine.sources["peak_flop_per_s.fp64_tensor"].startswith(
        "measured: x (the fp64 GEMM: cuBLAS runs it on")
    monkeypatch.setitem(machines.RATE_KEYS, "peak_flop_per_s",
                        tuple(k for k in machines.DENSE_DTYPES if k != "fp64_tensor"))
    assert runner.peak_keys("fp64", h100) == ("fp64",)  # a machine table without the key: the plain fp64 roof


def test_matmul_precision_uses_the_new_api_when_a_script_set_it() -> None:
    # Once torch.backends.cuda.matmul.fp32_precision is set, torch.get_float32_matmul_precision() raises
    # on the mix of APIs: the measured GEMM sets and restores the new one instead.
    from nsroof.collectors.measure.gemm import matmul_precision

    matmul = torch.backends.cuda.matmul
    if not hasattr(matmul, "fp32_precision"):
        pytest.skip("torch without the fp32_precision API")
    old = matmul.fp32_precision
    try:
        matmul.fp32_precision = "tf32"
        with matmul_precision("fp32"):
            assert matmul.fp32_precision == "ieee"
        with matmul_precision("tf32"):
            assert matmul.fp32_precision == "tf32"
        assert matmul.fp32_precision == "tf32"
    finally:
        matmul.fp32_precision = old
