"""Clock-true datasheet ceilings against Nsight Compute's own, over the real exports in ../shared/fixtures.

1. Per-cycle datasheet figures × the clocks an export recorded equal the ceilings ncu computes from the
   same export (`X.sum.peak_sustained × unit__cycles_elapsed.avg.per_second`) within 3%, for every
   roof the export holds: DRAM, L2, L1, FP32/FP64/FP16 on CUDA cores, tensor paths.
2. With `--machine <its GPU>`, no kernel that has FLOP, byte and time counters at a level is `unknown`
   there (a kernel that moved 0 bytes and did 0 FLOPs has nothing to place and is left out).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nsroof import importers
from nsroof.pipeline import analyze
from nsroof.roofs import machines

TOLERANCE = 0.03
CLOCKS = {"sm": "sm__cycles_elapsed.avg.per_second", "dram": "dram__cycles_elapsed.avg.per_second",
          "l2": "lts__cycles_elapsed.avg.per_second", "l1": "l1tex__cycles_elapsed.avg.per_second"}
# (ncu metric × factor, its clock, the datasheet roof it must equal): ncu's chart formulas
# (shared/docs/roofline-metrics.md §2–4)
ROOFS: tuple[tuple[str, float, str, str, str], ...] = (
    ("dram__bytes.sum.peak_sustained", 1, "dram", "bandwidth_bytes_per_s", "dram"),
    ("derived__lts__lts2xbar_bytes.sum.peak_sustained", 1, "l2", "bandwidth_bytes_per_s", "l2"),
    ("derived__l1tex__lsu_writeback_bytes_mem_lg.sum.peak_sustained", 1, "l1", "bandwidth_bytes_per_s", "l1"),
    ("derived__l1tex__lsu_writeback_bytes_mem_lgds.sum.peak_sustained", 1, "l1", "bandwidth_bytes_per_s",
     "l1"),
    ("sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained", 2, "sm", "simt_flop_per_s", "fp32"),
    ("sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained", 2, "sm", "simt_flop_per_s", "fp64"),
    ("sm__sass_thread_inst_executed_op_hfma_pred_on.sum.peak_sustained", 4, "sm", "simt_flop_per_s", "fp16"),
    ("sm__ops_path_tensor_src_fp16_dst_fp32_sparsity_off.sum.peak_sustained", 1, "sm", "peak_flop_per_s",
     "fp16"),
    ("sm__ops_path_tensor_src_bf16_dst_fp32_sparsity_off.sum.peak_sustained", 1, "sm", "peak_flop_per_s",
     "bf16"),
    ("sm__ops_path_tensor_src_tf32_dst_fp32_sparsity_off.sum.peak_sustained", 1, "sm", "peak_flop_per_s",
     "tf32"),
    ("sm__ops_path_tensor_src_fp64.sum.peak_sustained", 1, "sm", "peak_flop_per_s", "fp64"),
    ("sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32_sparsity_off.sum.peak_sustained", 1, "sm",
     "peak_flop_per_s", "bf16"),
    ("sm__ops_path_tensor_op_hgmma_src_tf32_dst_fp32_sparsity_off.sum.peak_sustained", 1, "sm",
     "peak_flop_per_s", "tf32"),
)
# the raw pages that hold both ncu's peaks and its clocks, and how many roofs each must compare
WITH_PEAKS = {"alprielse__2025-04-21-77_06-MT": 10, "alprielse__silu-2025-04-18-v1": 9,
              "averyclapp__profile_output": 5, "bautista__report_name": 3, "speedyscan__profile": 3}

# exports that name no device: the GPU their authors profiled (shared/fixtures/MANIFEST.md)
GPU_OF = {"averyclapp__metrics.csv": "NVIDIA A10G", "gardenia__gemm.csv": "a100-pcie-40gb",
          "gardenia__share_tile.csv": "a100-pcie-40gb", "leleucas__bert_flashattn_nsight.csv": "a100-40gb",
          "leleucas__nsight_virtual.csv": "a100-40gb", "llmperfopt__k0016_gemm_ncu.details.csv": "rtx5090",
          "lashi__ncu_reduceInteger.csv": "rtx4090", "olajide__saxpy.csv": "rtx5070",
          "leleucas__pooling_nsight16.csv": "a100-40gb", "leleucas__roofline_result.csv": "a100-40gb",
          "llmperfopt__k0016_gemm_ncu.section_SpeedOfLight_RooflineChart.csv": "rtx5090"}


def _kernels(path: Path) -> pd.DataFrame:
    got = importers.read(path)
    return got[0] if isinstance(got, tuple) else got  # (kernels, facts) once every importer returns both


@pytest.mark.parametrize("export", sorted(WITH_PEAKS))
def test_datasheet_at_the_recorded_clock_equals_ncus_ceilings(shared_fixtures: Path, export: str) -> None:
    k = _kernels(shared_fixtures / "converted" / f"{export}.raw_base.csv")
    m = machines.lookup_device(str(k["device"].iloc[0]))
    assert m is not None
    compared = set()
    for _, row in k.iterrows():
        clocks = {unit: float(pd.to_numeric(row.get(metric), errors="coerce"))
                  for unit, metric in CLOCKS.items()}
        at = m.at_clocks(sm_hz=clocks["sm"], dram_hz=clocks["dram"], l2_hz=clocks["l2"], l1_hz=clocks["l1"])
        for metric, factor, unit, table, key in ROOFS:
            per_cycle = pd.to_numeric(row.get(metric), errors="coerce")
            clock = clocks[unit] if unit != "l1" or clocks["l1"] == clocks["l1"] else clocks["sm"]
            if not per_cycle == per_cycle or not clock == clock:
                continue
            ncu = float(per_cycle) * factor * clock  # e.g. A100: 1280 B/cycle × 1.2149 GHz = 1.5551 TB/s
            ours = getattr(at, table)[key]
            assert ours == pytest.approx(ncu, rel=TOLERANCE), (
                f"{export} {metric}: {ours:.4g} vs ncu {ncu:.4g}")
            compared.add(metric)
    assert len(compared) == WITH_PEAKS[export], sorted(compared)


def _exports(root: Path) -> list[Path]:
    out = []
    for folder in ("csv", "converted", "synthetic"):
        out += [p for p in sorted((root / folder).glob("*"))
                if "_auto_" not in p.name and p.name != "llmperfopt__error_only_raw.csv"]
    return out


def test_every_kernel_with_counters_is_classified_at_every_level(shared_fixtures: Path) -> None:
    classified = 0
    for path in _exports(shared_fixtures):
        device = str(_kernels(path)["device"].iloc[0]) if len(_kernels(path)) else ""
        spec = device or GPU_OF.get(path.name)
        if not spec or machines.lookup_device(device) is None and device:
            continue  # synthetic exports without a device name
        frame = analyze([path], machine=spec).frame
        has = frame[["flops", "bytes", "duration_s"]].notna().all(axis=1).to_numpy()
        nothing = ((frame["flops"] == 0) & (frame["bytes"] == 0)).to_numpy()
        rows = frame[has & ~nothing]
        # the one roof a datasheet entry may lack: the l1tex__t counter's (its L1 figure is the LSU
        # writeback's), said in `missing`, never the other counter's number
        no_figure = rows["missing"].astype(str).str.contains("has no L1 roof for the l1tex__t counter")
        rows = rows[~no_figure]
        unknown = rows[rows["bound"].astype(str) == "unknown"]
        assert unknown.empty, f"{path.name}: {unknown[['function', 'level', 'missing']].head().to_string()}"
        classified += len(rows)
    # the real exports with FLOP and byte counters: A100 (gardenia ×2, leleucas ×2, alprielse), GH200,
    # A10G (×2), GTX 1650, RTX 3070, RTX 5090 — none may pass by comparing nothing
    assert classified >= 90


def test_readme_gardenia_numbers_are_at_the_profiled_clock(shared_fixtures: Path) -> None:
    # gemm_v0: 2 × 34,359,738,368,000 FFMA = 6.87e13 FLOP (+ 104,857,600 tensor instructions) in
    # 28,293,058,736.76 cycles / 765 MHz = 36.98 s; the FP32 roof at 765 MHz is 19.5e12 × 765 / 1410 =
    # 10.58e12 FLOP/s, so 6.916e13 / 36.98 s = 1.87e12 FLOP/s is 17.7% of it (10% against the boost figure)
    frame = analyze([shared_fixtures / "csv" / "gardenia__gemm.csv"], machine="a100-40gb").frame
    row = frame[(frame["function"] == "gemm_v0") & (frame["level"] == "dram")].iloc[0]
    assert row["peak_flop_per_s"] == pytest.approx(19.5e12 * 765 / 1410, rel=1e-3)
    assert row["ceiling_source"] == "spec:A100 SXM4 40GB @ 765 MHz SM"
    assert row["roof_fraction"] == pytest.approx(0.177, abs=0.002)
    assert "HMMA.16816" in row["flops_source"]
    # L2: lts__t_bytes against the tag stage's 7680 B/cycle × 765 MHz = 5.875e12 B/s (lts2xbar's 5120 B
    # would be 1.5x too low); L1: l1tex__t_bytes, for which the datasheet has no figure: NaN and why
    l2 = frame[frame["level"] == "l2"]
    assert np.allclose(l2["bandwidth_bytes_per_s"], 7680 * 765e6, rtol=1e-3)
    assert set(l2["ceiling_source"]) == {
        "spec:A100 SXM4 40GB @ 765 MHz SM#counter_bandwidth_bytes_per_s.l2.lts__t"}
    l1 = frame[frame["level"] == "l1"]
    assert l1["bandwidth_bytes_per_s"].isna().all() and (l1["bound"] == "unknown").all()
    assert l1["missing"].str.contains("collect l1tex__t_bytes.sum.peak_sustained").all()
