"""`nsroof ncu` against a stand-in `ncu` placed on PATH: it records its arguments and environment, runs the
application it was given (the nsroof bootstrap and a tiny script), and replays a small raw-page export
(tests/data/collectors/ncu_raw_nvtx.csv, written for these tests: two kernels under emit_nvtx-style and
nsroof-domain NVTX stacks)."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from nsroof.cli import cli
from nsroof.collectors.ncu_run import join_nvtx, parse_op_range
from nsroof.models.metric_formulas import required_metrics

DATA = Path(__file__).resolve().parents[1] / "data" / "collectors"

STANDIN = '''#!{python}
import json, os, subprocess, sys
args = sys.argv[1:]
with open(os.environ["NCU_STANDIN_LOG"], "a") as fh:
    fh.write(json.dumps({{"argv": args, "LC_ALL": os.environ.get("LC_ALL")}}) + "\\n")
if "-i" in args:
    sys.stdout.write(open(os.environ["NCU_STANDIN_EXPORT"]).read())
    sys.exit(0)
report = args[args.index("-o") + 1]
log = args[args.index("--log-file") + 1]
app = args[args.index("--log-file") + 2:]
rc = 0 if os.environ.get("NCU_STANDIN_SKIP_APP") else subprocess.call(app)
with open(log, "w") as fh:
    fh.write("==PROF== Connected to process 4242\\n==PROF== Disconnected from process 4242\\n")
if rc == 0:
    with open(report, "wb") as fh:
        fh.write(b"NVR\\0stand-in report")
sys.exit(rc)
'''

SCRIPT = '''import torch
torch.set_num_threads(1)

class TinyNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(128, 256)
        self.act = torch.nn.ReLU()

    def forward(self, x):
        return self.act(self.fc1(x))

TinyNet()(torch.randn(64, 128)).sum().backward()
'''


@pytest.fixture
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "ncu"
    exe.write_text(STANDIN.format(python=sys.executable))
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "ncu-calls.jsonl"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("NCU_STANDIN_LOG", str(log))
    monkeypatch.setenv("NCU_STANDIN_EXPORT", str(DATA / "ncu_raw_nvtx.csv"))
    monkeypatch.delenv("NSROOF_NCU", raising=False)
    monkeypatch.chdir(tmp_path)
    return log


def _calls(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_profiles_exports_and_joins_kernels_to_ops_and_modules(standin: Path, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    (tmp_path / "train.py").write_text(SCRIPT)
    # the interpreter of this test run: the PATH's `python` may not have torch
    result = CliRunner().invoke(cli, ["ncu", "--set", "minimal", "--machine", "h100", "-o", "run", "--",
                                      sys.executable, "train.py"])
    assert result.exit_code == 0, result.output
    profile_call, export_call = _calls(standin)

    argv = profile_call["argv"]
    assert profile_call["LC_ALL"] == "C"
    # a start/end range (no trailing '/'): process-wide, so backward and optimizer kernels are inside it
    assert argv[:4] == ["--nvtx", "--nvtx-include", "nsroof@nsroof.run", "--metrics"]
    assert argv[4].split(",") == required_metrics(None, "minimal")  # no CUDA here: the generic list
    assert argv[5:12] == ["--print-units", "base", "-o", str(Path("run.ncu-rep")), "-f", "--log-file", "run.log"]
    assert argv[12:15] == [sys.executable, "-m", "nsroof.collectors.ncu_run"]
    assert argv[-2:] == ["--", "train.py"]
    assert export_call["argv"] == ["-i", "run.ncu-rep", "--csv", "--page", "raw", "--print-units", "base"]
    assert export_call["LC_ALL"] == "C"

    # The bootstrap ran the script and named its module ranges.
    modules = json.loads((tmp_path / "run.modules.json").read_text())["module_ranges"]
    assert {"TinyNet", "TinyNet.fc1", "TinyNet.act"} <= set(modules)

    from nsroof.report.parquet import load

    report = load(tmp_path / "run.parquet")
    dram = report[report["level"].astype(str) == "dram"].set_index("kernel_id")
    sgemm, relu = dram.loc[0], dram.loc[1]
    assert (sgemm["op"], sgemm["module"]) == ("aten::addmm", "TinyNet.fc1")
    assert sgemm["input_shapes"] == "[[256], [64, 128], [128, 256], [], []]"
    assert (relu["op"], relu["module"]) == ("aten::relu", "TinyNet.act")
    # 2,097,152 FFMA thread instructions × 2 = 4,194,304 FLOP = 2·64·128·256;
    # DRAM bytes 229,376 = 4·(64·128 + 128·256 + 64·256): intensity 18.29 FLOP/B
    assert sgemm["flops"] == 4_194_304 and sgemm["bytes"] == 229_376
    assert sgemm["intensity"] == pytest.approx(4_194_304 / 229_376)
    assert sgemm["bound"] != "unknown"
    assert (tmp_path / "run.csv").read_bytes() == (DATA / "ncu_raw_nvtx.csv").read_bytes()
    assert "ampere_sgemm_128x64_nn" in result.output


def test_a_named_range_is_the_nvtx_filter_and_the_script_opens_it(standin: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NCU_STANDIN_SKIP_APP", "1")
    (tmp_path / "train.py").write_text("pass\n")
    result = CliRunner().invoke(cli, ["ncu", "--range", "train_step", "--machine", "h100", "-o", "out/step",
                                      "--", "train.py", "--lr", "0.1"])
    assert result.exit_code == 0, result.output
    argv = _calls(standin)[0]["argv"]
    assert argv[argv.index("--nvtx-include") + 1] == "nsroof@train_step"
    assert argv[argv.index("--metrics") + 1].split(",") == required_metrics(None, "roofline")
    app = argv[argv.index("--log-file") + 2:]
    assert app[0] == sys.executable  # no interpreter given: this one
    assert "--user-range" in app and app[-4:] == ["--", "train.py", "--lr", "0.1"]
    assert (tmp_path / "out" / "step.parquet").exists()


def test_missing_ncu_is_one_line_saying_how_to_get_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("NSROOF_NCU", raising=False)
    result = CliRunner().invoke(cli, ["ncu", "--", "python", "train.py"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("nsroof: error: ncu (Nsight Compute) not found on PATH")
    assert "CUDA toolkit" in lines[0]


def test_range_names_that_break_the_filter_are_refused(standin: Path) -> None:
    result = CliRunner().invoke(cli, ["ncu", "--range", "a/b", "--", "python", "x.py"])
    assert result.exit_code == 2
    assert "cannot be used in an ncu NVTX filter" in result.output


def test_emit_nvtx_range_names_parse_into_op_and_shapes() -> None:
    assert parse_op_range("aten::addmm, seq = 5, op_id = 72, sizes = [[256], [64, 128], [128, 256], [], []], "
                          "input_op_ids = [(0,-1), (0,-1), (69,0), (0,-1), (0,-1)]") == (
        "aten::addmm", "[[256], [64, 128], [128, 256], [], []]")
    assert parse_op_range("autograd::engine::evaluate_function: SumBackward0, op_id = 22") == (
        "autograd::engine::evaluate_function: SumBackward0", "")
    assert parse_op_range("TinyNet.fc1") is None


def test_join_keeps_rows_without_nvtx_as_they_were() -> None:
    import pandas as pd

    frame = pd.DataFrame({"nvtx_path": ["", "TinyNet/TinyNet.fc1 (backward)/aten::mm, seq = 3, op_id = 9"],
                          "op": ["", ""], "input_shapes": ["", ""], "module": ["", ""]})
    out = join_nvtx(frame, {"TinyNet", "TinyNet.fc1"})
    assert list(out["op"]) == ["", "aten::mm"]
    assert list(out["module"]) == ["", "TinyNet.fc1"]


# --------------------------------------------------------------------------- the whole step, dry run, real ncu


def _ncu_help_start_end_syntax() -> str:
    """ncu's own help (2024.1) for a start/end range filter: `--nvtx-include "Domain A@Range A"` profiles
    kernels inside start/end range 'Range A' of 'Domain A'; push/pop configs end in '/' or ']'. Quoted from
    ../shared/docs/ncu-formats.md §1.7 and `ncu --help`."""
    return "Domain A@Range A"


def test_the_nvtx_filter_is_a_start_end_range_in_ncus_documented_syntax() -> None:
    from nsroof.collectors.ncu_run import nvtx_filter

    domain, _, name = _ncu_help_start_end_syntax().partition("@")
    built = nvtx_filter("nsroof.run")
    assert built == "nsroof@nsroof.run"
    # start/end syntax: "<domain>@<range>" with no push/pop level marks ('/', '[', ']', '+', '*')
    assert built.count("@") == 1 and not set(built) & set("/[]+*")
    assert domain and name  # the documented form has both parts


def test_the_bootstraps_range_is_process_wide_so_backward_threads_are_inside(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bootstrap opens a start/end range (Domain.start_range) around the script: kernels of autograd's
    threads are inside it. A fake domain records the calls, as an NVTX tool would see them."""
    from nsroof.collectors import nvtx_ranges

    calls: list[tuple[str, object]] = []

    class Domain:
        def start_range(self, attributes: object) -> int:
            calls.append(("start", attributes))
            return 7

        def end_range(self, range_id: int) -> None:
            calls.append(("end", range_id))

        def push_range(self, attributes: object) -> None:
            calls.append(("push", attributes))

        def pop_range(self) -> None:
            calls.append(("pop", None))

        def get_event_attributes(self, message: str, *args: object) -> str:
            return message

    monkeypatch.setattr(nvtx_ranges, "_nvtx", lambda: Domain())
    monkeypatch.setattr(nvtx_ranges, "_attributes", lambda name: name)
    with nvtx_ranges.process_range("nsroof.run"):
        pass
    assert calls == [("start", "nsroof.run"), ("end", 7)]
    # --range NAME: the script's own annotate(NAME) opens the start/end range too
    calls.clear()
    monkeypatch.setattr(nvtx_ranges, "PROCESS_WIDE", {"train_step"})
    with nvtx_ranges.annotate("train_step"):
        with nvtx_ranges.annotate("inner"):
            pass
    assert calls == [("push", "train_step"), ("start", "train_step"), ("push", "inner"), ("pop", None),
                     ("pop", None), ("end", 7)]


