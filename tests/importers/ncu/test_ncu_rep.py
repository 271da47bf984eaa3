"""nsroof.importers.ncu.rep: .ncu-rep reports through ncu_report (or the ncu CLI), their container checked
first (tests/importers/ncu/test_rep_container.py).

Tests on real reports use ../shared/fixtures (skipped when absent) and compare against the raw-page CSV that
ncu 2024.1.1 converted from the same report.
"""

from __future__ import annotations

import csv
import os
import stat
import struct
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nsroof.importers.ncu import rep as ncu_rep
from nsroof.importers.ncu import rep_container
from tests._paths import SHARED_FIXTURES
from tests.importers.ncu.test_rep_container import _damaged, _synthetic_two_kernels, _write

REPORT_NAMES = (sorted(p.name[: -len(".ncu-rep")] for p in (SHARED_FIXTURES / "rep").glob("*.ncu-rep"))
                or ["<no shared reports>"])


def _has_module() -> bool:
    return ncu_rep._load_ncu_report_module() is not None


needs_module = pytest.mark.skipif(not _has_module(), reason="the ncu-report package is not installed")


@needs_module
def test_library_reads_a_headerless_report_as_empty_which_nsroof_refuses(shared_fixtures: Path,
                                                                         tmp_path: Path) -> None:
    """Why the container check exists: ncu_report returns zero kernels without raising."""
    import ncu_report

    data = (shared_fixtures / "rep" / "lashi__index.ncu-rep").read_bytes()
    first_block = 8 + struct.unpack_from("<I", data, 4)[0]
    p = _write(tmp_path, data[first_block:])
    context = ncu_report.load_report(str(p))
    assert sum(context.range_by_idx(i).num_actions() for i in range(context.num_ranges())) == 0
    assert "damaged" in _damaged(p)


