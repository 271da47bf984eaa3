"""Issue 6's equality: for every report in ../shared/fixtures/rep with a conversion in converted/,
the report nsroof builds from the .ncu-rep equals the one it builds from NAME.raw_base.csv
(`LC_ALL=C ncu -i NAME.ncu-rep --csv --page raw --print-units base`, ncu 2024.1.1), row for row
(kernel_id, level): every roofline number within 1e-6 relative with identical NaN patterns, every
provenance / classification string identical.

The raw page prints each value with at most two decimals in its base unit, the report keeps the
double. So the equality is asserted (1) on the report built from the .ncu-rep values rounded the way
the raw page prints them: same information in, same report out, to 1e-6; and (2) on the unrounded
report, where only quantities rebuilt from small per-cycle rates may differ, by what the CSV's
rounding explains: e.g. bautista kernel 1, FP32 FLOPs = 4080 from the report (an exact count) vs
4083.06 from the CSV, because smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed
is printed as a 2-decimal number.

Skipped when the shared folder or the `ncu-report` package is absent.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nsroof.schema import FileFacts
from tests._paths import SHARED_FIXTURES
from tests.importers.ncu.test_ncu_rep import _csv_units

NAMES = sorted(
    p.name[: -len(".ncu-rep")]
    for p in (SHARED_FIXTURES / "rep").glob("*.ncu-rep")
    if (SHARED_FIXTURES / "converted" / p.name.replace(".ncu-rep", ".raw_base.csv")).is_file()
) or ["<no shared reports>"]

REL_TOL = 1e-6
# Quantities computed from the FLOP count; the only ones a rounded per-cycle rate can move.
FLOP_FAMILY = {"flops", "flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor", "intensity",
               "attainable_flop_per_s", "achieved_flop_per_s", "time_floor_s", "roof_fraction"}
# Two decimals on a rate of at least ~5 (bautista: 2 × 1.53 FFMA/cycle-ish) bound the error below 1e-3.
ROUNDING_REL_TOL = 1e-3


def _module_or_skip() -> None:
    from nsroof.importers.ncu import rep as ncu_rep

    if ncu_rep._load_ncu_report_module() is None:
        pytest.skip("the ncu-report package is not installed")


def _as_printed(table: pd.DataFrame, csv_units: dict[str, str]) -> pd.DataFrame:
    """The kernel table with every number rounded as the raw page prints it: two decimals in the
    unit of the CSV's units row (nsecond for durations, byte/second for rates ...)."""
    from nsroof import units

    out = table.copy()
    for column in out.columns:
        if column in csv_units and pd.api.types.is_float_dtype(out[column]):
            factor = units.scale(csv_units[column]).factor
            out[column] = np.round(out[column].to_numpy() / factor, 2) * factor
    return out


_CSV_REPORTS: dict[Path, pd.DataFrame] = {}


def _analyze(path: Path) -> pd.DataFrame:
    from nsroof.pipeline import analyze

    frame = analyze([path]).frame
    return frame.sort_values(["kernel_id", "level"]).reset_index(drop=True)


def _analyze_csv(path: Path) -> pd.DataFrame:
    if path not in _CSV_REPORTS:  # both tests compare against the same CSV report
        _CSV_REPORTS[path] = _analyze(path)
    return _CSV_REPORTS[path]


def _columns() -> tuple[list[str], list[str]]:
    import pyarrow as pa

    from nsroof.schema import REPORT_FIELDS

    floats = [f.name for f in REPORT_FIELDS if pa.types.is_floating(f.type)]
    # `source` names the input file, which differs by construction
    texts = [f.name for f in REPORT_FIELDS if f.name not in floats and f.name != "source"]
    return floats, texts


def _relative_differences(rep: pd.DataFrame, conv: pd.DataFrame) -> dict[str, float]:
    """Assert equal keys, strings and NaN patterns; return each float column's largest relative gap."""
    assert len(rep) == len(conv) > 0
    assert rep[["kernel_id", "level"]].equals(conv[["kernel_id", "level"]])
    floats, texts = _columns()
    for column in texts:
        assert rep[column].astype(str).tolist() == conv[column].astype(str).tolist(), column
    gaps: dict[str, float] = {}
    for column in floats:
        a, b = rep[column].to_numpy(dtype="float64"), conv[column].to_numpy(dtype="float64")
        assert (np.isnan(a) == np.isnan(b)).all(), f"{column}: NaN patterns differ"
        both = ~np.isnan(a) & ((a != 0) | (b != 0))
        scale = np.maximum(np.abs(a[both]), np.abs(b[both]))
        gaps[column] = float((np.abs(a[both] - b[both]) / scale).max()) if both.any() else 0.0
    return gaps


@pytest.mark.parametrize("name", NAMES)
def test_report_from_ncu_rep_equals_report_from_its_raw_csv(
    shared_fixtures: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _module_or_skip()
    from nsroof.importers.ncu import rep as ncu_rep

    converted = shared_fixtures / "converted" / f"{name}.raw_base.csv"
    units_row = _csv_units(converted)
    read = ncu_rep.read
    def read_as_printed(path: Path) -> tuple[pd.DataFrame, FileFacts]:
        kernels, facts = read(path)
        return _as_printed(kernels, units_row), facts

    monkeypatch.setattr(ncu_rep, "read", read_as_printed)

    gaps = _relative_differences(_analyze(shared_fixtures / "rep" / f"{name}.ncu-rep"),
                                 _analyze_csv(converted))

    assert {c: g for c, g in gaps.items() if g > REL_TOL} == {}


@pytest.mark.parametrize("name", NAMES)
def test_unrounded_report_differs_only_where_the_csv_rounded_a_rate(shared_fixtures: Path, name: str) -> None:
    _module_or_skip()
    rep = _analyze(shared_fixtures / "rep" / f"{name}.ncu-rep")
    conv = _analyze_csv(shared_fixtures / "converted" / f"{name}.raw_base.csv")

    gaps = _relative_differences(rep, conv)

    off = {c: g for c, g in gaps.items() if g > REL_TOL}
    assert set(off) <= FLOP_FAMILY, off
    assert all(g < ROUNDING_REL_TOL for g in off.values()), off
    if off:
        assert rep["flops_source"].str.contains("per_cycle_elapsed").all()
        # FLOPs are counts: from the report's doubles they come out whole, from the CSV they do not
        flops = rep["flops"].dropna().to_numpy()
        assert np.allclose(flops, np.round(flops), rtol=1e-9, atol=0.0)
