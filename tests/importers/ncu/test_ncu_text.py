"""ncu's text (non-CSV) output -> the kernel table: every kernel-line layout, aligned section tables,
NVTX blocks, rule results, ==PROF== lines, number styles, errors, sniffing, and agreement with the
CSV importer on the shared capture exported both ways."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from nsroof import importers
from nsroof.errors import InputError, UnitError
from nsroof.importers.kernel_table import IDENTITY_COLUMNS
from nsroof.importers.ncu import csv_export as ncu_csv
from nsroof.importers.ncu import text as ncu_text
from nsroof.schema import FileFacts

# In these outputs a line ending in a backslash goes on at the start of the next (one line of the output,
# wider than the source allows).

# ncu 2023-2024: one kernel line with (grid)x(block), Device and CC; two processes; application
# output among the ==PROF== lines and between results; NVTX start/end and push/pop blocks with payload
# lines; rule results (WRN, OPT with a `----- ---` separator); en_US digit grouping.
TEXT_2024 = """\
==PROF== Connected to process 4242 (/usr/bin/python3.11)
==PROF== Profiling "axpy" - 0: 0%....50%....100% - 9 passes
step 0 loss 1.25
==PROF== Profiling "gemm_tile" - 1: 0%....50%....100% - 9 passes
==PROF== Disconnected from process 4242
[4242] python3.11@gpu-node-7
  axpy(float, const float *, float *, int) (4096, 1, 1)x(256, 1, 1), Context 1, Stream 13, Device 1, CC 9.0

    NVTX Start/End Ranges:
      train
        <7,epoch0>

    NVTX Push/Pop Stack for Thread 777:
     <default domain>
        <0,forward>
        <1,aten::add_, seq = 3, op_id = 9>
     train
        <0,block 0: mlp>
          Int64: 42
          ASCII: block 0: mlp
    Section: GPU Speed Of Light Throughput
    ----------------------- ------------- ------------
    Metric Name               Metric Unit Metric Value
    ----------------------- ------------- ------------
    DRAM Frequency          cycle/nsecond         2.62
    SM Frequency            cycle/nsecond         1.98
    Elapsed Cycles                  cycle       25,000
    Duration                      usecond        12.50
    Compute (SM) Throughput             %        14.11
    ----------------------- ------------- ------------

    WRN   This kernel exhibits low compute throughput and memory bandwidth utilization relative to the peak
          performance of this device.
    ----- --------------------------------------------------------------------------------------------------
    OPT   Est. Speedup: 50%
          A wave of thread blocks is defined as the maximum number of blocks that can be executed in parallel.

    Section: Memory Workload Analysis
    ----------------- ------------ ------------
    Metric Name        Metric Unit Metric Value
    ----------------- ------------ ------------
    Memory Throughput Gbyte/second       838.86
    Mem Busy                     %        31.25
    ----------------- ------------ ------------

    Section: Launch Statistics
    ---------------------------- --------------- ---------------
    Metric Name                      Metric Unit    Metric Value
    ---------------------------- --------------- ---------------
    Block Size                                               256
    Function Cache Configuration                 CachePreferNone
    Registers Per Thread         register/thread              16
    Threads                               thread       1,048,576
    ---------------------------- --------------- ---------------

    Section: Command line profiler metrics
    ------------------------------------------------- ----------- -----------------------
    Metric Name                                       Metric Unit            Metric Value
    ------------------------------------------------- ----------- -----------------------
    gpu__time_duration.sum                                nsecond                  12,480
    dram__bytes.sum                                         Mbyte 2.10 (1.05; 0.50; 0.55)
    sm__sass_thread_inst_executed_op_ffma_pred_on.sum        inst                  65,536
    ------------------------------------------------- ----------- -----------------------

  void gemm_tile<128, 64>(const float *, const float *, float *) (64, 32, 1)x(128, 1, 1), Context 1, Stream \
13, Device 1, CC 9.0
    Section: GPU Speed Of Light Throughput
    ------------------ ----------- ------------
    Metric Name        Metric Unit Metric Value
    ------------------ ----------- ------------
    Duration               msecond         1.50
    Achieved Occupancy           %      (!) n/a
    ------------------ ----------- ------------

