"""`nsroof analyze --by name`: the time per kernel name in the summary and in --json/--csv."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from nsroof.cli import cli
from tests._paths import DATA

# its l1tex__t L1 bytes carry ncu's own peak in the export (no datasheet entry gives the l1tex__t counter's)
THREE_SAXPY = DATA / "report" / "by_name_raw.csv"  # saxpy ×3 (60 us in all), sgemm 200 us


def _run(*args: str, columns: int = 80) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, list(args), env={"COLUMNS": str(columns)})
    return r.exit_code, r.stdout, r.stderr


def test_summary_by_name_at_80_columns(example_csv: Path, tmp_path: Path) -> None:
    code, out, err = _run("analyze", str(example_csv), "-o", str(tmp_path / "r.parquet"), "--by", "name",
                          "--top", "3")
    assert code == 0, err
    assert "Top 3 of 10 kernel names by total time" in out and "Top 3 kernels" not in out
    assert max(len(line) for line in out.splitlines()) <= 80
    # the four _tn GEMM launches under one name: 480 us, 31.1% of 1.54 ms, compute-bound at 69% of the roof
    tn = next(line for line in out.splitlines() if line.strip().startswith("ampere") and "_tn" in line)
    assert tn.split()[1:] == ["4", "4", "480", "us", "31.1%", "comp", "comp", "69%"]


def test_json_and_csv_by_name(tmp_path: Path) -> None:
    code, out, err = _run("analyze", str(THREE_SAXPY), "-o", str(tmp_path / "r.parquet"), "--by", "name",
                          "--json")
    assert code == 0, err
    rows = json.loads(out)
    assert [(r["function"], r["launches"]) for r in rows] == [("sgemm_kernel", 1), ("saxpy", 3)]
    assert rows[1]["duration_s"] == pytest.approx(60e-6) and rows[1]["bound"] == "memory"
    code, out, err = _run("analyze", str(THREE_SAXPY), "-o", str(tmp_path / "r.parquet"), "--by", "name",
                          "--csv")
    assert code == 0, err
    table = pd.read_csv(io.StringIO(out))
    assert (list(table["function"]) == ["sgemm_kernel", "saxpy"]
            and table["time_share"].sum() == pytest.approx(1.0))


def test_by_rejects_an_unknown_grouping(tmp_path: Path) -> None:
    code, _, err = _run("analyze", str(THREE_SAXPY), "-o", str(tmp_path / "r.parquet"), "--by", "stream")
    assert code == 2 and "'kernel', 'name'" in err
