"""Classifying kernels at every level: roofs from the export first, then --machine, then the device table."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsroof.roofs.aggregate import aggregate
from nsroof.roofs.classify import build_report, limiting
from nsroof.roofs.machines import Machine
from nsroof.schema import COLUMNS
from tests.pipeline.helpers import A100ISH, kernels, quantities


def test_one_row_per_kernel_and_level_in_schema_order() -> None:
    r = build_report(kernels(2), quantities(2), A100ISH)
    assert list(r.columns) == COLUMNS
    assert list(r["level"]) == ["dram", "l2", "l1", "dram", "l2", "l1"]
    assert list(r["kernel_id"]) == [0, 0, 0, 1, 1, 1]


def test_memory_bound_kernel_against_machine_roofs() -> None:
    q = quantities(1, duration_s=[1e-3], flops_fp32=[2e9], bytes_dram=[4e8], bytes_l2=[8e8])
    r = build_report(kernels(1), q, A100ISH).set_index("level")
    dram = r.loc["dram"]
    # I = 2e9 / 4e8 = 5 FLOP/B; ridge = 19.5e12 / 1.555e12 = 12.54 -> memory-bound
    assert dram["intensity"] == 5.0 and dram["bound"] == "memory"
    assert dram["precision"] == "fp32" and dram["peak_flop_per_s"] == 19.5e12
    # achieved 2e9 / 1e-3 = 2e12 FLOP/s of attainable 5 * 1.555e12 = 7.775e12 -> 0.2572
    assert math.isclose(dram["roof_fraction"], 2e12 / 7.775e12)
    assert dram["achieved_bytes_per_s"] == 4e11
    assert dram["ceiling_source"] == "spec:Test A100"
    # L2: I = 2e9 / 8e8 = 2.5, ridge = 19.5e12 / 7e12 = 2.79 -> memory; floor 8e8 / 7e12 = 1.143e-4
    assert r.loc["l2", "bound"] == "memory"
    # DRAM's floor 4e8 / 1.555e12 = 2.572e-4 s beats L2's 1.143e-4 s, but L1's is unknown: no verdict
    assert set(r["limiting"]) == {""}
    # L1 has neither bytes nor a bandwidth: unknown, and says which metric is missing
    assert r.loc["l1", "bound"] == "unknown"
    assert "l1tex__t_bytes.sum" in r.loc["l1", "missing"]
    assert "bandwidth_bytes_per_s[l1]" in r.loc["l1", "missing"]


def _with_ncu_ceilings() -> pd.DataFrame:
    return quantities(
        1, duration_s=[1e-3], flops_fp32=[2e9], bytes_dram=[4e8],
        peak_flop_per_s_fp32=[10e12], ceiling_source_fp32=["ncu:ffma.peak_sustained*2*sm_clock"],
        bandwidth_bytes_per_s_dram=[1.0e12], ceiling_source_dram=["ncu:dram.peak_sustained*dram_clock"],
    )


def test_ncu_ceilings_win_over_the_machine_table() -> None:
    # the device's datasheet entry (the resolver) yields to the export's own ceilings
    dram = build_report(kernels(1), _with_ncu_ceilings(), resolver=lambda _device: A100ISH).iloc[0]
    assert dram["peak_flop_per_s"] == 10e12 and dram["bandwidth_bytes_per_s"] == 1.0e12
    assert dram["ceiling_source"].startswith("compute=ncu:")
    assert dram["ridge"] == 10.0  # 10e12 / 1e12


def test_an_explicit_machine_overrides_the_export_ceilings() -> None:
    # --machine is a what-if: its 19.5e12 and 1.555e12 replace ncu's 10e12 and 1e12 where it has a figure;
    # L1, which it lacks, would keep ncu's (none here)
    r = build_report(kernels(1), _with_ncu_ceilings(), A100ISH).set_index("level")
    assert r.loc["dram", "peak_flop_per_s"] == 19.5e12 and r.loc["dram", "bandwidth_bytes_per_s"] == 1.555e12
    assert r.loc["dram", "ceiling_source"] == "spec:Test A100"
    assert r.loc["dram", "ridge"] == pytest.approx(19.5e12 / 1.555e12)  # 12.54


def test_precision_is_the_one_carrying_most_flops() -> None:
    q = quantities(2, duration_s=[1e-3, 1e-3], flops_fp32=[1e6, 0.0], flops_tensor=[5e9, 0.0],
                   bytes_dram=[1e6, 1e6],
                   tensor_metric=["sm__ops_path_tensor_src_bf16_dst_fp32_sparsity_off", ""])
    r = build_report(kernels(2), q, A100ISH)
    first = r[r["kernel_id"] == 0].iloc[0]
    assert first["precision"] == "tensor" and first["peak_flop_per_s"] == 312e12
    # a kernel with no FLOPs has no precision but still sits under the fp32 roof, memory-bound at I = 0
    second = r[r["kernel_id"] == 1].iloc[0]
    assert second["precision"] == "" and second["bound"] == "memory"
    assert second["roof_fraction"] == pytest.approx((1e6 / 1e-3) / 1.555e12)


def test_unknown_device_without_machine_is_unknown_with_reason() -> None:
    q = quantities(1, duration_s=[1e-3], flops_fp32=[2e9], bytes_dram=[4e8])
    r = build_report(kernels(1, device=["Mystery GPU 9000"]), q, resolver=lambda d: None)
    assert set(r["bound"]) == {"unknown"}
    assert "not in the machine table" in r.iloc[0]["missing"]
    assert np.isnan(r.iloc[0]["time_floor_s"])


def test_above_roof_is_flagged() -> None:
    # 2e9 bytes in 1 ms = 2e12 B/s > 1.05 * 1.555e12
    q = quantities(1, duration_s=[1e-3], flops_fp32=[1e6], bytes_dram=[2e9])
    r = build_report(kernels(1), q, A100ISH)
    assert bool(r.iloc[0]["above_roof"]) is True


def test_aggregate_sums_totals_and_reclassifies() -> None:
    k = kernels(3, kernel_name=["void a()", "void a()", "void b()"], function=["a", "a", "b"])
    q = quantities(3, duration_s=[1e-3, 3e-3, 1e-3], flops_fp32=[1e9, 3e9, 1e9],
                   bytes_dram=[1e8, 3e8, np.nan])
    ka, qa = aggregate(k, q)
    assert list(ka["launches"]) == [2, 1]
    assert list(ka["kernel_id"]) == [0, 2]
    # 1e9 + 3e9 = 4e9 FLOP in 1e-3 + 3e-3 = 4e-3 s
    assert qa.loc[0, "flops_fp32"] == 4e9 and qa.loc[0, "duration_s"] == 4e-3
    assert np.isnan(qa.loc[1, "bytes_dram"])  # never a partial sum
    r = build_report(ka, qa, A100ISH)
    assert r[r["level"] == "dram"].iloc[0]["intensity"] == 10.0  # 4e9 / 4e8


def test_empty_input_gives_empty_report() -> None:
    r = build_report(kernels(0), quantities(0), A100ISH)
    assert len(r) == 0 and list(r.columns) == COLUMNS
    assert isinstance(r, pd.DataFrame)


@pytest.mark.parametrize(
    "metric, peak",
    [
        ("sm__ops_path_tensor_src_fp8_sparsity_off", 1979e12),  # H100-ish dense fp8
        ("sm__ops_path_tensor_src_tf32_dst_fp32_sparsity_off", 494.7e12),
        ("sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32_sparsity_off", 989.4e12),
        ("sm__ops_path_tensor_src_fp64", 66.9e12),
        ("sm__ops_path_tensor_src_int8_sparsity_off", 1979e12),
    ],
)
def test_tensor_flops_stand_under_their_dtype_roof(metric: str, peak: float) -> None:
    h100ish = Machine(name="H", peak_flop_per_s={"fp64": 66.9e12, "tf32": 494.7e12, "bf16": 989.4e12,
                                                  "fp16": 989.4e12, "fp8": 1979e12, "int8": 1979e12},
                      bandwidth_bytes_per_s={"dram": 3.35e12})
    q = quantities(1, duration_s=[1e-3], flops_fp32=[0.0], flops_tensor=[1.5e12], bytes_dram=[1e8],
                   tensor_metric=[metric])
    row = build_report(kernels(1), q, h100ish).iloc[0]
    assert row["peak_flop_per_s"] == peak
    assert row["ceiling_source"] == "spec:H"


def test_a_tensor_path_without_a_single_dtype_has_no_machine_roof() -> None:
    # fp4/fp6/fp8 lumped in one path: no single dense roof, so NaN and the reason, never the fp16 rate
    q = quantities(1, duration_s=[1e-3], flops_fp32=[0.0], flops_tensor=[1e12], bytes_dram=[1e8],
                   tensor_metric=["sm__ops_path_tensor_src_fp4_fp6_fp8_dst_fp32"])
    row = build_report(kernels(1), q, A100ISH).iloc[0]
    assert np.isnan(row["peak_flop_per_s"]) and row["bound"] == "unknown"
    assert "tensor path sm__ops_path_tensor_src_fp4_fp6_fp8_dst_fp32" in row["missing"]


def test_an_analytic_source_states_its_tensor_dtype() -> None:
    # a profiled bf16 matmul has no ncu metric: the collector names the dtype instead
    q = quantities(1, duration_s=[1e-3], flops_fp32=[0.0], flops_tensor=[1e12], bytes_dram=[1e8],
                   tensor_dtype=["bf16"])
    assert build_report(kernels(1), q, A100ISH).iloc[0]["peak_flop_per_s"] == 312e12


def _limiting_by_groupby(report: pd.DataFrame) -> pd.Series:
    """The limiting level as first written (pandas groupby transforms over a string key): the reference."""
    key = report["source"].astype(str) + "\x00" + report["kernel_id"].astype(str)
    with np.errstate(divide="ignore", invalid="ignore"):
        memory_s = report["bytes"].astype("float64") / report["bandwidth_bytes_per_s"].astype("float64")
        compute_s = report["flops"].astype("float64") / report["peak_flop_per_s"].astype("float64")
    worst_memory = memory_s.fillna(-1.0).groupby(key, sort=False).transform("max")
    is_worst = (memory_s == worst_memory) & memory_s.notna()
    level_of_worst = (report["level"].astype(object).where(is_worst).groupby(key, sort=False)
                      .transform("first"))
    worst_compute = compute_s.groupby(key, sort=False).transform("max")
    out = level_of_worst.where(~(worst_compute.notna() & (worst_compute >= worst_memory)), "compute")
    known = (memory_s.notna() & compute_s.notna()).groupby(key, sort=False).transform("all")
    return out.where(known, "").fillna("").astype(object)


_FLOOR = st.sampled_from([float("nan"), 0.0, 1.0, 2.0, 4.0, float("inf")])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a.csv", "b.csv"]), st.integers(0, 3),
                          st.sampled_from(["dram", "l2", "l1"]), _FLOOR, _FLOOR, _FLOOR, _FLOOR),
                max_size=24))
def test_limiting_level_equals_the_groupby_reference(
        rows: list[tuple[str, int, str, float, float, float, float]]) -> None:
    # rows in any order, repeated levels, unknown and zero roofs: the kernel (source, id) groups them
    frame = pd.DataFrame(rows, columns=["source", "kernel_id", "level", "bytes", "bandwidth_bytes_per_s",
                                        "flops", "peak_flop_per_s"])
    frame["kernel_id"] = frame["kernel_id"].astype("Int64")
    with np.errstate(divide="ignore", invalid="ignore"):
        memory_s = frame["bytes"].to_numpy(float) / frame["bandwidth_bytes_per_s"].to_numpy(float)
        compute_s = frame["flops"].to_numpy(float) / frame["peak_flop_per_s"].to_numpy(float)
    got = limiting(frame["source"].to_numpy(dtype=object), frame["kernel_id"].to_numpy(dtype=object),
                   memory_s, compute_s, frame["level"].to_numpy(dtype=object))
    assert got.tolist() == _limiting_by_groupby(frame).tolist()


# ---------------------------------------------------------------- clocks and tensor-pipe estimates

CLOCKED = Machine(name="Clocked A100", peak_flop_per_s={"fp32": 19.5e12, "fp16": 312e12},
                  simt_flop_per_s={"fp32": 19.5e12}, bandwidth_bytes_per_s={"dram": 1.555e12}, sm_count=108,
                  clocks_hz={"boost": 1.41e9}, bytes_per_cycle={"l2": 5120, "l1": 128})


def _estimate(inst: float, **extra: list[float]) -> pd.DataFrame:
    """One kernel whose tensor FLOPs derive() estimated at the default 4096 FLOP/instruction (CC 8.0)."""
    source = "sm__inst_executed_pipe_tensor.sum × 4096 (FLOP/instruction at this CC)"
    return quantities(1, duration_s=[1e-3], flops_fp32=[0.0], flops_tensor=[inst * 4096], bytes_dram=[1e6],
                      tensor_inst=[inst], flops_source_tensor=[source],
                      flops_source=[f"fp32: x; tensor: {source}"], **extra)


def test_datasheet_roofs_at_the_recorded_sm_clock() -> None:
    # 765 MHz recorded: FP32 19.5e12 × 765 / 1410 = 10.58e12; L2 5120 B × 765e6 = 3.917e12;
    # L1 128 × 108 × 765e6
    q = quantities(1, duration_s=[1e-3], flops_fp32=[2e9], bytes_dram=[4e8], bytes_l2=[4e8], bytes_l1=[4e8],
                   clock_hz_sm=[765e6])
    r = build_report(kernels(1), q, resolver=lambda _d: CLOCKED).set_index("level")
    assert r.loc["dram", "peak_flop_per_s"] == pytest.approx(19.5e12 * 765 / 1410)
    assert r.loc["l2", "bandwidth_bytes_per_s"] == pytest.approx(5120 * 765e6)
    assert r.loc["l1", "bandwidth_bytes_per_s"] == pytest.approx(128 * 108 * 765e6)
    assert r.loc["dram", "bandwidth_bytes_per_s"] == 1.555e12  # no DRAM clock, no DRAM bytes/cycle: datasheet
    assert set(r["ceiling_source"]) == {"spec:Clocked A100 @ 765 MHz SM"}


@pytest.mark.parametrize(("inst", "clock", "active", "flops", "shape"), [
    # roof 312e12 × 1e-3 s × 1.05 = 3.276e11 FLOP: 1e6 × 4096 = 4.096e9 fits the largest shape
    (1e6, np.nan, np.nan, 4.096e9, "HMMA.16816, the largest shape"),
    # 1e8 × 4096 = 4.096e11 > 3.276e11; 1e8 × 2048 = 2.048e11 fits
    (1e8, np.nan, np.nan, 2.048e11, "HMMA.1688, the largest shape"),
    # at 765 MHz the roof is 312e12 × 765/1410 × 1e-3 × 1.05 = 1.777e11: only 1e8 × 1024 = 1.024e11 fits
    (1e8, 765e6, np.nan, 1.024e11, "HMMA.1684, the largest shape"),
    # tensor pipe busy 1e5 SM-cycles × 2048.9 FLOP/cycle/SM (312e12 / (108 × 1.41e9)) × 1.05 = 2.151e8:
    # 1e5 × 4096 = 4.096e8 does not fit, 1e5 × 2048 = 2.048e8 does
    (1e5, np.nan, 1e5, 2.048e8, "HMMA.1688, the largest shape"),
])
def test_tensor_pipe_estimates_take_the_largest_shape_within_the_roof(
        inst: float, clock: float, active: float, flops: float, shape: str) -> None:
    q = _estimate(inst, clock_hz_sm=[clock], tensor_cycles_active=[active])
    row = build_report(kernels(1), q, resolver=lambda _d: CLOCKED).iloc[0]
    assert row["flops_tensor"] == pytest.approx(flops) and row["flops"] == pytest.approx(flops)
    assert row["precision"] == "tensor" and not row["above_roof"]
    assert shape in row["flops_source"] and "estimate" in row["flops_source"]
    # the roof of a pipe-count estimate: the dense FP16 tensor rate (at the clock when recorded)
    assert row["peak_flop_per_s"] == pytest.approx(312e12 * (765 / 1410 if clock == clock else 1))


def test_an_estimate_above_the_roof_at_every_shape_is_flagged_not_reported_as_fact() -> None:
    # 1e9 × 1024 (smallest shape) = 1.024e12 FLOP in 1 ms = 1.024e15 FLOP/s > 312e12 × 1.05
    row = build_report(kernels(1), _estimate(1e9), resolver=lambda _d: CLOCKED).iloc[0]
    assert row["flops_tensor"] == pytest.approx(1.024e12)
    assert row["above_roof"]
    assert "HMMA.1684, the smallest shape at CC 8.0: above the fp16 tensor roof" in row["flops_source"]


def test_an_estimate_without_a_machine_keeps_the_default_shape_and_says_so() -> None:
    row = build_report(kernels(1), _estimate(1e6)).iloc[0]
    assert row["flops_tensor"] == 4.096e9 and "no roof to check it against" in row["flops_source"]
    assert row["bound"] == "unknown"


def test_a_generic_device_name_is_unknown_with_its_candidates_named() -> None:
    # issue 13: 'NVIDIA H100' is an SXM, PCIe or NVL board (3.35, 2.0 or 3.9 TB/s): no guess,
    # the candidates named
    q = quantities(1, duration_s=[1e-3], flops_fp32=[2e9], bytes_dram=[4e8])
    row = build_report(kernels(1, device=["NVIDIA H100"]), q).iloc[0]
    assert row["bound"] == "unknown"
    assert ("fits several machine table entries (H100 SXM, H100 PCIe, H100 NVL): pass --machine"
            in row["missing"])
    # the NVL board's own name resolves: 3.9 TB/s
    row = build_report(kernels(1, device=["NVIDIA H100 NVL"]), q).iloc[0]
    assert row["bandwidth_bytes_per_s"] == 3.9e12 and row["ceiling_source"] == "spec:H100 NVL"
