"""The ncu CSV layouts: details page (old, new, body-item) and raw page, into the kernel table.

Fixtures are hand-written exports in tests/data/ncu (see each test for the arithmetic)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from nsroof.importers.kernel_table import IDENTITY_COLUMNS, metric_columns
from nsroof.importers.ncu import csv_export


@pytest.fixture(scope="module")
def ncu_dir(data_dir: Path) -> Path:
    return data_dir / "ncu"


def test_new_details_layout_identity(ncu_dir: Path) -> None:
    df, facts = csv_export.read(ncu_dir / "details_new.csv")
    assert list(df.columns[: len(IDENTITY_COLUMNS)]) == list(IDENTITY_COLUMNS)
    assert df["kernel_id"].tolist() == [0, 1]
    assert df["kernel_id"].dtype == "int64"
    assert df["function"].tolist() == ["layer_norm_kernel", "vectorized_elementwise_kernel"]
    assert df["grid"].tolist() == ["(4096, 1, 1)", "(8192, 1, 1)"]
    assert df["block"].tolist() == ["(256, 1, 1)", "(128, 1, 1)"]
    assert df["cc"].tolist() == ["8.0", "8.0"]
    assert df["device_id"].tolist() == [0, 0]  # the "Device" column is an index; no name on the details page
    assert df["device"].tolist() == ["", ""]
    assert df["stream"].tolist() == [7, 7] and df["context"].tolist() == [1, 1]
    assert df["process_id"].tolist() == [4100, 4100]
    assert facts.format == "ncu-csv:details" and facts.layout == "new"
    assert facts.source == "details_new.csv" and df["source"].eq("details_new.csv").all()


def test_per_row_units_become_si(ncu_dir: Path) -> None:
    df, facts = csv_export.read(ncu_dir / "details_new.csv")
    df = df.set_index("kernel_id")
    # kernel 0: "1.50" Mbyte = 1.5e6 B; "512.25" Kbyte = 512,250 B; "12.35" usecond = 1.235e-5 s
    assert df.at[0, "dram__bytes_read.sum"] == pytest.approx(1.5e6)
    assert df.at[0, "dram__bytes_write.sum"] == pytest.approx(512_250.0)
    assert df.at[0, "gpu__time_duration.sum"] == pytest.approx(12.35e-6)
    # kernel 1, same metrics in other units: "983,040" byte; "1.05" Mbyte = 1.05e6 B;
    # "7,488" nsecond = 7.488e-6 s
    assert df.at[1, "dram__bytes_read.sum"] == 983_040.0
    assert df.at[1, "dram__bytes_write.sum"] == pytest.approx(1.05e6)
    assert df.at[1, "gpu__time_duration.sum"] == pytest.approx(7.488e-6)
    assert df.at[0, "sm__sass_thread_inst_executed_op_ffma_pred_on.sum"] == 1_048_576.0
    units = facts.metric_units
    assert units["dram__bytes_read.sum"] == "byte" and units["gpu__time_duration.sum"] == "second"
    assert facts.number_style == "en_US"


def test_labels_map_to_metrics_by_section_and_unit(ncu_dir: Path) -> None:
    df, facts = csv_export.read(ncu_dir / "details_new.csv")
    df = df.set_index("kernel_id")
    # "DRAM Frequency" 1.21 cycle/nsecond = 1.21e9 Hz
    assert df.at[0, "dram__cycles_elapsed.avg.per_second"] == pytest.approx(1.21e9)
    # "Memory Throughput" means two metrics: % under Speed Of Light, byte/second under
    # Memory Workload Analysis
    assert (df.at[0, "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"]
            == pytest.approx(61.07))
    assert df.at[0, "dram__bytes.sum.per_second"] == pytest.approx(121.46e9)  # 121.46 Gbyte/second
    # "Duration" and gpu__time_duration.sum are one column, not two
    assert [c for c in df.columns if "Duration" in c] == []
    # a label no table entry identifies stays a label column, under its section
    assert df.at[0, "Occupancy: Average Spin Cycles"] == 2048.0
    assert facts.metric_units["Occupancy: Average Spin Cycles"] == "cycle"


def test_string_and_unsupported_metrics(ncu_dir: Path) -> None:
    df = csv_export.read(ncu_dir / "details_new.csv")[0]
    assert df["launch__func_cache_config"].tolist() == ["CachePreferNone", "CachePreferNone"]
    assert df["launch__func_cache_config"].dtype == object
    # "n/a" (metric the chip does not support) is NaN, and the name is a metric even without "__"
    assert df["flop_count_hp.sum"].isna().all()
    assert df["flop_count_hp.sum"].dtype == "float64"


def test_rule_rows_do_not_become_metrics(ncu_dir: Path) -> None:
    df = csv_export.read(ncu_dir / "details_new.csv")[0]
    assert not any("SOLBottleneck" in c or c.startswith("SpeedOfLight") for c in df.columns)
    assert len(df) == 2


def test_old_layout_with_preamble(ncu_dir: Path) -> None:
    df, facts = csv_export.read(ncu_dir / "details_old_preamble.csv")
    assert facts.layout == "old"
    assert df["kernel_id"].tolist() == [0, 1]
    assert "Kernel Time" not in df.columns  # a wall-clock timestamp, not a duration
    # "2,097,152" byte and "65.54" Kbyte = 65,540 B; "10,240" nsecond = 1.024e-5 s
    assert df["dram__bytes.sum"].tolist() == pytest.approx([2_097_152.0, 65_540.0])
    assert df["gpu__time_duration.sum"].tolist() == pytest.approx([10.24e-6, 10.24e-6])
    assert df["sm__cycles_elapsed.avg.per_second"].iloc[0] == pytest.approx(1_009_150_443.18)
    assert df["cc"].tolist() == ["", ""] and df["grid"].tolist() == ["", ""]
    assert any("clock reset" in w for w in facts.warnings)  # ncu's ==WARNING== line is passed on
    assert any("FLOP" in h and "--page raw --print-units base" in h for h in facts.hints)


def test_body_item_layout_keeps_chart_items_apart(ncu_dir: Path) -> None:
    df, facts = csv_export.read(ncu_dir / "details_body_item.csv")
    row = df.iloc[0]
    assert facts.layout == "body-item"
    # "SM Frequency" repeats per body item: roofs use the SM clock, achieved values the SMSP clock
    assert row["sm__cycles_elapsed.avg.per_second"] == pytest.approx(2.01e9)
    assert row["smsp__cycles_elapsed.avg.per_second"] == pytest.approx(1.98e9)
    assert row["dram__bytes.sum.peak_sustained"] == 128.0
    assert row["dram__cycles_elapsed.avg.per_second"] == pytest.approx(13.79e9)
    assert row["dram__bytes.sum.per_second"] == pytest.approx(158.07e9)
    assert row["sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained"] == 21_760.0
    # an unmapped label under two body items: two columns, suffixed by the item
    assert row["GPU Speed Of Light Roofline Chart: Single Precision Achieved Value: Mystery Gauge"] == 3.0
    assert row["GPU Speed Of Light Roofline Chart: Double Precision Achieved Value: Mystery Gauge"] == 4.0


def test_raw_page_with_units_row_and_nvtx(ncu_dir: Path) -> None:
    df, facts = csv_export.read(ncu_dir / "raw_2022_nvtx.csv")  # CRLF, 2022 header with Kernel Time
    assert facts.format == "ncu-csv:raw" and facts.number_style == "C"
    # "0.25" msecond = 2.5e-4 s; "1410.00" cycle/usecond = 1.41e9 Hz
    assert df["gpu__time_duration.sum"].tolist() == pytest.approx([2.5e-4, 1e-5])
    assert df["sm__cycles_elapsed.avg.per_second"].tolist() == pytest.approx([1.41e9, 1.41e9])
    # instance values keep the aggregate; "no data" is NaN
    assert df["lts__t_sectors.sum"].tolist() == [262_144.0, 1024.0]
    assert df["dram__bytes_read.sum"].iloc[0] == 4_194_304.0 and pd.isna(df["dram__bytes_read.sum"].iloc[1])
    assert df["launch__func_cache_config"].tolist() == ["CachePreferNone", "CachePreferShared"]
    assert df["device"].tolist() == ["NVIDIA A100-SXM4-40GB"] * 2  # from device__attribute_display_name
    assert df["nvtx_ranges"].iloc[0] == ["train_step", "aten::mm, seq = 4, op_id = 9", "encoder.layer0",
                                         "step3"]
    assert df["nvtx_path"].iloc[0] == "train_step/aten::mm, seq = 4, op_id = 9/encoder.layer0/step3"
    assert df["nvtx_ranges"].iloc[1] == [] and df["nvtx_path"].iloc[1] == ""


def test_metric_columns_are_float64_or_strings(ncu_dir: Path) -> None:
    for name in ("details_new.csv", "raw_2022_nvtx.csv", "details_body_item.csv"):
        df = csv_export.read(ncu_dir / name)[0]
        for col in metric_columns(df):
            assert str(df[col].dtype) in ("float64", "object"), (name, col, df[col].dtype)


def test_launch_identity_from_launch_metrics(tmp_path: Path) -> None:
    # a raw page without Block/Grid/CC columns: taken from launch__/device__ metrics
    header = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Kernel Time", "Context",
              "Stream", "device__attribute_compute_capability_major",
              "device__attribute_compute_capability_minor",
              "launch__block_dim_x", "launch__block_dim_y", "launch__block_dim_z",
              "launch__grid_dim_x", "launch__grid_dim_y", "launch__grid_dim_z"]
    units = [""] * 8 + [""] * 8
    row = ["3", "1", "a.out", "h", "kern(int)", "2020-Dec-03 17:12:24", "1", "7", "7", "5", "256", "1", "1",
           "40", "2", "1"]
    text = "\n".join(",".join(f'"{v}"' for v in r) for r in (header, units, row)) + "\n"
    path = tmp_path / "raw.csv"
    path.write_text(text)
    df = csv_export.read(path)[0]
    assert df["block"].tolist() == ["(256, 1, 1)"] and df["grid"].tolist() == ["(40, 2, 1)"]
    assert df["cc"].tolist() == ["7.5"] and df["kernel_id"].tolist() == [3]


def test_print_metric_name_label_name(tmp_path: Path) -> None:
    # --print-metric-name label-name prints "Label (metric__name)": the metric name wins
    header = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
              "Block Size", "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit",
              "Metric Value"]
    ident = ["0", "1", "p", "h", "k()", "1", "7", "(32, 1, 1)", "(1, 1, 1)", "0", "8.6",
             "GPU Speed Of Light Throughput"]
    rows = [ident + ["DRAM Frequency (dram__cycles_elapsed.avg.per_second)", "cycle/nsecond", "6.68"],
            ident + ["Duration (gpu__time_duration.sum)", "usecond", "3.10"]]
    path = tmp_path / "labelname.csv"
    path.write_text("\n".join(",".join(f'"{v}"' for v in r) for r in [header, *rows]) + "\n")
    df = csv_export.read(path)[0]
    assert df["dram__cycles_elapsed.avg.per_second"].iloc[0] == pytest.approx(6.68e9)
    assert df["gpu__time_duration.sum"].iloc[0] == pytest.approx(3.1e-6)
