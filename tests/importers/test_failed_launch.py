"""A failed launch (ncu prints `==ERROR== LaunchFailed`, then `n/a` without a unit for every metric of that
launch, grid (0, 0, 0)) is one row of NaN whose `missing` says why; the other launches are analyzed.
Strict per number: a unit is checked where a number is printed in it, and `n/a` is no number. The inputs
are built here from the repo's own small exports."""

from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd
import pytest

from nsroof import importers, pipeline
from nsroof.counters.quantities import NO_VALUES
from nsroof.errors import UnitError
from tests._paths import DATA
from tests.importers.ncu.test_ncu_text import TEXT_2024


def _quoted(fields: list[str]) -> str:
    return ",".join('"' + f.replace('"', '""') + '"' for f in fields)


def _raw_with_failed_launch(tmp_path: Path) -> Path:
    lines = (DATA / "spine" / "tiny_raw.csv").read_text().split("\n")
    header = next(csv.reader([lines[2]]))
    failed = ["2", "4242", "python3.11", "localhost", "void crash_kernel(float *)", "1", "7", "(0, 0, 0)",
              "(0, 0, 0)", "0", "No-CC", ""] + ["n/a"] * (len(header) - 12)
    lines.insert(5, _quoted(failed))
    lines.insert(2, "==ERROR== LaunchFailed")
    path = tmp_path / "failed_raw.csv"
    path.write_text("\n".join(lines))
    return path


def _details_with_failed_launch(tmp_path: Path, value: str = "n/a", unit: str = "") -> Path:
    src = (DATA / "ncu" / "details_new.csv").read_text().rstrip("\n").split("\n")
    rows = list(csv.reader(src))
    out = ["==ERROR== LaunchFailed", *src]
    for r in rows[1:]:
        if r[0] == "0" and r[12]:
            f = list(r[:15])
            f[0], f[4], f[7], f[8], f[13], f[14] = ("9", "void crash_kernel(float *)", "(0, 0, 0)",
                                                    "(0, 0, 0)", unit, value)
            out.append(_quoted(f) + ",")
    path = tmp_path / "failed_details.csv"
    path.write_text("\n".join(out) + "\n")
    return path


def _text_with_failed_launch(tmp_path: Path) -> Path:
    lines = TEXT_2024.splitlines()
    for label in ("Duration ", "Elapsed Cycles "):  # the first launch's, printed `n/a` without a unit
        at = next(i for i, line in enumerate(lines) if line.strip().startswith(label))
        lines[at] = f"    {label.strip():<40} n/a"
    path = tmp_path / "failed.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("build", [_raw_with_failed_launch, _details_with_failed_launch])
def test_a_failed_launch_is_a_nan_row_with_its_reason(  # type: ignore[no-untyped-def]
        tmp_path: Path, build) -> None:
    report = pipeline.analyze([build(tmp_path)], machine="a100-80gb")
    frame = report.frame
    failed = frame[frame["function"] == "crash_kernel"]
    others = frame[frame["function"] != "crash_kernel"]
    assert len(failed) == 3  # one row per level
    assert failed["duration_s"].isna().all() and failed["bound"].eq("unknown").all()
    assert failed["missing"].str.contains(NO_VALUES, regex=False).all()
    # the launches that ran are analyzed as without the failed one, and carry no such reason
    assert (others["duration_s"].notna().all()
            and not others["missing"].str.contains(NO_VALUES, regex=False).any())


def test_a_number_in_a_wrong_unit_is_still_refused_on_the_details_page(tmp_path: Path) -> None:
    # the same rows with a number: gpu__time_duration.sum = 5 with no unit is damage, with its line
    with pytest.raises(UnitError) as err:
        importers.read(_details_with_failed_launch(tmp_path, value="5"))
    assert "gpu__time_duration.sum" in err.value.cause and err.value.line is not None


def test_a_text_log_with_a_value_missing_reads(tmp_path: Path) -> None:
    table, _ = importers.read(_text_with_failed_launch(tmp_path))
    assert isinstance(table, pd.DataFrame) and len(table) >= 2
    assert len(table) == 3  # every launch read: an `n/a` without unit is a missing value, not a damaged unit
    assert "gpc__cycles_elapsed.max" not in table.columns or pd.isna(table["gpc__cycles_elapsed.max"].iloc[0])


def test_auto_unit_rounding_above_one_percent_is_warned_once(data_dir: Path, tmp_path: Path) -> None:
    # `ncu --print-units auto` prints 12 usecond where 12.35 was measured: half a unit of the last digit
    # over the value = 0.5 / 12 = 4.2% > 1%; "12.35" (0.005 / 12.35 = 0.04%) is no warning
    from nsroof.importers.ncu import csv_export

    text = (data_dir / "ncu" / "details_new.csv").read_text()
    assert '"gpu__time_duration.sum","usecond","12.35"' in text
    _, facts = csv_export.read(data_dir / "ncu" / "details_new.csv")
    assert not [w for w in facts.warnings if "rounding" in w]
    path = tmp_path / "auto.csv"
    path.write_text(text.replace('"gpu__time_duration.sum","usecond","12.35"',
                                 '"gpu__time_duration.sum","usecond","12"'))
    _, facts = csv_export.read(path)
    warned = [w for w in facts.warnings if "rounding" in w]
    assert (len(warned) == 1 and "up to 4.2%: gpu__time_duration.sum" in warned[0]
            and "--print-units base" in warned[0])