worker finished
[4243] worker@gpu-node-7
  axpy(float, const float *, float *, int) (4096, 1, 1)x(256, 1, 1), Context 2, Stream 7, Device 0, CC 9.0
    Section: GPU Speed Of Light Throughput
    ----------- ----------- ------------
    Metric Name Metric Unit Metric Value
    ----------- ----------- ------------
    Duration        msecond         0.75
    ----------- ----------- ------------
"""

# ncu <= 2022.3: the kernel line carries the Kernel Time and no launch shape; tables have no header
# row and fixed widths 70/15/30; a rule result follows the closing rule directly; de_DE numbers; a
# metric name wider than its column pushes the rest of its row right.
TEXT_2022_DE = """\
==PROF== Disconnected from process 60621
[60621] add_two_matrix@127.0.0.1
  addMatrix(int*, int*, int*, int), 2021-Mar-29 21:11:57, Context 1, Stream 7
    Section: GPU Speed Of Light
    ---------------------------------------------------------------------- --------------- \
------------------------------
    DRAM Frequency                                                           cycle/nsecond \
                          1,11
    Duration                                                                       usecond \
                         13,89
    SOL DRAM                                                                             % \
                         42,37
    ---------------------------------------------------------------------- --------------- \
------------------------------
    WRN   This kernel exhibits low compute throughput and memory bandwidth utilization relative to the peak \
performance
          of this device.

    Section: Command line profiler metrics
    ---------------------------------------------------------------------- --------------- \
------------------------------
    smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio               \
                        1.234,50
    dram__bytes_read.sum                                                             Mbyte \
                          9,45
    ---------------------------------------------------------------------- --------------- \
------------------------------
"""

# ncu 2025.x: the kernel name on one line, the launch on the next; short unit names (Ghz, us);
# --print-metric-name label-name (`Label (metric)`); a ==WARNING== before the results.
TEXT_2025_TWO_LINE = """\
==WARNING== Could not deploy stock section files to /home/u/Documents/NVIDIA Nsight Compute
==PROF== Connected to process 31440 (/usr/bin/python3.10)
==PROF== Disconnected from process 31440
[31440] python3.10@127.0.0.1
  void vectorized_elementwise_kernel<4, unnamed>::silu_kernel(TensorIteratorBase &)::[lambda() (instance \
1)], std::array<char *, 2>>(int, T2, T3)
  (524288, 1, 1)x(128, 1, 1), Context 1, Stream 7, Device 0, CC 9.0
    Section: GPU Speed Of Light Throughput
    -------------------------------------------------------- ----------- ---------------
    Metric Name                                              Metric Unit    Metric Value
    -------------------------------------------------------- ----------- ---------------
    DRAM Frequency (dram__cycles_elapsed.avg.per_second)             Ghz            2.62
    Duration (gpu__time_duration.sum)                                 us          582.37
    Function Cache Configuration (launch__func_cache_config)             CachePreferNone
    -------------------------------------------------------- ----------- ---------------

    INF   This workload is utilizing greater than 80.0% of the available compute or memory performance of \
the device.
"""

# --print-metric-name name: the name column holds metric names under ordinary section titles.
TEXT_METRIC_NAMES = """\
[9] gemm@host
  sgemm_128x64_nn (13, 2, 2)x(256, 1, 1), Context 1, Stream 7, Device 0, CC 8.9
    Section: GPU Speed Of Light Throughput
    ------------------------------------------------- ----------- -------------
    Metric Name                                       Metric Unit  Metric Value
    ------------------------------------------------- ----------- -------------
    gpu__time_duration.sum                                     ms          1.50
    dram__bytes.sum                                         Gbyte          3.00
    sm__sass_thread_inst_executed_op_fadd_pred_on.sum        inst   200,000,000
    sm__sass_thread_inst_executed_op_fmul_pred_on.sum        inst   100,000,000
    sm__sass_thread_inst_executed_op_ffma_pred_on.sum        inst 1,500,000,000
    ------------------------------------------------- ----------- -------------
