"""`nsroof analyze` for scripts and narrow terminals: the selection options, --json/--csv, -q, a suffix it
cannot write, and every line fitted to the terminal (COLUMNS, 80 at least)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from nsroof.cli import cli


def _run(*args: str, columns: int = 80) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, list(args), env={"COLUMNS": str(columns)})
    return r.exit_code, r.stdout, r.stderr


def test_kernel_keeps_only_the_gemms_and_json_prints_one_row_per_kernel(example_csv: Path,
                                                                        tmp_path: Path) -> None:
    out = tmp_path / "g.parquet"
    code, stdout, err = _run("analyze", str(example_csv), "-o", str(out), "--kernel", "gemm", "--json")
    assert code == 0, err
    rows = json.loads(stdout)
    assert len(rows) == 6 and all("gemm" in r["function"] for r in rows)
    assert [r["rank"] for r in rows] == [1, 2, 3, 4, 5, 6]
    first = rows[0]
    # the longest GEMM of the example: 170.2 us, compute-bound against the tensor roof
    assert first["duration_s"] == pytest.approx(170.2e-6) and first["limiting"] == "compute"
    assert {"intensity_dram", "bound_l2", "roof_fraction_l1", "headroom", "step"} <= set(first)
    # the report written holds the same selection: 6 kernels × 3 levels
    df = pd.read_parquet(out)
    assert len(df) == 18 and df["function"].astype(str).str.contains("gemm").all()


def test_csv_prints_the_same_table(example_csv: Path, tmp_path: Path) -> None:
    code, stdout, err = _run("analyze", str(example_csv), "-o", str(tmp_path / "r.parquet"), "--csv")
    assert code == 0, err
    table = pd.read_csv(io.StringIO(stdout))
    assert len(table) == 15 and list(table.columns[:3]) == ["rank", "source", "kernel_id"]
    assert (table["duration_s"].diff().dropna() <= 0).all()  # longest first


def test_a_selection_that_keeps_nothing_is_one_line_and_writes_nothing(example_csv: Path,
                                                                       tmp_path: Path) -> None:
    out = tmp_path / "r.parquet"
    code, stdout, err = _run("analyze", str(example_csv), "-o", str(out), "--kernel", "no-such-kernel")
    assert code == 2 and stdout == "" and not out.exists()
    assert err.count("\n") == 1 and "no kernel matches --kernel no-such-kernel: 15 kernels in" in err
    code, _, err = _run("analyze", str(example_csv), "-o", str(out), "--step", "two")
    assert code == 2 and "--step 'two'" in err and not out.exists()
    code, _, err = _run("analyze", str(example_csv), "-o", str(out), "--step", "1")
    assert code == 2 and "marks no steps" in err


def test_quiet_prints_nothing_and_an_unwritable_suffix_is_a_usage_error(tiny_raw_csv: Path,
                                                                        tmp_path: Path) -> None:
    code, stdout, err = _run("analyze", str(tiny_raw_csv), "-o", str(tmp_path / "r.parquet"), "-q")
    assert code == 0 and stdout == "" and err == ""
    code, stdout, err = _run("analyze", str(tiny_raw_csv), "-o", str(tmp_path / "r.csv"))
    assert code == 2 and "cannot write a report as '.csv'" in err and not (tmp_path / "r.csv").exists()


@pytest.mark.parametrize("columns", [80, 100])
def test_no_line_is_wider_than_the_terminal(example_csv: Path, tmp_path: Path, columns: int) -> None:
    code, stdout, err = _run("analyze", str(example_csv), "-o", str(tmp_path / "r.parquet"), columns=columns)
    assert code == 0, err
    lines = stdout.splitlines()
    assert max(len(line) for line in lines) <= columns
    # the kernel ids and the suffix that tells the GEMMs apart survive the narrow table
    gemms = [line for line in lines if "ampere_bf16" in line]
    assert len(gemms) == 5 and {line.split()[1][-2:] for line in gemms} == {"nt", "nn", "tn"}
    assert [line.split()[0] for line in gemms] == ["10", "9", "7", "5", "2"]


def test_json_is_indented_by_one_space_with_python_floats_nan_as_null_and_slashes_kept() -> None:
    from nsroof.commands.analyze import script_output
    from nsroof.report.wide import script_table
    from tests.report.report_frames import five_kernels

    frame = five_kernels()
    frame["nvtx_path"] = frame["nvtx_path"].astype(object).where(frame["kernel_id"] != 0, "model/layer1/µ-op")
    text = script_output(frame, as_json=True)
    records = json.loads(script_table(frame).to_json(orient="records", double_precision=15))
    assert text == json.dumps(records, indent=1, ensure_ascii=False) + "\n"
    assert '"nvtx_path": "model/layer1/µ-op"' in text and '\\/' not in text
    assert '"flops": null' in text  # mystery: FLOPs unknown
    assert '"duration_s": 0.0001,' in text  # bogus, as Python writes 1e-4
