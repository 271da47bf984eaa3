"""`nsroof analyze` on every real export in ../shared/fixtures: each one analyzes (exit 0, a Parquet
report with the full column set), except the log that holds only ==ERROR== lines, which must give
one clean line on stderr, exit code 2 and no output file. Skipped when the folder is absent."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from nsroof.cli import cli
from tests._paths import SHARED_FIXTURES

FOLDERS = ("csv", "converted", "synthetic", "rep", "traces")
FILES = sorted(f"{p.parent.name}/{p.name}" for folder in FOLDERS for p in (SHARED_FIXTURES / folder).glob("*")
               if p.is_file())

# ncu could not run at all: the file is two ==ERROR== lines and no CSV (MANIFEST.md)
ERROR_ONLY = {"csv/llmperfopt__error_only_raw.csv"}
# Known failures, reported to the lead; strict, so a fix turns them into a failure to remove here.
KNOWN_FAILURES: dict[str, str] = {}


def _param(relative: str) -> object:
    if relative in KNOWN_FAILURES:
        return pytest.param(relative, marks=pytest.mark.xfail(strict=True, reason=KNOWN_FAILURES[relative]))
    return relative


def _needs_module(relative: str) -> bool:
    if not relative.startswith("rep/"):
        return False
    from nsroof.importers.ncu import rep as ncu_rep

    return ncu_rep._load_ncu_report_module() is None and ncu_rep.shutil.which("ncu") is None


@pytest.mark.parametrize("relative",
                         [_param(f) for f in FILES if f not in ERROR_ONLY] or ["<no shared fixtures>"])
def test_analyze_writes_a_full_report(shared_fixtures: Path, tmp_path: Path, relative: str) -> None:
    from nsroof.schema import COLUMNS

    if _needs_module(relative):
        pytest.skip("no ncu-report package and no ncu CLI to read .ncu-rep")
    out = tmp_path / "report.parquet"
    result = CliRunner().invoke(cli, ["analyze", str(shared_fixtures / relative), "-o", str(out)])
    assert result.exit_code == 0, f"{relative}: exit {result.exit_code}: {result.stderr.strip()}"
    assert "Traceback" not in result.stderr
    assert out.is_file()
    table = pq.read_table(out)
    assert table.column_names == COLUMNS
    assert table.num_rows > 0, relative


@pytest.mark.parametrize("relative", sorted(ERROR_ONLY))
def test_error_only_log_fails_cleanly(shared_fixtures: Path, tmp_path: Path, relative: str) -> None:
    src = shared_fixtures / relative
    out = tmp_path / "report.parquet"
    result = CliRunner().invoke(cli, ["analyze", str(src), "-o", str(out)])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("nsroof: error: ") and str(src) in lines[0]
    assert "Traceback" not in result.stderr
    assert not out.exists()
    assert not list(tmp_path.iterdir())  # not even a temporary file left behind
