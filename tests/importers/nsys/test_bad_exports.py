"""What is not an analyzable Nsight Systems export fails in one line naming the file and what it lacks,
exit 2, no report written: an empty capture, an export without CUDA tables, text that is not UTF-8, a
truncated database, someone else's SQLite, a report without an `nsys` to export it or newer than the
local one."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from nsroof.cli import cli
from nsroof.importers.nsys.rep import find_nsys
from tests._paths import SHARED_FIXTURES
from tests.importers.nsys.synthetic import Export, write


def _fails(path: Path, tmp_path: Path, *words: str) -> str:
    out = tmp_path / "r.parquet"
    r = CliRunner().invoke(cli, ["analyze", str(path), "-o", str(out)])
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and path.name in lines[0], r.stderr
    assert all(w in lines[0] for w in words), lines[0]
    assert not out.exists() and "Traceback" not in r.output
    return lines[0]


def _one_kernel() -> Export:
    return Export(kernels=[("k", 1000, 2000, 1, 7)], launches=[("cudaLaunchKernel_v7000", 100, 200, 1, 1)])


def test_an_empty_capture(tmp_path: Path) -> None:
    _fails(write(tmp_path / "empty.sqlite", Export()), tmp_path, "no CUDA kernels", "is empty")


def test_an_export_without_cuda_tables(tmp_path: Path) -> None:
    _fails(write(tmp_path / "cpu.sqlite", Export(kernel_table=False)), tmp_path,
           "without CUDA kernels", "CUPTI_ACTIVITY_KIND_KERNEL")


def test_text_that_is_not_utf8(tmp_path: Path) -> None:
    path = write(tmp_path / "latin1.sqlite", _one_kernel())
    with sqlite3.connect(path) as db:
        db.execute("UPDATE StringIds SET value = CAST(x'6bff' AS TEXT) WHERE value = 'k'")
    _fails(path, tmp_path, "not UTF-8", "CUPTI_ACTIVITY_KIND_KERNEL")


def test_a_truncated_export(tmp_path: Path) -> None:
    whole = write(tmp_path / "whole.sqlite", _one_kernel()).read_bytes()
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(whole[: len(whole) // 2])
    _fails(cut, tmp_path, "damaged SQLite database")


def test_someone_elses_sqlite_named_like_an_export(tmp_path: Path) -> None:
    path = tmp_path / "report.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE users (id INTEGER, name TEXT)")
    _fails(path, tmp_path, "not an nsys export")


def test_an_nsys_rep_without_nsys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"NVIDIA Tegra Profiler Report 2025@1@1@110-251135451612v0.\n" + b"\0" * 64)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("NSROOF_NSYS", raising=False)
    line = _fails(rep, tmp_path, "nsys 2025.1.1.110", "nsys export --type sqlite")
    assert "not on PATH" in line


def test_an_nsys_rep_newer_than_the_local_nsys(tmp_path: Path) -> None:
    rep = SHARED_FIXTURES / "nsys" / "fuser__report1.nsys-rep"
    if find_nsys() is None or not rep.is_file():
        pytest.skip("no nsys CLI (../shared/tools/get-nsys.sh) or no shared .nsys-rep")
    _fails(rep, tmp_path, "`nsys export` failed", "2025.1.1.110")
