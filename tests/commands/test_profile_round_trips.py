"""What `nsroof profile` writes reads back the same: the command it prints makes the report again from the
trace, the report shows under `nsroof analyze` as an analysis of its trace does, the step numbers the summary
states are the report's `step` column, and a step the report does not hold is refused naming those it does."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
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


def _cached_cpu_profile(cache: Path, repo: Path, env: dict[str, str]) -> Path:
    """A measured-looking CPU profile where `nsroof profile --threads 1` looks for this CPU's (the round
    test figures of test-cpu.json, so nothing is measured)."""
    key = subprocess.run([sys.executable, "-c", "import torch; torch.set_num_threads(1); "
                          "from nsroof.collectors.measure.cache import cache_key; print(cache_key())"],
                         env=env, cwd=repo, capture_output=True, text=True, check=True).stdout.strip()
    profile = json.loads((repo / "tests" / "data" / "collectors" / "test-cpu.json").read_text())
    cache.mkdir()
    path = cache / f"cpu-{key}.json"
    path.write_text(json.dumps({**profile, "name": "this CPU", "source": "measured"}))
    return path


def test_the_printed_rebuild_command_makes_the_same_report(repo: Path, tmp_path: Path) -> None:
    # before: it printed `nsroof analyze TRACE` alone, and on a CPU run (no --machine: this CPU's cached
    # profile) that gave every row `unknown`: analyze never looks up the cached CPU profile itself
    env = {**os.environ, "PYTHONPATH": str(repo), "NSROOF_CACHE_DIR": str(tmp_path / "cache")}
    cached = _cached_cpu_profile(tmp_path / "cache", repo, env)
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    proc = subprocess.run([sys.executable, "-m", "nsroof", "profile", "--threads", "1", "-o", "r.parquet",
                           "--", "python", str(script)], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    printed = re.search(r"^trace: r\.trace\.json\.gz \(`(.+)` makes this report again\)$", proc.stdout, re.M)
    assert printed is not None, proc.stdout
    words = shlex.split(printed.group(1))
    assert words == ["nsroof", "analyze", "r.trace.json.gz", "--machine", str(cached)]
    again = subprocess.run([sys.executable, "-m", "nsroof", *words[1:], "-q"], env=env, cwd=tmp_path,
                           capture_output=True, text=True, timeout=240)
    assert again.returncode == 0, again.stderr
    from nsroof.report.parquet import load, read_metadata

    report, rebuilt = load(tmp_path / "r.parquet"), load(tmp_path / "r.trace.nsroof.parquet")
    assert set(report["bound"].astype(str)) - {"unknown"}  # classified against this CPU's profile
    pd.testing.assert_frame_equal(rebuilt, report)
    assert read_metadata(tmp_path / "r.parquet")["rebuild"] == printed.group(1)


def test_the_rebuild_command_carries_the_options_that_change_the_costs(cpu_machine_json: Path,
                                                                       tmp_path: Path) -> None:
    script, formulas = tmp_path / "one.py", tmp_path / "mine.py"
    script.write_text("import torch\ntorch.ones(4).sum()\n")
    formulas.write_text("")
    result = CliRunner().invoke(cli, ["profile", "--all-steps", "--machine", str(cpu_machine_json),
                                      "--formulas", str(formulas), "-o", str(tmp_path / "r.parquet"), "--",
                                      "python", str(script)])
    assert result.exit_code == 0, result.output
    assert (f"(`nsroof analyze {tmp_path / 'r.trace.json.gz'} --machine {cpu_machine_json} --formulas "
            f"{formulas}` makes this report again)") in result.stdout
