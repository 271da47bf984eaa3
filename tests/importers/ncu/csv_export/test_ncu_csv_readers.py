"""The details-page readers agree, chosen through `csv_export.read(path, reader=...)`: the prefix scan's
compiled twin ("scan", where it was built), its pure-Python twin ("python") and the block reader with
row-level repairs ("robust") give the identical kernel table (columns, dtypes, values, file facts) on every
file the scan accepts; the scan declines (ReaderDeclined when chosen alone) whatever it cannot vouch for,
and "auto" then hands the file to the robust reader."""

from __future__ import annotations

import dataclasses
import gzip
from pathlib import Path

import pandas as pd
import pandas.testing as pdt
import pytest

from nsroof.errors import InputError
from nsroof.importers.ncu import csv_bytes, csv_export
from nsroof.importers.ncu.csv_export import find_layout, scan
from nsroof.schema import FileFacts
from tests._paths import DATA, SHARED_FIXTURES


def header_says_details(path: Path) -> bool:
    """Whether the file's header is a details page's (read from the header alone, cheap enough for a
    parametrize list); the tests then assert that the full read agrees (is_details)."""
    try:
        export = csv_bytes.open_export(path)
    except InputError:
        return False  # no ncu export at all
    try:
        return find_layout(export).page == "details"
    except InputError:
        return False
    finally:
        export.close()


# the details pages only: a raw page has one reader and no scan, so the readers' tests do not apply to it
LOCAL = sorted(p.name for p in (DATA / "ncu").glob("*.csv") if header_says_details(p))
SHARED = sorted(
    p.relative_to(SHARED_FIXTURES).as_posix()
    for folder in ("csv", "converted", "synthetic")
    for p in (SHARED_FIXTURES / folder).glob("*.csv")
    if header_says_details(p)
) if SHARED_FIXTURES.is_dir() else []

HEADER = ["ID", "Process ID", "Process Name", "Host Name",
          "thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg", "Kernel Name",
          "Context", "Stream", "Block Size", "Grid Size", "Device", "CC", "Section Name", "Metric Name",
          "Metric Unit", "Metric Value", "Rule Name", "Rule Type", "Rule Description",
          "Estimated Speedup Type", "Estimated Speedup"]

SCAN_READERS = ["scan", "python"] if scan.compiled_available() else ["python"]