def test_dry_run_prints_the_commands_and_runs_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no ncu here: written as `ncu`, resolved where it will run
    monkeypatch.delenv("NSROOF_NCU", raising=False)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["ncu", "--dry-run", "--set", "minimal", "-o", "run", "--", "python", "train.py",
                                      "--lr", "0.1"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if not line.startswith("#")]
    assert len(lines) == 3
    profile_line, export_line, analyze_line = lines
    assert profile_line.startswith("LC_ALL=C PYTHONPATH=") and " ncu --nvtx --nvtx-include nsroof@nsroof.run " in profile_line
    assert f"--metrics {','.join(required_metrics(None, 'minimal'))} " in profile_line
    assert profile_line.endswith("-- train.py --lr 0.1")
    assert export_line.endswith("ncu -i run.ncu-rep --csv --page raw --print-units base > run.csv")
    assert analyze_line == "python -m nsroof.collectors.ncu_run --analyze run"
    assert list(tmp_path.iterdir()) == []  # nothing ran, nothing written


def test_the_dry_runs_last_step_analyzes_an_export(tmp_path: Path) -> None:
    from nsroof.collectors.ncu_run import main

    (tmp_path / "run.csv").write_bytes((DATA / "ncu_raw_nvtx.csv").read_bytes())
    (tmp_path / "run.modules.json").write_text(json.dumps({"module_ranges": ["TinyNet", "TinyNet.fc1", "TinyNet.act"]}))
    assert main(["--analyze", str(tmp_path / "run")]) == 0
    from nsroof.report.parquet import load

    report = load(tmp_path / "run.parquet")
    assert set(report["module"].astype(str)) >= {"TinyNet.fc1", "TinyNet.act"}


