"""The details-page readers agree: polars' tokenizer (_details_polars, when polars is installed), the
prefix scan (_details_scan), pandas' tokenizer (_details_pandas) and the block reader with row-level
repairs (_details_robust) give the identical kernel table (columns, dtypes, values, attrs facts) on every
file the faster ones accept; and the faster ones decline (None) whatever they cannot vouch for, so the
next reader takes it."""

from __future__ import annotations

import gzip
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pandas.testing as pdt
import pytest

from nsroof.errors import InputError
from nsroof.importers import _ncutext as text
from nsroof.importers import ncu_csv
from nsroof.schema import FileFacts
from tests._paths import SHARED_FIXTURES

DATA = Path(__file__).resolve().parents[1] / "data"
LOCAL = sorted(p.name for p in (DATA / "ncu").glob("*.csv"))
SHARED = sorted(
    p.relative_to(SHARED_FIXTURES).as_posix()
    for folder in ("csv", "converted", "synthetic")
    for p in (SHARED_FIXTURES / folder).glob("*.csv")
) if SHARED_FIXTURES.is_dir() else []

HEADER = ["ID", "Process ID", "Process Name", "Host Name",
          "thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg", "Kernel Name", "Context",
          "Stream", "Block Size", "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit",
          "Metric Value", "Rule Name", "Rule Type", "Rule Description", "Estimated Speedup Type", "Estimated Speedup"]

Reader = Callable[[Any, Any], Any]
HAS_POLARS = importlib.util.find_spec("polars") is not None
needs_polars = pytest.mark.skipif(not HAS_POLARS, reason="polars (the optional `fast` extra) is not installed")


def q(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'


def ident(kid: int, name: str) -> list[str]:
    nvtx = '4242  "<default domain>:step0:none:none:none:none:none:none"  "<default domain>:aten::mm, seq = 1:none:none:none:none:none:none" '
    return [str(kid), "4242", "python3", "host", nvtx, name, "1", "7", "(256, 1, 1)", "(80, 2, 1)", "0", "8.0"]


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
            metric_row(kid, name, "Command line profiler metrics", "gpu__time_duration.sum", "usecond", f"{2.5 + kid:.2f}"),
            metric_row(kid, name, "Command line profiler metrics", "dram__bytes_read.sum", "Mbyte", "1,234.56"),
            metric_row(kid, name, "Command line profiler metrics", "lts__t_bytes.sum", "Kbyte", "7,488.00"),
            rule_row(kid, name),
            metric_row(kid, name, "GPU Speed Of Light Throughput", "Duration", "nsecond", "2,500"),
            metric_row(kid, name, "Launch Statistics", "Function Cache Configuration", "", "CachePreferNone"),
            rule_row(kid, name, "Occupancy"),
        ]
    return lines


def write(tmp_path: Path, lines: list[str], *, newline: str = "\n", name: str = "x.csv", end: str | None = None) -> Path:
    path = tmp_path / name
    path.write_bytes((newline.join(lines) + (newline if end is None else end)).encode("utf-8"))
    return path


def read_with(path: Path, reader: Reader | None, monkeypatch: pytest.MonkeyPatch) -> tuple[pd.DataFrame, FileFacts]:
    """ncu_csv.read with the details-page fast path replaced by `reader` (None: robust reader only)."""
    with monkeypatch.context() as m:
        m.setattr(ncu_csv, "_details_fast", reader if reader is not None else (lambda export, layout: None))
        return ncu_csv.read(path)


def scan_result(path: Path) -> Any:
    export = text.open_export(path)
    try:
        return ncu_csv._details_scan(export, ncu_csv._layout(export))
    finally:
        export.close()


def assert_same(a: tuple[pd.DataFrame, FileFacts], b: tuple[pd.DataFrame, FileFacts]) -> None:
    pdt.assert_frame_equal(a[0], b[0], check_exact=True)
    assert list(a[0].dtypes) == list(b[0].dtypes)
    assert a[1] == b[1]


def polars_result(path: Path) -> Any:
    export = text.open_export(path)
    try:
        return ncu_csv._details_polars(export, ncu_csv._layout(export))
    finally:
        export.close()


