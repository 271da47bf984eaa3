"""derive(): every formula path of nsroof.counters.metric_formulas, its precedence, and the provenance
and missing-metric bookkeeping. Kernel tables are built here by hand, in SI base units (seconds,
bytes, counts; .per_second in 1/s; .per_cycle_elapsed and .peak_sustained per cycle)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsroof.counters import metric_formulas as mf
from nsroof.counters import tensor_paths as tp
from nsroof.counters.quantities import derive
from nsroof.errors import NsroofError
from nsroof.schema import LEVELS, PRECISIONS

CONTRACT = (
    "duration_s duration_source flops_fp64 flops_fp32 flops_fp16 flops_tensor flops flops_source "
    "flops_estimated bytes_dram bytes_l2 bytes_l1 bytes_source_dram bytes_source_l2 bytes_source_l1 "
    "peak_flop_per_s_fp64 peak_flop_per_s_fp32 peak_flop_per_s_fp16 peak_flop_per_s_tensor "
    "bandwidth_bytes_per_s_dram bandwidth_bytes_per_s_l2 bandwidth_bytes_per_s_l1 "
    "ceiling_source_fp64 ceiling_source_fp32 ceiling_source_fp16 ceiling_source_tensor "
    "ceiling_source_dram ceiling_source_l2 ceiling_source_l1 "
    "missing_duration missing_flops missing_dram missing_l2 missing_l1"
).split()


def sass(unit: str, op: str, suffix: str = "") -> str:
    return f"{unit}__sass_thread_inst_executed_op_{op}_pred_on.sum{suffix}"


def table(rows: int = 1, cc: str = "8.0", **metrics: Any) -> pd.DataFrame:
    """A kernel table with `rows` rows; keyword names use '__' as ncu does, '.' spelled '_dot_'."""
    data: dict[str, Any] = {"kernel_id": list(range(rows)), "cc": [cc] * rows}
    for key, value in metrics.items():
        data[key.replace("_dot_", ".")] = value if isinstance(value, list) else [value] * rows
    return pd.DataFrame(data)


def one(**columns: Any) -> pd.Series:
    """derive() of a one-kernel table whose metric columns are given by full ncu name."""
    cc = columns.pop("cc", "8.0")
    frame = pd.DataFrame({"kernel_id": [0], "cc": [cc], **{k: [v] for k, v in columns.items()}})
    return derive(frame).iloc[0]


# --- shape of the result ----------------------------------------------------------------------


class TestShape:
    def test_contract_columns_present_and_index_kept(self) -> None:
        frame = pd.DataFrame({"cc": ["8.0", "8.0"], "gpu__time_duration.sum": [1e-6, 2e-6]}, index=[10, 42])
        q = derive(frame)
        assert list(q.index) == [10, 42]
        assert set(CONTRACT) <= set(q.columns)

    def test_dtypes(self) -> None:
        q = derive(pd.DataFrame({"cc": ["8.0"], "gpu__time_duration.sum": [1e-6]}))
        assert q["duration_s"].dtype == np.float64
        assert q["flops_estimated"].dtype == bool
        assert q["flops_partial"].dtype == bool
        assert pd.api.types.is_string_dtype(q["duration_source"])

    def test_empty_table(self) -> None:
        q = derive(pd.DataFrame({"cc": pd.Series([], dtype=object)}))
        assert len(q) == 0 and set(CONTRACT) <= set(q.columns)

    def test_table_without_cc_column(self) -> None:
        q = derive(pd.DataFrame({"gpu__time_duration.sum": [5e-6]}))
        assert q["duration_s"].iat[0] == 5e-6


# --- duration -------------------------------------------------------------------------------


class TestDuration:
    def test_gpu_time_duration_preferred(self) -> None:
        q = one(**{"gpu__time_duration.sum": 437.44e-6, "sm__cycles_elapsed.avg": 1.0,
                   "sm__cycles_elapsed.avg.per_second": 1.0})
        assert q["duration_s"] == 437.44e-6
        assert q["duration_source"] == "gpu__time_duration.sum"

    def test_nersc_cycles_over_clock(self) -> None:
        # 1,500,000 cycles / 1.5e9 cycles/s = 1e-3 s
        q = one(**{"sm__cycles_elapsed.avg": 1.5e6, "sm__cycles_elapsed.avg.per_second": 1.5e9})
        assert q["duration_s"] == pytest.approx(1e-3)
        assert q["duration_source"] == "sm__cycles_elapsed.avg / sm__cycles_elapsed.avg.per_second"

    def test_smsp_cycles_when_sm_absent(self) -> None:
        # gardenia-style export: smsp__ cycles only; 2,000,000 / 1.0e9 = 2e-3 s
        q = one(**{"smsp__cycles_elapsed.avg": 2e6, "smsp__cycles_elapsed.avg.per_second": 1e9})
        assert q["duration_s"] == pytest.approx(2e-3)

    def test_zero_clock_is_not_a_duration(self) -> None:
        q = one(**{"sm__cycles_elapsed.avg": 1e6, "sm__cycles_elapsed.avg.per_second": 0.0})
        assert math.isnan(q["duration_s"])

    def test_missing_names_preferred_metric(self) -> None:
        q = one(**{"dram__bytes.sum": 1.0})
        assert math.isnan(q["duration_s"])
        assert q["duration_source"] == ""
        assert q["missing_duration"] == "gpu__time_duration.sum"

    def test_row_falls_through_per_kernel(self) -> None:
        # kernel 0 has its duration counter; kernel 1's is n/a (NaN) and comes from cycles: 3e6 / 1e9 = 3e-3 s
        k = table(2, **{"gpu__time_duration_dot_sum": [1e-3, np.nan],
                        "sm__cycles_elapsed_dot_avg": [9e9, 3e6],
                        "sm__cycles_elapsed_dot_avg_dot_per_second": [1e9, 1e9]})
        q = derive(k)
        assert q["duration_s"].tolist() == pytest.approx([1e-3, 3e-3])
        assert q["duration_source"].tolist() == ["gpu__time_duration.sum",
                                                 "sm__cycles_elapsed.avg / sm__cycles_elapsed.avg.per_second"]


# --- FLOPs on CUDA cores ---------------------------------------------------------------------


class TestCudaCoreFlops:
    def test_fp32_totals_fma_counts_two(self) -> None:
        # 100 FADD + 50 FMUL + 2 × 1000 FFMA = 2150 FLOP
        q = one(**{sass("sm", "fadd"): 100.0, sass("sm", "fmul"): 50.0, sass("sm", "ffma"): 1000.0})
        assert q["flops_fp32"] == 2150.0
        assert q["flops_source_fp32"] == (f"{sass('sm', 'fadd')} + {sass('sm', 'fmul')} + "
                                          f"2 × {sass('sm', 'ffma')}")

    def test_fp64_totals(self) -> None:
        # 1 DADD + 2 DMUL + 2 × 3 DFMA = 9 FLOP
        q = one(**{sass("sm", "dadd"): 1.0, sass("sm", "dmul"): 2.0, sass("sm", "dfma"): 3.0})
        assert q["flops_fp64"] == 9.0

    def test_fp16_packed_convention(self) -> None:
        # ncu: HADD2 = 2, HMUL2 = 2, HFMA2 = 4 → 2·10 + 2·20 + 4·30 = 20 + 40 + 120 = 180 FLOP
        q = one(**{sass("sm", "hadd"): 10.0, sass("sm", "hmul"): 20.0, sass("sm", "hfma"): 30.0})
        assert q["flops_fp16"] == 180.0

    def test_sm_preferred_over_smsp(self) -> None:
        q = one(**{sass("sm", "fadd"): 1.0, sass("sm", "fmul"): 1.0, sass("sm", "ffma"): 1.0,
                   sass("smsp", "fadd"): 7.0, sass("smsp", "fmul"): 7.0, sass("smsp", "ffma"): 7.0})
        assert q["flops_fp32"] == 4.0  # 1 + 1 + 2·1

    def test_smsp_totals(self) -> None:
        # gardenia-style names: 3 + 4 + 2·5 = 17
        q = one(**{sass("smsp", "fadd"): 3.0, sass("smsp", "fmul"): 4.0, sass("smsp", "ffma"): 5.0})
        assert q["flops_fp32"] == 17.0
        assert q["flops_source_fp32"].startswith("smsp__")

    def test_per_cycle_times_elapsed_cycles(self) -> None:
        # (100 + 0 + 2·1000) FLOP/cycle × 200,000 cycles = 2100 × 2e5 = 4.2e8 FLOP
        q = one(**{sass("smsp", "fadd", ".per_cycle_elapsed"): 100.0,
                   sass("smsp", "fmul", ".per_cycle_elapsed"): 0.0,
                   sass("smsp", "ffma", ".per_cycle_elapsed"): 1000.0, "smsp__cycles_elapsed.avg": 2e5,
                   "smsp__cycles_elapsed.avg.per_second": 1e9, "gpu__time_duration.sum": 1.0})
        assert q["flops_fp32"] == pytest.approx(4.2e8)
        assert q["flops_source_fp32"].endswith("× smsp__cycles_elapsed.avg")

    def test_per_cycle_times_clock_times_duration(self) -> None:
        # no elapsed-cycle total: 2100 FLOP/cycle × 1e9 cycles/s × 2e-4 s = 4.2e8 FLOP
        q = one(**{sass("smsp", "fadd", ".per_cycle_elapsed"): 100.0,
                   sass("smsp", "fmul", ".per_cycle_elapsed"): 0.0,
                   sass("smsp", "ffma", ".per_cycle_elapsed"): 1000.0,
                   "smsp__cycles_elapsed.avg.per_second": 1e9, "gpu__time_duration.sum": 2e-4})
        assert q["flops_fp32"] == pytest.approx(4.2e8)
        assert q["flops_source_fp32"].endswith("× smsp__cycles_elapsed.avg.per_second × duration_s")

    def test_derived_x2_variant(self) -> None:
        # derived__smsp__…ffma_pred_on_x2 = 2 × FFMA/cycle already: (100 + 0 + 2000) × 2e5 = 4.2e8
        q = one(**{sass("smsp", "fadd", ".per_cycle_elapsed"): 100.0,
                   sass("smsp", "fmul", ".per_cycle_elapsed"): 0.0,
                   "derived__smsp__sass_thread_inst_executed_op_ffma_pred_on_x2": 2000.0,
                   "smsp__cycles_elapsed.avg": 2e5})
        assert q["flops_fp32"] == pytest.approx(4.2e8)
        assert "derived__smsp__sass_thread_inst_executed_op_ffma_pred_on_x2" in q["flops_source_fp32"]

    def test_fp16_derived_x4(self) -> None:
        # (hadd_x2 4 + hmul_x2 2 + hfma_x4 40) per cycle × 1000 cycles = 46,000 FLOP
        q = one(**{"derived__smsp__sass_thread_inst_executed_op_hadd_pred_on_x2": 4.0,
                   "derived__smsp__sass_thread_inst_executed_op_hmul_pred_on_x2": 2.0,
                   "derived__smsp__sass_thread_inst_executed_op_hfma_pred_on_x4": 40.0,
                   "smsp__cycles_elapsed.avg": 1000.0})
        assert q["flops_fp16"] == pytest.approx(46_000.0)

    def test_zero_counter_is_zero_absent_is_nan(self) -> None:
        q = one(**{sass("sm", "fadd"): 0.0, sass("sm", "fmul"): 0.0, sass("sm", "ffma"): 0.0})
        assert q["flops_fp32"] == 0.0
        assert math.isnan(q["flops_fp64"])
        assert sass("sm", "dfma") in q["missing_flops"]

    def test_incomplete_formula_is_a_flagged_lower_bound(self) -> None:
        # PARTIAL_RULES: FFMA alone is at least 2 × 1000 = 2000 FP32 FLOPs; FADD/FMUL stay named as missing
        q = one(**{sass("sm", "ffma"): 1000.0})
        assert q["flops_fp32"] == 2000.0
        assert q["flops_source_fp32"] == (f"2 × {sass('sm', 'ffma')} (lower bound: lacks "
                                          f"{sass('sm', 'fadd')}, {sass('sm', 'fmul')})")
        assert q["flops_partial"]
        missing = q["missing_flops"].split(", ")
        assert sass("sm", "fadd") in missing and sass("sm", "fmul") in missing
        assert sass("sm", "ffma") not in missing

    def test_partial_fp16_hfma_only_is_a_lower_bound(self) -> None:
        # the case: HFMA present, HADD/HMUL not collected → 4 × 250 = 1000 (HFMA2 = 4), flagged
        q = one(**{sass("sm", o): 1.0 for o in ("fadd", "fmul", "ffma")}, **{sass("sm", "hfma"): 250.0})
        assert q["flops_fp16"] == 1000.0
        assert "lower bound: lacks" in q["flops_source_fp16"] and sass("sm", "hadd") in q["flops_source_fp16"]
        assert q["flops"] == 4.0 + 1000.0 and q["flops_partial"]

    def test_string_valued_metric_is_an_absent_term(self) -> None:
        # 'n/a' is not a number: FADD counts as not collected → FMUL + 2 × FFMA = 1 + 2 = 3, a lower bound
        q = one(**{sass("sm", "fadd"): "n/a", sass("sm", "fmul"): 1.0, sass("sm", "ffma"): 1.0})
        assert q["flops_fp32"] == 3.0
        assert "lacks " + sass("sm", "fadd") in q["flops_source_fp32"]


class TestFlopTotal:
    def test_sum_of_precisions_and_source(self) -> None:
        # fp64 0 + fp32 (1 + 1 + 2·1 = 4) + fp16 (2·1 + 2·1 + 4·1 = 8) + tensor 100 = 112
        q = one(**{sass("sm", o): (0.0 if o[0] == "d" else 1.0) for o in
                   ("dadd", "dmul", "dfma", "fadd", "fmul", "ffma", "hadd", "hmul", "hfma")},
                **{"sm__ops_path_tensor_src_fp64.sum": 100.0})
        assert q["flops"] == 112.0
        assert not q["flops_partial"]
        assert q["missing_flops"] == ""
        for p in ("fp64", "fp32", "fp16", "tensor"):
            assert f"{p}: " in q["flops_source"]

    def test_partial_sum_is_flagged_and_names_missing(self) -> None:
        # fp32 known (2150), other precisions absent: flops = 2150, partial, missing names the rest
        q = one(**{sass("sm", "fadd"): 100.0, sass("sm", "fmul"): 50.0, sass("sm", "ffma"): 1000.0})
        assert q["flops"] == 2150.0
        assert q["flops_partial"]
        assert "sm__ops_path_tensor_*.sum" in q["missing_flops"]
        assert sass("sm", "hfma") in q["missing_flops"]

    def test_no_flop_counter_at_all(self) -> None:
        q = one(**{"gpu__time_duration.sum": 1e-6})
        assert math.isnan(q["flops"])
        assert not q["flops_partial"]
        assert q["flops_source"] == ""

    def test_only_a_zero_tensor_counter_is_unknown_not_zero(self) -> None:
        # the case: no FP64/FP32/FP16 counter collected, tensor reads 0 → FLOPs unknown (NaN), the FP
        # counters named as missing — not 0 FLOPs and a confident 'memory' verdict
        q = one(**{"sm__ops_path_tensor_src_fp16_dst_fp32.sum": 0.0, "dram__bytes.sum": 1e6})
        assert q["flops_tensor"] == 0.0
        assert math.isnan(q["flops"])
        assert sass("sm", "ffma") in q["missing_flops"]

    def test_only_a_positive_tensor_counter_is_a_lower_bound(self) -> None:
        # tensor 5e9 with no CUDA-core counter: flops = 5e9, said to be a lower bound
        q = one(**{"sm__ops_path_tensor_src_bf16_dst_fp32.sum": 5e9})
        assert q["flops"] == 5e9
        assert q["flops_source"].endswith("lower bound: no CUDA-core FP counters collected")
        assert q["flops_partial"]


class TestPartialBytes:
    def test_dram_reads_without_writes_are_a_lower_bound(self) -> None:
        # dram__bytes_read.sum = 4e6 and no write counter: bytes_dram = 4e6, the source says why it is a bound
        q = one(**{"dram__bytes_read.sum": 4e6})
        assert q["bytes_dram"] == 4e6
        assert q["bytes_source_dram"] == ("dram__bytes_read.sum (lower bound: DRAM reads only, "
                                          "no write counter collected)")

    def test_reads_and_writes_give_the_total(self) -> None:
        q = one(**{"dram__bytes_read.sum": 4e6, "dram__bytes_write.sum": 1e6})
        assert q["bytes_dram"] == 5e6 and "lower bound" not in q["bytes_source_dram"]

    def test_sector_reads_only(self) -> None:
        # 100 read sectors × 32 B = 3200 B, a lower bound
        q = one(**{"dram__sectors_read.sum": 100.0})
        assert q["bytes_dram"] == 3200.0 and "lower bound" in q["bytes_source_dram"]


class TestClocks:
    def test_recorded_clocks_sm_from_smsp_when_sm_absent(self) -> None:
        q = one(**{"smsp__cycles_elapsed.avg.per_second": 765e6,
                   "dram__cycles_elapsed.avg.per_second": 1215e6,
                   "lts__cycles_elapsed.avg.per_second": 1063e6})
        assert (q["clock_hz_sm"], q["clock_hz_dram"], q["clock_hz_l2"]) == (765e6, 1215e6, 1063e6)
        assert math.isnan(q["clock_hz_l1"])

    def test_clock_from_elapsed_cycles_over_the_duration(self) -> None:
        # the real T4 export (armleth) records lts__cycles_elapsed.avg but no .per_second:
        # 129,338 cycles / 151,328 ns = 854.69 MHz, not the SM's 554.11 MHz
        q = one(**{"gpu__time_duration.sum": 151_328e-9, "lts__cycles_elapsed.avg": 129_338.0,
                   "sm__cycles_elapsed.avg.per_second": 554_111_598.65, "sm__cycles_elapsed.avg": 1.0})
        assert q["clock_hz_l2"] == pytest.approx(129_338 / 151_328e-9)
        assert q["clock_hz_sm"] == 554_111_598.65  # the recorded rate wins over cycles / duration
        assert math.isnan(q["clock_hz_l1"])  # neither rate nor cycles: no clock, never the SM's

    def test_tensor_estimate_keeps_its_instruction_count(self) -> None:
        # 1000 HMMA instructions on CC 8.0: estimate 1000 × 4096 (largest shape)
        # until the report checks the roof
        q = one(**{"sm__inst_executed_pipe_tensor.sum": 1000.0})
        assert q["flops_tensor"] == 4_096_000.0 and q["tensor_inst"] == 1000.0
        q = one(**{"sm__ops_path_tensor_src_fp16_dst_fp32.sum": 5.0})
        assert math.isnan(q["tensor_inst"])


# --- tensor cores ----------------------------------------------------------------------------

T = tp.TENSOR_PREFIX


class TestTensorFlops:
    def test_ga100_aggregate_dense_and_sparse(self) -> None:
        # A100: 3e9 dense + 1e9 sparse BF16 ops = 4e9; the dense path dominates; its peak
        # 221,184 ops/cycle × 1.09e9 cycles/s = 2.4109056e14 FLOP/s
        q = one(**{f"{T}src_bf16_dst_fp32_sparsity_off.sum": 3e9,
                   f"{T}src_bf16_dst_fp32_sparsity_on.sum": 1e9,
                   f"{T}src_fp16_dst_fp32_sparsity_off.sum": 0.0,
                   f"{T}src_bf16_dst_fp32_sparsity_off.sum.peak_sustained": 221184.0,
                   f"{T}src_bf16_dst_fp32_sparsity_on.sum.peak_sustained": 442368.0,
                   "sm__cycles_elapsed.avg.per_second": 1.09e9})
        assert q["flops_tensor"] == 4e9
        assert q["flops_tensor_sparse"] == 1e9
        assert q["tensor_metric"] == f"{T}src_bf16_dst_fp32_sparsity_off"
        assert q["peak_flop_per_s_tensor"] == pytest.approx(221184 * 1.09e9)
        assert q["ceiling_source_tensor"] == (f"ncu:{T}src_bf16_dst_fp32_sparsity_off.sum.peak_sustained"
                                              " × sm__cycles_elapsed.avg.per_second")
        assert not q["flops_estimated"]

    def test_sparse_dominant_gets_sparse_peak(self) -> None:
        q = one(**{f"{T}src_fp16_dst_fp32_sparsity_off.sum": 1e6,
                   f"{T}src_fp16_dst_fp32_sparsity_on.sum": 9e6,
                   f"{T}src_fp16_dst_fp32_sparsity_on.sum.peak_sustained": 442368.0,
                   "sm__cycles_elapsed.avg.per_second": 1e9})
        assert q["peak_flop_per_s_tensor"] == pytest.approx(442368 * 1e9)

    def test_gh100_per_class_not_double_counted(self) -> None:
        # H100 exports the same work twice: aggregate src_fp16 = 5e9 and per class hgmma 4e9 + hmma 1e9.
        # Per source type the per-class metrics win: 4e9 + 1e9 = 5e9 (not 1e10). Dense hgmma peak
        # 540,672/cycle (132 SMs × 4096) × 1.5e9 = 8.11008e14 FLOP/s —
        # not the aggregate's 1,081,344 (sparse rate).
        q = one(cc="9.0", **{f"{T}src_fp16.sum": 5e9, f"{T}src_fp16.sum.peak_sustained": 1081344.0,
                             f"{T}op_hgmma_src_fp16_sparsity_off.sum": 4e9,
                             f"{T}op_hgmma_src_fp16_sparsity_on.sum": 0.0,
                             f"{T}op_hmma_src_fp16_dst_fp32_sparsity_off.sum": 1e9,
                             f"{T}op_hgmma_src_fp16_sparsity_off.sum.peak_sustained": 540672.0,
                             f"{T}src_fp8_sparsity_off.sum": 2e9,
                             "sm__cycles_elapsed.avg.per_second": 1.5e9})
        # fp8 has no per-class metric on GH100: its aggregate counts: 4e9 + 1e9 + 0 + 2e9 = 7e9
        assert q["flops_tensor"] == 7e9
        assert q["tensor_metric"] == f"{T}op_hgmma_src_fp16_sparsity_off"
        assert q["peak_flop_per_s_tensor"] == pytest.approx(540672 * 1.5e9)

    def test_unsplit_aggregate_gives_no_peak(self) -> None:
        # only the aggregate: the FLOPs count, but its peak is the 2:4 sparse rate → no dense ceiling
        q = one(cc="9.0", **{f"{T}src_fp16.sum": 5e9, f"{T}src_fp16.sum.peak_sustained": 1081344.0,
                             "sm__cycles_elapsed.avg.per_second": 1.5e9})
        assert q["flops_tensor"] == 5e9
        assert math.isnan(q["flops_tensor_sparse"])
        assert math.isnan(q["peak_flop_per_s_tensor"])
        assert q["ceiling_source_tensor"] == ""

    def test_turing_aggregate_is_dense(self) -> None:
        # Turing has no 2:4 sparsity: its unsplit metric is dense work with a dense peak:
        # 65,536 ops/cycle × 1.5e9 cycles/s = 9.8304e13 FLOP/s; and no sparse part
        q = one(cc="7.5", **{f"{T}src_fp16_bf16_tf32_dst_fp32.sum": 1e6,
                             f"{T}src_fp16_bf16_tf32_dst_fp32.sum.peak_sustained": 65536.0,
                             "sm__cycles_elapsed.avg.per_second": 1.5e9})
        assert q["peak_flop_per_s_tensor"] == pytest.approx(65536 * 1.5e9)
        assert q["flops_tensor_sparse"] == 0.0

    def test_fp64_tensor_is_dense(self) -> None:
        # 33,792 FP64 tensor ops/cycle × 1.5e9 = 5.0688e13 FLOP/s
        q = one(cc="9.0", **{f"{T}src_fp64.sum": 1e6, f"{T}src_fp64.sum.peak_sustained": 33792.0,
                             "sm__cycles_elapsed.avg.per_second": 1.5e9})
        assert q["peak_flop_per_s_tensor"] == pytest.approx(33792 * 1.5e9)

    def test_na_path_is_skipped(self) -> None:
        # RTX 5090 export: bf16→fp32 = 45,902,462,976; bf16→bf16 'n/a' (not on this chip)
        q = one(cc="12.0", **{f"{T}src_bf16_dst_fp32.sum": 45_902_462_976.0,
                              f"{T}src_bf16_dst_bf16.sum": np.nan})
        assert q["flops_tensor"] == 45_902_462_976.0

    def test_all_paths_na_is_nan(self) -> None:
        q = one(**{f"{T}src_bf16_dst_fp32_sparsity_off.sum": np.nan})
        assert math.isnan(q["flops_tensor"])

    def test_rate_variant(self) -> None:
        # 512 ops/cycle × 1e5 cycles = 5.12e7
        q = one(**{f"{T}src_tf32_dst_fp32_sparsity_off.sum.per_cycle_elapsed": 512.0,
                   "sm__cycles_elapsed.avg": 1e5})
        assert q["flops_tensor"] == pytest.approx(5.12e7)
        assert q["tensor_metric"] == f"{T}src_tf32_dst_fp32_sparsity_off"

    def test_totals_preferred_over_rates(self) -> None:
        q = one(**{f"{T}src_tf32_dst_fp32_sparsity_off.sum.per_cycle_elapsed": 512.0,
                   "sm__cycles_elapsed.avg": 1e5, f"{T}src_tf32_dst_fp32_sparsity_off.sum": 7.0})
        assert q["flops_tensor"] == 7.0

    def test_estimate_from_pipe_instructions(self) -> None:
        # A100, HMMA.16816 = 2·16·8·16 = 4096 FLOP per instruction: 1000 × 4096 = 4.096e6, flagged
        q = one(cc="8.0", **{"sm__inst_executed_pipe_tensor.sum": 1000.0})
        assert q["flops_tensor"] == 4.096e6
        assert q["flops_estimated"]
        assert q["flops_source_tensor"] == ("sm__inst_executed_pipe_tensor.sum × 4096 "
                                            "(FLOP/instruction at this CC)")

    def test_estimate_v100(self) -> None:
        # NERSC: 512 FLOP per V100 HMMA.884 → 10 × 512 = 5120
        q = one(cc="7.0", **{"smsp__inst_executed_pipe_tensor.sum": 10.0})
        assert q["flops_tensor"] == 5120.0

    def test_estimate_needs_architecture(self) -> None:
        q = one(cc="", **{"sm__inst_executed_pipe_tensor.sum": 1000.0})
        assert math.isnan(q["flops_tensor"])
        assert not q["flops_estimated"]

    def test_zero_instructions_are_exactly_zero(self) -> None:
        # no tensor instruction executed: 0 FLOPs whatever the architecture, and not an estimate
        q = one(cc="", **{"sm__inst_executed_pipe_tensor.sum": 0.0})
        assert q["flops_tensor"] == 0.0
        assert not q["flops_estimated"]
        assert q["flops_source_tensor"] == "sm__inst_executed_pipe_tensor.sum × any factor (0 instructions)"

    def test_ops_path_preferred_over_estimate(self) -> None:
        q = one(**{"sm__inst_executed_pipe_tensor.sum": 1000.0, f"{T}src_fp64.sum": 3.0})
        assert q["flops_tensor"] == 3.0 and not q["flops_estimated"]


class TestTensorMetricSelection:
    def test_name_parsing(self) -> None:
        p = tp.tensor_path(f"{T}op_hgmma_src_bf16_dst_fp32_sparsity_on")
        assert p == tp.TensorPath(f"{T}op_hgmma_src_bf16_dst_fp32_sparsity_on", "bf16", True, "sparse")
        assert tp.tensor_path(f"{T}src_fp4_fp6_fp8_dst_fp16") == tp.TensorPath(
            f"{T}src_fp4_fp6_fp8_dst_fp16", "fp4_fp6_fp8", False, "unsplit")
        assert tp.tensor_path(f"{T}src_int1").sparsity == "dense"
        assert tp.tensor_path("sm__pipe_tensor_cycles_active") is None

    @pytest.mark.parametrize(("family", "count"), [("TU10x", 5), ("GA100/GA10x/GA10y", 14), ("AD10x", 16),
                                                   ("GH100", 28), ("GB100/GB10b", 35), ("GB11x", 36),
                                                   ("GB20x/GB20b", 26)])
    def test_family_metric_counts_match_the_tensor_section(self, family: str, count: int) -> None:
        # `n` column of roofline-metrics.md §3.2 (ncu 2025.3.1 HierarchicalTensorRooflineChart)
        cc = tp.tensor_families()[family]["cc"][0]
        names = tp.tensor_metric_names(cc)
        assert len(names) == count == len(set(names))

    @pytest.mark.parametrize("cc", ["9.0", "10.0", "10.3", "12.0"])
    def test_full_family_export_counts_each_source_type_once(self, cc: str) -> None:
        # every metric of the family present: each source type comes from one side only
        chosen = tp.select_tensor_metrics([n + ".sum" for n in tp.tensor_metric_names(cc)])
        for src in {p.source_type for p in chosen}:
            sides = {p.per_class for p in chosen if p.source_type == src}
            assert len(sides) == 1, src


# --- bytes -----------------------------------------------------------------------------------


class TestDramBytes:
    @pytest.mark.parametrize(
        ("metrics", "expected", "source"),
        [
            ({"dram__bytes.sum": 1000.0, "dram__bytes_read.sum": 1.0, "dram__bytes_write.sum": 1.0}, 1000.0,
             "dram__bytes.sum"),
            # 268,443,904 + 255,749,248 = 524,193,152 (A100 silu kernel)
            ({"dram__bytes_read.sum": 268_443_904.0, "dram__bytes_write.sum": 255_749_248.0}, 524_193_152.0,
             "dram__bytes_read.sum + dram__bytes_write.sum"),
            ({"dram__bytes_op_read.sum": 300.0, "dram__bytes_op_write.sum": 200.0}, 500.0,
             "dram__bytes_op_read.sum + dram__bytes_op_write.sum"),
            # 1.2e12 B/s × 4e-4 s = 4.8e8 B
            ({"dram__bytes.sum.per_second": 1.2e12, "gpu__time_duration.sum": 4e-4}, 4.8e8,
             "dram__bytes.sum.per_second × duration_s"),
            # (15 + 1) sectors × 32 B = 512 B
            ({"dram__sectors_read.sum": 15.0, "dram__sectors_write.sum": 1.0}, 512.0,
             "32 × dram__sectors_read.sum + 32 × dram__sectors_write.sum"),
        ],
    )
    def test_precedence(self, metrics: dict[str, float], expected: float, source: str) -> None:
        q = one(**metrics)
        assert q["bytes_dram"] == pytest.approx(expected)
        assert q["bytes_source_dram"] == source
        assert q["missing_dram"] == ""

    def test_totals_before_rates(self) -> None:
        q = one(**{"dram__bytes.sum.per_second": 1e12, "gpu__time_duration.sum": 1.0,
                   "dram__bytes_read.sum": 5.0, "dram__bytes_write.sum": 6.0})
        assert q["bytes_dram"] == 11.0

    def test_rate_without_duration_does_not_apply(self) -> None:
        q = one(**{"dram__bytes.sum.per_second": 1e12})
        assert math.isnan(q["bytes_dram"])
        assert q["missing_dram"] == "dram__bytes.sum"

    def test_ceiling(self) -> None:
        # A100-40GB at the profiled clock: 1280 B/cycle × 1,214,915,874.18 cycles/s = 1.5550923e12 B/s
        q = one(**{"dram__bytes.sum": 1.0, "dram__bytes.sum.peak_sustained": 1280.0,
                   "dram__cycles_elapsed.avg.per_second": 1_214_915_874.18})
        assert q["bandwidth_bytes_per_s_dram"] == pytest.approx(1.5550923e12, rel=1e-7)
        assert q["ceiling_source_dram"] == ("ncu:dram__bytes.sum.peak_sustained × "
                                            "dram__cycles_elapsed.avg.per_second")


class TestL2Bytes:
    def test_lts_t_bytes_first(self) -> None:
        q = one(**{"lts__t_bytes.sum": 4096.0, "lts__t_sectors.sum": 1.0})
        assert q["bytes_l2"] == 4096.0 and q["bytes_source_l2"] == "lts__t_bytes.sum"

    def test_lts2xbar_rate_times_duration(self) -> None:
        # 6.1459685442575e11 B/s × 437.44e-6 s = 268,849,247.9 B
        q = one(**{"derived__lts__lts2xbar_bytes.sum.per_second": 614_596_854_425.75,
                   "gpu__time_duration.sum": 437.44e-6, "lts__t_sectors.sum": 33_225_427.0})
        assert q["bytes_l2"] == pytest.approx(614_596_854_425.75 * 437.44e-6)
        assert q["bytes_source_l2"] == "derived__lts__lts2xbar_bytes.sum.per_second × duration_s"

    def test_sectors_times_32(self) -> None:
        # 1705 sectors × 32 B = 54,560 B
        q = one(**{"lts__t_sectors.sum": 1705.0})
        assert q["bytes_l2"] == 54_560.0 and q["bytes_source_l2"] == "32 × lts__t_sectors.sum"

    def test_ceiling_matches_byte_definition(self) -> None:
        # bytes from lts2xbar → ceiling from lts2xbar: 5120 B/cycle × 1,063,279,535.48 = 5.4439912e12 B/s
        q = one(**{"derived__lts__lts2xbar_bytes.sum.per_second": 1e9, "gpu__time_duration.sum": 1e-3,
                   "lts__t_bytes.sum.peak_sustained": 99999.0,
                   "derived__lts__lts2xbar_bytes.sum.peak_sustained": 5120.0,
                   "lts__cycles_elapsed.avg.per_second": 1_063_279_535.48})
        assert q["bandwidth_bytes_per_s_l2"] == pytest.approx(5120 * 1_063_279_535.48)
        assert "lts2xbar" in q["ceiling_source_l2"]

    def test_no_ceiling_of_another_definition(self) -> None:
        # bytes counted as lts__t sectors; only the lts2xbar peak is known → no L2 ceiling (never mixed)
        q = one(**{"lts__t_sectors.sum": 10.0, "derived__lts__lts2xbar_bytes.sum.peak_sustained": 5120.0,
                   "lts__cycles_elapsed.avg.per_second": 1e9})
        assert math.isnan(q["bandwidth_bytes_per_s_l2"])
        assert q["ceiling_source_l2"] == ""

    def test_cycles_active_times_32(self) -> None:
        # lts2xbar from its counter: 160 cycles/cycle peak × 32 B = 5120 B/cycle × 1e9 = 5.12e12 B/s;
        # bytes: 19,206,151,700.80 active cycles/s × 32 B × 1e-3 s = 614,596,854.4 B
        q = one(**{"lts__lts2xbar_cycles_active.sum.per_second": 19_206_151_700.80,
                   "gpu__time_duration.sum": 1e-3,
                   "lts__lts2xbar_cycles_active.sum.peak_sustained": 160.0,
                   "lts__cycles_elapsed.avg.per_second": 1e9})
        assert q["bytes_l2"] == pytest.approx(614_596_854.4256)
        assert q["bandwidth_bytes_per_s_l2"] == pytest.approx(5.12e12)

    def test_ceiling_without_bytes_takes_first_available(self) -> None:
        q = one(**{"lts__t_bytes.sum.peak_sustained": 2048.0, "lts__cycles_elapsed.avg.per_second": 1e9})
        assert q["bandwidth_bytes_per_s_l2"] == pytest.approx(2.048e12)
        assert math.isnan(q["bytes_l2"]) and q["missing_l2"] == "lts__t_bytes.sum"


class TestL1Bytes:
    def test_l1tex_t_bytes_first(self) -> None:
        q = one(**{"l1tex__t_bytes.sum": 10.0, "l1tex__lsu_writeback_active_mem_lg.sum": 1.0})
        assert q["bytes_l1"] == 10.0

    def test_lsu_writeback_cycles_times_128(self) -> None:
        # 2,162,688 writeback cycles × 128 B = 276,824,064 B
        q = one(**{"l1tex__lsu_writeback_active_mem_lg.sum": 2_162_688.0})
        assert q["bytes_l1"] == 276_824_064.0
        assert q["bytes_source_l1"] == "128 × l1tex__lsu_writeback_active_mem_lg.sum"

    def test_lgds_preferred_over_lg(self) -> None:
        q = one(cc="9.0", **{"l1tex__lsu_writeback_active_mem_lgds.sum": 2.0,
                             "l1tex__lsu_writeback_active_mem_lg.sum": 1.0})
        assert q["bytes_l1"] == 256.0  # 2 × 128

    def test_derived_rate_times_duration(self) -> None:
        q = one(**{"derived__l1tex__lsu_writeback_bytes_mem_lg.sum.per_second": 1e12,
                   "gpu__time_duration.sum": 2e-6})
        assert q["bytes_l1"] == pytest.approx(2e6)

    def test_pre_turing_writeback_only_for_old_architectures(self) -> None:
        # l1tex__lsu_writeback_active × 128 is ncu's L1 definition for CC ≤ 7.2 only
        assert one(cc="7.0", **{"l1tex__lsu_writeback_active.sum": 3.0})["bytes_l1"] == 384.0
        q = one(cc="8.0", **{"l1tex__lsu_writeback_active.sum": 3.0})
        assert math.isnan(q["bytes_l1"])

    def test_ceiling(self) -> None:
        # 108 SMs × 128 B = 13,824 B/cycle × 1,090,839,971.28 cycles/s = 1.50797717e13 B/s
        q = one(**{"l1tex__lsu_writeback_active_mem_lg.sum": 1.0,
                   "l1tex__lsu_writeback_active_mem_lg.sum.peak_sustained": 108.0,
                   "l1tex__cycles_elapsed.avg.per_second": 1_090_839_971.28})
        assert q["bandwidth_bytes_per_s_l1"] == pytest.approx(108 * 128 * 1_090_839_971.28)


# --- compute ceilings ------------------------------------------------------------------------


class TestComputeCeilings:
    def test_fp32_fp64_fp16_from_peak_sustained(self) -> None:
        # A100 at 1.09083997128 GHz: FFMA 6912/cycle × 2 = 1.50797717e13; DFMA 3456 × 2 = 7.5398859e12;
        # HFMA 13,824 × 4 = 55,296/cycle → 6.0319087e13 FLOP/s
        clock = 1_090_839_971.28
        q = one(**{sass("sm", "ffma", ".peak_sustained"): 6912.0,
                   sass("sm", "dfma", ".peak_sustained"): 3456.0,
                   sass("sm", "hfma", ".peak_sustained"): 13824.0,
                   "sm__cycles_elapsed.avg.per_second": clock})
        assert q["peak_flop_per_s_fp32"] == pytest.approx(13824 * clock)
        assert q["peak_flop_per_s_fp64"] == pytest.approx(6912 * clock)
        assert q["peak_flop_per_s_fp16"] == pytest.approx(55296 * clock)
        assert q["ceiling_source_fp32"] == (f"ncu:2 × {sass('sm', 'ffma', '.peak_sustained')}"
                                            " × sm__cycles_elapsed.avg.per_second")

    def test_derived_x2_peak(self) -> None:
        q = one(**{"derived__sm__sass_thread_inst_executed_op_ffma_pred_on_x2": 13824.0,
                   "sm__cycles_elapsed.avg.per_second": 1e9})
        assert q["peak_flop_per_s_fp32"] == pytest.approx(1.3824e13)

    def test_old_hfma_x2_rescaled_to_four(self) -> None:
        # older ncu: derived__sm__…hfma_pred_on_x2 = 5120 × 2;
        # ncu's current HFMA2 = 4 → 10240 × 2 = 20480/cycle
        q = one(**{"derived__sm__sass_thread_inst_executed_op_hfma_pred_on_x2": 10240.0,
                   "sm__cycles_elapsed.avg.per_second": 1e9})
        assert q["peak_flop_per_s_fp16"] == pytest.approx(2.048e13)

    def test_no_clock_no_ceiling(self) -> None:
        q = one(**{sass("sm", "ffma", ".peak_sustained"): 6912.0})
        assert math.isnan(q["peak_flop_per_s_fp32"]) and q["ceiling_source_fp32"] == ""


# --- the --metrics list ----------------------------------------------------------------------


class TestRequiredMetrics:
    def test_minimal(self) -> None:
        assert mf.required_metrics(metric_set="minimal") == [
            "gpu__time_duration.sum",
            *(sass("sm", o) for o in ("dadd", "dmul", "dfma", "fadd", "fmul", "ffma")),
            "dram__bytes.sum",
        ]

    def test_roofline_a100(self) -> None:
        m = mf.required_metrics("8.0")
        assert len(m) == len(set(m))
        for name in ("gpu__time_duration.sum", "sm__cycles_elapsed.avg", "sm__cycles_elapsed.avg.per_second",
                     sass("sm", "hfma"), "dram__bytes.sum", "lts__t_bytes.sum", "l1tex__t_bytes.sum",
                     sass("sm", "ffma", ".peak_sustained"), "dram__bytes.sum.peak_sustained",
                     "dram__cycles_elapsed.avg.per_second", "lts__t_bytes.sum.peak_sustained",
                     "l1tex__t_bytes.sum.peak_sustained", f"{T}src_bf16_dst_fp32_sparsity_off.sum",
                     f"{T}src_bf16_dst_fp32_sparsity_off.sum.peak_sustained"):
            assert name in m, name
        assert not any("op_hgmma" in n for n in m)
        assert "sm__inst_executed_pipe_tensor.sum" not in m

    def test_roofline_h100_has_per_class_tensor(self) -> None:
        m = mf.required_metrics("sm_90")
        assert f"{T}op_hgmma_src_fp16_sparsity_off.sum" in m

    def test_unknown_architecture_uses_instruction_count(self) -> None:
        m = mf.required_metrics(None)
        assert "sm__inst_executed_pipe_tensor.sum" in m
        assert not any(n.startswith(T) for n in m)

    def test_integrated_parts_have_no_dram(self) -> None:
        assert not any(n.startswith("dram__") for n in mf.required_metrics("8.7"))

    def test_every_metric_feeds_a_formula(self) -> None:
        # the list is derived from the table: each name is an input of some formula (or a tensor path)
        inputs = {m for f in mf.FORMULAS for m in f.metrics}
        for name in mf.required_metrics("9.0"):
            assert name in inputs or name.startswith(T), name

    def test_derive_uses_what_it_collects(self) -> None:
        # a kernel holding exactly the minimal set gets duration, DRAM bytes and fp32/fp64 FLOPs
        q = one(**{m: 1.0 for m in mf.required_metrics(metric_set="minimal")})
        assert q["duration_s"] == 1.0 and q["bytes_dram"] == 1.0
        assert q["flops_fp32"] == 4.0 and q["flops_fp64"] == 4.0  # 1 + 1 + 2·1

    def test_roofline_set_yields_every_quantity(self) -> None:
        q = one(cc="8.0", **{m: 1.0 for m in mf.required_metrics("8.0")})
        for name in ("duration_s", "flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor", "bytes_dram",
                     "bytes_l2", "bytes_l1", "peak_flop_per_s_fp32", "bandwidth_bytes_per_s_dram",
                     "bandwidth_bytes_per_s_l2", "bandwidth_bytes_per_s_l1", "peak_flop_per_s_tensor"):
            assert not math.isnan(q[name]), name

    def test_every_name_is_known_to_nvidias_metric_library(self) -> None:
        # ncu refuses a --metrics list with one unknown name. NVIDIA's libnvperf_host.so (shipped in the
        # ncu-report 2026.3.1 wheel) holds every metric base name of every chip: a typo here fails here.
        import importlib.util
        import re

        spec = importlib.util.find_spec("ncu_report")
        if spec is None or not spec.submodule_search_locations:
            pytest.skip("ncu-report wheel not installed")
        lib = Path(next(iter(spec.submodule_search_locations))) / "libnvperf_host.so"
        if not lib.is_file():
            pytest.skip("libnvperf_host.so not in the ncu-report wheel")
        known = {m.decode() for m in re.findall(rb"[a-z0-9]+__[a-z0-9_]+", lib.read_bytes())}
        asked = {m for cc in (None, "7.0", "7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "10.3", "11.0", "12.0")
                 for s in mf.METRIC_SETS for m in mf.required_metrics(cc, s)}
        unknown = sorted(m for m in asked if re.sub(r"\.(sum|avg|max|min)(\..*)?$", "", m) not in known)
        assert not unknown

    def test_unknown_set(self) -> None:
        with pytest.raises(NsroofError, match="unknown metric set"):
            mf.required_metrics(metric_set="everything")

    @pytest.mark.parametrize(("raw", "norm"), [("8.0", "8.0"), ("80", "8.0"), ("sm_90a", "9.0"),
                                               ("sm_120", "12.0"), ("10.3", "10.3"), ("", ""), (None, ""),
                                               ("7", "7.0"), ("x", "")])
    def test_normalize_cc(self, raw: str | None, norm: str) -> None:
        assert tp.normalize_cc(raw) == norm


# --- the table and its documentation ---------------------------------------------------------


class TestTable:
    def test_every_contract_quantity_has_formulas(self) -> None:
        for q in ("duration_s", *(f"flops_{p}" for p in PRECISIONS), *(f"bytes_{lv}" for lv in LEVELS),
                  *(f"peak_flop_per_s_{p}" for p in PRECISIONS),
                  *(f"bandwidth_bytes_per_s_{lv}" for lv in LEVELS)):
            assert mf.formulas_for(q)

    def test_expressions_unique_per_quantity(self) -> None:
        for q in mf.QUANTITIES:
            exprs = [f.expression for f in mf.formulas_for(q)]
            assert len(exprs) == len(set(exprs)), q

    def test_ceilings_are_ncu_sourced(self) -> None:
        for f in mf.FORMULAS:
            if f.quantity.startswith(("peak_", "bandwidth_")):
                assert f.provenance.startswith("ncu:")

    def test_every_level_definition_has_a_ceiling(self) -> None:
        for level in LEVELS:
            byte_defs = {f.definition for f in mf.formulas_for(f"bytes_{level}")}
            bw_defs = {f.definition for f in mf.formulas_for(f"bandwidth_bytes_per_s_{level}")}
            assert byte_defs == bw_defs, level

    def test_readme_doc_in_step_with_table(self, repo: Path) -> None:
        doc = (repo / "docs" / "readme" / "formulas.md").read_text(encoding="utf-8")
        assert mf.render_markdown() in doc, ("regenerate: python -m nsroof.counters.metric_formulas "
                                             "docs/readme/formulas.md")


# --- properties --------------------------------------------------------------------------------

_POOL = sorted({m for f in mf.FORMULAS for m in f.metrics if "*" not in m and "<" not in m}
               | {f"{T}src_bf16_dst_fp32_sparsity_off.sum", f"{T}src_bf16_dst_fp32_sparsity_on.sum",
                  f"{T}src_bf16_dst_fp32_sparsity_off.sum.peak_sustained", f"{T}src_fp16.sum",
                  f"{T}op_hgmma_src_fp16_sparsity_off.sum", "sm__inst_executed_pipe_tensor.sum"})
_VALUE = st.one_of(st.just(np.nan), st.just(0.0), st.floats(1e-9, 1e12, allow_nan=False))


@st.composite
def kernel_tables(draw: st.DrawFn) -> pd.DataFrame:
    rows = draw(st.integers(1, 4))
    names = draw(st.lists(st.sampled_from(_POOL), min_size=1, max_size=25, unique=True))
    data: dict[str, Any] = {"cc": draw(st.lists(st.sampled_from(["8.0", "9.0", "7.0", ""]), min_size=rows,
                                                max_size=rows))}
    for name in names:
        data[name] = draw(st.lists(_VALUE, min_size=rows, max_size=rows))
    return pd.DataFrame(data)


class TestProperties:
    @settings(max_examples=40, deadline=None)
    @given(kernel_tables())
    def test_each_kernel_is_derived_on_its_own(self, k: pd.DataFrame) -> None:
        # vectorised over rows, yet a kernel's quantities never depend on its neighbours
        together = derive(k)
        for i in range(len(k)):
            alone = derive(k.iloc[[i]])
            pd.testing.assert_series_equal(together.iloc[i], alone.iloc[0], check_names=False)

    @settings(max_examples=40, deadline=None)
    @given(kernel_tables())
    def test_nan_quantities_name_what_is_missing(self, k: pd.DataFrame) -> None:
        q = derive(k)
        for name, missing in (("duration_s", "missing_duration"), ("bytes_dram", "missing_dram"),
                              ("bytes_l2", "missing_l2"), ("bytes_l1", "missing_l1")):
            nan = q[name].isna()
            assert (q.loc[nan, missing] != "").all(), name
            assert (q.loc[~nan, missing] == "").all(), name
        # a computed quantity always says which formula made it
        assert (q.loc[q["duration_s"].notna(), "duration_source"] != "").all()
        assert (q.loc[q["flops"].notna(), "flops_source"] != "").all()
        # FLOPs unknown although a precision has a source: only the no-CUDA-core-counter rule (PARTIAL_RULES),
        # and then the absent counters are named
        assert (q.loc[q["flops"].isna() & (q["flops_source"] != ""), "missing_flops"] != "").all()
