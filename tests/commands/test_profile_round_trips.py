"""What `nsroof profile` writes reads back the same: the step numbers the summary states are the report's
`step` column, and a step the report does not hold is refused naming the ones it does."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from nsroof.cli import cli

pytest.importorskip("torch")

TRAIN = """
import torch
model = torch.nn.Linear(16, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(4, 16)
for _ in range(5):
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()
"""


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory, cpu_machine_json: Path) -> tuple[Path, str]:
    """A 5-step script profiled with the default window (1 warm-up step, 3 recorded): (report, stdout)."""
    folder = tmp_path_factory.mktemp("profiled")
    script = folder / "train.py"
    script.write_text(TRAIN)
    result = CliRunner().invoke(cli, ["profile", "--machine", str(cpu_machine_json),
                                      "-o", str(folder / "r.parquet"), "--", "python", str(script)])
    assert result.exit_code == 0, result.output
    return folder / "r.parquet", result.stdout


def test_the_recorded_steps_are_numbered_as_the_step_column(profiled: tuple[Path, str]) -> None:
    from nsroof.report.parquet import load

    report, stdout = profiled
    assert "recorded steps 2..4:" in stdout  # step 1 is the warm-up: the first step is 1, as in the column
    assert sorted(set(load(report)["step"].dropna().astype(int))) == [2, 3, 4]


def test_a_step_the_report_does_not_hold_is_refused_naming_those_it_holds(
        profiled: tuple[Path, str], cpu_machine_json: Path, tmp_path: Path) -> None:
    trace = profiled[0].with_name("r.trace.json.gz")
    out = tmp_path / "again.parquet"
    result = CliRunner().invoke(cli, ["analyze", str(trace), "--machine", str(cpu_machine_json),
                                      "-o", str(out), "--step", "1"])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"nsroof: error: no step 1: {trace} holds steps 2, 3, 4"
    assert not out.exists()


def test_the_profile_report_shows_as_an_analysis_of_its_trace(profiled: tuple[Path, str],
                                                              cpu_machine_json: Path, tmp_path: Path) -> None:
    report, _ = profiled
    trace = report.with_name("r.trace.json.gz")
    for view in (["--json"], ["--csv", "--by", "name"], ["--step", "3", "--json"]):
        fresh = CliRunner().invoke(cli, ["analyze", str(trace), "--machine", str(cpu_machine_json),
                                         "-o", str(tmp_path / "fresh.parquet"), *view])
        shown = CliRunner().invoke(cli, ["analyze", str(report), *view])
        assert fresh.exit_code == shown.exit_code == 0, shown.output
        assert shown.stdout == fresh.stdout
    summary = CliRunner().invoke(cli, ["analyze", str(report)]).stdout
    assert "costed ops by time" in summary  # the op-level rows beside the report (r.ops.parquet) with it
    result = CliRunner().invoke(cli, ["analyze", str(report), "--step", "1"])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"nsroof: error: no step 1: {report} holds steps 2, 3, 4"