def assert_all_readers_agree(
    path: Path, monkeypatch: pytest.MonkeyPatch, *, scan_applies: bool = True, polars_applies: bool = True
) -> pd.DataFrame:
    robust = read_with(path, None, monkeypatch)
    if HAS_POLARS:
        if polars_applies:
            assert polars_result(path) is not None, "the polars reader declined a file it should read"
            assert_same(read_with(path, ncu_csv._details_polars, monkeypatch), robust)
        else:
            assert polars_result(path) is None, "the polars reader took a file it cannot vouch for"
    if scan_applies:
        assert scan_result(path) is not None, "the prefix scan declined a file it should read"
        assert_same(read_with(path, ncu_csv._details_scan, monkeypatch), robust)
        # and without the compiled splitters (an install without a C compiler): the Python loop, pyarrow
        with monkeypatch.context() as m:
            m.setattr(ncu_csv, "_compiled_scan", lambda: None)
            m.setattr(ncu_csv, "_compiled_split", lambda: None)
            assert scan_result(path) is not None, "the pure-Python prefix scan declined a file it should read"
            assert_same(read_with(path, ncu_csv._details_scan, m), robust)
    pandas_path = ncu_csv._details_pandas
    if _declines(pandas_path, path):
        pytest.fail("the pandas reader declined a file it should read")
    assert_same(read_with(path, pandas_path, monkeypatch), robust)
    assert_same(ncu_csv.read(path), robust)
    return robust[0]


def _declines(reader: Reader, path: Path) -> bool:
    export = text.open_export(path)
    try:
        return reader(export, ncu_csv._layout(export)) is None
    finally:
        export.close()


def is_details(path: Path) -> bool:
    try:
        export = text.open_export(path)
    except InputError:
        return False
    try:
        return ncu_csv._layout(export).page == "details"
    finally:
        export.close()


