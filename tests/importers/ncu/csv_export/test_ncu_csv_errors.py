"""Bad input: one InputError naming the file, the line and the cause, plus what to do — never a traceback."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pytest

from nsroof.errors import InputError, UnitError
from nsroof.importers.ncu import csv_export

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
          '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')
ROW = ('"{id}","1","a","h","k()","1","7","(1, 1, 1)","(1, 1, 1)","0","8.0","Command line profiler metrics",'
       '"{m}","{u}","{v}"')


def write(tmp_path: Path, text: str | bytes, name: str = "bad.csv") -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def error_of(path: Path) -> InputError:
    with pytest.raises(InputError) as err:
        csv_export.read(path)
    message = str(err.value)
    assert "\n" not in message and str(path) in message and " — " in message  # file, cause — what to do
    return err.value


def test_empty_file(tmp_path: Path) -> None:
    err = error_of(write(tmp_path, ""))
    assert err.line == 1 and "empty" in err.cause


def test_error_only_log(tmp_path: Path) -> None:
    text = ("==ERROR== Option '--section .*SpeedOfLight.*' did not match any section.\n"
            "==ERROR== Use --list-sections to see the list of available sections.\n")
    err = error_of(write(tmp_path, text))
    assert err.line == 1 and "did not match any section" in err.cause


def test_not_an_export(tmp_path: Path) -> None:
    err = error_of(write(tmp_path, "name,value\nfoo,1\n"))
    assert 'no Nsight Compute CSV header' in err.cause and err.line == 1


def test_nvprof_export_is_named(tmp_path: Path) -> None:
    text = ('"Device","Kernel","Invocations","Metric Name","Metric Description","Min","Max","Avg"\n'
            '"A100","k",1,"x","y",1,1,1\n')
    err = error_of(write(tmp_path, text))
    assert "nvprof" in err.cause


def test_binary_file(tmp_path: Path) -> None:
    err = error_of(write(tmp_path, b"\x00\x01\x02NVR\x00garbage" * 50))
    assert "binary" in err.cause


def test_header_without_rows(tmp_path: Path) -> None:
    err = error_of(write(tmp_path, "==PROF== Disconnected\n" + HEADER + "\n"))
    assert "no data rows" in err.cause and err.line == 3


def test_raw_header_and_units_without_rows(tmp_path: Path) -> None:
    text = '"ID","Process ID","Kernel Name","gpu__time_duration.sum"\n"","","","nsecond"\n'
    err = error_of(write(tmp_path, text))
    assert "no data rows" in err.cause


def test_truncated_mid_row(tmp_path: Path) -> None:
    good = ROW.format(id=0, m="gpu__time_duration.sum", u="nsecond", v="10")
    text = HEADER + "\n" + good + "\n" + '"1","1","a","h","k(int, fl'
    err = error_of(write(tmp_path, text))
    assert err.line == 3 and ("truncated" in err.cause or "damaged" in err.cause)


def _two_launches(newline: str = "\n") -> str:
    rows = [ROW.format(id=i, m=m, u="nsecond", v="10")
            for i in (0, 1) for m in ("gpu__time_duration.sum", "b__y.sum")]
    return newline.join([HEADER, *rows]) + newline  # header on line 1, rows on lines 2-5


@pytest.mark.parametrize(("cut", "line"), [
    # the last row loses everything after a closing quote: '..."0","8.0"' — every cell that is left parses
    (lambda t: t[: t.rstrip("\n").rfind('","') + 1], 5),
    (lambda t: t[: t.rstrip("\n").rfind('","') - 3], 5),  # inside a quoted cell
    (lambda t: t.rstrip("\n"), 5),  # the whole last row, but not its newline
    (lambda t: t[: t.find("\n", len(HEADER) + 1) + 5], 3),  # a few bytes into line 3
], ids=["after-a-cell", "inside-a-cell", "before-the-newline", "early"])
def test_details_page_cut_anywhere_in_a_line_is_truncated(tmp_path: Path, cut: Any, line: int) -> None:
    # ncu ends every line with a newline: an export whose last byte is not one was cut off
    err = error_of(write(tmp_path, cut(_two_launches())))
    assert err.line == line and err.cause.startswith("truncated")


def test_cut_between_cr_and_lf_is_truncated(tmp_path: Path) -> None:
    text = _two_launches("\r\n")
    err = error_of(write(tmp_path, text[:-1]))
    assert err.line == 5 and err.cause.startswith("truncated")


def test_cut_inside_a_gzip_member_content_is_truncated(tmp_path: Path) -> None:
    # a well-formed gzip whose content was cut before compressing: the check runs on the decompressed bytes
    text = _two_launches()
    err = error_of(write(tmp_path, gzip.compress(text[: text.rfind('","') + 1].encode()), "cut.csv.gz"))
    assert err.line == 5 and err.cause.startswith("truncated")


def test_raw_page_cut_at_a_field_boundary_is_truncated(tmp_path: Path) -> None:
    text = ('"ID","Process ID","Kernel Name","gpu__time_duration.sum","dram__bytes.sum"\n'
            '"","","","nsecond","byte"\n"0","1","k()","10","100"\n"1","1","k()","10"')
    err = error_of(write(tmp_path, text))
    assert err.line == 4 and err.cause.startswith("truncated")


def test_export_cut_at_a_line_end_is_read(tmp_path: Path) -> None:
    # cut right after a newline: indistinguishable from an export of fewer launches, so it is read
    text = _two_launches()
    df = csv_export.read(write(tmp_path, text[: text.find("\n", text.find('"1","1"')) + 1]))[0]
    assert df["kernel_id"].tolist() == [0, 1]


def test_row_wider_than_the_header(tmp_path: Path) -> None:
    row = ROW.format(id=0, m="gpu__time_duration.sum", u="nsecond", v="10") + ',"surprise","extra"'
    err = error_of(write(tmp_path, HEADER + "\n" + row + "\n"))
    assert err.line == 2 and "17 fields" in err.cause


def test_unknown_unit_names_the_unit_and_the_line(tmp_path: Path) -> None:
    rows = [ROW.format(id=0, m="gpu__time_duration.sum", u="nsecond", v="10"),
            ROW.format(id=0, m="dram__bytes.sum", u="furlongs", v="3")]
    path = write(tmp_path, "\n".join([HEADER, *rows]) + "\n")
    with pytest.raises(UnitError) as err:
        csv_export.read(path)
    assert "'furlongs'" in err.value.cause and "dram__bytes.sum" in err.value.cause
    assert err.value.line == 3


def test_mixed_number_styles(tmp_path: Path) -> None:
    rows = [ROW.format(id=0, m="a__x.sum", u="", v="1,234.50"),
            ROW.format(id=0, m="b__y.sum", u="", v="1.234,50")]
    err = error_of(write(tmp_path, "\n".join([HEADER, *rows]) + "\n"))
    assert "mix" in err.cause and err.line == 3 and "LC_ALL=C" in str(err)


def test_non_numeric_launch_id(tmp_path: Path) -> None:
    row = ROW.format(id="zero", m="gpu__time_duration.sum", u="nsecond", v="10")
    err = error_of(write(tmp_path, HEADER + "\n" + row + "\n"))
    assert "launch ID" in err.cause and err.line == 2


def test_missing_file_and_directory(tmp_path: Path) -> None:
    assert "no such file" in error_of(tmp_path / "nope.csv").cause
    assert "directory" in error_of(tmp_path).cause


def test_damaged_gzip(tmp_path: Path) -> None:
    data = gzip.compress((HEADER + "\n").encode())[:12]
    err = error_of(write(tmp_path, data, "bad.csv.gz"))
    assert "gzip" in err.cause or "empty" in err.cause
