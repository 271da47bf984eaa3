"""A collective costed by its formula is judged against the GPU's interconnect, not DRAM
(nsroof.roofs.classify._link_rows, roofs from nsroof.roofs.ceilings.resolve_roofs)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from nsroof.pipeline import analyze
from tests._paths import SHARED_FIXTURES

B200 = SHARED_FIXTURES / "traces" / "tracelens__b200__eager_trace.json.gz"


def _x(cat: str, name: str, ts: float, dur: float, pid: Any = 1, tid: Any = 1, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def write_trace(tmp_path: Path, device: str, name: str = "ar.json") -> Path:
    """A 4-rank job's rank: vllm::all_reduce of a 1024×1024 fp32 tensor (its NCCL kernel: 20 µs on stream 20,
    from 100 µs) beside aten::mm 64×64·64×64 (its GEMM: 20 µs on stream 7, from 110 µs)."""
    events = [
        _x("cpu_op", "vllm::all_reduce", 0.0, 50.0, **{"External id": 1, "Input Dims": [[1024, 1024], []],
                                                      "Input type": ["float", ""]}),
        _x("cuda_runtime", "cudaLaunchKernel", 1.0, 1.0, correlation=11, **{"External id": 1}),
        _x("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 100.0, 20.0, pid=0, tid=20, correlation=11,
           device=0, stream=20),
        _x("cpu_op", "aten::mm", 60.0, 30.0, **{"External id": 2, "Input Dims": [[64, 64], [64, 64]],
                                                "Input type": ["float", "float"]}),
        _x("cuda_runtime", "cudaLaunchKernel", 61.0, 1.0, correlation=12, **{"External id": 2}),
        _x("kernel", "ampere_sgemm_64x64_nn", 110.0, 20.0, pid=0, tid=7, correlation=12, device=0, stream=7),
    ]
    path = tmp_path / name
    path.write_text(json.dumps({"traceEvents": events, "distributedInfo": {"world_size": 4, "rank": 0},
                                "deviceProperties": [{"id": 0, "name": device, "computeMajor": 9,
                                                      "computeMinor": 0}]}))
    return path


def test_a_collective_is_judged_against_the_interconnect_of_its_gpu(tmp_path: Path) -> None:
    frame = analyze(write_trace(tmp_path, "NVIDIA H100 80GB HBM3")).frame
    row = frame[frame["op"].astype(str) == "vllm::all_reduce"]
    assert len(row) == 1  # the link row stands where its dram row would: no DRAM judgement of its bus bytes
    r = row.iloc[0]
    assert r["level"] == "link" and r["bound"] == "memory" and r["limiting"] == "link"
    # all-reduce over n = 4 ranks: S = 1024·1024·4 B = 4,194,304 B;
    # bus bytes = S·2(n − 1)/n = S·1.5 = 6,291,456
    assert r["bytes"] == 6_291_456 and r["bytes_source"] == "analytic:vllm::all_reduce"
    # H100 SXM NVLink 4: 900 GB/s both ways (datasheet) -> 450 GB/s per direction
    assert r["bandwidth_bytes_per_s"] == 4.5e11 and "H100 datasheet" in r["ceiling_source"]
    # floor = 6,291,456 B / 4.5e11 B/s = 13.98 µs
    # (the adds, 1,048,576·3/4 = 786,432 FLOP at 66.9 TFLOP/s, 12 ns)
    assert r["flops"] == 786_432
    assert r["time_floor_s"] == pytest.approx(6_291_456 / 4.5e11, rel=1e-12)
    # achieved over attainable: 13.98 µs floor / 20 µs ran = 0.699
    assert r["roof_fraction"] == pytest.approx(6_291_456 / 4.5e11 / 20e-6, rel=1e-9)
    assert r["ideal_time_s"] == r["time_floor_s"] and r["min_bytes"] == 6_291_456
    from nsroof.report.summary import by_name

    name = by_name(frame).set_index("function").loc["ncclDevKernel_AllReduce_Sum_f32_RING_LL"]
    assert (name["bound"], name["limiting"]) == ("memory", "link")  # the per-name view reads the link row too
    assert name["roof_fraction"] == pytest.approx(6_291_456 / 4.5e11 / 20e-6, rel=1e-9)
    gemm = frame[frame["op"].astype(str) == "aten::mm"].iloc[0]
    assert gemm["level"] == "dram" and gemm["bandwidth_bytes_per_s"] != 4.5e11  # compute kernels keep DRAM


def test_an_unknown_interconnect_is_nan_with_the_missing_fact_never_dram(tmp_path: Path) -> None:
    frame = analyze(write_trace(tmp_path, "NVIDIA GeForce RTX 4090")).frame
    r = frame[frame["op"].astype(str) == "vllm::all_reduce"].iloc[0]
    assert r["level"] == "link" and r["bytes"] == 6_291_456
    assert (math.isnan(r["bandwidth_bytes_per_s"]) and math.isnan(r["time_floor_s"])
            and r["bound"] == "unknown")
    assert "bandwidth_bytes_per_s[link] (no interconnect figure for RTX 4090" in r["missing"]


@pytest.mark.skipif(not B200.exists(), reason="shared B200 trace absent")
def test_the_b200_all_reduces_stand_under_nvlink_5() -> None:
    frame = analyze(B200).frame
    ar = frame[frame["op"].astype(str) == "symm_mem::multimem_all_reduce_"]
    assert len(ar) == 73 and (ar["level"] == "link").all()  # 73 NVLS all-reduces, none judged against DRAM
    assert (ar["bandwidth_bytes_per_s"] == 9e11).all()
    first = ar.iloc[0]
    # 2,557,440 bf16 values over 8 ranks: S = 5,114,880 B, bus bytes S·2·7/8 = 8,951,040 B;
    # / 9e11 B/s = 9.95 µs
    assert first["bytes"] == 8_951_040
    assert first["time_floor_s"] == pytest.approx(8_951_040 / 9e11, rel=1e-12)
    assert "NVIDIA DGX B200 / HGX B200 datasheet" in first["ceiling_source"]
    # and the one NCCL all-gather (record_param_comms): 74 link rows, every one a collective's kernel
    links = frame[frame["level"].astype(str) == "link"]
    assert len(links) == 74 and set(links["op"].astype(str)) == {
        "symm_mem::multimem_all_reduce_", "record_param_comms"}
    assert links["kernel_name"].astype(str).str.contains("all_reduce|AllGather").all()
