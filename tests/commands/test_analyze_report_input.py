"""`nsroof analyze REPORT.parquet`: a report nsroof wrote is shown as its analysis showed it — the summary,
--json, --csv and the selection options alike; any other Parquet file is refused in one line."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from nsroof.errors import InputError
from tests._cli import invoke
from tests._paths import DATA, REPO

EXAMPLE = REPO / "nsroof" / "data" / "examples" / "example_details.csv"
INCOMPLETE = DATA / "ncu" / "details_new.csv"  # lacks roofline counters: the run gives the metrics hint


def _ok(*args: str) -> str:
    code, out, err = invoke(*args)
    assert code == 0, err
    return out


@pytest.mark.parametrize("export", [EXAMPLE, INCOMPLETE], ids=["example", "with-hints"])
@pytest.mark.parametrize("view", [[], ["--json"], ["--csv", "--by", "name"], ["--kernel", "gemm", "--json"],
                                  ["--top", "3"]], ids=["summary", "json", "csv", "selected", "top"])
def test_a_report_shows_as_its_analysis_did(export: Path, view: list[str], tmp_path: Path) -> None:
    report = tmp_path / "r.parquet"
    if export == INCOMPLETE and "--kernel" in view:
        view = ["--kernel", "layer_norm", "--json"]
    fresh = _ok("analyze", str(export), "--machine", "h100-sxm", "-o", str(report), *view)
    shown = _ok("analyze", str(report), *view)
    assert shown == fresh


def test_the_op_rows_beside_a_report_are_read_with_it(tmp_path: Path) -> None:
    trace = DATA / "traces" / "cross_thread.json"
    report = tmp_path / "t.parquet"
    fresh = _ok("analyze", str(trace), "--machine", "h100-sxm", "-o", str(report))
    assert (tmp_path / "t.ops.parquet").is_file() and "costed ops" in fresh
    assert _ok("analyze", str(report)) == fresh
    # the op-level file on its own is a report too
    assert _ok("analyze", str(tmp_path / "t.ops.parquet"), "--json").startswith("[")


def test_o_writes_the_selected_rows_and_never_over_the_report_shown(tmp_path: Path) -> None:
    report, selected = tmp_path / "r.parquet", tmp_path / "gemm.parquet"
    _ok("analyze", str(EXAMPLE), "--machine", "h100-sxm", "-o", str(report))
    _ok("analyze", str(report), "--kernel", "gemm", "-o", str(selected), "-q")
    from nsroof.report.parquet import load, read_metadata

    kept = load(selected)
    assert len(kept) and kept["function"].astype(str).str.contains("gemm", case=False).all()
    assert read_metadata(selected)["selection"] == "--kernel gemm"
    code, _, err = invoke("analyze", str(report), "-o", str(report))
    assert code == 2 and "the output would overwrite the report shown" in err


def test_options_that_change_an_analysis_point_to_the_export(tmp_path: Path) -> None:
    report = tmp_path / "r.parquet"
    _ok("analyze", str(EXAMPLE), "--machine", "h100-sxm", "-o", str(report))
    before = report.read_bytes()
    formulas = tmp_path / "mine.py"
    formulas.write_text("")
    for option in (["--machine", "a100-sxm4-40gb"], ["--aggregate"], ["--formulas", str(formulas)]):
        code, out, err = invoke("analyze", str(report), *option)
        assert code == 2 and out == ""
        assert err.strip() == (f"nsroof: error: {report}: a report nsroof wrote, already analyzed: "
                               f"{option[0]} changes how an export is analyzed — analyze {EXAMPLE} again "
                               f"with {option[0]}")
    assert report.read_bytes() == before


def test_any_other_parquet_file_is_refused_in_one_line(tmp_path: Path) -> None:
    foreign = tmp_path / "table.parquet"
    pd.DataFrame({"a": [1, 2]}).to_parquet(foreign)
    code, out, err = invoke("analyze", str(foreign), "--json")
    assert code == 2 and out == ""
    assert err.strip() == (f"nsroof: error: {foreign}: a Parquet file without nsroof's metadata: not a "
                           "report nsroof wrote, nor an export — analyze the ncu export or torch trace it "
                           "came from (pandas.read_parquet reads the table)")
    broken = tmp_path / "cut.parquet"
    broken.write_bytes(b"PAR1" + os.urandom(64))
    code, _, err = invoke("analyze", str(broken))
    assert code == 2 and err.count("\n") == 1 and "an unreadable Parquet file" in err
    assert not list(tmp_path.glob("*.nsroof.parquet"))


def test_the_importers_refuse_parquet_with_the_advice(tmp_path: Path) -> None:
    from nsroof import importers

    table = tmp_path / "x.bin"  # by content, not by name
    pd.DataFrame({"a": [1]}).to_parquet(table)
    assert importers.sniff(table) == "parquet"
    with pytest.raises(InputError, match="a Parquet file, not an ncu export or torch trace — an nsroof"):
        importers.read(table)
    with pytest.raises(InputError, match="a Parquet file, not an export"):
        importers.sniff(table, strict=True)
