"""The ledger's aten costs on the shared real torch traces (../shared/fixtures/traces), through
`nsroof analyze`:
the coverage line per trace, and no op above a roof because of an assumed argument."""

from __future__ import annotations

from pathlib import Path

import pytest

from nsroof.costs.ledger.aten import NO_SHAPES, OpCost, on_kernel, op_cost
from tests._paths import SHARED_FIXTURES

TRACES = SHARED_FIXTURES / "traces"
ALEXNET = TRACES / "hta__alexnet_benchmark_result_2869224_1695835535_trace.json.gz"
SAMPLED = TRACES / "hta__timeline_analysis_sampled_rank-0.json.gz"
needs_traces = pytest.mark.skipif(not SAMPLED.is_file() or not ALEXNET.is_file(),
                                  reason="shared traces not present")


def _analyze(path: Path):  # type: ignore[no-untyped-def]
    from nsroof.pipeline import analyze

    # the traces come from A100s; the sampled one names no device
    return analyze(path, machine="a100-80gb")


@needs_traces
def test_coverage_is_printed_per_trace_with_the_largest_reason() -> None:
    from nsroof.report.summary import analytic_coverage, render

    alexnet = _analyze(ALEXNET)
    cov = analytic_coverage(alexnet.frame, [ALEXNET.name]).iloc[0]
    # HTA's alexnet trace was profiled without record_shapes: nothing is costed, and the reason says so
    assert (cov["costed"], cov["kernels"], cov["share"]) == (0, 79, 0.0)
    assert cov["uncovered"] == NO_SHAPES
    text = render(alexnet, width=250)  # a wide terminal: the reason is read whole (at 80 columns it wraps)
    assert "Coverage of the torch trace(s)" in text and "0.0% of" in text and NO_SHAPES in text

    sampled = _analyze(SAMPLED)
    cov = analytic_coverage(sampled.frame, [SAMPLED.name]).iloc[0]
    assert cov["kernels"] == 1154 and 0 < cov["costed"] < cov["kernels"] and 0 < cov["share"] < 1
    assert f"{cov['share']:.1%} of" in render(sampled)


@needs_traces
def test_no_shared_trace_runs_above_a_roof_because_of_an_assumed_argument() -> None:
    """What stays above a roof in the shared traces is not a costing assumption: a split-K reduce kernel
    whose GEMM kernel the sample dropped (the op's whole cost lands on the reduce), and pointwise ops whose
    working set fits the A100's 40 MB L2 (the previous kernel wrote the tensor there): e.g. the DDP trace's
    aten::mul on two [1024, 2560] fp32 tensors, 3 × 1024 × 2560 × 4 B = 31.5 MB in 9 µs = 1.7 × the
    1,555 GB/s DRAM roof, far below the L2 roof (5,120 B/cycle × 1.41 GHz = 7.2 TB/s).
    Before: 187 rows, among them fp32 matmuls run as TF32 held to the fp32 roof and `aten::linear` records
    whose input and weight disagree."""
    from nsroof.roofs import machines, roofline

    a100 = machines.resolve("a100-80gb")
    assert a100 is not None
    l2_bytes, l2_roof = a100.cache_bytes["l2"], a100.bandwidth_bytes_per_s["l2"]
    from nsroof.pipeline import analyze

    for path in sorted(TRACES.glob("*.json*")):
        # HTA's traces come from A100s (the sampled one names no device); the others name their own GPU
        frame = (_analyze(path) if path.name.startswith("hta__") else analyze(path)).frame
        above = frame[frame["above_roof"].astype(bool)]
        assert set(above["function"].astype(str)) <= {"splitKreduce_kernel",
                                                      "vectorized_elementwise_kernel"}, path.name
        elementwise = above[above["function"].astype(str) == "vectorized_elementwise_kernel"]
        assert set(elementwise["level"]) <= {"dram"}, path.name
        assert bool((elementwise["bytes"] <= l2_bytes).all()), path.name
        assert bool((elementwise["achieved_bytes_per_s"] < l2_roof).all()), path.name
        # the report says so: its cause names the cache (roofline.above_roof_cause)
        assert all(str(c).startswith("working set") for c in elementwise["above_roof_cause"]), path.name
        assert (frame.loc[~frame["above_roof"].astype(bool), "above_roof_cause"] == "").all(), path.name
    # 60 MB > 40 MB
    assert roofline.above_roof_cause("dram", 60e6, l2_bytes, False) == roofline.CAUSE_COUNTING
    assert roofline.above_roof_cause("l2", 1e6, l2_bytes, False) == roofline.CAUSE_COUNTER
    assert roofline.above_roof_cause("dram", 1e6, l2_bytes, True) == roofline.CAUSE_FLOPS


def test_a_tf32_kernel_puts_an_fp32_matmul_under_the_tf32_roof() -> None:
    fp32 = op_cost("aten::mm", [[64, 64], [64, 64]], ["float", "float"])
    assert (fp32.precision, fp32.roof_kind) == ("fp32", "matmul")
    for name in ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_tn_align1>(…)",
                 "sm80_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x16_stage4_"
                 "warpsize2x2x1_tensor16x8x8_kernel"):
        tf32 = on_kernel(fp32, name)
        assert (tf32.precision, tf32.tensor_dtype, tf32.flops) == ("tensor", "tf32", fp32.flops)
    assert on_kernel(fp32, "ampere_sgemm_128x64_nn") == fp32  # SIMT fp32 SGEMM: the fp32 roof stays
    pointwise = op_cost("aten::add", [[8], [8], []], ["float", "float", "Scalar"])
    assert on_kernel(pointwise, "tf32_named_elementwise") == pointwise  # not a matmul
    unknown = OpCost(float("nan"), float("nan"), "", "", "", "why")
    assert on_kernel(unknown, "tf32") is unknown


def test_inconsistent_matmul_records_are_not_costed() -> None:
    # an aten::linear record of HTA's sampled trace: 4 inputs whose first does not match the weight
    bad = op_cost("aten::linear", [[2048, 160, 72], [2048, 2400], [256, 2400], [256]], ["float"] * 4)
    assert not bad.known and "not (input, weight[, bias])" in bad.missing
    assert not op_cost("aten::addmm", [[8], [4, 5], [6, 8], [], []], ["float"] * 3).known
    assert not op_cost("aten::bmm", [[2, 4, 5], [3, 5, 6]], ["float"] * 2).known
