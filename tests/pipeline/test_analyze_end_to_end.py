"""`nsroof analyze` end to end on a tiny raw-page export written for this test
(tests/data/spine/tiny_raw.csv).

Two kernels on an A100-SXM4-40GB, no ceilings in the export, so the datasheet entry is used:
FP32 (CUDA cores) 19.5e12 FLOP/s and DRAM 1.555e12 B/s.
"""

from __future__ import annotations

import hashlib
import math
import subprocess
import sys
from concurrent.futures import Future
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from nsroof import digest
from nsroof.cli import cli
from nsroof.pipeline import analyze
from nsroof.report.parquet import read_metadata
from nsroof.schema import COLUMNS


@pytest.fixture(scope="module")
def report(tiny_raw_csv: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[pd.DataFrame, str, Path]:
    out = tmp_path_factory.mktemp("r") / "tiny.parquet"
    result = CliRunner().invoke(cli, ["analyze", str(tiny_raw_csv), "-o", str(out)])
    assert result.exit_code == 0, result.output
    return pd.read_parquet(out), result.stdout, out


def test_every_column_for_every_kernel_and_level(report: tuple[pd.DataFrame, str, Path]) -> None:
    df, _, _ = report
    assert list(df.columns) == COLUMNS
    assert len(df) == 2 * 3
    assert set(df["device"]) == {"NVIDIA A100-SXM4-40GB"}
    assert set(df["ceiling_source"][df["level"] == "dram"]) == {"spec:A100 SXM4 40GB"}


def test_saxpy_is_memory_bound_at_dram(report: tuple[pd.DataFrame, str, Path]) -> None:
    df, _, _ = report
    row = df[(df["function"] == "saxpy") & (df["level"] == "dram")].iloc[0]
    # 2^20 FFMA = 2,097,152 FLOP over 3 * 4 B * 2^20 = 12,582,912 B: I = 1/6 FLOP/B
    assert row["flops"] == 2_097_152 and row["bytes"] == 12_582_912
    assert math.isclose(row["intensity"], 1 / 6)
    assert row["bound"] == "memory"
    # 12,582,912 B / 1e-5 s = 1.2583e12 B/s of 1.555e12 -> roof fraction 0.8092
    assert math.isclose(row["roof_fraction"], 12_582_912 / 1e-5 / 1.555e12)
    # floor 12,582,912 / 1.555e12 = 8.0919e-6 s
    assert math.isclose(row["time_floor_s"], 12_582_912 / 1.555e12)
    assert row["duration_source"] == "gpu__time_duration.sum" and row["bytes_source"] == "dram__bytes.sum"


def test_sgemm_is_compute_bound_and_limited_by_compute(report: tuple[pd.DataFrame, str, Path]) -> None:
    df, _, _ = report
    rows = df[df["function"] == "sgemm_kernel"].set_index("level")
    # 2 * 1024^3 = 2,147,483,648 FLOP over 12,582,912 B: I = 170.67 > ridge 19.5e12 / 1.555e12 = 12.54
    assert rows.loc["dram", "bound"] == "compute"
    # 2,147,483,648 FLOP / 2e-4 s = 1.0737e13 FLOP/s of 19.5e12 -> 0.5506
    assert math.isclose(rows.loc["dram", "roof_fraction"], 2_147_483_648 / 2e-4 / 19.5e12)
    assert rows.loc["dram", "precision"] == "fp32"
    # the datasheet roofs of the counters the bytes came from, at boost (no clock recorded): L2 bytes are
    # lts__t_bytes, the tag stage's 80 slices × 96 B = 7680 B × 1.41 GHz = 1.0829e13 B/s (not lts2xbar's
    # 5120 B, 1.5x lower); L1 bytes are l1tex__t_bytes, and the table's L1 figure (128 B per SM) is the LSU
    # writeback's: no l1tex__t figure, so that roof is unknown and says why, and no level is named limiting
    assert rows.loc["l2", "bandwidth_bytes_per_s"] == pytest.approx(7680 * 1.41e9)
    assert rows.loc["l2", "bound"] == "compute"
    assert math.isnan(rows.loc["l1", "bandwidth_bytes_per_s"]) and rows.loc["l1", "bound"] == "unknown"
    assert ("spec:A100 SXM4 40GB has no L1 roof for the l1tex__t counter (its L1 figure is the lsu counter's)"
            in rows.loc["l1", "missing"])
    assert set(rows["limiting"]) == {""}


def test_with_every_roof_known_the_compute_floor_limits_sgemm(tiny_raw_csv: Path, tmp_path: Path) -> None:
    profile = tmp_path / "a100ish.json"
    profile.write_text('{"name": "a100ish", "source": "measured", "simt_flop_per_s": {"fp32": 19.5e12},'
                       ' "peak_flop_per_s": {"fp32": 19.5e12},'
                       ' "bandwidth_bytes_per_s": {"dram": 1.555e12, "l2": 5e12, "l1": 15e12}}')
    out = tmp_path / "r.parquet"
    result = CliRunner().invoke(cli,
                                ["analyze", str(tiny_raw_csv), "-o", str(out), "--machine", str(profile)])
    assert result.exit_code == 0, result.output
    df = pd.read_parquet(out)
    sgemm = df[df["function"] == "sgemm_kernel"]
    # compute 2,147,483,648 / 19.5e12 = 1.101e-4 s beats DRAM 12,582,912 / 1.555e12 = 8.1e-6 s,
    # L2 402,653,184 / 5e12 = 8.05e-5 s and L1 1,610,612,736 / 15e12 = 1.074e-4 s
    assert set(sgemm["limiting"]) == {"compute"}
    saxpy = df[df["function"] == "saxpy"]
    # saxpy: DRAM 8.09e-6 s > L2 12,582,912 / 5e12 = 2.5e-6 s > compute 2,097,152 / 19.5e12 = 1.1e-7 s
    assert set(saxpy["limiting"]) == {"dram"}


def test_summary_and_metadata(report: tuple[pd.DataFrame, str, Path]) -> None:
    _, stdout, out = report
    table = stdout.splitlines()
    first = next(i for i, line in enumerate(table) if line.split()[:2] == ["id", "function"])
    assert "sgemm_kernel" in table[first + 1]  # the slowest kernel heads the table
    assert "Share of kernel time by bound" in stdout
    meta = read_metadata(out)
    assert meta["inputs"][0]["name"] == "tiny_raw.csv"
    assert meta["ceilings"][0]["name"] == "A100 SXM4 40GB"


def test_default_output_lands_next_to_the_input(tiny_raw_csv: Path, tmp_path: Path) -> None:
    src = tmp_path / "run.ncu-rep.csv"
    src.write_bytes(tiny_raw_csv.read_bytes())
    result = CliRunner().invoke(cli, ["analyze", str(src)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "run.nsroof.parquet").exists()


def test_machine_option_overrides_the_device_table(tiny_raw_csv: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.parquet"
    result = CliRunner().invoke(cli, ["analyze", str(tiny_raw_csv), "-o", str(out), "--machine", "h100-sxm"])
    assert result.exit_code == 0, result.output
    df = pd.read_parquet(out)
    assert set(df["ceiling_source"][df["level"] == "dram"]) == {"spec:H100 SXM"}


def test_aggregate_merges_nothing_when_kernels_differ(tiny_raw_csv: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.parquet"
    result = CliRunner().invoke(cli, ["analyze", str(tiny_raw_csv), "-o", str(out), "--aggregate"])
    assert result.exit_code == 0, result.output
    assert list(pd.read_parquet(out)["launches"].unique()) == [1]


def test_an_export_without_byte_counters_still_reports_and_says_what_to_collect(
    tiny_raw_csv: Path, tmp_path: Path,
) -> None:
    # drop the three byte columns: the report still lands, bounds unknown, with the ncu --metrics list
    lines = tiny_raw_csv.read_text().splitlines()
    rows = [line.split('","') for line in lines[2:]]
    keep = [i for i, name in enumerate(rows[0]) if not name.endswith(("bytes.sum", "t_bytes.sum"))]
    stripped = lines[:2] + ['","'.join(r[i] for i in keep) for r in rows]
    src = tmp_path / "nobytes.csv"
    src.write_text("\n".join(stripped) + "\n")
    out = tmp_path / "r.parquet"
    result = CliRunner().invoke(cli, ["analyze", str(src), "-o", str(out)])
    assert result.exit_code == 0, result.output
    df = pd.read_parquet(out)
    assert set(df["bound"]) == {"unknown"}
    for level, metric in (("dram", "dram__bytes.sum"), ("l2", "lts__t_bytes.sum"),
                          ("l1", "l1tex__t_bytes.sum")):
        assert df.loc[df["level"] == level, "missing"].str.contains(metric, regex=False).all()
    assert "profile with `ncu --metrics" in result.stdout and "dram__bytes" in result.stdout


def test_a_ledger_that_matches_nothing_says_so(tiny_raw_csv: Path, tmp_path: Path) -> None:
    mapping = tmp_path / "map.yaml"
    mapping.write_text("dtype: fp32\nrules:\n  - kernel: 'no_such_kernel'\n    formula: gemm\n"
                       "    shape: {m: 1, n: 1, k: 1}\n")
    result = CliRunner().invoke(cli, ["analyze", str(tiny_raw_csv), "-o", str(tmp_path / "r.parquet"),
                                      "--ledger", str(mapping)])
    assert result.exit_code == 0, result.output
    assert "Ledger: 0 of 2 kernels matched and evaluated a formula" in result.stdout


def test_a_rule_that_cannot_be_evaluated_is_a_warning(tiny_raw_csv: Path, tmp_path: Path) -> None:
    # sizes come from emit_nvtx markers; this export has none, so the rule matches but cannot evaluate
    mapping = tmp_path / "map.yaml"
    mapping.write_text("dtype: fp32\nrules:\n  - kernel: 'saxpy'\n    formula: gemm\n"
                       "    shape: {m: 'sizes[0][0]', n: 1, k: 1}\n")
    result = CliRunner().invoke(cli, ["analyze", str(tiny_raw_csv), "-o", str(tmp_path / "r.parquet"),
                                      "--ledger", str(mapping)])
    assert result.exit_code == 0, result.output
    assert "warning:" in result.stdout and "could not evaluate" in result.stdout


def test_digests_started_before_the_imports_are_the_ones_recorded(tiny_raw_csv: Path, tmp_path: Path) -> None:
    # the CLI starts hashing before importing pandas; analyze takes those digests over (and hashes
    # only what it was not given)
    given: Future[str] = Future()
    given.set_result("f" * 64)
    report = analyze([tiny_raw_csv], digests={str(tiny_raw_csv): given})
    assert report.metadata["inputs"][0]["sha256"] == "f" * 64
    # not given: hashed here, the file's real digest
    assert analyze([tiny_raw_csv]).metadata["inputs"][0]["sha256"] == digest.sha256_of(tiny_raw_csv)
    assert digest.sha256_of(tiny_raw_csv) == hashlib.sha256(tiny_raw_csv.read_bytes()).hexdigest()


def test_the_cli_hashes_before_it_imports_pandas(tiny_raw_csv: Path, tmp_path: Path) -> None:
    # in a fresh interpreter: when `nsroof analyze` starts hashing, pandas is not imported yet, so the
    # digest of a large export is computed while the interpreter imports
    code = (
        "import sys\n"
        "import nsroof.digest as d\n"
        "real = d.start\n"
        "def start(paths):\n"
        "    print('pandas imported:', 'pandas' in sys.modules)\n"
        "    return real(paths)\n"
        "d.start = start\n"
        "from nsroof.cli import main\n"
        f"sys.argv = ['nsroof', 'analyze', {str(tiny_raw_csv)!r}, '-o', sys.argv[1]]\n"
        "main()\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "r.parquet")], capture_output=True,
                         text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert "pandas imported: False" in out.stdout