"""


def write(tmp_path: Path, text: str, name: str = "run.txt") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def read_text(tmp_path: Path, text: str, name: str = "run.txt") -> tuple[pd.DataFrame, FileFacts]:
    return ncu_text.read(write(tmp_path, text, name))


# ---------------------------------------------------------------------------------------------
# kernel lines and identity
# ---------------------------------------------------------------------------------------------


def test_one_line_kernels_across_two_processes(tmp_path: Path) -> None:
    df, facts = read_text(tmp_path, TEXT_2024)
    assert list(df.columns[: len(IDENTITY_COLUMNS)]) == list(IDENTITY_COLUMNS)
    assert df["kernel_id"].tolist() == [0, 1, 2]  # print order: the text carries no ID
    assert df["process_id"].tolist() == [4242, 4242, 4243]
    assert df["process_name"].tolist() == ["python3.11", "python3.11", "worker"]
    assert df["host"].tolist() == ["gpu-node-7"] * 3
    assert df["kernel_name"].tolist() == [
        "axpy(float, const float *, float *, int)",
        "void gemm_tile<128, 64>(const float *, const float *, float *)",
        "axpy(float, const float *, float *, int)",
    ]
    assert df["function"].tolist() == ["axpy", "gemm_tile", "axpy"]
    assert df["grid"].tolist() == ["(4096, 1, 1)", "(64, 32, 1)", "(4096, 1, 1)"]
    assert df["block"].tolist() == ["(256, 1, 1)", "(128, 1, 1)", "(256, 1, 1)"]
    assert df["context"].tolist() == [1, 1, 2]
    assert df["stream"].tolist() == [13, 13, 7]
    assert df["device_id"].tolist() == [1, 1, 0]
    assert df["cc"].tolist() == ["9.0"] * 3
    assert df["device"].tolist() == [""] * 3  # text output names the device by index only
    assert facts.format == "ncu-text:details" and facts.layout == "one-line"
    assert facts.source == "run.txt"


def test_identity_dtypes_follow_the_kernel_table_contract(tmp_path: Path) -> None:
    df = read_text(tmp_path, TEXT_2024)[0]
    assert df["kernel_id"].dtype == np.int64
    for name, (dtype, _) in IDENTITY_COLUMNS.items():
        if dtype == "object":
            assert df[name].dtype == object, name
        elif dtype == "Int64":
            assert str(df[name].dtype) == "Int64", name


def test_kernel_time_layout_has_no_launch_shape(tmp_path: Path) -> None:
    df, facts = read_text(tmp_path, TEXT_2022_DE)
    assert df["kernel_name"].tolist() == ["addMatrix(int*, int*, int*, int)"]
    assert df["function"].tolist() == ["addMatrix"]
    assert df["grid"].tolist() == [""] and df["block"].tolist() == [""] and df["cc"].tolist() == [""]
    assert df["device_id"].isna().all()
    assert df["context"].tolist() == [1] and df["stream"].tolist() == [7]
    assert facts.layout == "kernel-time"


def test_two_line_kernel_header(tmp_path: Path) -> None:
    df, facts = read_text(tmp_path, TEXT_2025_TWO_LINE)
    assert len(df) == 1
    assert df["kernel_name"][0].startswith("void vectorized_elementwise_kernel<4, unnamed>::silu_kernel(")
    assert df["kernel_name"][0].endswith("std::array<char *, 2>>(int, T2, T3)")
    assert df["function"][0] == "vectorized_elementwise_kernel"
    assert df["grid"][0] == "(524288, 1, 1)" and df["block"][0] == "(128, 1, 1)"
    assert df["cc"][0] == "9.0" and df["device_id"][0] == 0
    assert facts.layout == "two-line"
    # the ==WARNING== before the results is passed on
    assert any("Could not deploy stock section files" in w for w in facts.warnings)


# ---------------------------------------------------------------------------------------------
# tables: labels -> metrics, units, numbers, strings
# ---------------------------------------------------------------------------------------------


def test_section_labels_map_to_metrics_in_si_units(tmp_path: Path) -> None:
    df, facts = read_text(tmp_path, TEXT_2024)
    k = df.iloc[0]
    assert k["dram__cycles_elapsed.avg.per_second"] == pytest.approx(2.62e9)  # 2.62 cycle/nsecond
    assert k["gpc__cycles_elapsed.avg.per_second"] == pytest.approx(1.98e9)  # SM Frequency 1.98 cycle/ns
    assert k["gpc__cycles_elapsed.max"] == 25000.0  # Elapsed Cycles `25,000`: en_US grouping
    assert k["sm__throughput.avg.pct_of_peak_sustained_elapsed"] == pytest.approx(14.11)  # % stays %
    # Memory Throughput under Memory Workload Analysis is a rate: 838.86 Gbyte/second = 8.3886e11 B/s
    assert k["dram__bytes.sum.per_second"] == pytest.approx(838.86e9)
    assert (k["gpu__compute_memory_access_throughput.avg.pct_of_peak_sustained_elapsed"]
            == pytest.approx(31.25))
    assert k["launch__block_size"] == 256.0  # no unit
    assert k["launch__registers_per_thread"] == 16.0
    assert k["launch__thread_count"] == 1048576.0  # `1,048,576`
    units = facts.metric_units
    assert units["dram__bytes.sum.per_second"] == "byte/second"
    assert units["gpu__time_duration.sum"] == "second"
    assert facts.number_style == "en_US"


def test_printed_metric_name_wins_over_a_mapped_label(tmp_path: Path) -> None:
    df = read_text(tmp_path, TEXT_2024)[0]
    # kernel 0 prints Duration 12.50 usecond (label) and gpu__time_duration.sum 12,480 nsecond (name):
    # the name wins, 12480 ns = 1.248e-5 s (the label would give 12.50e-6 = 1.25e-5 s)
    assert df["gpu__time_duration.sum"][0] == pytest.approx(1.248e-5, rel=1e-12)
    # kernels 1 and 2 print only the label: 1.50 msecond = 1.5e-3 s, 0.75 msecond = 7.5e-4 s
    assert df["gpu__time_duration.sum"][1] == pytest.approx(1.5e-3, rel=1e-12)
    assert df["gpu__time_duration.sum"][2] == pytest.approx(7.5e-4, rel=1e-12)


def test_instance_values_keep_the_aggregate(tmp_path: Path) -> None:
    df = read_text(tmp_path, TEXT_2024)[0]
    # `2.10 (1.05; 0.50; 0.55)` Mbyte -> the aggregate 2.10 Mbyte = 2.1e6 bytes
    assert df["dram__bytes.sum"][0] == pytest.approx(2.1e6)
    assert df["sm__sass_thread_inst_executed_op_ffma_pred_on.sum"][0] == 65536.0
    assert np.isnan(df["dram__bytes.sum"][1])  # not printed for kernel 1


def test_string_values_and_flagged_missing_values(tmp_path: Path) -> None:
    df = read_text(tmp_path, TEXT_2024)[0]
    assert df["launch__func_cache_config"].tolist() == ["CachePreferNone", "", ""]
    assert df["launch__func_cache_config"].dtype == object
    # `(!) n/a`: ncu could not collect it -> NaN, and the column stays numeric
    occ = df["GPU Speed Of Light Throughput: Achieved Occupancy"]  # mapped only under Occupancy
    assert occ.dtype == np.float64 and occ.isna().all()


def test_unmapped_labels_keep_section_and_label(tmp_path: Path) -> None:
    df = read_text(tmp_path, TEXT_2022_DE)[0]
    assert df["GPU Speed Of Light: SOL DRAM"][0] == pytest.approx(42.37)  # `42,37` %


def test_de_de_numbers_and_fixed_width_tables(tmp_path: Path) -> None:
    df, facts = read_text(tmp_path, TEXT_2022_DE)
    assert facts.number_style == "de_DE"
    assert df["dram__cycles_elapsed.avg.per_second"][0] == pytest.approx(1.11e9)  # `1,11` cycle/nsecond
    assert df["gpu__time_duration.sum"][0] == pytest.approx(13.89e-6)  # `13,89` usecond
    # the 72-character name overflows its 70-wide column; the row still splits: `1.234,50` = 1234.5
    assert df["smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"][0] == 1234.5
    assert df["dram__bytes_read.sum"][0] == pytest.approx(9.45e6)  # `9,45` Mbyte


def test_label_name_and_short_units(tmp_path: Path) -> None:
    df = read_text(tmp_path, TEXT_2025_TWO_LINE)[0]
    assert df["dram__cycles_elapsed.avg.per_second"][0] == pytest.approx(2.62e9)  # 2.62 Ghz
    assert df["gpu__time_duration.sum"][0] == pytest.approx(582.37e-6)  # 582.37 us
    assert df["launch__func_cache_config"][0] == "CachePreferNone"


def test_print_metric_name_name(tmp_path: Path) -> None:
    df, facts = read_text(tmp_path, TEXT_METRIC_NAMES)
    assert df["gpu__time_duration.sum"][0] == pytest.approx(1.5e-3)  # 1.50 ms
    assert df["dram__bytes.sum"][0] == pytest.approx(3e9)  # 3.00 Gbyte
    assert df["sm__sass_thread_inst_executed_op_ffma_pred_on.sum"][0] == 1.5e9
    # byte and FLOP counters present: no "export the raw page" hint
    assert facts.hints == []


def test_roofline_hint_when_only_labels(tmp_path: Path) -> None:
    df, facts = read_text(tmp_path, TEXT_2022_DE)
    (hint,) = facts.hints
    assert "--page raw --print-units base" in hint


def test_table_without_a_section_line(tmp_path: Path) -> None:
    text = """\
