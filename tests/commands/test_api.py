"""The Python facade: what `dir(nsroof)` lists, lazy imports, one Report type, functions that take a
Report or a path, one-line errors, short reprs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import nsroof


def test_dir_lists_the_public_api_and_importing_loads_nothing_heavy(repo: Path) -> None:
    names = dir(nsroof)
    assert {"analyze", "load", "summary", "plot", "html", "profile", "Report", "NsroofError", "annotate",
            "step"} <= set(names)
    assert "TYPE_CHECKING" not in names and "annotations" not in names and set(names) == set(nsroof.__all__)
    code = ("import sys, nsroof; dir(nsroof); "
            "print(sorted(m for m in ('pandas', 'torch', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=repo, check=True)
    assert out.stdout.strip() == "[]"
    assert (repo / "nsroof" / "py.typed").exists()


def test_one_report_type_from_analyze_and_load(example_csv: Path, tmp_path: Path) -> None:
    report = nsroof.analyze(example_csv, kernel="gemm")
    assert isinstance(report, nsroof.Report) and len(report.frame) == 6 * 3
    assert repr(report) == ("Report(6 kernels, 18 rows from example_details.csv on NVIDIA A100-SXM4-40GB; "
                            ".frame holds the rows)")
    path = report.write(tmp_path / "g.parquet")
    loaded = nsroof.load(path)
    assert isinstance(loaded, nsroof.Report) and len(loaded.frame) == 18
    assert loaded.metadata["inputs"][0]["name"] == "example_details.csv"


def test_summary_plot_and_html_take_a_report_or_a_path(example_csv: Path, tmp_path: Path) -> None:
    report = nsroof.analyze(example_csv)
    path = report.write(tmp_path / "r.parquet")
    text = nsroof.summary(path, top=3, width=80)
    assert text == nsroof.summary(report, top=3, width=80)
    assert text.startswith("15 kernels (15 launches, 1.54 ms)") and max(map(len, text.splitlines())) <= 80
    fig = nsroof.plot(path, tmp_path / "c.svg", kernel="softmax")
    assert (tmp_path / "c.svg").exists() and fig.axes
    page = nsroof.html(report, tmp_path / "r.html", kernel="gemm")
    assert page.read_text().count('class="kernel"') == 6


def test_errors_from_the_api_are_one_line(example_csv: Path, tmp_path: Path) -> None:
    with pytest.raises(nsroof.NsroofError) as err:
        nsroof.load(example_csv)  # an export, not a report
    assert "\n" not in str(err.value) and "not a readable Parquet report" in str(err.value)
    with pytest.raises(nsroof.NsroofError, match="no kernel matches --kernel conv"):
        nsroof.analyze(example_csv, kernel="conv")
    with pytest.raises(nsroof.NsroofError, match="expected a Report or the path of a report"):
        nsroof.summary(42)  # type: ignore[arg-type]


def test_profile_report_is_a_report_with_a_short_repr(cpu_machine_json: Path, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    machine = cpu_machine_json
    with nsroof.profile(machine=str(machine), trace=tmp_path / "t.json.gz") as prof:
        torch.ones(64, 64) @ torch.ones(64, 64)
    assert isinstance(prof.report, nsroof.Report) and len(prof.report.frame) > 0
    assert len(repr(prof.result)) < 300 and len(repr(prof.report)) < 300


def test_profile_keeps_the_output_clean_and_says_where_its_trace_is(
        cpu_machine_json: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """Issue 41, "Python API": kineto's `USDT: … profiler_start/stop` lines (C++, file descriptor 2) no longer
    reach the user's terminal, and the trace saved in a temporary folder is on the report."""
    torch = pytest.importorskip("torch")
    with nsroof.profile(machine=str(cpu_machine_json)) as prof:
        torch.ones(64, 64) @ torch.ones(64, 64)
        print("the user's own line", file=sys.stderr, flush=True)
    out, err = capfd.readouterr()
    assert "USDT" not in out + err and "the user's own line" in err
    trace = prof.report.trace
    assert trace is not None and trace.is_file() and trace.name == "trace.json.gz"
    assert f"trace {trace}" in repr(prof.report) and repr(prof.report).startswith("Report(3 ops,")  # CPU: ops
