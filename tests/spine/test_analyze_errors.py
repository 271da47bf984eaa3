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
        (lambda d: d, "is a directory"),
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