@needs_module
def test_results_the_library_cannot_parse_are_damage_and_its_log_does_not_leak(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # well framed, but the result messages are not ProfileResults: ncu_report logs to fd 2 and hands
    # back two nameless, metric-less kernels
    data, _ = _synthetic_two_kernels()
    message = _damaged(_write(tmp_path, data))
    assert "damaged .ncu-rep file: ncu_report could not parse profile result 0 of 2" in message
    assert "missing required fields" in message  # the library's own words, as the cause
    assert capfd.readouterr().err == ""


@needs_module
def test_garbled_bytes_inside_a_real_result_are_damage(shared_fixtures: Path, tmp_path: Path) -> None:
    data = (shared_fixtures / "rep" / "lashi__index.ncu-rep").read_bytes()
    pos, results = 8 + struct.unpack_from("<I", data, 4)[0], []
    while pos < len(data):  # find the first result block's payload
        header_len = struct.unpack_from("<I", data, pos)[0]
        fields = {n: v for n, w, v, _ in rep_container._fields(data, pos + 4, pos + 4 + header_len) if w == 0}
        pos += 4 + header_len
        if fields.get(2):
            results.append((pos, fields[5]))
        pos += fields.get(5, 0)
    start, size = results[0]
    garbled = bytearray(data)
    at = start + 4 + size // 10
    garbled[at : at + 16] = b"\xff" * 16
    assert "damaged .ncu-rep file" in _damaged(_write(tmp_path, bytes(garbled)))


# ---------------------------------------------------------------------------------------------
# No ncu_report module
# ---------------------------------------------------------------------------------------------


def test_without_module_or_cli_the_error_points_to_the_csv_route(
    shared_fixtures: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ncu_rep, "_load_ncu_report_module", lambda: None)
    monkeypatch.setattr(ncu_rep.shutil, "which", lambda name: None)
    monkeypatch.setattr(ncu_rep.platform, "system", lambda: "Linux")
    monkeypatch.setattr(ncu_rep.platform, "machine", lambda: "x86_64")
    message = _damaged(shared_fixtures / "rep" / "lashi__index.ncu-rep")
    assert "`ncu-report` package is not installed" in message
    assert "no `ncu` command is on PATH" in message
    assert "--csv --page raw --print-units base" in message


def test_on_other_platforms_the_error_says_the_wheel_is_x86_64_linux_only(
    shared_fixtures: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ncu_rep, "_load_ncu_report_module", lambda: None)
    monkeypatch.setattr(ncu_rep.shutil, "which", lambda name: None)
    monkeypatch.setattr(ncu_rep.platform, "system", lambda: "Darwin")
    monkeypatch.setattr(ncu_rep.platform, "machine", lambda: "arm64")
    message = _damaged(shared_fixtures / "rep" / "lashi__index.ncu-rep")
    assert "x86-64 Linux only, and this is Darwin arm64" in message


def _fake_ncu(tmp_path: Path, csv_file: Path, exit_code: int = 0) -> Path:
    """An `ncu` stand-in on PATH that logs how it was called and prints a real conversion."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "ncu-call.log"
    script = bindir / "ncu"
    script.write_text(
        f"#!{sys.executable}\n"
        "import os, sys\n"
        f"open({str(log)!r}, 'w').write(os.environ.get('LC_ALL', '') + '\\n' + '\\n'.join(sys.argv[1:]))\n"
        f"sys.stdout.buffer.write(open({str(csv_file)!r}, 'rb').read())\n"
        f"sys.stderr.write('==ERROR== fake failure\\n' if {exit_code} else '')\n"
        f"sys.exit({exit_code})\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return log


def test_without_module_the_ncu_cli_converts_in_the_c_locale(
    shared_fixtures: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("nsroof.importers.ncu.csv_export")
    from nsroof.importers.ncu import csv_export as ncu_csv

    name = "nsighttraining__manual_nvtx"
    converted = shared_fixtures / "converted" / f"{name}.raw_base.csv"
    log = _fake_ncu(tmp_path, converted)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("LC_ALL", "de_DE.UTF-8")
    monkeypatch.setattr(ncu_rep, "_load_ncu_report_module", lambda: None)
    report = shared_fixtures / "rep" / f"{name}.ncu-rep"

    table, table_facts = ncu_rep.read(report)

    lc_all, *argv = log.read_text().splitlines()
    assert lc_all == "C"
    assert argv == ["-i", str(report), "--csv", "--page", "raw", "--print-units", "base"]
    expected = ncu_csv.read(converted)[0]
    assert table_facts.format == "ncu-rep"
    assert (table["source"] == f"{name}.ncu-rep").all()
    pd.testing.assert_frame_equal(table.drop(columns="source"), expected.drop(columns="source"))


def test_a_failing_ncu_cli_is_reported_with_its_message(
    shared_fixtures: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_ncu(tmp_path, shared_fixtures / "converted" / "lashi__index.raw_base.csv", exit_code=1)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setattr(ncu_rep, "_load_ncu_report_module", lambda: None)
    message = _damaged(shared_fixtures / "rep" / "lashi__index.ncu-rep")
    assert "`ncu -i` exited with 1: ==ERROR== fake failure" in message


# ---------------------------------------------------------------------------------------------
# Real reports through ncu_report against their raw_base.csv conversions
# ---------------------------------------------------------------------------------------------


def _csv_units(path: Path) -> dict[str, str]:
    """Column -> unit string from the raw page's units row (the line after the `"ID",` header)."""
    with open(path, newline="", encoding="utf-8") as fh:
        rows = csv.reader(fh)
        for header in rows:
            if header and header[0] == "ID":
                return dict(zip(header, next(rows), strict=True))
    raise AssertionError(f"no header in {path}")


@pytest.fixture(scope="module")
def tables() -> dict[str, tuple]:
    return {}


def _pair(shared: Path, name: str,
          cache: dict) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, str], tuple[dict, dict]]:
    if name not in cache:
        from nsroof.importers.ncu import csv_export as ncu_csv

        converted = shared / "converted" / f"{name}.raw_base.csv"
        (rep, rep_facts), (conv, conv_facts) = (ncu_rep.read(shared / "rep" / f"{name}.ncu-rep"),
                                                ncu_csv.read(converted))
        facts = rep_facts, conv_facts
        cache[name] = (rep, conv, _csv_units(converted), facts)
    return cache[name]


@needs_module
@pytest.mark.parametrize("name", REPORT_NAMES)
def test_real_report_reads_with_the_identity_of_its_csv_conversion(
    shared_fixtures: Path, name: str, tables: dict
) -> None:
    pytest.importorskip("nsroof.importers.ncu.csv_export")
    rep, conv, _, (facts, _) = _pair(shared_fixtures, name, tables)
    assert facts.format == "ncu-rep"
    assert facts.source == f"{name}.ncu-rep"
    assert facts.reader.startswith("ncu_report ")
    assert len(rep) > 0
    assert rep["kernel_id"].tolist() == conv["kernel_id"].tolist() == list(range(len(rep)))
    for column in ["kernel_name", "function", "device", "cc", "grid", "block", "process_name", "host",
                   "nvtx_path"]:
        assert rep[column].tolist() == conv[column].tolist(), column
    for column in ["process_id", "device_id", "context", "stream"]:
        assert rep[column].astype("Int64").tolist() == conv[column].astype("Int64").tolist(), column
    assert [list(r) for r in rep["nvtx_ranges"]] == [list(r) for r in conv["nvtx_ranges"]]


