"""The wide per-kernel table (nsroof.report.wide.kernel_rows): the report's level rows pivoted into columns,
the verdict where each kernel's time floor is set, and the facts merged over a kernel's rows."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from nsroof.report.wide import SCRIPT_COLUMNS, kernel_rows, script_table
from tests.report.report_frames import five_kernels


def _row(frame: pd.DataFrame, kernel_id: int, level: str) -> int:
    hit = frame.index[(frame["kernel_id"] == kernel_id) & (frame["level"] == level)]
    assert len(hit) == 1
    return int(hit[0])


@pytest.fixture(scope="module")
def wide() -> pd.DataFrame:
    df = five_kernels()
    # copy: above a roof at L1 only -> above_roof for the kernel
    df.loc[_row(df, 1, "l1"), "above_roof"] = True
    # mystery: a different missing text per level -> each name once, in the order the rows meet them
    df.loc[_row(df, 2, "dram"), "missing"] = "dram__bytes_read.sum"
    df.loc[_row(df, 2, "l2"), "missing"] = "lts__t_bytes.sum, dram__bytes_read.sum"
    df.loc[_row(df, 2, "l1"), "missing"] = "nan"
    # softmax: limited by the compute floor, its DRAM fraction unknown -> the first level that has one (L1)
    df.loc[df["kernel_id"] == 3, "limiting"] = "compute"
    df.loc[_row(df, 3, "dram"), "roof_fraction"] = np.nan
    return kernel_rows(df)


def test_one_row_per_kernel_longest_first(wide: pd.DataFrame) -> None:
    assert wide["function"].tolist() == ["gemm", "copy", "mystery", "softmax<float>", "bogus"]
    assert wide["rank"].tolist() == [1, 2, 3, 4, 5]
    assert wide["time_share"].tolist() == pytest.approx([0.5, 0.25, 0.1, 0.1, 0.05])  # of 2.0 ms


def test_levels_pivoted_into_columns(wide: pd.DataFrame) -> None:
    gemm = wide.iloc[0]
    # 10 GFLOP over 1 / 2 / 5 GB
    assert (gemm["intensity_dram"], gemm["intensity_l2"], gemm["intensity_l1"]) == pytest.approx(
        (10.0, 5.0, 2.0))
    # ridges 20e12 / 2e12 = 10, / 5e12 = 4, / 20e12 = 1: at or right of each -> compute-bound everywhere
    assert [gemm[f"bound_{lv}"] for lv in ("dram", "l2", "l1")] == ["compute"] * 3
    assert wide.loc[3, "bound_l2"] == "unknown"  # softmax's L2 bytes unknown
    assert wide.loc[0, "bound_link"] == ""  # no collective: no link row


def test_verdict_at_the_limiting_level(wide: pd.DataFrame) -> None:
    gemm = wide.iloc[0]
    # floors: DRAM max(10e9/20e12, 1e9/2e12) = 0.5 ms, L2 max(0.5, 0.4) ms, L1 max(0.5, 0.25) ms:
    # DRAM (the first max)
    assert gemm["limiting"] == "dram" and gemm["bound"] == "compute"
    assert gemm["time_floor_s"] == pytest.approx(0.5e-3)
    assert gemm["roof_fraction"] == pytest.approx(0.5)  # 1e13 FLOP/s of min(20e12, 10 x 2e12)
    assert gemm["floor_ratio"] == pytest.approx(2.0)  # 1 ms / 0.5 ms
    mystery = wide.iloc[2]  # FLOPs unknown: no floor, no level limits it
    assert (mystery["limiting"] == "" and mystery["bound"] == "unknown"
            and math.isnan(mystery["roof_fraction"]))
    softmax = wide.iloc[3]
    # compute floor: DRAM's fraction unset, L2's unknown, L1's 5e11 FLOP/s of min(20e12, 0.25 x 20e12) = 0.1
    assert softmax["bound"] == "compute" and softmax["roof_fraction"] == pytest.approx(0.1)


def test_facts_merged_over_a_kernels_rows(wide: pd.DataFrame) -> None:
    assert wide["above_roof"].tolist() == [False, True, False, False, True]  # copy at L1; bogus everywhere
    assert wide.loc[2, "missing"] == "dram__bytes_read.sum, lts__t_bytes.sum"
    assert wide.loc[3, "missing"] == "lts__t_bytes.sum" and wide.loc[0, "missing"] == ""


def test_script_table_has_the_documented_columns(wide: pd.DataFrame) -> None:
    table = script_table(five_kernels())
    assert list(table.columns) == list(SCRIPT_COLUMNS)
    assert table["function"].tolist() == wide["function"].tolist()