def _real_ncu() -> str | None:
    import shutil

    explicit = os.environ.get("NSROOF_NCU")
    if explicit and Path(explicit).is_file():
        return explicit
    cached = sorted(Path.home().glob(".cache/nsroof-ncu/usr/lib/x86_64-linux-gnu/nsight-compute/target/*/ncu"))
    return str(cached[0]) if cached else shutil.which("ncu")


def test_a_real_ncu_accepts_the_built_command(tmp_path: Path) -> None:
    """Nsight Compute 2024.1 (../shared/tools/get-ncu.sh) parses every option, then stops at the CUDA
    driver on a machine without a GPU: that must be its only complaint."""
    import subprocess

    from nsroof.collectors.ncu_run import _env, ncu_command, outputs_for

    ncu = _real_ncu()
    if ncu is None:
        pytest.skip("no ncu (run ../shared/tools/get-ncu.sh)")
    (tmp_path / "train.py").write_text("pass\n")
    for metric_set, cc in (("roofline", "9.0"), ("roofline", "8.0"), ("minimal", None)):
        cmd = ncu_command(ncu, [sys.executable, str(tmp_path / "train.py")], outputs_for(tmp_path / "run"),
                          metrics=required_metrics(cc, metric_set))
        proc = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=120, cwd=tmp_path)
        log = (tmp_path / "run.log").read_text() if (tmp_path / "run.log").exists() else ""
        text = proc.stdout + proc.stderr + log
        errors = [line for line in text.splitlines() if line.startswith("==ERROR==")]
        assert errors and "failed to connect to the CUDA driver" in errors[0], text
        assert not any("option" in e.lower() or "metric" in e.lower() or "nvtx" in e.lower() for e in errors), errors
