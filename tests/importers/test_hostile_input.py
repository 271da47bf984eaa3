"""Hostile input (issue 15): every class of crash, hang or silent wrong number the fuzz harness
(tests/fuzz) found in the ncu importers, as a named regression. Each input is built here from the
repo's own small exports; the outcome is one line naming the file (and line), or a report whose
numbers say what they lack — never a traceback, never a number from a bad value."""

from __future__ import annotations

import csv
import gzip
import math
import random
from pathlib import Path

import numpy as np
import pytest

from nsroof import importers, pipeline
from nsroof.errors import InputError, UnitError
from nsroof.importers.ncu import csv_bytes
from nsroof.importers.ncu import csv_export as ncu_csv
from tests._paths import DATA
from tests.importers.ncu.test_ncu_text import TEXT_2024

# 2 preamble lines, header (3), units (4), launches 0, 1
TINY_RAW = (DATA / "spine" / "tiny_raw.csv").read_bytes()
RAW_LINES = TINY_RAW.split(b"\n")


def write(tmp_path: Path, data: bytes, name: str = "x.csv") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def raw_with(cells: dict[str, bytes], row: int = 4, lines: list[bytes] | None = None) -> bytes:
    """tiny_raw.csv with the named cells of line `row` (0-based: 3 = units row, 4 = launch 0) replaced."""
    lines = list(lines or RAW_LINES)
    header = next(csv.reader([lines[2].decode()]))
    fields = next(csv.reader([lines[row].decode()]))
    for name, value in cells.items():
        fields[header.index(name)] = value.decode()
    lines[row] = ",".join('"' + f.replace('"', '""') + '"' for f in fields).encode()
    return b"\n".join(lines)


def one_line_error(path: Path) -> InputError:
    with pytest.raises(InputError) as err:
        pipeline.analyze([path])
    message = str(err.value)
    assert "\n" not in message and path.name in message
    return err.value


# ---------------------------------------------------------------------------------------------
# structure: validated at the door
# ---------------------------------------------------------------------------------------------


def test_repeated_units_row_in_a_raw_page_is_refused_with_its_line(tmp_path: Path) -> None:
    # fuzz: duplicate_line of a raw page -> IndexError in the raw reader
    lines = RAW_LINES[:4] + [RAW_LINES[3]] + RAW_LINES[4:]
    err = one_line_error(write(tmp_path, b"\n".join(lines)))
    assert "second units row" in err.cause and err.line == 5


def test_repeated_launch_row_in_a_raw_page_names_its_id(tmp_path: Path) -> None:
    # fuzz: the duplicate-ID message indexed the unsorted IDs with a sorted position -> IndexError
    lines = RAW_LINES[:5] + [RAW_LINES[5], RAW_LINES[4]] + RAW_LINES[6:]
    err = one_line_error(write(tmp_path, b"\n".join(lines)))
    assert "launch ID 0 appears on two rows" in err.cause


def test_stray_carriage_return_in_the_header_is_a_clean_error(tmp_path: Path) -> None:
    # fuzz: ragged_row of a CRLF export -> `_csv.Error: new-line character seen in unquoted field`
    lines = list(RAW_LINES)
    lines[2] = lines[2].replace(b'"Host Name",', b'"Host Name",x\ry,', 1)
    err = one_line_error(write(tmp_path, b"\n".join(lines)))
    assert err.line == 3 and "header" in err.cause


def nvtx_row_with_a_stray_quote(data_dir: Path, **cells: str) -> bytes:
    """raw_2022_nvtx.csv with an unescaped quote in launch 0's NVTX range name (ncu does not escape it, so
    the robust reader rebuilds the row from both ends) and the given cells of that row replaced."""
    lines = (data_dir / "ncu" / "raw_2022_nvtx.csv").read_bytes().split(b"\n")
    header = next(csv.reader([lines[0].decode()]))
    row = lines[2].decode()
    for name, value in cells.items():
        old = next(csv.reader([row]))[header.index(name)]
        row = row.replace(f'"{old}"', f'"{value}"', 1)
    lines[2] = row.replace(":train_step:", ':train "step":', 1).encode()
    return b"\n".join(lines)


