"""How a trace's kernels are costed beyond the op formula: FP64 GEMMs on devices with FP64 tensor cores are
judged against the FP64 tensor roof, picked like TF32 (the op's dtype and formula, the device: CC 8.0 / 9.0 /
10.0, and the kernel: a SIMT kernel is not); Triton kernels are costed from Inductor's own estimates
(kernel_flop, kernel_num_gb in the launch's record), provenance inductor:…, or named uncosted with the
reason."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from nsroof.pipeline import analyze
from nsroof.roofs.machines import Machine

# H100 SXM datasheet: FP64 Tensor Core 67 TFLOP/s, FP64 (CUDA cores) 34 TFLOP/s, 3.35 TB/s
H100 = Machine(name="test-h100", source="file", peak_flop_per_s={"fp64": 6.7e13, "fp32": 6.7e13},
               simt_flop_per_s={"fp64": 3.4e13, "fp32": 6.7e13}, bandwidth_bytes_per_s={"dram": 3.35e12})


def _x(cat: str, name: str, ts: float, dur: float, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}


def _launch_trace(tmp_path: Path, op: str, op_args: dict[str, Any], kernel: str, *,
                  cc: tuple[int, int] = (9, 0), outer: tuple[dict[str, Any], ...] = ()) -> Path:
    """One op (External id 3) launching one kernel on an H100-named device of compute capability `cc`."""
    kernel_event = _x("kernel", kernel, 100, 10, correlation=7, device=0, stream=7)
    kernel_event.update(pid=0, tid=7)
    data = {
        "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": cc[0],
                              "computeMinor": cc[1]}],
        "traceEvents": [*outer, _x("cpu_op", op, 10, 50, **{"External id": 3, **op_args}),
                        _x("cuda_runtime", "cudaLaunchKernel", 20, 5, correlation=7, **{"External id": 3}),
                        kernel_event],
    }
    path = tmp_path / f"{kernel}-{cc[0]}{cc[1]}-{len(list(tmp_path.iterdir()))}.json"
    path.write_text(json.dumps(data))
    return path


def _mm_trace(tmp_path: Path, *, kernel: str, dtype: str = "double", cc: tuple[int, int] = (9, 0)) -> Path:
    """One torch.mm of (64×128)·(128×32) launching one kernel."""
    return _launch_trace(tmp_path, "aten::mm",
                         {"Input Dims": [[64, 128], [128, 32]], "Input type": [dtype, dtype]}, kernel, cc=cc)


def _kernel_row(path: Path, machine: Machine = H100) -> Any:
    frame = analyze(path, machine=machine).frame
    return frame[frame["kernel_name"] != ""].iloc[0]


def test_an_fp64_gemm_on_hopper_is_judged_against_the_fp64_tensor_roof(tmp_path: Path) -> None:
    row = _kernel_row(_mm_trace(tmp_path, kernel="sm90_xmma_gemm_f64f64_f64f64_f64_nt_tensor8x8x4"))
    # mm(64, 32, 128) = 2·64·32·128 = 524,288 FLOP, all on the FP64 tensor roof (67 TFLOP/s, not 34)
    assert (row["precision"], row["flops_tensor"]) == ("tensor", 2 * 64 * 32 * 128)
    assert row["peak_flop_per_s"] == 6.7e13
    assert "[FP64 tensor cores]" in row["flops_source"]


@pytest.mark.parametrize(("kernel", "dtype", "cc", "why"), [
    ("cutlass_80_simt_dgemm_128x128_8x2_nn_align1", "double", (9, 0), "a SIMT kernel runs on CUDA cores"),
    ("ampere_dgemm_64x64_nn", "double", (8, 6), "an RTX 30xx (CC 8.6) has no FP64 tensor cores"),
    ("volta_dgemm_128x64_nn", "double", (7, 0), "a V100 has none"),
])
def test_fp64_stays_on_the_cuda_core_roof_where_there_are_no_fp64_tensor_cores(
        tmp_path: Path, kernel: str, dtype: str, cc: tuple[int, int], why: str) -> None:
    row = _kernel_row(_mm_trace(tmp_path, kernel=kernel, dtype=dtype, cc=cc))
    assert row["precision"] == "fp64", why
    assert row["peak_flop_per_s"] == 3.4e13, why  # the CUDA-core (SIMT) fp64 rate


def test_fp32_is_untouched_and_an_a100_has_fp64_tensor_cores(tmp_path: Path) -> None:
    assert (_kernel_row(_mm_trace(tmp_path, kernel="sm90_xmma_gemm_f32f32", dtype="float"))["precision"]
            == "fp32")
    assert (_kernel_row(_mm_trace(tmp_path, kernel="sm80_xmma_gemm_f64f64", cc=(8, 0)))["precision"]
            == "tensor")


def test_the_machine_tables_h100_gives_the_fp64_tensor_rate_not_the_cuda_core_one(tmp_path: Path) -> None:
    from nsroof.roofs import machines

    h100 = machines.load("h100-sxm")
    frame = analyze(_mm_trace(tmp_path, kernel="sm90_xmma_gemm_f64f64_f64f64_f64_nt"), machine=h100).frame
    row = frame[frame["kernel_name"] != ""].iloc[0]
    # H100 SXM datasheet: FP64 Tensor Core 67 TFLOP/s (66.9e12 in the table), FP64 on CUDA cores 34 (33.5e12)
    assert row["peak_flop_per_s"] == h100.peak_flop_per_s["fp64"] == pytest.approx(66.9e12)
    assert h100.simt_flop_per_s["fp64"] == pytest.approx(33.5e12)


# --------------------------------------------------------------------------- Inductor's estimates

# H100 SXM dense rates for the Triton kernels below: BF16 tensor 989 TFLOP/s, FP32 67, 3.35 TB/s
H100_BF16 = Machine(name="test-h100", source="file", peak_flop_per_s={"fp32": 6.7e13, "bf16": 9.89e14},
                    simt_flop_per_s={"fp32": 6.7e13, "fp16": 1.34e14},
                    bandwidth_bytes_per_s={"dram": 3.35e12})


def _triton_trace(tmp_path: Path, name: str, estimates: dict[str, float], dtype: str = "float") -> Path:
    """What kineto writes for an Inductor launch (torch/_inductor/runtime/triton_heuristics.py: a
    _RecordFunctionFast named by the kernel, its profiler kwargs as args) and the kernel it launches."""
    record = {"kernel_backend": "triton", "kernel_file": "/tmp/k.py", "num_warps": 4,
              "Input type": [dtype, dtype, "Scalar"], "Input Dims": [[1024, 1024], [1024, 1024], []],
              **estimates}
    return _launch_trace(tmp_path, name, record, name, outer=(_x("cpu_op", "CompiledFunction", 0, 80),))


def test_a_triton_kernel_is_costed_from_inductors_estimates(tmp_path: Path) -> None:
    # a pointwise add of two 1024×1024 fp32 tensors: Inductor says 1,048,576 FLOP and 0.012582912 GB
    # (= 3 · 1024·1024 · 4 B = 12,582,912 B: two reads, one write)
    row = _kernel_row_bf16(_triton_trace(tmp_path, "triton_poi_fused_add_0",
                                         {"kernel_flop": 1048576, "kernel_num_gb": 0.012582912}))
    assert row["flops"] == 1048576 and row["precision"] == "fp32"
    assert row["bytes"] == 12582912
    assert row["flops_source"] == "inductor:kernel_flop, kernel_num_gb"
    assert row["bytes_source"] == "inductor:kernel_flop, kernel_num_gb"
    assert row["missing"] == ""


def test_bytes_without_flops_and_no_estimates_at_all(tmp_path: Path) -> None:
    only_bytes = _kernel_row_bf16(_triton_trace(tmp_path, "triton_red_fused_sum_0",
                                                {"kernel_num_gb": 0.004194304}))
    assert only_bytes["bytes"] == 4194304 and math.isnan(only_bytes["flops"])
    assert only_bytes["bytes_source"] == "inductor:kernel_num_gb"
    bare = _kernel_row_bf16(_triton_trace(tmp_path, "triton_poi_fused_mul_1", {}))
    assert math.isnan(bare["flops"]) and math.isnan(bare["bytes"])
    assert "triton_poi_fused_mul_1" in bare["missing"]  # uncosted: no formula, no estimate


def _kernel_row_bf16(path: Path) -> Any:
    return _kernel_row(path, H100_BF16)


# --------------------------------------------------------------------------- Inductor's kernels, no estimates


def _launch(tmp_path: Path, name: str, record: dict[str, Any]) -> Path:
    """An Inductor launch record (kernel_backend triton, its arguments' shapes and values) and its kernel."""
    return _launch_trace(tmp_path, name, {"kernel_backend": "triton", "num_warps": 4, **record}, name,
                         outer=(_x("cpu_op", "CompiledFunction", 0, 80),))


def test_a_triton_kernel_without_estimates_is_costed_from_its_launchs_shapes(tmp_path: Path) -> None:
    # a pointwise add + relu of x[256, 1024] and b[1024], fp32, xnumel = 262,144 (the last integer; XBLOCK
    # alone: one numel); the kernel file it names is not here
    row = _kernel_row_bf16(_launch(tmp_path, "triton_poi_fused_add_relu_0", {
        "Input Dims": [[256, 1024], [1024], [256, 1024], []], "Input type": ["float"] * 3 + ["Scalar"],
        "Concrete Inputs": ["", "", "", "262144"], "kernel_kwargs": "XBLOCK=1024",
        "kernel_file": str(tmp_path / "not-here.py")}))
    assert row["flops"] == 262144 * 2  # add 1 + relu 1 per element
    assert row["bytes"] == (262144 * 2 + 1024) * 4 == 2_101_248  # x, y and b once
    assert row["flops_source"] == ("analytic:triton-pointwise(n=262144, ops=add+relu, flops_per_element=2, "
                                   "dtype=fp32)")
    assert row["bytes_source"] == "analytic:triton-pointwise"
    # 2,101,248 B at 3.35 TB/s = 627 ns at best; the kernel ran 10 µs
    assert row["time_floor_s"] == pytest.approx(2_101_248 / 3.35e12)


def test_a_local_kernel_file_gives_argument_roles_numels_and_inductors_estimate(tmp_path: Path) -> None:
    from tests.importers.trace.test_inductor_cache import write_kernel

    record = {"Input Dims": [[1024], [1024], []], "Input type": ["float", "float", "Scalar"],
              "Concrete Inputs": ["", "", "1024"]}
    # no kernel_kwargs, no grid: the file names xnumel, and in_out_ptr0 is read and written
    row = _kernel_row_bf16(_launch(tmp_path, "triton_poi_fused_add_relu_0",
                                   {**record, "kernel_file": str(write_kernel(tmp_path))}))
    assert (row["flops"], row["bytes"]) == (1024 * 2, 1024 * 4 * 3)  # add + relu; in_out twice, in once
    # the file states Inductor's bytes (kernel_num_gb 1.2288e-05 = 12,288 B) but no FLOPs: the formula's stay
    stated = tmp_path / "stated"
    stated.mkdir()
    row = _kernel_row_bf16(_launch(stated, "triton_poi_fused_add_relu_0", {
        **record, "kernel_file": str(write_kernel(stated, ", 'kernel_num_gb': 1.2288e-05"))}))
    assert (row["flops"], row["bytes"]) == (2048, pytest.approx(12288))
    assert row["bytes_source"] == "inductor:kernel_num_gb (kernel file)"
    assert row["flops_source"] == ("inductor:kernel_num_gb (kernel file) (bytes); FLOPs by "
                                   "triton-pointwise(n=1024, ops=add+relu, flops_per_element=2, dtype=fp32)")


def test_the_ops_table_view_costs_the_launch_as_its_kernel(tmp_path: Path) -> None:
    report = analyze(_launch(tmp_path, "triton_red_fused_sum_0", {
        "Input Dims": [[64, 512], [64], [], []], "Input type": ["float", "float", "Scalar", "Scalar"],
        "Concrete Inputs": ["", "", "64", "512"], "kernel_kwargs": "XBLOCK=1,R0_BLOCK=512"}),
        machine=H100_BF16)
    kernel = report.frame[report.frame["kernel_name"] == "triton_red_fused_sum_0"].iloc[0]
    assert (kernel["flops"], kernel["bytes"]) == (64 * 512, (64 * 512 + 64) * 4)  # 1 add per element
    op = report.ops[report.ops["op"] == "triton_red_fused_sum_0"].iloc[0]
    assert (op["flops"], op["bytes"], op["flops_source"]) == (kernel["flops"], kernel["bytes"],
                                                               kernel["flops_source"])


def test_the_ops_table_view_takes_inductors_estimates_as_its_kernel_does(tmp_path: Path) -> None:
    report = analyze(_triton_trace(tmp_path, "triton_poi_fused_add_0",
                                   {"kernel_flop": 1048576, "kernel_num_gb": 0.012582912}), machine=H100_BF16)
    op = report.ops[report.ops["op"] == "triton_poi_fused_add_0"].iloc[0]
    assert (op["flops"], op["bytes"]) == (1048576, 12582912)
    assert op["flops_source"] == op["bytes_source"] == "inductor:kernel_flop, kernel_num_gb"


def test_a_graph_replayed_triton_kernel_is_costed_from_its_capture_launch_record(tmp_path: Path) -> None:
    # the capture trace records the launch (its estimates or its shapes); the replay only the graph launch
    name = "triton_poi_fused__to_copy_0"
    record = {"External id": 1, "kernel_backend": "triton", "kernel_kwargs": "XBLOCK=1024",
              "Input Dims": [[4096, 64], [4096, 64], []], "Input type": ["float", "c10::BFloat16", "Scalar"],
              "Concrete Inputs": ["", "", "262144"]}
    capture = {"traceEvents": [
        _x("cuda_runtime", "cudaStreamBeginCapture", 105, 1, correlation=10),
        _x("cpu_op", name, 110, 20, **record),
        _x("cuda_runtime", "cudaLaunchKernel", 115, 5, correlation=11, **{"External id": 1}),
        _x("cuda_runtime", "cudaStreamEndCapture", 190, 1, correlation=12)]}
    kernel = _x("kernel", name, 1020, 10, device=0, stream=7, correlation=50)
    kernel.update(pid=0, tid=7)
    replay = {"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9,
                                    "computeMinor": 0}],
              "traceEvents": [_x("cuda_runtime", "cudaGraphLaunch", 1010, 5, correlation=50), kernel]}
    paths = []
    for label, data in (("capture", capture), ("replay", replay)):
        paths.append(tmp_path / f"{label}.json")
        paths[-1].write_text(json.dumps(data))
    frame = analyze(paths[1], machine=H100_BF16, captures=[paths[0]]).frame
    row = frame[frame["kernel_name"] == name].iloc[0]
    # fp32 → bf16 of 262,144 elements: 0 FLOP, 262,144·(4 + 2) = 1,572,864 B
    assert (row["flops"], row["bytes"]) == (0, 1572864)
    stated = tmp_path / "stated"
    stated.mkdir()
    capture["traceEvents"][1]["args"].update(kernel_flop=0, kernel_num_gb=0.001572864)
    (stated / "capture.json").write_text(json.dumps(capture))
    frame = analyze(paths[1], machine=H100_BF16, captures=[stated / "capture.json"]).frame
    row = frame[frame["kernel_name"] == name].iloc[0]
    assert row["bytes_source"] == "inductor:kernel_flop, kernel_num_gb"
    assert row["bytes"] == pytest.approx(1572864)
