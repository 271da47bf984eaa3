"""File-level quirks of real ncu CSV captures: preamble text, BOM, CRLF, gzip, ragged rows, rule-only
kernels, long kernel names, the unescaped quote in NVTX names — and the fast and robust readers agreeing."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pandas as pd
import pandas.testing as pdt
import pytest

from nsroof.importers.ncu import csv_export
from nsroof.schema import FileFacts

HEADER = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
          "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit", "Metric Value",
          "Rule Name", "Rule Type", "Rule Description", "Estimated Speedup Type", "Estimated Speedup"]


def q(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'


def details(rows: list[tuple[str, str, str, str, str, str]], *, preamble: str = "",
            newline: str = "\n") -> str:
    """rows: (id, kernel name, section, metric, unit, value); metric rows end in a trailing comma like
    ncu's."""
    out = [",".join(q(h) for h in HEADER)]
    for kid, name, section, metric, unit, value in rows:
        ident = [kid, "11", "app", "127.0.0.1", name, "1", "7", "(128, 1, 1)", "(80, 1, 1)", "0", "9.0"]
        if metric:
            out.append(",".join(q(v) for v in ident + [section, metric, unit, value]) + ",")
        else:  # a rule row: full width, empty metric
            out.append(",".join(q(v) for v in ident + [section, "", "", "", "SOLBottleneck", "OPT", "text",
                                                       "global", "12.5"]))
    return preamble + newline.join(out) + newline


def read_text(tmp_path: Path, text: str, name: str = "x.csv", *,
              encoding: str = "utf-8") -> tuple[pd.DataFrame, FileFacts]:
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    return csv_export.read(path)


def read_robust(path: Path) -> tuple[pd.DataFrame, FileFacts]:
    return csv_export.read(path, reader="robust")


BASIC = [("0", "k0(float *)", "Command line profiler metrics", "gpu__time_duration.sum", "usecond", "2.50"),
         ("0", "k0(float *)", "Command line profiler metrics", "dram__bytes.sum", "Kbyte", "1,024.00"),
         ("0", "k0(float *)", "SpeedOfLight", "", "", ""),
         ("1", "k1(float *)", "Command line profiler metrics", "gpu__time_duration.sum", "nsecond", "640"),
         ("1", "k1(float *)", "Command line profiler metrics", "dram__bytes.sum", "byte", "4,096")]


def check_basic(df: pd.DataFrame) -> None:
    # 2.50 usecond = 2.5e-6 s, 640 nsecond = 6.4e-7 s; 1,024.00 Kbyte = 1,024,000 B, 4,096 byte
    assert df["kernel_id"].tolist() == [0, 1]
    assert df["gpu__time_duration.sum"].tolist() == pytest.approx([2.5e-6, 6.4e-7])
    assert df["dram__bytes.sum"].tolist() == pytest.approx([1_024_000.0, 4096.0])


def test_plain(tmp_path: Path) -> None:
    check_basic(read_text(tmp_path, details(BASIC))[0])


def test_preamble_of_app_output_and_prof_lines(tmp_path: Path) -> None:
    pre = ('==PROF== Connected to process 11 (/usr/bin/app)\n2 2 2\n\n"quoted" app line, with a comma\n'
           '==PROF== Profiling "k0" - 0: 0%....50%....100% - 10 passes\n'
           '==PROF== Disconnected from process 11\n')
    df = read_text(tmp_path, details(BASIC, preamble=pre))[0]
    check_basic(df)


def test_bom_and_crlf(tmp_path: Path) -> None:
    df = read_text(tmp_path, "\ufeff" + details(BASIC, preamble="C:\\Users\\me\\app.exe\r\n",
                                                newline="\r\n"))[0]
    check_basic(df)


def test_gzip(tmp_path: Path) -> None:
    plain = tmp_path / "x.csv"
    plain.write_text(details(BASIC, preamble="==PROF== Disconnected\n"))
    packed = tmp_path / "x.csv.gz"
    with open(plain, "rb") as src, gzip.open(packed, "wb") as dst:
        shutil.copyfileobj(src, dst)
    df, facts = csv_export.read(packed)
    check_basic(df)
    assert facts.source == "x.csv.gz"


def test_kernel_with_only_rule_rows_is_a_kernel(tmp_path: Path) -> None:
    rows = [("0", "conv(int)", "SpeedOfLight_RooflineChart", "", "", "")]
    df, facts = read_text(tmp_path, details(rows))
    assert df["kernel_id"].tolist() == [0]
    assert [c for c in df.columns if "__" in c] == []
    assert facts.hints  # nothing to classify: say how to get the counters


