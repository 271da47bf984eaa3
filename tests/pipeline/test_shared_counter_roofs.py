"""The roof of every level is the one of the counter the bytes came from, checked against Nsight Compute's own
percentage of that counter's peak (`<counter>.sum.pct_of_peak_sustained_elapsed`, in the same raw export) on
the real exports: the export's ncu ceilings, the datasheet entry matched from the device name, and --machine
must all give achieved / roof = ncu's percentage, at L2 and L1, on A100 (SXM4 and PCIe), GH200, T4 and
GTX 1650."""

from __future__ import annotations

from pathlib import Path

import pytest

from nsroof import importers
from nsroof.pipeline import analyze

L2_T = "lts__t_sectors.sum.pct_of_peak_sustained_elapsed"
LSU_LG = "l1tex__lsu_writeback_active_mem_lg.sum.pct_of_peak_sustained_elapsed"

# (export, --machine, level, ncu's percentage metric for the counter used): the fraction before this fix
# in the comment (ncu's own in brackets)
CASES = [
    # A100 SXM4: L2 bytes switch to lts__t (write-inclusive); the datasheet roof was lts2xbar's 5120 B/cycle,
    # 1.5x too low: 44.7% of it [29.76%]; lts__t's 7680 B × 1,063 MHz gives 29.76%
    ("alprielse__2025-04-21-77_06-MT", "NVIDIA A100-SXM4-40GB", "l2", L2_T),
    ("alprielse__2025-04-21-77_06-MT", None, "l2", L2_T),  # the export's own peaks: 29.76% before and after
    ("alprielse__2025-04-21-77_06-MT", "NVIDIA A100-SXM4-40GB", "l1", LSU_LG),
    # GH200: 27.1% [18.04%] with --machine before
    ("alprielse__silu-2025-04-18-v1", "NVIDIA GH200 480GB", "l2", L2_T),
    # A100 80GB PCIe, no ncu L2 peak: the datasheet entry from the device name, lts2xbar's figure at the SM
    # clock, 23.5% [16.30%]; now lts__t's 7680 B × its L2 clock (lts__cycles_elapsed.avg / duration)
    ("panjd123__384", None, "l2", L2_T),
    ("panjd123__384", None, "l1", LSU_LG),
    # T4: the L2 clock (854.7 MHz, from its elapsed cycles) was the SM's 554.1 MHz: 77.1% [49.98%]
    ("armleth__report_v4_8_per_thread", None, "l2", L2_T),
    ("armleth__report_v4_8_per_thread", None, "l1", LSU_LG),
    ("bautista__report_name", None, "l1", LSU_LG),
]


@pytest.mark.parametrize(("export", "machine", "level", "pct"), CASES)
def test_achieved_over_the_roof_is_ncus_percentage_of_that_counters_peak(
        shared_fixtures: Path, export: str, machine: str | None, level: str, pct: str) -> None:
    path = shared_fixtures / "converted" / f"{export}.raw_base.csv"
    kernels, _ = importers.read(path)
    rows = analyze([path], machine=machine).frame
    rows = rows[rows["level"] == level].set_index("kernel_id")
    compared = 0
    for _, k in kernels.iterrows():
        ncu = float(k[pct])
        row = rows.loc[k["kernel_id"]]
        if not ncu > 0.05:  # ncu prints 2 decimals: a few hundredths say nothing about a factor
            continue
        ours = row["achieved_bytes_per_s"] / row["bandwidth_bytes_per_s"] * 100
        assert ours == pytest.approx(ncu, abs=0.0051 + 0.002 * ncu), (export, level, row["ceiling_source"])
        compared += 1
    assert compared
