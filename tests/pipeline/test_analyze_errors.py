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
        (lambda d: (d / "empty.csv").write_bytes(b"") and d / "empty.csv" or d / "empty.csv",
         "file is empty"),
    ],
)
def test_bad_input_is_one_clean_line(tmp_path: Path, make,  # type: ignore[no-untyped-def]
                                     cause: str) -> None:
    src = make(tmp_path)
    out = tmp_path / "out.parquet"
    code, stdout, stderr = run(["analyze", str(src), "-o", str(out)])
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("nsroof: error: ") and str(src) in lines[0] and cause in lines[0]
    assert "Traceback" not in stderr
    assert not out.exists()


def test_a_directory_without_exports_is_an_input_error(tmp_path: Path) -> None:
    # directories are dataset inputs (recursed); one holding no export is an input error before
    # anything is written: one line, exit code 2, no output folder
    (tmp_path / "empty").mkdir()
    code, stdout, stderr = run(["analyze", str(tmp_path / "empty"), "-o", str(tmp_path / "ds")])
    assert code == 2
    assert ("folder holds no ncu CSV, ncu text page, .ncu-rep or torch trace" in stderr
            and stderr.count("\n") == 1)
    assert "Traceback" not in stdout + stderr
    assert not (tmp_path / "ds").exists()


def test_not_an_export_names_file_and_line(tmp_path: Path) -> None:
    src = tmp_path / "notes.csv"
    src.write_text("hello,world\n1,2\n")
    code, _, stderr = run(["analyze", str(src), "-o", str(tmp_path / "o.parquet")])
    assert code == 2
    assert stderr.count("\n") == 1 and str(src) in stderr
    assert not (tmp_path / "o.parquet").exists()




def test_a_truncated_gzip_is_named_not_aborted(tiny_raw_csv: Path, tmp_path: Path) -> None:
    import gzip

    whole = gzip.compress(tiny_raw_csv.read_bytes())
    src = tmp_path / "cut.csv.gz"
    src.write_bytes(whole[: len(whole) // 2])
    code, _, stderr = run(["analyze", str(src), "-o", str(tmp_path / "o.parquet")])
    assert code == 2 and "damaged gzip file" in stderr and str(src) in stderr
    assert "Aborted" not in stderr


def test_an_unwritable_output_is_one_line(tiny_raw_csv: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    code, _, stderr = run(["analyze", str(tiny_raw_csv), "-o", str(blocker / "r.parquet")])
    assert code == 2 and "cannot write the output" in stderr and "Traceback" not in stderr
    assert len(stderr.strip().splitlines()) == 1


def test_the_output_never_overwrites_the_input(tiny_raw_csv: Path, tmp_path: Path) -> None:
    src = tmp_path / "run.csv"
    src.write_bytes(tiny_raw_csv.read_bytes())
    code, _, stderr = run(["analyze", str(src), "-o", str(src)])
    assert code == 2 and "would overwrite the input" in stderr
    assert src.read_bytes() == tiny_raw_csv.read_bytes()


def test_reports_get_the_usual_file_permissions(tiny_raw_csv: Path, tmp_path: Path) -> None:
    import os

    out = tmp_path / "r.parquet"
    old = os.umask(0o022)
    try:
        code, _, _ = run(["analyze", str(tiny_raw_csv), "-o", str(out)])
    finally:
        os.umask(old)
    assert code == 0
    assert out.stat().st_mode & 0o777 == 0o644  # not mkstemp's 0o600


def test_usage_errors_are_one_line_too() -> None:
    code, _, stderr = run(["analyze", "x.csv", "--top", "-3"])
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("nsroof: error: Invalid value for '--top': -3 is not in the range x>=0.")
    assert lines[0].endswith("analyze --help`)")


def test_a_pipe_is_refused_in_one_line_without_waiting_for_a_writer(tmp_path: Path) -> None:
    # the importers read an export more than once and the digest reads it once more: a pipe cannot serve
    # them. A FIFO nobody writes to must give the clean error at once, not hang on open(). A fresh
    # process with a deadline, so a hang fails the test instead of stalling the run.
    import os
    import subprocess
    import sys

    fifo = tmp_path / "export.csv"
    os.mkfifo(fifo)
    out = tmp_path / "out.parquet"
    done = subprocess.run([sys.executable, "-m", "nsroof", "analyze", str(fifo), "-o", str(out)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and str(fifo) in lines[0] and "not a regular file" in lines[0], done.stderr
    assert not out.exists()
