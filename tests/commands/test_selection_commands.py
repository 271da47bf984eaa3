"""The selection options on the commands that read a report (plot, report, compare), their empty cases,
and `compare` of an empty report: one line each, no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from nsroof.cli import cli


def _run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, list(args))
    return r.exit_code, r.stdout, r.stderr


@pytest.fixture(scope="module")
def reports(example_csv: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from nsroof.pipeline import analyze
    from nsroof.report import parquet

    folder = tmp_path_factory.mktemp("sel")
    full = analyze([example_csv])
    full.write(folder / "full.parquet")
    # what `analyze` writes for a trace without kernels: a report with no rows
    parquet.write(full.frame.iloc[0:0], folder / "empty.parquet", metadata=full.metadata)
    return folder / "full.parquet", folder / "empty.parquet"


def test_plot_selects_titles_and_sizes(reports: tuple[Path, Path], tmp_path: Path) -> None:
    full, _ = reports
    out = tmp_path / "c.png"
    code, stdout, err = _run("plot", str(full), "-o", str(out), "--kernel", "softmax", "--title", "Softmax",
                             "--size", "5x3", "--dpi", "50")
    assert code == 0, err
    assert stdout.startswith(f"wrote {out}: 2 kernels, 6 points")
    from PIL import Image

    # (5 in plot area + 3.4 in of legend and margins) x 50 dpi wide
    assert Image.open(out).size[0] == pytest.approx((5 + 10.0 - 6.6) * 50, abs=2)


def test_an_empty_selection_is_an_error_not_an_empty_chart(reports: tuple[Path, Path],
                                                           tmp_path: Path) -> None:
    full, _ = reports
    for command, out in (("plot", tmp_path / "c.png"), ("report", tmp_path / "r.html")):
        code, stdout, err = _run(command, str(full), "-o", str(out), "--nvtx", "nomatch")
        assert code == 2 and stdout == "" and not out.exists()
        assert err == f"nsroof: error: no kernel matches --nvtx nomatch: 15 kernels in {full}\n"


def test_report_keeps_the_selection(reports: tuple[Path, Path], tmp_path: Path) -> None:
    full, _ = reports
    code, stdout, err = _run("report", str(full), "-o", str(tmp_path / "r.html"), "--kernel", "gemm")
    assert code == 0, err
    assert stdout.startswith(f"wrote {tmp_path / 'r.html'}: 6 kernels")


def test_compare_of_an_empty_and_a_full_report_is_one_line(reports: tuple[Path, Path]) -> None:
    full, empty = reports
    for args in ((str(empty), str(full)), (str(empty), str(full), "--no-ranges")):
        code, stdout, err = _run("compare", *args)
        assert code == 0 and err == ""
        assert stdout == (f"nothing to compare: {empty} has no kernels "
                          f"({full} has 15; every kernel is added)\n")
    code, stdout, _ = _run("compare", str(full), str(empty))
    assert code == 0 and "every kernel is removed" in stdout and stdout.count("\n") == 1
    code, stdout, _ = _run("compare", str(empty), str(full), "--json")
    assert code == 0 and json.loads(stdout)["kernels"] == []


def test_compare_selects_on_both_sides_and_prints_csv(reports: tuple[Path, Path]) -> None:
    full, _ = reports
    code, stdout, err = _run("compare", str(full), str(full), "--kernel", "gemm", "--csv")
    assert code == 0, err
    lines = stdout.splitlines()
    assert lines[0].startswith("function,nvtx_path,status")
    # the six GEMMs share 3 names and 3 NVTX paths: 5 distinct (function, path) keys, all unchanged
    assert all(line.split(",")[0].startswith("ampere_bf16") for line in lines[1:])
    assert all(",both," in line for line in lines[1:])


def test_quiet_prints_nothing_but_errors(reports: tuple[Path, Path], tmp_path: Path) -> None:
    full, _ = reports
    for command, out in (("plot", tmp_path / "c.svg"), ("report", tmp_path / "r.html")):
        code, stdout, err = _run(command, str(full), "-o", str(out), "-q")
        assert (code, stdout, err) == (0, "", "") and out.exists()
    code, stdout, err = _run("plot", str(full), "-o", str(tmp_path / "c.txt"), "-q")
    assert code == 2 and stdout == "" and "cannot write a chart as '.txt'" in err