def test_a_1_mb_kernel_name_in_a_recovered_nvtx_row_is_read(data_dir: Path, tmp_path: Path) -> None:
    # the NVTX-quote recovery parsed cells with the csv module's 128 KiB field limit -> _csv.Error
    big = "void k<" + "A" * (1 << 20) + ">()"
    kernels, facts = ncu_csv.read(write(tmp_path,
                                        nvtx_row_with_a_stray_quote(data_dir, **{"Kernel Name": big})))
    assert kernels.loc[kernels["kernel_id"] == 0, "kernel_name"].iloc[0] == big
    assert any("unescaped quote" in w for w in facts.warnings)


def test_a_cell_beyond_the_field_limit_is_refused_with_its_line(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the limit shrunk for the test (16 MiB in use): a longer cell, in a row only the csv module can
    # rebuild, is one line naming the row and the limit
    monkeypatch.setattr(csv_bytes, "MAX_FIELD_BYTES", 1 << 16)
    old = csv.field_size_limit(1 << 16)
    try:
        data = nvtx_row_with_a_stray_quote(data_dir, **{"Host Name": "h" * (1 << 17)})
        with pytest.raises(InputError) as err:
            ncu_csv.read(write(tmp_path, data))
    finally:
        csv.field_size_limit(old)
    assert err.value.line == 3 and "a cell longer than 65,536 bytes" in err.value.cause


def test_an_unbalanced_quote_is_refused_past_the_longest_cell(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # fuzz: ragged_row left one quote open: the row-boundary search re-counted the quotes from the
    # block's start for every line (10 s on 2.7 MB); now one pass, and a cell may not run past the limit
    monkeypatch.setattr(csv_bytes, "MAX_FIELD_BYTES", 1 << 12)
    monkeypatch.setattr(csv_bytes, "BLOCK_BYTES", 1 << 12)
    lines = RAW_LINES[:5] + [b'"9","4242","x", "open quote'] + [RAW_LINES[5]] * 2000 + [b""]
    err = one_line_error(write(tmp_path, b"\n".join(lines)))
    assert "a quoted cell runs on for more than 4,096 bytes" in err.cause and err.line is not None


def test_damaged_gzip_stream_is_a_clean_error(tmp_path: Path) -> None:
    # fuzz: gzip of damaged content -> zlib.error from the middle of the stream (no OSError)
    packed = bytearray(gzip.compress(TINY_RAW * 50, mtime=0))
    rng = random.Random(3)
    for _ in range(40):
        packed[rng.randrange(20, len(packed) - 20)] ^= 0xFF
    err = one_line_error(write(tmp_path, bytes(packed), "x.csv.gz"))
    assert "gzip" in err.cause


def test_flipped_bytes_inside_a_ncu_rep_are_a_clean_error(shared_fixtures: Path, tmp_path: Path) -> None:
    # fuzz case 550 (seed 7): bytes flipped past the header -> TypeError from ncu_report's metric_by_name
    from nsroof.importers.ncu import rep as ncu_rep

    if ncu_rep._load_ncu_report_module() is None:
        pytest.skip("the ncu-report package is not installed")
    data = bytearray((shared_fixtures / "rep" / "speedyscan__profile.ncu-rep").read_bytes())
    outcomes = set()
    for k in range(12):
        rng = random.Random(k)
        flipped = bytearray(data)
        for _ in range(16):
            i = rng.randrange(64, len(flipped))
            flipped[i] ^= 1 << rng.randrange(8)
        path = write(tmp_path, bytes(flipped), f"r{k}.ncu-rep")
        try:
            pipeline.analyze([path])
            outcomes.add("report")
        except InputError as err:
            assert "\n" not in str(err) and path.name in str(err)
            outcomes.add("error")
    assert "error" in outcomes


# ---------------------------------------------------------------------------------------------
# values checked against their meaning
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("metric", "unit"), [
    ("gpu__time_duration.sum", b"Kbyte"), ("dram__bytes.sum", b"usecond"),
    ("sm__sass_thread_inst_executed_op_ffma_pred_on.sum", b"nsecond")])
def test_raw_units_row_of_another_dimension_is_refused(tmp_path: Path, metric: str, unit: bytes) -> None:
    path = write(tmp_path, raw_with({metric: unit}, row=3))
    with pytest.raises(UnitError) as err:
        ncu_csv.read(path)
    assert err.value.line == 4 and metric in err.value.cause and "wrong dimension" in err.value.cause


def test_details_metric_of_another_dimension_is_refused_with_its_line(data_dir: Path, tmp_path: Path) -> None:
    lines = (data_dir / "ncu" / "details_new.csv").read_bytes().split(b"\n")
    at = next(i for i, line in enumerate(lines) if b'"gpu__time_duration.sum","usecond"' in line)
    lines[at] = lines[at].replace(b'"usecond"', b'"Ghz"')
    with pytest.raises(UnitError) as err:
        ncu_csv.read(write(tmp_path, b"\n".join(lines)))
    assert err.value.line == at + 1 and "gpu__time_duration.sum" in err.value.cause


def _text_with_unit(tmp_path: Path, label: str, unit: str) -> tuple[Path, int]:
    text = TEXT_2024.splitlines()
    at = next(i for i, line in enumerate(text) if line.strip().startswith(label + " "))
    old_unit = text[at].split()[len(label.split())]
    text[at] = text[at].replace(f" {old_unit} ", f" {unit}" + " " * max(1, len(old_unit) - len(unit) + 1), 1)
    return write(tmp_path, ("\n".join(text) + "\n").encode(), "run.txt"), at


def test_text_label_of_another_dimension_is_refused(tmp_path: Path) -> None:
    # Duration = gpu__time_duration.sum: every rate divides by it, so a wrong unit refuses the file
    path, at = _text_with_unit(tmp_path, "Duration", "Kbyte")
    with pytest.raises(UnitError) as err:
        importers.read(path)
    assert err.value.line == at + 1 and "Duration" in err.value.cause


def test_text_label_no_number_reads_is_dropped_with_one_warning(tmp_path: Path) -> None:
    # Elapsed Cycles = gpc__cycles_elapsed.max: no formula reads it, so a wrong unit drops it (strict per
    # number, lenient per metric) and the rest of the file is analyzed
    path, _ = _text_with_unit(tmp_path, "Elapsed Cycles", "Mbyte")
    table, facts = importers.read(path)
    # a label printed in a unit none of its metrics has
    label = "GPU Speed Of Light Throughput: Elapsed Cycles"
    assert "gpc__cycles_elapsed.max" not in table.columns and label not in table.columns
    assert table["gpu__time_duration.sum"].notna().all()
    dropped = [w for w in facts.warnings if w.startswith("ignored 1 metric(s)")]
    assert len(dropped) == 1 and f"{label} ('Mbyte')" in dropped[0]


def test_a_short_unit_left_in_a_full_width_column_is_refused_with_its_line(tmp_path: Path) -> None:
    # fuzz case 6416 (seed 7): `cycle/nsecond` (as wide as its column) of DRAM Frequency swapped for
    # `byte` without re-padding; the value then started inside the unit column, the row read as unit
    # 'byte         2.62' and no value, and a clock (dram__cycles_elapsed.avg.per_second, which the DRAM
    # roof reads) in bytes went through unrefused
    text = TEXT_2024.split("\n")
    at = next(i for i, ln in enumerate(text) if ln.strip().startswith("DRAM Frequency"))
    assert text[at].endswith("cycle/nsecond         2.62")  # the unit fills its 13-wide column
    text[at] = text[at].replace("cycle/nsecond", "byte")
    err = one_line_error(write(tmp_path, "\n".join(text).encode(), "run.txt"))
    assert err.line == at + 1 and "does not fit" in err.cause


@pytest.mark.parametrize("value", [b"-1", b"-inf", b"inf", b"1e400"])
def test_bad_duration_is_nan_unknown_and_named_in_missing(tmp_path: Path, value: bytes) -> None:
    # fuzz: special_value -> a negative or infinite duration used as is (achieved rates < 0 or 0)
    report = pipeline.analyze([write(tmp_path, raw_with({"gpu__time_duration.sum": value}))])
    k0 = report.frame[report.frame["kernel_id"] == 0]
    assert k0["duration_s"].isna().all() and k0["achieved_flop_per_s"].isna().all()
    # the value as printed (nsecond) converted: -1 ns = -1e-09 s; inf stays inf
    shown = f"{float(value) * 1e-9:g}"
    assert all(f"gpu__time_duration.sum={shown}" in m for m in k0["missing"])
    k1 = report.frame[report.frame["kernel_id"] == 1]
    assert k1["duration_s"].notna().all()  # the other launch is untouched


@pytest.mark.parametrize("value", [b"-12582912", b"-inf", b"inf"])
def test_bad_byte_count_leaves_that_level_unknown(tmp_path: Path, value: bytes) -> None:
    # fuzz: special_value in dram__bytes.sum -> a verdict from a negative or infinite byte count
    report = pipeline.analyze([write(tmp_path, raw_with({"dram__bytes.sum": value}))])
    k0 = report.frame[report.frame["kernel_id"] == 0].set_index("level")
    assert math.isnan(k0.at["dram", "bytes"]) and k0.at["dram", "bound"] == "unknown"
    assert "dram__bytes.sum=" in k0.at["dram", "missing"]
    assert k0.at["l2", "bytes"] == 12582912.0  # the other levels keep their counts


@pytest.mark.parametrize("value", [b"-1048576", b"inf"])
def test_bad_flop_count_is_never_a_verdict(tmp_path: Path, value: bytes) -> None:
    report = pipeline.analyze([write(tmp_path,
                                     raw_with({"sm__sass_thread_inst_executed_op_ffma_pred_on.sum": value}))])
    k0 = report.frame[report.frame["kernel_id"] == 0]
    assert k0["flops"].isna().all() and k0["bound"].eq("unknown").all()
    flops = k0["flops"].to_numpy(dtype=np.float64)
    assert not np.isinf(flops).any()


# ---------------------------------------------------------------------------------------------
# linear time
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("blank", [b"", b" ", b"\t \r"])
def test_a_million_blank_lines_read_as_none(tmp_path: Path, blank: bytes) -> None:
    # fuzz: 1M whitespace-only lines in a raw page took > 10 s (each took pyarrow's invalid-row path);
    # the time itself is measured by `make bench` (bench_hostile.py), here the result
    lines = RAW_LINES[:4] + [blank] * 1_000_000 + RAW_LINES[4:]
    got, _ = ncu_csv.read(write(tmp_path, b"\n".join(lines)))
    want, _ = ncu_csv.read(write(tmp_path, TINY_RAW, "plain.csv"))
    assert got.drop(columns="source").equals(want.drop(columns="source"))


def test_a_peak_that_underflows_to_zero_is_no_ceiling(shared_fixtures: Path, tmp_path: Path) -> None:
    # fuzz case 6487 (seed 1): `1e-400` (0.0 once parsed) in a peak counter gave peak_flop_per_s = 0,
    # time_floor_s = inf and a `compute` verdict; a roof of 0 is damage: the spec ceiling is used instead
    src = shared_fixtures / "converted" / "alprielse__2025-04-21-77_06-MT.raw_base.csv"
    rows = list(csv.reader(src.read_text().splitlines()))
    at = rows[0].index("sm__cycles_elapsed.avg.per_second")
    rows[3][at] = "1e-400"  # launch 1 (header, units row, launch 0, launch 1)
    path = write(tmp_path, ("\n".join(",".join(f'"{c}"' for c in row) for row in rows) + "\n").encode())
    report = pipeline.analyze([path])
    k1 = report.frame[report.frame["kernel_id"] == 1]
    assert (k1["peak_flop_per_s"] > 0).all() and np.isfinite(k1["time_floor_s"]).all()
    assert k1["ceiling_source"].str.contains("spec:").all()


def test_text_that_is_not_utf8_inside_a_ncu_rep_is_a_clean_error(shared_fixtures: Path,
                                                                 tmp_path: Path) -> None:
    # fuzz case 2926 (seed 2): a flipped byte inside a kernel name reached the Parquet writer as a lone
    # surrogate -> UnicodeEncodeError; refused now where the report is read, with its name. The input is
    # built here, not drawn again by the fuzzer: the first kernel's name, where the file stores it as
    # text, gets a byte that is never UTF-8 (0xFF), the container's lengths unchanged
    from nsroof.importers.ncu import rep as ncu_rep

    if ncu_rep._load_ncu_report_module() is None:
        pytest.skip("the ncu-report package is not installed")
    src = shared_fixtures / "rep" / "jakeflasher__standard_window-128.ncu-rep"
    name = ncu_rep.read(src)[0]["kernel_name"].iloc[0].encode()
    data = src.read_bytes()
    assert name.startswith(b"void ") and data.count(name) >= 1
    damaged = data.replace(name, b"vo\xffd" + name[4:])
    err = one_line_error(write(tmp_path, damaged, "case.ncu-rep"))
    assert err.cause.startswith("damaged .ncu-rep file: kernel_name of profile result 0 is not UTF-8 text")
