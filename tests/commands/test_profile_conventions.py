"""`nsroof profile` keeps the shell's conventions: Ctrl-C exits 130 with the trace recorded so far saved
and named; the user's script's own exit status comes back (not nsroof's usage-error 2); kineto's
`USDT: … profiler_start` lines never reach the terminal; the first step is a warm-up by default."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from nsroof.cli import cli
from tests._paths import REPO

MACHINE = REPO / "tests" / "data" / "collectors" / "test-cpu.json"

SCRIPT = """
import sys, time, pathlib
import torch, nsroof
x = torch.randn(32, 32)
for _ in range(2):
    x @ x
    nsroof.step()
mode = sys.argv[1]
if mode == "exit":
    sys.exit(3)
if mode == "raise":
    raise ValueError("boom")
if mode == "wait":
    pathlib.Path(sys.argv[2]).write_text("ready")
    while True:
        x @ x
        time.sleep(0.01)
"""


@pytest.fixture()
def script(tmp_path: Path) -> Path:
    path = tmp_path / "job.py"
    path.write_text(SCRIPT)
    return path


def _profile(tmp_path: Path, script: Path, *args: str) -> tuple[int, str]:
    r = CliRunner().invoke(cli, ["profile", "--machine", str(MACHINE), "-o", str(tmp_path / "r.parquet"),
                                 "--", "python", str(script), *args])
    return r.exit_code, r.stderr


def test_the_scripts_own_exit_status_is_passed_through(tmp_path: Path, script: Path) -> None:
    code, err = _profile(tmp_path, script, "exit")
    assert code == 3 and "exited with status 3" in err
    code, err = _profile(tmp_path, script, "raise")
    assert code == 1 and "raised ValueError: boom" in err  # python's own status for an uncaught exception
    assert not (tmp_path / "r.parquet").exists()


def test_warmup_is_one_step_by_default(tmp_path: Path, script: Path) -> None:
    code, err = _profile(tmp_path, script, "done")
    assert code == 0, err
    from nsroof.report.parquet import load, read_metadata

    assert read_metadata(tmp_path / "r.parquet")["warmup"] == 1
    # two steps marked, the first skipped: only the second step's matmul is in the report
    assert (load(tmp_path / "r.parquet")["op"].astype(str) == "aten::matmul").sum() == 1


def test_kineto_lines_are_filtered_from_file_descriptor_2(capfd: pytest.CaptureFixture[str]) -> None:
    from nsroof.collectors.script import filtered_stderr

    with filtered_stderr():
        os.write(2, b"USDT:2026-12-01 22:03:02 11683:11683 SyncActivityProfilerHandler.cpp:52] "
                    b"profiler_start\n")
        os.write(2, b"a line of the user's own\n")
        os.write(2, b"USDT:2026-12-01 22:03:02 11683:11683 SyncActivityProfilerHandler.cpp:59] "
                    b"profiler_stop\n")
    assert capfd.readouterr().err == "a line of the user's own\n"


def test_ctrl_c_exits_130_and_keeps_the_trace(
    cpu_machine_json: Path, repo: Path, tmp_path: Path, script: Path,
) -> None:
    ready = tmp_path / "ready"
    env = {**os.environ, "PYTHONPATH": str(repo)}
    # SIGINT as a shell delivers it (a parent started in the background may have it ignored)
    proc = subprocess.Popen([sys.executable, "-m", "nsroof", "profile", "--machine", str(cpu_machine_json),
                             "-o", str(tmp_path / "r.parquet"), "--", "python", str(script), "wait",
                             str(ready)],
                            env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    trace = tmp_path / "r.trace.json.gz"
    assert proc.returncode == 130, err.decode()
    assert trace.exists() and not (tmp_path / "r.parquet").exists()
    assert f"saved as {trace}" in err.decode() and "USDT" not in err.decode()
    # the command names the machine, so it makes the report this run would have made
    assert (f"(`nsroof analyze {trace} --machine {cpu_machine_json} -o {tmp_path / 'r.parquet'}` makes its "
            "report)") in err.decode()


OWN_PROFILER = """
import sys, torch
from torch import nn
model = nn.Linear(16, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(4, 16)
ready = []
schedule = torch.profiler.schedule(wait=0, warmup=1, active=2)
with torch.profiler.profile(schedule=schedule, on_trace_ready=lambda p: ready.append(1)) as prof:
    for _ in range(5):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
        prof.step()
print(f"own profiler: {len(prof.events())} events, on_trace_ready called {len(ready)} times")
"""


@pytest.mark.parametrize("window", [[], ["--all-steps"]])
def test_a_script_running_its_own_torch_profiler_profiles_with_one_warning(
    cpu_machine_json: Path, repo: Path, tmp_path: Path, window: list[str],
) -> None:
    # before: the script's profiler took over nsroof's session and its stop ended it; --all-steps then died in
    # kineto (SIGSEGV, exit -11: no message, no report, no trace) and the default window lost the shapes
    script = tmp_path / "own_profiler.py"
    script.write_text(OWN_PROFILER)
    out = tmp_path / "r.parquet"
    proc = subprocess.run([sys.executable, "-m", "nsroof", "profile", *window, "--machine",
                           str(cpu_machine_json), "-o", str(out), "--", "python", str(script)],
                          env={**os.environ, "PYTHONPATH": str(repo)}, cwd=tmp_path, capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"nsroof: warning: the script's own torch profiler (started at {script}:" in proc.stderr
    assert proc.stderr.count("was made a no-op") == 1
    assert "own profiler: 0 events, on_trace_ready called 0 times" in proc.stdout
    from nsroof.report.parquet import load, read_metadata

    report = load(out)
    linear = report[report["op"].astype(str) == "aten::linear"]
    assert len(linear) == (5 if window else 3) and linear["flops"].notna().all()  # shapes recorded
    assert any("was made a no-op" in w for w in read_metadata(out)["warnings"])
    assert (tmp_path / "r.trace.json.gz").exists()
