"""Bad input to `nsroof analyze`: one line on stderr naming the file, exit code 2, no traceback, no output."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from nsroof.cli import cli


def run(args: list[str]) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, args)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(
    "make, cause",
    [
        (lambda d: d / "absent.csv", "no such file"),
        (lambda d: (d / "empty.csv").write_bytes(b"") and d / "empty.csv" or d / "empty.csv", "file is empty"),
    ],
)
def test_bad_input_is_one_clean_line(tmp_path: Path, make, cause: str) -> None:  # type: ignore[no-untyped-def]
    src = make(tmp_path)
    out = tmp_path / "out.parquet"
    code, stdout, stderr = run(["analyze", str(src), "-o", str(out)])
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("nsroof: error: ") and str(src) in lines[0] and cause in lines[0]
    assert "Traceback" not in stderr
    assert not out.exists()


def test_a_directory_without_exports_is_listed_as_failed(tmp_path: Path) -> None:
    # directories are dataset inputs (recursed); one holding no export fails cleanly, exit code 1
    (tmp_path / "empty").mkdir()
    code, stdout, stderr = run(["analyze", str(tmp_path / "empty"), "-o", str(tmp_path / "ds")])
    assert code == 1
    assert "directory holds no ncu CSV, .ncu-rep or torch trace" in stdout
    assert "Traceback" not in stdout + stderr


def test_not_an_export_names_file_and_line(tmp_path: Path) -> None:
    src = tmp_path / "notes.csv"
    src.write_text("hello,world\n1,2\n")
    code, _, stderr = run(["analyze", str(src), "-o", str(tmp_path / "o.parquet")])
    assert code == 2
    assert stderr.count("\n") == 1 and str(src) in stderr
    assert not (tmp_path / "o.parquet").exists()