def q(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'


def ident(kid: int, name: str) -> list[str]:
    nvtx = ('4242  "<default domain>:step0:none:none:none:none:none:none"  '
            '"<default domain>:aten::mm, seq = 1:none:none:none:none:none:none" ')
    return [str(kid), "4242", "python3", "host", nvtx, name, "1", "7", "(256, 1, 1)", "(80, 2, 1)", "0",
            "8.0"]


def metric_row(kid: int, name: str, section: str, metric: str, unit: str, value: str) -> str:
    return ",".join(q(v) for v in ident(kid, name) + [section, metric, unit, value]) + ","


def rule_row(kid: int, name: str, section: str = "SpeedOfLight") -> str:
    return ",".join(q(v) for v in ident(kid, name) + [section, "", "", "", "SOLBottleneck", "OPT",
                                                     'rule text, with "quotes"', "global", "12.5"])


KERNELS = {0: 'void gemm<128, "causal", cutlass::Shape<64, 64>>(Params)', 1: "void silu(float *)"}


def export_lines() -> list[str]:
    """Two launches, auto units per row, en_US grouping, rule rows, a string metric."""
    lines = [",".join(q(h) for h in HEADER)]
    for kid, name in KERNELS.items():
        lines += [
            metric_row(kid, name, "Command line profiler metrics", "gpu__time_duration.sum", "usecond",
                       f"{2.5 + kid:.2f}"),
            metric_row(kid, name, "Command line profiler metrics", "dram__bytes_read.sum", "Mbyte",
                       "1,234.56"),
            metric_row(kid, name, "Command line profiler metrics", "lts__t_bytes.sum", "Kbyte", "7,488.00"),
            rule_row(kid, name),
            metric_row(kid, name, "GPU Speed Of Light Throughput", "Duration", "nsecond", "2,500"),
            metric_row(kid, name, "Launch Statistics", "Function Cache Configuration", "", "CachePreferNone"),
            rule_row(kid, name, "Occupancy"),
        ]
    return lines


def write(tmp_path: Path, lines: list[str], *, newline: str = "\n", name: str = "x.csv",
          end: str | None = None) -> Path:
    path = tmp_path / name
    path.write_bytes((newline.join(lines) + (newline if end is None else end)).encode("utf-8"))
    return path


def read(path: Path, reader: str = "auto") -> tuple[pd.DataFrame, FileFacts]:
    return csv_export.read(path, reader=reader)


def assert_same(a: tuple[pd.DataFrame, FileFacts], b: tuple[pd.DataFrame, FileFacts]) -> None:
    """The identical kernel table and file facts (but for facts.reader, which names the reader)."""
    pdt.assert_frame_equal(a[0], b[0], check_exact=True)
    assert list(a[0].dtypes) == list(b[0].dtypes)
    assert dataclasses.replace(a[1], reader="") == dataclasses.replace(b[1], reader="")


def scan_result(path: Path) -> str | None:
    """The scan twin that reads the file by default (facts.reader), None when the scan declines it."""
    try:
        return read(path, SCAN_READERS[0])[1].reader
    except csv_export.ReaderDeclined:
        return None
    except InputError as err:  # the scan took the file; its content is refused after
        return f"{SCAN_READERS[0]}, then {err.cause}"


def assert_all_readers_agree(path: Path, *, scan_applies: bool = True) -> pd.DataFrame:
    """Every details-page reader gives the robust reader's table; a scan twin that should not apply
    declines."""
    robust = read(path, "robust")
    assert robust[1].reader == "nsroof " + csv_export.READERS["robust"]
    for reader in SCAN_READERS:
        if scan_applies:
            assert_same(read(path, reader), robust)
        else:
            with pytest.raises(csv_export.ReaderDeclined):
                read(path, reader)
    auto = read(path)
    assert_same(auto, robust)
    assert auto[1].reader == "nsroof " + csv_export.READERS[SCAN_READERS[0] if scan_applies else "robust"]
    return robust[0]


def is_details(path: Path) -> bool:
    try:
        return read(path, "robust")[1].format == csv_export.FORMAT_DETAILS
    except InputError:
        return False


# ---------------------------------------------------------------------------------------------
# every fixture
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", LOCAL)
def test_repo_fixtures(name: str) -> None:
    path = DATA / "ncu" / name
    assert is_details(path)
    assert_all_readers_agree(path)


@pytest.mark.parametrize("name", SHARED)
def test_shared_fixtures(shared_fixtures: Path, name: str) -> None:
    path = shared_fixtures / name
    assert is_details(path)
    assert_all_readers_agree(path)


def test_the_fixture_lists_hold_the_details_pages(shared_fixtures: Path) -> None:
    # the header test that builds the lists above must not leave them (nearly) empty
    assert len(LOCAL) >= 4 and len(SHARED) >= 20


# ---------------------------------------------------------------------------------------------
# generated files the scan reads
# ---------------------------------------------------------------------------------------------


def test_generated_export(tmp_path: Path) -> None:
    df = assert_all_readers_agree(write(tmp_path, export_lines()))
    facts = csv_export.read(write(tmp_path, export_lines()))[1]
    # 2.50 usecond = 2.5e-6 s; 1,234.56 Mbyte = 1.23456e9 B; 7,488.00 Kbyte = 7.488e6 B;
    # 2,500 nsecond = 2.5e-6 s
    assert df["kernel_id"].tolist() == [0, 1]
    assert df["kernel_name"].tolist() == list(KERNELS.values())
    assert df["gpu__time_duration.sum"].tolist() == pytest.approx([2.5e-6, 3.5e-6])
    assert df["dram__bytes_read.sum"].tolist() == pytest.approx([1.23456e9, 1.23456e9])
    assert df["lts__t_bytes.sum"].tolist() == pytest.approx([7.488e6, 7.488e6])
    assert df["nvtx_ranges"].iloc[0] == ["step0", "aten::mm, seq = 1"]
    assert facts.number_style == "en_US"


def test_crlf_bom_and_preamble(tmp_path: Path) -> None:
    path = tmp_path / "win.csv"
    body = "\r\n".join(export_lines()) + "\r\n"
    path.write_bytes(b"\xef\xbb\xbf" + ("==PROF== Connected to process 11\r\napp output\r\n" + body).encode())
    assert_all_readers_agree(path)


def test_interleaved_launches_and_blank_lines(tmp_path: Path) -> None:
    lines = export_lines()
    a, b = lines[1:8], lines[8:]
    mixed = [lines[0], a[0], b[0], "", a[1], a[2], "", "", b[1], a[3], b[2], *a[4:], *b[3:]]
    path = write(tmp_path, mixed)
    # the scan counts the blank lines, so the line numbers stay exact
    df = assert_all_readers_agree(path)
    assert df["gpu__time_duration.sum"].tolist() == pytest.approx([2.5e-6, 3.5e-6])


def test_launch_that_begins_with_a_rule_row(tmp_path: Path) -> None:
    lines = export_lines()
    lines.insert(1, rule_row(0, KERNELS[0]))
    assert_all_readers_agree(write(tmp_path, lines))


def test_duplicate_metric_rows_keep_the_first(tmp_path: Path) -> None:
    lines = export_lines()
    lines.insert(2, metric_row(0, KERNELS[0], "Command line profiler metrics", "gpu__time_duration.sum",
                               "usecond", "9.00"))
    df = assert_all_readers_agree(write(tmp_path, lines))
    assert df["gpu__time_duration.sum"].iloc[0] == pytest.approx(2.5e-6)


def test_rows_with_full_width_and_no_trailing_comma(tmp_path: Path) -> None:
    # an export where every row is as wide as the header (no ragged metric rows)
    lines = [ln[:-1] + ',"","","","",""' if ln.endswith(",") else ln for ln in export_lines()]
    assert_all_readers_agree(write(tmp_path, lines))


def test_unit_error_names_the_line(tmp_path: Path) -> None:
    lines = export_lines()
    lines[9] = metric_row(1, KERNELS[1], "Command line profiler metrics", "dram__bytes_read.sum", "furlong",
                          "1")
    path = write(tmp_path, lines[:3] + ["", ""] + lines[3:])
    assert scan_result(path) is not None
    with pytest.raises(InputError) as err:
        csv_export.read(path)
    # header line 1, two blank lines before it
    assert ":12:" in str(err.value) and "furlong" in str(err.value)


# ---------------------------------------------------------------------------------------------
# what the scan declines (the robust reader reads or reports it)
# ---------------------------------------------------------------------------------------------


def test_declines_text_among_rows(tmp_path: Path) -> None:
    lines = export_lines()
    lines.insert(5, "==PROF== Disconnected from process 11")
    path = write(tmp_path, lines)
    assert scan_result(path) is None
    df, facts = csv_export.read(path)
    assert any("non-CSV" in w for w in facts.warnings)


def assert_all_readers_refuse(path: Path) -> InputError:
    """Every reader, chosen in turn, raises the one identical InputError."""
    messages = set()
    for reader in ["auto", "robust", *SCAN_READERS]:
        with pytest.raises(InputError) as err:
            read(path, reader)
        assert type(err.value) is InputError
        messages.add(str(err.value))
    assert len(messages) == 1, messages
    return err.value


def test_every_reader_refuses_a_missing_final_newline(tmp_path: Path) -> None:
    # the last row is complete but for its newline: ncu ends every line, so the export was cut off;
    # 1 header line + 14 rows: the last row is line 15
    path = write(tmp_path, export_lines(), end="")
    err = assert_all_readers_refuse(path)
    assert err.line == 15 and err.cause.startswith("truncated")


@pytest.mark.parametrize("keep", [0.5, 0.9])
def test_every_reader_refuses_an_export_cut_at_a_cell_boundary(
    tmp_path: Path, keep: float
) -> None:
    data = write(tmp_path, export_lines()).read_bytes()
    cut = data.rfind(b'","', 0, int(len(data) * keep)) + 1  # ends on a closing quote: every cell left parses
    path = tmp_path / "cut.csv"
    path.write_bytes(data[:cut])
    err = assert_all_readers_refuse(path)
    assert err.line == data[:cut].count(b"\n") + 1 and err.cause.startswith("truncated")


def test_declines_unquoted_cells(tmp_path: Path) -> None:
    lines = export_lines()
    lines[1] = lines[1].replace('"0","4242"', '0,4242', 1)
    path = write(tmp_path, lines)
    assert scan_result(path) is None
    assert_same(read(path), read(path, "robust"))


def test_declines_newline_in_kernel_name(tmp_path: Path) -> None:
    lines = [ln.replace("void silu(float *)", "void silu(\nfloat *)") for ln in export_lines()]
    path = write(tmp_path, lines)
    assert scan_result(path) is None
    df = csv_export.read(path)[0]
    assert df["kernel_name"].tolist()[1] == "void silu(\nfloat *)"


def test_declines_a_wide_row_with_a_metric(tmp_path: Path) -> None:
    # a full-width row that carries a metric: the robust reader keeps it, the scan must not drop it
    lines = export_lines()
    lines[2] = lines[2][:-1] + ',"","","","",""'
    lines[3] = lines[3][:-1] + ',"R","OPT","x","global","1"'
    path = write(tmp_path, lines)
    assert scan_result(path) is None
    df = assert_all_readers_agree(path, scan_applies=False)
    assert df["lts__t_bytes.sum"].iloc[0] == pytest.approx(7.488e6)


def test_declines_a_short_row(tmp_path: Path) -> None:
    lines = export_lines()
    lines[2] = ",".join(q(v) for v in ident(0, KERNELS[0])
                        + ["Command line profiler metrics", "x.sum", "byte"])
    path = write(tmp_path, lines)
    assert scan_result(path) is None
    with pytest.raises(InputError, match=":3: row has 15 fields"):
        read(path, "robust")


def test_gzip_goes_to_the_robust_reader(tmp_path: Path) -> None:
    plain = write(tmp_path, export_lines())
    packed = tmp_path / "x.csv.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert scan_result(packed) is None
    df = csv_export.read(packed)[0]
    expected, expected_facts = csv_export.read(plain)
    expected_facts.source = packed.name
    pdt.assert_frame_equal(df.drop(columns="source"), expected.drop(columns="source"))