@needs_module
@pytest.mark.parametrize("name", REPORT_NAMES)
def test_real_report_metrics_equal_the_csv_within_its_printed_precision(
    shared_fixtures: Path, name: str, tables: dict
) -> None:
    """Every metric both tables hold: same strings, same NaNs, same SI numbers. The raw page prints
    numbers with at most 2 decimals in its (base) unit, so a value may differ by 0.005 of that unit:
    e.g. smsp__…ffma_pred_on.sum.per_cycle_elapsed 632.1648959 in the report, "632.16" in the CSV."""
    pytest.importorskip("nsroof.importers.ncu.csv_export")
    from nsroof import units

    rep, conv, csv_unit, _ = _pair(shared_fixtures, name, tables)
    shared = sorted(set(rep.columns) & set(conv.columns) - set(ncu_rep.IDENTITY_COLUMNS))
    assert len(shared) > 50  # even basic-set reports carry hundreds of launch__/device__ metrics
    floats = [c for c in shared
              if pd.api.types.is_float_dtype(rep[c]) and pd.api.types.is_float_dtype(conv[c])]
    for column in sorted(set(shared) - set(floats)):  # string metrics (CachePreferNone, device names, ...)
        a, b = rep[column], conv[column]
        assert a.dtype == b.dtype, column
        assert a.isna().tolist() == b.isna().tolist(), column
        assert a.dropna().tolist() == b.dropna().tolist(), column
    a, b = rep[floats].to_numpy(dtype="float64"), conv[floats].to_numpy(dtype="float64")
    nan_differs = (np.isnan(a) != np.isnan(b)).any(axis=0)
    assert not nan_differs.any(), [c for c, d in zip(floats, nan_differs, strict=True) if d]
    csv_unit_in_si = np.array([units.scale(csv_unit[c]).factor for c in floats])
    tolerance = 0.005 * csv_unit_in_si * (1 + 1e-9) + 1e-12 * np.abs(a)
    off = ~np.isnan(a) & (np.abs(a - b) > tolerance)
    assert not off.any(), [(floats[j], a[i, j], b[i, j]) for i, j in zip(*np.nonzero(off), strict=True)][:10]


@needs_module
def test_nvtx_push_pop_stack_comes_outermost_first(shared_fixtures: Path) -> None:
    table = ncu_rep.read(shared_fixtures / "rep" / "nsighttraining__manual_nvtx.ncu-rep")[0]
    assert [list(r) for r in table["nvtx_ranges"]] == [
        ["run_test", "init_data"], ["run_test", "daxpy"], ["run_test", "check_results"]]
    assert table["nvtx_path"].tolist() == ["run_test/init_data", "run_test/daxpy", "run_test/check_results"]


@needs_module
def test_typed_values_are_scaled_to_si(shared_fixtures: Path) -> None:
    table, table_facts = ncu_rep.read(shared_fixtures / "rep" / "alprielse__silu-2025-04-18-v1.ncu-rep")
    row = table.iloc[0]
    # IMetric gpu__time_duration.sum = 143264.0, unit 'ns' -> 143264e-9 s
    assert row["gpu__time_duration.sum"] == pytest.approx(143264e-9, rel=1e-15)
    # dram__bytes_write.sum = 240701440.0 'byte' -> unchanged
    assert row["dram__bytes_write.sum"] == 240701440.0
    # sm__cycles_elapsed.avg.per_second = 1490935150.0260592 'hz' -> Hz, full double precision kept
    assert row["sm__cycles_elapsed.avg.per_second"] == pytest.approx(1490935150.0260592, rel=1e-15)
    # string metrics stay strings; a device with CC 9.0
    assert row["launch__cluster_scheduling_policy"] == "PolicySpread"
    assert (row["device"], row["cc"], row["grid"], row["block"]) == ("NVIDIA GH200 480GB", "9.0",
                                                                     "(1056, 1, 1)", "(256, 1, 1)")
    assert (row["process_name"], row["process_id"], row["stream"]) == ("python3.10", 12584, 7)
    assert table["gpu__time_duration.sum"].dtype == "float64"
    units_map = table_facts.metric_units
    assert units_map["gpu__time_duration.sum"] == "second"
    # section bookkeeping metrics (lists of metric names) are not kernel metrics
    assert not [c for c in table.columns if c.startswith(("group:", "breakdown:", "regex:"))]


@needs_module
def test_missing_values_are_nan_not_zero(shared_fixtures: Path) -> None:
    # averyclapp's A10G report: nvlink__source_ports / destination_ports have no value (ValueKind
    # UNKNOWN; 'no data' on the CSV raw page), nvlink__count_physical has a real 0
    table = ncu_rep.read(shared_fixtures / "rep" / "averyclapp__profile_output.ncu-rep")[0]
    assert table["nvlink__source_ports"].isna().all()
    assert table["nvlink__destination_ports"].isna().all()
    assert (table["nvlink__count_physical"] == 0.0).all()