# ---------------------------------------------------------------------------------------------
# every fixture
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", LOCAL)
def test_repo_fixtures(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = DATA / "ncu" / name
    if not is_details(path):
        pytest.skip("raw page: one reader")
    assert_all_readers_agree(path, monkeypatch)


@pytest.mark.parametrize("name", SHARED)
def test_shared_fixtures(shared_fixtures: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = shared_fixtures / name
    if not is_details(path):
        pytest.skip("raw page or no export: one reader")
    assert_all_readers_agree(path, monkeypatch)


def test_shared_fixtures_include_details_pages(shared_fixtures: Path) -> None:
    # the parametrised test above must not skip everything
    assert sum(is_details(shared_fixtures / n) for n in SHARED) >= 20


# ---------------------------------------------------------------------------------------------
# generated files the scan reads
# ---------------------------------------------------------------------------------------------


def test_generated_export(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    df = assert_all_readers_agree(write(tmp_path, export_lines()), monkeypatch)
    facts = ncu_csv.read(write(tmp_path, export_lines()))[1]
    # 2.50 usecond = 2.5e-6 s; 1,234.56 Mbyte = 1.23456e9 B; 7,488.00 Kbyte = 7.488e6 B; 2,500 nsecond = 2.5e-6 s
    assert df["kernel_id"].tolist() == [0, 1]
    assert df["kernel_name"].tolist() == list(KERNELS.values())
    assert df["gpu__time_duration.sum"].tolist() == pytest.approx([2.5e-6, 3.5e-6])
    assert df["dram__bytes_read.sum"].tolist() == pytest.approx([1.23456e9, 1.23456e9])
    assert df["lts__t_bytes.sum"].tolist() == pytest.approx([7.488e6, 7.488e6])
    assert df["nvtx_ranges"].iloc[0] == ["step0", "aten::mm, seq = 1"]
    assert facts.number_style == "en_US"


def test_crlf_bom_and_preamble(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "win.csv"
    body = "\r\n".join(export_lines()) + "\r\n"
    path.write_bytes(b"\xef\xbb\xbf" + ("==PROF== Connected to process 11\r\napp output\r\n" + body).encode())
    assert_all_readers_agree(path, monkeypatch)


def test_interleaved_launches_and_blank_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = export_lines()
    a, b = lines[1:8], lines[8:]
    mixed = [lines[0], a[0], b[0], "", a[1], a[2], "", "", b[1], a[3], b[2], *a[4:], *b[3:]]
    path = write(tmp_path, mixed)
    # blank lines would shift the line numbers polars cannot report: it declines, the scan counts them
    df = assert_all_readers_agree(path, monkeypatch, polars_applies=False)
    assert df["gpu__time_duration.sum"].tolist() == pytest.approx([2.5e-6, 3.5e-6])


def test_launch_that_begins_with_a_rule_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = export_lines()
    lines.insert(1, rule_row(0, KERNELS[0]))
    assert_all_readers_agree(write(tmp_path, lines), monkeypatch)


def test_duplicate_metric_rows_keep_the_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = export_lines()
    lines.insert(2, metric_row(0, KERNELS[0], "Command line profiler metrics", "gpu__time_duration.sum", "usecond", "9.00"))
    df = assert_all_readers_agree(write(tmp_path, lines), monkeypatch)
    assert df["gpu__time_duration.sum"].iloc[0] == pytest.approx(2.5e-6)


def test_rows_with_full_width_and_no_trailing_comma(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # an export where every row is as wide as the header (no ragged metric rows)
    lines = [ln[:-1] + ',"","","","",""' if ln.endswith(",") else ln for ln in export_lines()]
    assert_all_readers_agree(write(tmp_path, lines), monkeypatch)


def test_unit_error_names_the_line(tmp_path: Path) -> None:
    lines = export_lines()
    lines[9] = metric_row(1, KERNELS[1], "Command line profiler metrics", "dram__bytes_read.sum", "furlong", "1")
    path = write(tmp_path, lines[:3] + ["", ""] + lines[3:])
    assert scan_result(path) is not None
    with pytest.raises(InputError) as err:
        ncu_csv.read(path)
    assert ":12:" in str(err.value) and "furlong" in str(err.value)  # header line 1, two blank lines before it


# ---------------------------------------------------------------------------------------------
# what the scan declines (the robust reader reads or reports it)
# ---------------------------------------------------------------------------------------------


def test_declines_text_among_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = export_lines()
    lines.insert(5, "==PROF== Disconnected from process 11")
    path = write(tmp_path, lines)
    assert scan_result(path) is None
    df, facts = ncu_csv.read(path)
    assert any("non-CSV" in w for w in facts.warnings)


def assert_all_readers_refuse(path: Path, monkeypatch: pytest.MonkeyPatch) -> InputError:
    """Every reader, forced in turn, raises the one identical InputError."""
    readers: list[Reader | None] = [None, ncu_csv._details_pandas, ncu_csv._details_scan]
    if HAS_POLARS:
        readers.append(ncu_csv._details_polars)
    messages = set()
    for reader in readers:
        with pytest.raises(InputError) as err:
            read_with(path, reader, monkeypatch)
        messages.add(str(err.value))
    with pytest.raises(InputError) as err:
        ncu_csv.read(path)
    messages.add(str(err.value))
    assert len(messages) == 1, messages
    return err.value


def test_every_reader_refuses_a_missing_final_newline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the last row is complete but for its newline: ncu ends every line, so the export was cut off;
    # 1 header line + 14 rows: the last row is line 15
    path = write(tmp_path, export_lines(), end="")
    assert scan_result(path) is None
    err = assert_all_readers_refuse(path, monkeypatch)
    assert err.line == 15 and err.cause.startswith("truncated")


@pytest.mark.parametrize("keep", [0.5, 0.9])
def test_every_reader_refuses_an_export_cut_at_a_cell_boundary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keep: float
) -> None:
    data = write(tmp_path, export_lines()).read_bytes()
    cut = data.rfind(b'","', 0, int(len(data) * keep)) + 1  # ends on a closing quote: every cell left parses
    path = tmp_path / "cut.csv"
    path.write_bytes(data[:cut])
    err = assert_all_readers_refuse(path, monkeypatch)
    assert err.line == data[:cut].count(b"\n") + 1 and err.cause.startswith("truncated")


def test_declines_unquoted_cells(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = export_lines()
    lines[1] = lines[1].replace('"0","4242"', '0,4242', 1)
    path = write(tmp_path, lines)
    assert scan_result(path) is None
    assert_same(ncu_csv.read(path), read_with(path, None, monkeypatch))


def test_declines_newline_in_kernel_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = [ln.replace("void silu(float *)", "void silu(\nfloat *)") for ln in export_lines()]
    path = write(tmp_path, lines)
    assert scan_result(path) is None
    df = ncu_csv.read(path)[0]
    assert df["kernel_name"].tolist()[1] == "void silu(\nfloat *)"


def test_declines_a_wide_row_with_a_metric(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a full-width row that carries a metric: the robust reader keeps it, the scan must not drop it
    lines = export_lines()
    lines[2] = lines[2][:-1] + ',"","","","",""'
    lines[3] = lines[3][:-1] + ',"R","OPT","x","global","1"'
    path = write(tmp_path, lines)
    assert scan_result(path) is None
    df = assert_all_readers_agree(path, monkeypatch, scan_applies=False, polars_applies=False)
    assert df["lts__t_bytes.sum"].iloc[0] == pytest.approx(7.488e6)


def test_declines_a_short_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = export_lines()
    lines[2] = ",".join(q(v) for v in ident(0, KERNELS[0]) + ["Command line profiler metrics", "x.sum", "byte"])
    path = write(tmp_path, lines)
    assert scan_result(path) is None
    with pytest.raises(InputError, match=":3: row has 15 fields"):
        read_with(path, None, monkeypatch)


def test_gzip_goes_to_pandas_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = write(tmp_path, export_lines())
    packed = tmp_path / "x.csv.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert scan_result(packed) is None
    df = ncu_csv.read(packed)[0]
    expected, expected_facts = ncu_csv.read(plain)
    expected_facts.source = packed.name
    pdt.assert_frame_equal(df.drop(columns="source"), expected.drop(columns="source"))


# ---------------------------------------------------------------------------------------------
# the polars reader: what it reads with exact line numbers, what it declines
# ---------------------------------------------------------------------------------------------


@needs_polars
def test_polars_line_numbers_are_exact(tmp_path: Path) -> None:
    # preamble of 2 lines, header at line 3, rows from line 4: lines[9] is row 9 of the body -> line 3 + 9 = 12
    lines = export_lines()
    lines[9] = metric_row(1, KERNELS[1], "Command line profiler metrics", "dram__bytes_read.sum", "furlong", "1")
    path = write(tmp_path, ["==PROF== Connected to process 11", 'app output with a " quote', *lines])
    assert polars_result(path) is not None
    with pytest.raises(InputError) as err:
        ncu_csv.read(path)
    assert ":12:" in str(err.value) and "furlong" in str(err.value)


@needs_polars
def test_polars_refuses_a_crlf_file_without_final_newline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, ["\r\n".join(export_lines())], end="")
    assert scan_result(path) is None
    assert assert_all_readers_refuse(path, monkeypatch).cause.startswith("truncated")


@needs_polars
def test_polars_declines_a_row_wider_than_the_header(tmp_path: Path) -> None:
    lines = export_lines()
    lines[4] += ',"extra"'  # a rule row with one field more than the header
    path = write(tmp_path, lines)
    assert polars_result(path) is None
    assert scan_result(path) is None
    # (the pandas reader ignores the extra field, and the robust reader takes the row for one whose NVTX
    # cell holds an unescaped quote: known leniencies, see docs/readme/importer.md)


@needs_polars
@pytest.mark.parametrize("row", [2, 13], ids=["first-launch", "last-launch"])
def test_polars_declines_a_short_row(tmp_path: Path, row: int) -> None:
    # a metric row without its value; in the last launch only the end-of-file check sees it
    lines = export_lines()
    kid = 0 if row < 8 else 1
    lines[row] = ",".join(q(v) for v in ident(kid, KERNELS[kid]) + ["Launch Statistics", "x.sum", "byte"])
    path = write(tmp_path, lines)
    assert polars_result(path) is None
    assert scan_result(path) is None


@needs_polars
def test_polars_declines_text_and_unquoted_cells(tmp_path: Path) -> None:
    text_lines = export_lines()
    text_lines.insert(5, "==PROF== Disconnected from process 11")
    unquoted = export_lines()
    unquoted[1] = unquoted[1].replace('"0","4242"', "0,4242", 1)
    late_unquoted = export_lines()
    late_unquoted[12] = late_unquoted[12].replace('"1","4242"', "1,4242", 1)
    for i, lines in enumerate((text_lines, unquoted, late_unquoted)):
        assert polars_result(write(tmp_path, lines, name=f"{i}.csv")) is None


@needs_polars
def test_polars_declines_line_breaks_in_cells(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a newline in a rule description: every reader reads the row, only polars could not give its line
    lines = export_lines()
    lines[4] = lines[4].replace("rule text, with", "rule text,\nwith")
    path = write(tmp_path, lines)
    assert_all_readers_agree(path, monkeypatch, scan_applies=False, polars_applies=False)
    # a lone CR inside a kernel name: other CSV readers end the row there
    lines = [ln.replace("void silu(float *)", "void silu(\rfloat *)") for ln in export_lines()]
    assert polars_result(write(tmp_path, lines, name="cr.csv")) is None


@needs_polars
def test_polars_declines_bytes_that_are_not_utf8(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # in a kernel name of a launch's second row: a column polars does not convert, a row not parsed in full
    path = write(tmp_path, export_lines())
    data = path.read_bytes().split(b"\n")
    data[3] = data[3].replace(b"void silu", b"void s\xffl", 1) if b"void silu" in data[3] else data[3].replace(
        b"void gemm", b"void g\xffm", 1)
    path.write_bytes(b"\n".join(data))
    assert polars_result(path) is None
    assert scan_result(path) is None
    # (the pandas reader decodes only the columns it converts: a known leniency, see docs/readme/importer.md)
    with pytest.raises(InputError, match="unreadable CSV block"):
        read_with(path, None, monkeypatch)


@needs_polars
def test_polars_declines_gzip(tmp_path: Path) -> None:
    plain = write(tmp_path, export_lines())
    packed = tmp_path / "x.csv.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert polars_result(packed) is None


def spy_readers(m: pytest.MonkeyPatch) -> list[str]:
    """Record which fast readers ncu_csv.read calls, in order."""
    called: list[str] = []
    for name in ("_details_polars", "_details_scan", "_details_pandas"):
        real = getattr(ncu_csv, name)

        def spy(export: Any, layout: Any, _real: Reader = real, _name: str = name) -> Any:
            called.append(_name)
            return _real(export, layout)

        m.setattr(ncu_csv, name, spy)
    return called


@needs_polars
def test_polars_reads_first_with_cores_to_spare(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, export_lines())
    with monkeypatch.context() as m:
        m.setattr(ncu_csv, "_usable_cpus", lambda: ncu_csv.POLARS_MIN_CPUS)
        m.setattr(ncu_csv, "POLARS_MIN_BYTES", path.stat().st_size)  # a file that large pays for the import
        called = spy_readers(m)
        df = ncu_csv.read(path)
    assert called == ["_details_polars"]
    assert_same(df, read_with(path, None, monkeypatch))


@needs_polars
def test_small_files_do_not_import_polars(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, export_lines())
    with monkeypatch.context() as m:
        m.setattr(ncu_csv, "_usable_cpus", lambda: ncu_csv.POLARS_MIN_CPUS)
        m.setattr(ncu_csv, "POLARS_MIN_BYTES", path.stat().st_size + 1)
        m.delitem(sys.modules, "polars", raising=False)
        called = spy_readers(m)
        ncu_csv.read(path)
        assert "polars" not in sys.modules
    assert called == ["_details_scan"]
    # once imported (by whoever), polars costs nothing more to start: it goes first whatever the size
    import polars  # noqa: F401
    with monkeypatch.context() as m:
        m.setattr(ncu_csv, "_usable_cpus", lambda: ncu_csv.POLARS_MIN_CPUS)
        m.setattr(ncu_csv, "POLARS_MIN_BYTES", path.stat().st_size + 1)
        called = spy_readers(m)
        ncu_csv.read(path)
    assert called == ["_details_polars"]


def test_on_few_cores_the_scan_reads_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, export_lines())
    with monkeypatch.context() as m:
        m.setattr(ncu_csv, "_usable_cpus", lambda: ncu_csv.POLARS_MIN_CPUS - 1)
        called = spy_readers(m)
        ncu_csv.read(path)
    assert called == ["_details_scan"]


def test_without_polars_the_scan_reads_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, export_lines())
    with monkeypatch.context() as m:
        m.setitem(sys.modules, "polars", None)  # import polars -> ImportError
        m.setattr(ncu_csv, "_usable_cpus", lambda: 64)
        assert polars_result(path) is None
        called = spy_readers(m)
        df = ncu_csv.read(path)
    assert called == ["_details_scan"]  # today's order
    assert_same(df, read_with(path, None, monkeypatch))
