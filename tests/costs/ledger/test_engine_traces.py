"""The engine ops of the shared serving traces costed from what the traces hold, without --model-config:
measured against the kernel time AMD's TraceLens costs on the same traces (its own reports, beside them in
../shared/fixtures/peer/tracelens), and on the B200 trace. Skipped where the shared fixtures are absent."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tests._paths import SHARED_FIXTURES

TRACES = SHARED_FIXTURES / "traces"
PEER = SHARED_FIXTURES / "peer" / "tracelens"
SETS = [
    ("tracelens__vllm_decode_full__graph_execution.json.gz",
     "tracelens__vllm_decode_full__graph_capture_rank_0.1773709742341309550.pt.trace.json.gz",
     "vllm_decode_full"),
    ("tracelens__sglang_decode__sglang_Qwen3-8B_decode.json.gz",
     "tracelens__sglang_decode__capture_bs_32_rank0.json.gz", "sglang_decode"),
]


def tracelens_costed_us(folder: Path) -> float:
    """The kernel time of the ops TraceLens costs: its unified_perf_summary.csv rows with FLOPs or bytes."""
    table = pd.read_csv(folder / "unified_perf_summary.csv")
    costed = table["GFLOPS"].notna() | table["Data Moved (MB)"].notna()
    return float(table.loc[costed, "Kernel Time (µs)_sum"].sum())


@pytest.mark.parametrize(("replay", "capture", "peer"), SETS)
def test_serving_decode_costs_at_least_the_kernel_time_tracelens_costs(replay: str, capture: str,
                                                                       peer: str) -> None:
    if not (TRACES / replay).exists() or not (PEER / peer).exists():
        pytest.skip("shared serving traces absent")
    from nsroof.pipeline import analyze

    report = analyze([TRACES / replay], captures=[TRACES / capture])
    ops = report.ops
    costed_us = float(ops.loc[ops["flops"].notna(), "duration_s"].sum()) * 1e6
    # the op-level view (one row per costed op with all its kernels' time) is what TraceLens's per-op
    # reports sum: vLLM 9,781.7 µs of 10,717.7, SGLang 9,677.4 µs of 9,778.6
    assert costed_us >= tracelens_costed_us(PEER / peer), costed_us
    # the engine ops the trace alone prices: the MoE (sizes from the calls under it), the attention (Σ kv
    # from the replay's step annotation) and the aiter norms
    costed_ops = set(ops.loc[ops["flops"].notna(), "op"].astype(str))
    expected = ({"vllm::moe_forward", "vllm::unified_attention_with_output",
                 "aiter::rmsnorm2d_fwd_with_add_ck"} if "vllm" in peer
                else {"sglang_profiler::attention_paged_attention_ragged_100"})
    assert expected <= costed_ops
    if "vllm" in peer:  # the MoE's routing kernels (top-k, the expert bitmatrix) carry none of its FLOPs
        kernels = report.frame[report.frame["level"].astype(str) == "dram"]
        routing = kernels[kernels["kernel_name"].astype(str).isin(["_topk_forward", "_sum_bitmatrix_rows"])]
        gemm = kernels[kernels["kernel_name"].astype(str).str.startswith("_matmul_ogs_")]
        assert len(routing) and routing["flops"].isna().all() and gemm["flops"].notna().all()


def test_b200_kernel_time_is_costed_without_a_model_config() -> None:
    trace = TRACES / "tracelens__b200__eager_trace.json.gz"
    if not trace.exists():
        pytest.skip("shared B200 trace absent")
    from nsroof.pipeline import analyze
    from nsroof.report.summary import analytic_coverage

    report = analyze([trace])
    share = float(analytic_coverage(report.frame, [trace.name])["share"].iloc[0])
    assert share >= 0.90, share
