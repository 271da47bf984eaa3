"""The time-per-kernel-name breakdown (report.summary.by_name / name_table): HTA's kernel view, with the
roofline verdict of each name."""

from __future__ import annotations

import pytest

from nsroof.pipeline import analyze
from nsroof.report.summary import BY_NAME_COLUMNS, by_name, name_table, render
from nsroof.report.wide import kernel_rows
from tests._paths import REPO

EXAMPLE = REPO / "nsroof" / "data" / "examples" / "example_details.csv"  # 15 kernels, 10 names
# our own export: saxpy launched 3 times (10, 20, 30 us; 12,582,912 DRAM bytes each), one sgemm (200 us);
# its L1 bytes are l1tex__t_bytes, whose roof no datasheet gives: the export carries ncu's own
# (l1tex__t_bytes.sum.peak_sustained 13,824 B/cycle at 1.41 GHz)
THREE_SAXPY = REPO / "tests" / "data" / "report" / "by_name_raw.csv"


def test_repeated_launches_sum_under_their_name() -> None:
    names = by_name(analyze([THREE_SAXPY]).frame)
    assert list(names.columns) == list(BY_NAME_COLUMNS)
    assert list(names["function"]) == ["sgemm_kernel", "saxpy"]  # longest total first
    saxpy = names.iloc[1]
    assert (saxpy["kernels"], saxpy["launches"]) == (3, 3)
    assert saxpy["duration_s"] == pytest.approx(60e-6)  # 10 + 20 + 30 us
    assert saxpy["time_share"] == pytest.approx(60 / 260)  # of 60 + 200 us
    assert ((saxpy["bound"], saxpy["limiting"]) == ("memory", "dram")
            and saxpy["bound_time_share"] == pytest.approx(1.0))
    # each launch's floor: 12,582,912 B / 1,555 GB/s (A100 SXM4 40GB datasheet DRAM) = 8.0919 us;
    # the name's roof fraction = 3 × 8.0919 / 60 = 0.4046 (not the mean of 0.809, 0.405, 0.270 = 0.495)
    assert saxpy["time_floor_s"] == pytest.approx(3 * 12582912 / 1555e9, rel=1e-6)
    assert saxpy["roof_fraction"] == pytest.approx(3 * 12582912 / 1555e9 / 60e-6, rel=1e-6)
    sgemm = names.iloc[0]
    # 1,073,741,824 FFMA × 2 FLOP / 19.5 TFLOP/s fp32 = 110.1 us of 200 us
    assert (sgemm["bound"], sgemm["limiting"]) == ("compute", "compute")
    assert sgemm["roof_fraction"] == pytest.approx(2 * 1073741824 / 19.5e12 / 200e-6, rel=1e-3)


def test_the_example_by_name_agrees_with_its_kernels() -> None:
    frame = analyze([EXAMPLE]).frame
    names, kernels = by_name(frame), kernel_rows(frame)
    assert len(names) == kernels["function"].nunique() == 10
    assert names["launches"].sum() == 15 and names["time_share"].sum() == pytest.approx(1.0)
    tn = kernels[kernels["function"].str.endswith("64x3_tn")]
    row = names.set_index("function").loc[tn["function"].iloc[0]]
    assert row["kernels"] == len(tn) == 4
    assert row["duration_s"] == pytest.approx(tn["duration_s"].sum())
    assert row["roof_fraction"] == pytest.approx(tn["time_floor_s"].sum() / tn["duration_s"].sum())


@pytest.mark.parametrize("width", [80, 100, 160])
def test_the_name_table_fits_the_terminal(width: int) -> None:
    report = analyze([EXAMPLE])
    lines = name_table(report.frame, 10, width)
    # title, key, header, 10 rows
    assert lines[0] == "Top 10 of 10 kernel names by total time" and len(lines) == 13
    assert all(len(line) <= width for line in lines)
    text = render(report, top=3, by="name", width=width)
    assert "Top 3 of 10 kernel names" in text and "Top 3 kernels by time" not in text
    assert max(len(line) for line in text.splitlines()) <= width


def test_an_empty_report_has_no_names() -> None:
    frame = analyze([THREE_SAXPY]).frame.iloc[0:0]
    assert by_name(frame).empty and list(by_name(frame).columns) == list(BY_NAME_COLUMNS)