[5] app@host
  k(int) (1, 1, 1)x(32, 1, 1), Context 1, Stream 7, Device 0, CC 8.6
    ---------------------- ----------- ------------
    Metric Name            Metric Unit Metric Value
    ---------------------- ----------- ------------
    gpu__time_duration.sum     nsecond        2,000
    Block Size                                   32
    ---------------------- ----------- ------------
"""
    df, facts = read_text(tmp_path, text)
    assert df["gpu__time_duration.sum"][0] == pytest.approx(2e-6)  # 2,000 nsecond
    assert df["Block Size"][0] == 32.0  # a label outside any section keeps its own name
    assert facts.warnings == []


@pytest.mark.parametrize(
    ("row", "cells"),
    [
        ("    Duration               msecond         1.50", ["Duration", "msecond", "1.50"]),
        ("    Block Size                              256", ["Block Size", "", "256"]),
        # a name wider than its column pushes unit and value right by the overflow (2 characters)
        ("    Elapsed Cycles Total     cycle         10", ["Elapsed Cycles Total", "cycle", "10"]),
        ("   Duration                msecond         1.50", None),  # starts left of the name column
        ("    Duration               msecondx        1.50", None),  # padded unit runs into the gap
        ("    Throughput         byte/second       838.86", ["Throughput", "byte/second", "838.86"]),
        # that unit swapped for one 7 characters shorter, not re-padded: the value moved left by 7 and now
        # starts at 34, inside the unit column (23..34), leaving the value column empty
        ("    Throughput         byte       838.86", None),
    ],
)
def test_split_row_by_rule_widths(row: str, cells: list[str] | None) -> None:
    spans = [(4, 22), (23, 34), (35, 47)]  # `    ------------------ ----------- ------------`
    assert ncu_text.split_row(row, spans) == cells


def test_rule_results_and_separators_are_skipped_not_warned(tmp_path: Path) -> None:
    df, facts = read_text(tmp_path, TEXT_2024)
    warnings = facts.warnings
    # the only foreign line among the results is the application's `worker finished`
    assert len(warnings) == 1 and "skipped 1 line(s)" in warnings[0] and "worker finished" in warnings[0]
    assert not any("Est. Speedup" in str(c) or "WRN" in str(c) for c in df.columns)


def test_crlf_and_gzip(tmp_path: Path) -> None:
    plain = read_text(tmp_path, TEXT_2024)[0]
    crlf = read_text(tmp_path, TEXT_2024.replace("\n", "\r\n"), "crlf.txt")[0]
    gz = tmp_path / "run.txt.gz"
    gz.write_bytes(gzip.compress(TEXT_2024.encode()))
    zipped = ncu_text.read(gz)[0]
    for other in (crlf, zipped):
        assert other["kernel_name"].tolist() == plain["kernel_name"].tolist()
        pd.testing.assert_frame_equal(other.drop(columns="source"), plain.drop(columns="source"))


# ---------------------------------------------------------------------------------------------
# NVTX
# ---------------------------------------------------------------------------------------------


def test_nvtx_push_pop_then_start_end_outermost_first(tmp_path: Path) -> None:
    df = read_text(tmp_path, TEXT_2024)[0]
    # push/pop: <default domain> bottom first, then the `train` domain; start/end ranges last (the
    # CSV importer's order), although the text prints start/end first; payload lines are not ranges
    assert df["nvtx_ranges"][0] == ["forward", "aten::add_, seq = 3, op_id = 9", "block 0: mlp", "epoch0"]
    assert df["nvtx_path"][0] == "forward/aten::add_, seq = 3, op_id = 9/block 0: mlp/epoch0"
    assert df["nvtx_ranges"][1] == [] and df["nvtx_path"][1] == ""


def test_nvtx_matches_the_csv_cells_for_the_same_state() -> None:
    from nsroof.names import nvtx_paths as nvtx

    push = ('777  "<default domain>:forward:none:none:none:none:none:none"  '
            '"<default domain>:aten::add_, seq = 3, op_id = 9:none:none:none:none:none:none"  '
            '"train:block 0: mlp:none:none:none:none:none:none" ')
    start = ' "7:train:epoch0:none:none:none:none:none:none" '
    assert list(nvtx.ranges(push, start)) == ["forward", "aten::add_, seq = 3, op_id = 9", "block 0: mlp",
                                              "epoch0"]


# ---------------------------------------------------------------------------------------------
# errors: file, line, cause
# ---------------------------------------------------------------------------------------------


def _error(tmp_path: Path, text: str) -> InputError:
    p = write(tmp_path, text, "bad.txt")
    with pytest.raises(InputError) as info:
        ncu_text.read(p)
    err = info.value
    assert err.path == str(p)
    return err


def test_truncated_table(tmp_path: Path) -> None:
    lines = TEXT_2024.splitlines()
    cut = "\n".join(lines[:27]) + "\n"  # ends after `Elapsed Cycles`, inside the first table
    err = _error(tmp_path, cut)
    assert err.line == 27 and "truncated" in err.cause and "GPU Speed Of Light Throughput" in err.cause


@pytest.mark.parametrize("marker", [
    "performance of this device.",  # inside a rule result, after every table of the launch
    "2.62\n    SM Frequency",  # inside a table row: the value column is cut
])
def test_output_cut_inside_a_line_is_truncated(tmp_path: Path, marker: str) -> None:
    # ncu ends every line it prints: a last line without its newline means the output was cut off
    cut = TEXT_2024[: TEXT_2024.index(marker) + len(marker) // 2]
    err = _error(tmp_path, cut)
    assert err.line == cut.count("\n") + 1 and err.cause.startswith("truncated")


def test_gzipped_output_cut_inside_a_line_is_truncated(tmp_path: Path) -> None:
    cut = TEXT_2024[: TEXT_2024.index("Est. Speedup") + 5]
    p = tmp_path / "cut.txt.gz"
    p.write_bytes(gzip.compress(cut.encode()))
    with pytest.raises(InputError) as info:
        ncu_text.read(p)
    assert info.value.line == cut.count("\n") + 1 and info.value.cause.startswith("truncated")


def test_shared_capture_cut_short_is_truncated(shared_fixtures: Path, tmp_path: Path) -> None:
    # the review's repro: the first 1,500 bytes of a real capture end inside a rule result's text
    data = (shared_fixtures / "synthetic" / "fixture_ncu2024_details_text_nvtx.txt").read_bytes()[:1500]
    p = tmp_path / "cut.txt"
    p.write_bytes(data)
    with pytest.raises(InputError) as info:
        ncu_text.read(p)
    assert info.value.line == data.count(b"\n") + 1 and info.value.cause.startswith("truncated")


def test_row_that_does_not_fit_the_columns(tmp_path: Path) -> None:
    broken = TEXT_2024.replace("    SM Frequency            cycle/nsecond         1.98",
                               "   SM Frequency             cycle/nsecond         1.98")
    err = _error(tmp_path, broken)
    assert err.line == 26 and "does not fit" in err.cause


def test_unknown_unit(tmp_path: Path) -> None:
    bad = TEXT_2024.replace("Gbyte/second       838.86", "furlong/week       838.86")
    p = write(tmp_path, bad, "bad.txt")
    with pytest.raises(UnitError) as info:
        ncu_text.read(p)
    assert (info.value.line == 42 and "furlong/week" in info.value.cause
            and "Memory Throughput" in info.value.cause)


def test_mixed_number_styles(tmp_path: Path) -> None:
    bad = TEXT_2022_DE.replace("9,45", "9.45").replace("13,89", "1,013.89")  # en_US next to de_DE `1.234,50`
    err = _error(tmp_path, bad)
    assert "mix styles" in err.cause and err.line is not None


def test_launch_line_without_a_name(tmp_path: Path) -> None:
    bad = "[1] app@host\n\n  (1, 1, 1)x(32, 1, 1), Context 1, Stream 7, Device 0, CC 8.6\n"
    err = _error(tmp_path, bad)
    assert err.line == 3 and "without the kernel name" in err.cause


def test_section_header_without_rule(tmp_path: Path) -> None:
    bad = TEXT_METRIC_NAMES.replace(
        "    Metric Name                                       Metric Unit  Metric Value\n"
        "    ------------------------------------------------- ----------- -------------\n",
        "    Metric Name                                       Metric Unit  Metric Value\n", 1)
    err = _error(tmp_path, bad)
    assert err.line == 6 and "not followed by a dashed rule" in err.cause


@pytest.mark.parametrize(
    ("text", "line", "cause"),
    [
        ("", 1, "file is empty"),
        ("\n\n", 1, "file is empty"),
        ("==PROF== Connected to process 1\n==ERROR== The application returned an error code (1).\n", 2,
         "holds only ncu messages, no results: ==ERROR== The application returned an error code (1)."),
        ("Hello from the app\n[3] app@host\n", 1, "no kernel results"),
    ],
)
def test_no_results(tmp_path: Path, text: str, line: int, cause: str) -> None:
    err = _error(tmp_path, text)
    assert err.line == line and cause in err.cause


def test_binary_and_missing_files(tmp_path: Path) -> None:
    p = tmp_path / "blob.txt"
    p.write_bytes(b"[1] a@b\n\0\0\0")
    with pytest.raises(InputError, match="binary"):
        ncu_text.read(p)
    with pytest.raises(InputError, match="no such file"):
        ncu_text.read(tmp_path / "absent.txt")
    with pytest.raises(InputError, match="directory"):
        ncu_text.read(tmp_path)


# ---------------------------------------------------------------------------------------------
# routing
# ---------------------------------------------------------------------------------------------


def test_sniff_recognises_text_output(tmp_path: Path) -> None:
    assert importers.sniff(write(tmp_path, TEXT_2024, "a.txt")) == "ncu-text"  # ==PROF== + app output first
    assert importers.sniff(write(tmp_path, TEXT_2025_TWO_LINE, "b.log")) == "ncu-text"
    only_section = "\n".join(TEXT_METRIC_NAMES.splitlines()[2:]) + "\n"  # no process, no kernel line
    assert importers.sniff(write(tmp_path, only_section, "c.txt")) == "ncu-text"
    # a CSV export stays a CSV even when its preamble looks like a process line
    csv_text = '[1] app@host\n"ID","Process ID","Kernel Name"\n"0","1","k"\n'
    assert importers.sniff(write(tmp_path, csv_text, "d.csv")) == "ncu-csv"
    assert importers.sniff(write(tmp_path, '[{"ph": "X"}]', "e.json")) == "torch-trace"


def test_importers_read_dispatches_to_text(tmp_path: Path) -> None:
    df, facts = importers.read(write(tmp_path, TEXT_METRIC_NAMES))
    assert facts.format == "ncu-text:details"
    assert df["function"].tolist() == ["sgemm_128x64_nn"]


def test_analyze_cli_on_text_output(tmp_path: Path) -> None:
    from nsroof.cli import cli

    src = write(tmp_path, TEXT_METRIC_NAMES)
    out = tmp_path / "report.parquet"
    result = CliRunner().invoke(cli, ["analyze", str(src), "-o", str(out)])
    assert result.exit_code == 0, result.stderr
    report = pd.read_parquet(out)
    dram = report[report["level"].astype(str) == "dram"].iloc[0]
    # 3.00 Gbyte in 1.50 ms: 3e9 / 1.5e-3 = 2e12 B/s
    assert dram["achieved_bytes_per_s"] == pytest.approx(2e12)
    # FP32 = fadd + fmul + 2 x ffma = 2e8 + 1e8 + 2 x 1.5e9 = 3.3e9 FLOP; / 1.5e-3 s = 2.2e12 FLOP/s
    assert dram["flops_fp32"] == pytest.approx(3.3e9)
    assert dram["achieved_flop_per_s"] == pytest.approx(2.2e12)
    assert dram["intensity"] == pytest.approx(1.1)  # 3.3e9 FLOP / 3e9 bytes


def test_analyze_cli_error_is_one_line(tmp_path: Path) -> None:
    from nsroof.cli import cli

    lines = TEXT_2024.splitlines()
    src = write(tmp_path, "\n".join(lines[:27]) + "\n", "cut.txt")
    out = tmp_path / "report.parquet"
    result = CliRunner().invoke(cli, ["analyze", str(src), "-o", str(out)])
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"nsroof: error: {src}:27: ") and "Traceback" not in result.stderr
    assert not out.exists()


# ---------------------------------------------------------------------------------------------
# the shared capture, exported as text and as CSV
# ---------------------------------------------------------------------------------------------

# Half a unit of the second decimal the text prints, per base unit of this capture: cycle/nsecond
# (1e9 hz), msecond (1e-3 s), cycle and % (printed in the base unit).
_PRINTED_UNIT = {"hz": 1e9, "second": 1e-3, "cycle": 1.0, "%": 1.0}


def test_shared_text_agrees_with_its_csv_twin(shared_fixtures: Path) -> None:
    text, text_facts = ncu_text.read(shared_fixtures / "synthetic" / "fixture_ncu2024_details_text_nvtx.txt")
    csv, csv_facts = ncu_csv.read(shared_fixtures / "synthetic" / "fixture_ncu2024_details_nvtx_base.csv")
    assert len(text) == len(csv) == 2
    for col in IDENTITY_COLUMNS:
        if col == "source":
            continue
        assert text[col].tolist() == csv[col].tolist(), col
        assert text[col].dtype == csv[col].dtype, col
    assert text["nvtx_path"][0] == (
        "model.forward/aten::linear, seq = 12, op_id = 3/aten::addmm, seq = 12, op_id = 5, sizes = "
        "[[64, 128], [128, 256]], input_op_ids = [(3, 0)]/layer0/step0")
    assert text["nvtx_path"][1] == "model.forward/aten::relu, seq = 13, op_id = 6/layer1/step1"

    metrics = [c for c in text.columns if c not in IDENTITY_COLUMNS]
    assert len(metrics) == 10 and set(metrics) <= set(csv.columns)  # the text shows one section only
    units = text_facts.metric_units
    for c in metrics:
        assert units[c] == csv_facts.metric_units[c], c
        tol = 0.005 * _PRINTED_UNIT[units[c]]
        np.testing.assert_allclose(text[c].to_numpy(float), csv[c].to_numpy(float), rtol=0, atol=tol,
                                   err_msg=c)
    # exact where the text prints every digit: Elapsed Cycles 112172012, SM Active Cycles 105097573.40
    assert text["gpc__cycles_elapsed.max"].tolist() == csv["gpc__cycles_elapsed.max"].tolist()
    assert text["sm__cycles_active.avg"][0] == csv["sm__cycles_active.avg"][0] == 105097573.40
    # Duration 77.71 msecond vs 77712512 nsecond: |0.07771 - 0.077712512| = 2.5e-6 s < 5e-6 s
    assert abs(text["gpu__time_duration.sum"][0] - 0.077712512) == pytest.approx(2.512e-6, rel=1e-6)