def test_long_kernel_names_with_commas_quotes_and_lambdas(tmp_path: Path) -> None:
    args = ", ".join(f"cutlass::gemm::GemmShape<{i}, 128, 32>" for i in range(200))
    long_name = f'void cutlass::Kernel<Gemm<{args}, "epilogue", [lambda(float) (instance 1)]>>(Params)'
    assert len(long_name) > 6000
    rows = [("0", long_name, "Command line profiler metrics", "gpu__time_duration.sum", "nsecond", "1,000"),
            ("0", long_name, "Command line profiler metrics", "dram__bytes.sum", "byte", "64")]
    df = read_text(tmp_path, details(rows))[0]
    assert df["kernel_name"].tolist() == [long_name]
    assert df["function"].tolist() == ["Kernel"]
    assert df["gpu__time_duration.sum"].tolist() == [pytest.approx(1e-6)]


def test_repeated_launches_keep_separate_ids(tmp_path: Path) -> None:
    rows = [(str(i), "void k<float>()", "Command line profiler metrics", "gpu__time_duration.sum", "nsecond",
             str(100 + i))
            for i in range(240)]
    df = read_text(tmp_path, details(rows))[0]
    assert df["kernel_id"].tolist() == list(range(240))
    assert df["gpu__time_duration.sum"].iloc[239] == pytest.approx(339e-9)


def test_text_lines_among_rows_are_skipped_with_a_warning(tmp_path: Path) -> None:
    text = details(BASIC).replace('"1","11"', '==PROF== Disconnected from process 11\n"1","11"', 1)
    df, facts = read_text(tmp_path, text)
    check_basic(df)
    assert any("non-CSV line" in w for w in facts.warnings)


def test_unescaped_quote_in_nvtx_name_recovers_the_kernel_and_warns_once(data_dir: Path,
                                                                         tmp_path: Path) -> None:
    # ncu writes NVTX range names without escaping '"': such a row has more fields than the header
    header = ["ID", "Process ID", "Process Name", "Host Name",
              "thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg",
              "Id:Domain:Start/Stop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg",
              "Kernel Name", "Context", "Stream", "Block Size", "Grid Size", "Device", "CC",
              "gpu__time_duration.sum"]
    broken = ('"0","5","app","h","77  ""<default domain>:step "7", warm:none:none:none:none:none:none""  '
              '""<default domain>:aten::mm:none:none:none:none:none:none"" ","","mm_kernel(float *)","1","7",'
              '"(1, 1, 1)","(1, 1, 1)","0","9.0","1000"')
    broken2 = broken.replace('"0","5"', '"2","5"').replace('"1000"', '"3000"')
    good = '"1","5","app","h","","","other(int)","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","2000"'
    units = ",".join('""' for _ in header[:-1]) + ',"nsecond"'
    path = tmp_path / "nvtx_quote.csv"
    path.write_text("\n".join([",".join(q(h) for h in header), units, broken, good, broken2]) + "\n")
    df, facts = csv_export.read(path)
    assert df["kernel_id"].tolist() == [0, 1, 2]
    assert df["nvtx_ranges"].iloc[0] == ['step "7", warm', "aten::mm"]
    assert df["gpu__time_duration.sum"].tolist() == pytest.approx([1e-6, 2e-6, 3e-6])
    warnings = [w for w in facts.warnings if "unescaped quote" in w]
    assert len(warnings) == 1 and "2 row(s)" in warnings[0]


@pytest.mark.parametrize("name", ["details_new.csv", "details_old_preamble.csv", "details_body_item.csv",
                                  "bom_crlf_de.csv"])
def test_fast_and_robust_readers_agree(data_dir: Path, name: str) -> None:
    path = data_dir / "ncu" / name
    fast, fast_facts = csv_export.read(path)
    robust, robust_facts = read_robust(path)
    pdt.assert_frame_equal(fast, robust)
    assert fast_facts.metric_units == robust_facts.metric_units


def test_de_de_file_with_bom_crlf_and_app_output(data_dir: Path) -> None:
    df, facts = csv_export.read(data_dir / "ncu" / "bom_crlf_de.csv")
    assert facts.number_style == "de_DE"
    # "134.221.568" byte; "292,93" us = 2.9293e-4 s; "33,26" %
    assert df["dram__bytes_op_read.sum"].iloc[0] == 134_221_568.0
    assert df["gpu__time_duration.sum"].iloc[0] == pytest.approx(292.93e-6)
    assert df["lts__t_sector_hit_rate.pct"].iloc[0] == pytest.approx(33.26)
    assert df["cc"].tolist() == ["12.0"]  # "12,0" in a de_DE export
    assert df["function"].tolist() == ["saxpy_kernel"]


def test_interleaved_launches_and_blank_lines(tmp_path: Path) -> None:
    # rows of two launches interleaved, a blank line in between: each launch still gets its own values
    rows = [BASIC[0], BASIC[3], BASIC[1], BASIC[4]]
    text = details(rows).replace('\n"1","11"', '\n\n"1","11"', 1)
    check_basic(read_text(tmp_path, text)[0])


def test_rule_description_spanning_lines(tmp_path: Path) -> None:
    # a quoted value holding a newline: the row is one record, whatever the line count
    text = details(BASIC).replace('"text"', '"first line\nsecond line"')
    check_basic(read_text(tmp_path, text)[0])
