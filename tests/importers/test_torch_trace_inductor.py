"""Triton kernels costed from Inductor's own estimates (kernel_flop, kernel_num_gb in the launch's record),
provenance inductor:…; without them, named uncosted with the reason."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from nsroof.models.machines import Machine
from nsroof.pipeline import analyze

H100 = Machine(name="test-h100", source="file", peak_flop_per_s={"fp32": 6.7e13, "bf16": 9.89e14},
               simt_flop_per_s={"fp32": 6.7e13, "fp16": 1.34e14}, bandwidth_bytes_per_s={"dram": 3.35e12})


def _x(cat: str, name: str, ts: float, dur: float, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}


def _triton_trace(tmp_path: Path, name: str, estimates: dict[str, float], dtype: str = "float") -> Path:
    """What kineto writes for an Inductor launch (torch/_inductor/runtime/triton_heuristics.py: a
    _RecordFunctionFast named by the kernel, its profiler kwargs as args) and the kernel it launches."""
    record = {"External id": 3, "kernel_backend": "triton", "kernel_file": "/tmp/k.py", "num_warps": 4,
              "Input type": [dtype, dtype, "Scalar"], "Input Dims": [[1024, 1024], [1024, 1024], []], **estimates}
    kernel = _x("kernel", name, 100, 20, correlation=9, device=0, stream=7)
    kernel.update(pid=0, tid=7)
    data = {"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0}],
            "traceEvents": [_x("cpu_op", "CompiledFunction", 0, 80, **{"External id": 2}),
                            _x("cpu_op", name, 10, 40, **record),
                            _x("cuda_runtime", "cuLaunchKernel", 20, 5, correlation=9, **{"External id": 3}), kernel]}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    return path


def _row(path: Path) -> Any:
    frame = analyze(path, machine=H100).frame
    return frame[frame["kernel_name"] != ""].iloc[0]


def test_a_triton_kernel_is_costed_from_inductors_estimates(tmp_path: Path) -> None:
    # a pointwise add of two 1024×1024 fp32 tensors: Inductor says 1,048,576 FLOP and 0.012582912 GB
    # (= 3 · 1024·1024 · 4 B = 12,582,912 B: two reads, one write)
    row = _row(_triton_trace(tmp_path, "triton_poi_fused_add_0", {"kernel_flop": 1048576, "kernel_num_gb": 0.012582912}))
    assert row["flops"] == 1048576 and row["precision"] == "fp32"
    assert row["bytes"] == 12582912
    assert row["flops_source"] == "inductor:kernel_flop, kernel_num_gb"
    assert row["bytes_source"] == "inductor:kernel_flop, kernel_num_gb"
    assert row["missing"] == ""


def test_a_bf16_template_kernel_runs_on_tensor_cores(tmp_path: Path) -> None:
    # mm template 1024³ in bf16: 2·1024³ = 2,147,483,648 FLOP
    row = _row(_triton_trace(tmp_path, "triton_tem_fused_mm_0", {"kernel_flop": 2 * 1024**3, "kernel_num_gb": 0.006291456},
                             dtype="c10::BFloat16"))
    assert (row["precision"], row["flops_tensor"]) == ("tensor", 2 * 1024**3)
    assert row["peak_flop_per_s"] == 9.89e14  # the dense BF16 tensor peak


def test_bytes_without_flops_and_no_estimates_at_all_say_so(tmp_path: Path) -> None:
    only_bytes = _row(_triton_trace(tmp_path, "triton_red_fused_sum_0", {"kernel_num_gb": 0.004194304}))
    assert only_bytes["bytes"] == 4194304 and math.isnan(only_bytes["flops"])
    assert "not its FLOPs" in only_bytes["missing"]
    bare = _row(_triton_trace(tmp_path, "triton_poi_fused_mul_1", {}))
    assert math.isnan(bare["flops"]) and math.isnan(bare["bytes"])
    assert "without Inductor's kernel_flop/kernel_num_gb" in bare["missing"]
