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
from nsroof.counters.metric_formulas import required_metrics
from tests import _paths

DATA = _paths.DATA / "collectors"

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
    fh.write("==PROF== Connected to process 4242\\n")
    fh.write('==PROF== Profiling "ampere_sgemm_128x64_nn" - 0: 0%....50%....100% - 9 passes\\n')
    fh.write('==PROF== Profiling "relu_kernel" - 1: 0%....50%....100% - 7 passes\\n')
    fh.write("==PROF== Disconnected from process 4242\\n")
# as ncu: a report only when a kernel ran inside the range (NCU_STANDIN_NEEDS_RANGE: the step window's
# range must have opened, as the bootstrap's state file says)
state = dict()
if "--modules-file" in app and os.path.exists(app[app.index("--modules-file") + 1]):
    state = json.load(open(app[app.index("--modules-file") + 1]))
in_range = "--after-steps" not in app or state.get("range_opened")
if rc == 0 and (in_range or not os.environ.get("NCU_STANDIN_NEEDS_RANGE")):
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
    result = CliRunner().invoke(cli, ["ncu", "--set", "minimal", "--machine", "h100-sxm", "-o", "run", "--",
                                      sys.executable, "train.py"])
    assert result.exit_code == 0, result.output
    profile_call, export_call = _calls(standin)

    argv = profile_call["argv"]
    assert profile_call["LC_ALL"] == "C"
    # the default: one step after one warm-up step, in a start/end range (no trailing '/': process-wide, so
    # backward and optimizer kernels are inside it), NCCL's kernels left out by ncu's kernel filter
    assert argv[:6] == ["--nvtx", "--nvtx-include", "nsroof@nsroof.step", "-k", "regex:^(?!nccl)",
                        "--metrics"]
    assert argv[6].split(",") == required_metrics(None, "minimal")  # no CUDA here: the generic list
    assert argv[7:14] == ["--print-units", "base", "-o", str(Path("run.ncu-rep")), "-f", "--log-file",
                          "run.log"]
    assert argv[14:17] == [sys.executable, "-m", "nsroof.collectors.ncu_run"]
    assert argv[17:] == ["--range", "nsroof.step", "--modules-file", "run.modules.json", "--after-steps", "1",
                         "--", "train.py"]
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
    from nsroof.report.parquet import read_metadata

    meta = read_metadata(tmp_path / "run.parquet")
    # no --clock-control: ncu's default, base clocks, recorded as such; the log's two kernels, 9 and 7 passes
    assert meta["ncu_clock_control"] == "base"
    sel = meta["ncu_selection"]
    assert (sel["mode"], sel["nvtx_filter"], sel["kernel_name"]) == ("step", "nsroof@nsroof.step",
                                                                     "regex:^(?!nccl)")
    assert (sel["profiled_kernels"], sel["passes_median"], sel["passes_max"]) == (2, 8, 9)
    assert meta["nvtx_backend"] == "nvtx"


def test_a_script_that_marks_no_step_is_profiled_again_its_first_kernels(
        standin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No optimizer step, no nsroof.step(): the step range never opens, ncu writes no report, and the run
    is repeated over the whole script bounded to its first FIRST_KERNELS kernels."""
    from nsroof.collectors.ncu_select import FIRST_KERNELS

    monkeypatch.setenv("NCU_STANDIN_NEEDS_RANGE", "1")
    (tmp_path / "train.py").write_text("x = 1\n")
    result = CliRunner().invoke(cli, ["ncu", "--machine", "h100-sxm", "-o", "run", "--", sys.executable,
                                      "train.py"])
    assert result.exit_code == 0, result.output
    first, second, _export = _calls(standin)
    assert "nsroof@nsroof.step" in first["argv"] and "-c" not in first["argv"]
    argv = second["argv"]
    assert argv[argv.index("--nvtx-include") + 1] == "nsroof@nsroof.run"
    assert argv[argv.index("-c") + 1] == str(FIRST_KERNELS) and "--after-steps" not in argv
    assert f"profiling its first {FIRST_KERNELS} kernels instead" in result.stderr


def test_a_step_window_that_never_opens_says_how_many_steps_ran(standin: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    monkeypatch.setenv("NCU_STANDIN_NEEDS_RANGE", "1")
    (tmp_path / "train.py").write_text(
        "import torch\np = torch.nn.Parameter(torch.ones(2))\nopt = torch.optim.SGD([p], lr=0.1)\n"
        "p.sum().backward(); opt.step()\n")  # one optimizer step: a window after 3 warm-up steps never opens
    result = CliRunner().invoke(cli, ["ncu", "--warmup-steps", "3", "-o", "run", "--", sys.executable,
                                      "train.py"])
    assert result.exit_code == 2
    assert "no kernel ran inside the NVTX range nsroof@nsroof.step" in result.output
    assert "opens at the end of step 3 and the script marked 1 step(s): lower --warmup-steps" in result.output
    assert len(_calls(standin)) == 1  # steps were marked: no second run


def test_a_named_range_is_the_nvtx_filter_and_the_script_opens_it(standin: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NCU_STANDIN_SKIP_APP", "1")
    (tmp_path / "train.py").write_text("pass\n")
    result = CliRunner().invoke(cli, ["ncu", "--range", "train_step", "--machine", "h100-sxm", "-o",
                                      "out/step", "--", "train.py", "--lr", "0.1"])
    assert result.exit_code == 0, result.output
    argv = _calls(standin)[0]["argv"]
    assert argv[argv.index("--nvtx-include") + 1] == "nsroof@train_step"
    assert argv[argv.index("--metrics") + 1].split(",") == required_metrics(None, "roofline")
    app = argv[argv.index("--log-file") + 2:]
    assert app[0] == sys.executable  # no interpreter given: this one
    assert "--user-range" in app and app[-4:] == ["--", "train.py", "--lr", "0.1"]
    assert (tmp_path / "out" / "step.parquet").exists()


def test_ncus_selection_options_go_to_ncu_never_to_the_script(standin: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NCU_STANDIN_SKIP_APP", "1")
    (tmp_path / "train.py").write_text("pass\n")
    result = CliRunner().invoke(cli, [
        "ncu", "--whole", "-k", "regex:gemm", "-c", "50", "-s", "5", "--replay-mode", "application",
        "--target-processes", "application-only", "--clock-control", "none", "--set", "full",
        "--ncu-args", "--cache-control none --import-source yes", "--machine", "h100-sxm", "-o", "run",
        "--", sys.executable, "train.py", "-k", "mine", "-c", "3"])
    assert result.exit_code == 0, result.output
    argv = _calls(standin)[0]["argv"]
    ncu_part, app = argv[:argv.index("--log-file")], argv[argv.index("--log-file") + 2:]
    assert ncu_part[:3] == ["--nvtx", "--nvtx-include", "nsroof@nsroof.run"]
    assert ncu_part[3:22] == ["-k", "regex:gemm", "-c", "50", "-s", "5", "--replay-mode", "application",
                              "--target-processes", "application-only", "--clock-control", "none", "--set",
                              "full", "--cache-control", "none", "--import-source", "yes", "--metrics"]
    assert app[-5:] == ["train.py", "-k", "mine", "-c", "3"]  # the script's own arguments, untouched
    from nsroof.report.parquet import read_metadata

    meta = read_metadata(tmp_path / "run.parquet")
    assert meta["ncu_clock_control"] == "none"
    assert (meta["ncu_selection"]["launch_count"], meta["ncu_selection"]["launch_skip"]) == (50, 5)


@pytest.mark.parametrize(("args", "message"), [
    (["--clock-control", "boost"], "--clock-control boost: ncu accepts base, none"),
    (["-c", "0"], "-c/--launch-count 0: needs a whole number >= 1"),
    (["--replay-mode", "fast"], "--replay-mode fast: ncu accepts kernel, application, range, app-range"),
    (["--range", "a", "--whole"], "--range and --whole choose different ranges"),
    (["--ncu-args", "'unclosed"], "--ncu-args"),
])
def test_bad_selection_options_are_one_line_errors(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["ncu", "--dry-run", *args, "--", "python", "x.py"])
    assert result.exit_code == 2 and message in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_missing_ncu_is_one_line_saying_how_to_get_it(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
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


# ------------------------------------------------------------------------- the whole step, dry run, real ncu


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


def test_the_bootstraps_range_is_process_wide_so_backward_threads_are_inside(
        monkeypatch: pytest.MonkeyPatch) -> None:
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


def test_dry_run_prints_the_commands_and_runs_nothing(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no ncu here: written as `ncu`, resolved where it will run
    monkeypatch.delenv("NSROOF_NCU", raising=False)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["ncu", "--dry-run", "--set", "minimal", "-o", "run", "--", "python",
                                      "train.py", "--lr", "0.1"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if not line.startswith("#")]
    assert len(lines) == 3
    profile_line, export_line, analyze_line = lines
    # `python` cannot be run here, so nothing says it has the nvtx package: torch.cuda.nvtx, whose ranges are
    # in the default domain (filter "nsroof.step", no "nsroof@"), and the profiled process is told so
    assert profile_line.startswith("LC_ALL=C NSROOF_NVTX_BACKEND=torch PYTHONPATH=")
    assert " ncu --nvtx --nvtx-include nsroof.step -k 'regex:^(?!nccl)' --metrics " in profile_line
    [estimate] = [line for line in result.output.splitlines() if line.startswith("# estimate: ")]
    # the 8 minimal metrics × 0.6 passes/metric -> ceil(4.8) = 5 passes × 20 ms = 0.10 s per kernel
    assert len(required_metrics(None, "minimal")) == 8
    assert "the kernels of one step (not known before it runs) × ~5 replay passes (8 metrics" in estimate
    assert "~0.10 s per kernel; bound it with -c N" in estimate
    assert f"--metrics {','.join(required_metrics(None, 'minimal'))} " in profile_line
    assert profile_line.endswith("-- train.py --lr 0.1")
    assert export_line.endswith("ncu -i run.ncu-rep --csv --page raw --print-units base > run.csv")
    assert analyze_line == "python -m nsroof.collectors.ncu_run --analyze run"
    assert list(tmp_path.iterdir()) == []  # nothing ran, nothing written


def test_the_dry_runs_last_step_analyzes_an_export(tmp_path: Path) -> None:
    from nsroof.collectors.ncu_run import main

    (tmp_path / "run.csv").write_bytes((DATA / "ncu_raw_nvtx.csv").read_bytes())
    (tmp_path / "run.modules.json").write_text(
        json.dumps({"module_ranges": ["TinyNet", "TinyNet.fc1", "TinyNet.act"]}))
    assert main(["--analyze", str(tmp_path / "run")]) == 0
    from nsroof.report.parquet import load

    report = load(tmp_path / "run.parquet")
    assert set(report["module"].astype(str)) >= {"TinyNet.fc1", "TinyNet.act"}


def _real_ncu() -> str | None:
    import shutil

    explicit = os.environ.get("NSROOF_NCU")
    if explicit and Path(explicit).is_file():
        return explicit
    cached = sorted(Path.home().glob(
        ".cache/nsroof-ncu/usr/lib/x86_64-linux-gnu/nsight-compute/target/*/ncu"))
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
        assert not any("option" in e.lower() or "metric" in e.lower() or "nvtx" in e.lower()
                       for e in errors), errors


def _dry_run_profile_line(args: list[str], command: list[str]) -> list[str]:
    import shlex

    result = CliRunner().invoke(cli, ["ncu", "--dry-run", *args, "--", *command])
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if not x.startswith("#"))
    words = shlex.split(line)
    return words[next(i for i, w in enumerate(words) if "=" not in w):]  # without the VAR=value prefix


def test_the_issue_dry_run_puts_ncus_options_in_ncus_part_and_estimates(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["ncu", "--dry-run", "-k", "regex:gemm", "-c", "50", "-s", "5",
                                      "--clock-control", "none", "--", "python", "x.py"])
    assert result.exit_code == 0, result.output
    n = len(required_metrics(None, "roofline"))
    passes = -(-n * 6 // 10)  # ceil(n × 0.6)
    # 50 kernels × passes × 20 ms
    assert f"at most 50 kernels (-c) × ~{passes} replay passes ({n} metrics" in result.output
    assert f"-> ~{50 * passes * 0.02:,.0f} s of profiling" in result.output
    words = _dry_run_profile_line(["-k", "regex:gemm", "-c", "50", "-s", "5", "--clock-control", "none"],
                                  ["python", "x.py"])
    app = words.index("-m") - 1
    ncu_part = words[:app]
    for flag, value in (("-k", "regex:gemm"), ("-c", "50"), ("-s", "5"), ("--clock-control", "none")):
        assert ncu_part[ncu_part.index(flag) + 1] == value
    assert words[-2:] == ["--", "x.py"]
    assert list(tmp_path.iterdir()) == []


def test_without_the_nvtx_package_the_filter_names_the_default_domain(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The profiled interpreter cannot import nvtx (blocked in sitecustomize, as on a machine without the
    package): the probe says so, the filter is the default domain's start/end range and the profiled
    process is told to use torch.cuda.nvtx."""
    block = tmp_path / "block"
    block.mkdir()
    (block / "sitecustomize.py").write_text(
        "import sys\nsys.modules['nvtx'] = None  # import nvtx -> ImportError\n")
    monkeypatch.setenv("PYTHONPATH", str(block))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["ncu", "--dry-run", "--", sys.executable, "x.py"])
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if not x.startswith("#"))
    assert line.startswith("LC_ALL=C NSROOF_NVTX_BACKEND=torch ") and " --nvtx-include nsroof.step " in line
    monkeypatch.delenv("PYTHONPATH")
    import importlib.util

    if importlib.util.find_spec("nvtx") is not None:  # the same interpreter with the package: its own domain
        result = CliRunner().invoke(cli, ["ncu", "--dry-run", "--", sys.executable, "x.py"])
        assert (" --nvtx-include nsroof@nsroof.step " in result.output
                and "NSROOF_NVTX_BACKEND=nvtx" in result.output)


def test_a_real_ncu_accepts_the_issues_dry_run_command(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The profile line `nsroof ncu --dry-run -k regex:gemm -c 50 -s 5 --clock-control none` prints, run by
    Nsight Compute 2024.1: every option parses (a bad one would be '==ERROR== the argument for option …'),
    and its one complaint is the missing CUDA driver."""
    import subprocess

    ncu = _real_ncu()
    if ncu is None:
        pytest.skip("no ncu (NSROOF_NCU, ~/.cache/nsroof-ncu from ../shared/tools/get-ncu.sh, or PATH)")
    monkeypatch.setenv("NSROOF_NCU", ncu)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.py").write_text("pass\n")
    for extra in ([], ["--whole", "--replay-mode", "application", "--target-processes", "application-only",
                       "--set", "full", "--ncu-args", "--cache-control none"]):
        words = _dry_run_profile_line(["-k", "regex:gemm", "-c", "50", "-s", "5", "--clock-control", "none",
                                       *extra], [sys.executable, "x.py"])
        assert words[0] == ncu
        proc = subprocess.run(words, capture_output=True, text=True, timeout=120, cwd=tmp_path,
                              env={**os.environ, "LC_ALL": "C"})
        log = (tmp_path / "nsroof-ncu.log").read_text() if (tmp_path / "nsroof-ncu.log").exists() else ""
        errors = [x for x in (proc.stdout + proc.stderr + log).splitlines() if x.startswith("==ERROR==")]
        assert errors and "failed to connect to the CUDA driver" in errors[0], errors
        assert not any("option" in e.lower() for e in errors), errors


def test_the_step_window_follows_nsroof_step_over_optimizer_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """Optimizer steps mark steps only in a script that never calls nsroof.step(): once it does, its count
    rules. Warm-up 1: the range opens at the end of step 1 and closes at the end of step 2, once."""
    pytest.importorskip("torch")
    from nsroof.collectors import nvtx_ranges
    from nsroof.collectors.ncu_run import StepWindow

    calls: list[str] = []

    class Domain:
        def start_range(self, attributes: object) -> int:
            calls.append(f"start {attributes}")
            return 1

        def end_range(self, range_id: int) -> None:
            calls.append("end")

        def mark(self, attributes: object) -> None:
            return None

        def get_event_attributes(self, message: str, *args: object) -> str:
            return message

    monkeypatch.setattr(nvtx_ranges, "_nvtx", lambda: Domain())
    monkeypatch.setattr(nvtx_ranges, "_attributes", lambda name: name)
    state: dict = {}
    window = StepWindow("nsroof.step", 1, state)
    uninstall = window.install()
    try:
        window.boundary("optimizer")  # step 1 ends (optimizer first): the window opens
        nvtx_ranges.step()            # the script's own step 1: nsroof.step() now rules, still step 1
        window.boundary("optimizer")  # ignored from now on
        assert calls == ["start nsroof.step"]
        nvtx_ranges.step()            # step 2 ends: the window closes
        nvtx_ranges.step()
    finally:
        uninstall()
    assert calls == ["start nsroof.step", "end"]
    assert (state["steps_marked"], state["step_source"], state["range_opened"]) == (3, "nsroof", True)


def test_ncu_judges_against_the_gpus_cached_measured_profile(monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from nsroof.collectors.measure.cache import gpu_cache_path
    from nsroof.collectors.ncu_run import local_machine
    from nsroof.roofs.machines import Machine

    monkeypatch.setenv("NSROOF_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H100 80GB HBM3")
    assert local_machine().name == "H100 SXM"  # nothing cached: the datasheet
    Machine(name="H100 measured", source="measured", peak_flop_per_s={"bf16": 7.1e14},
            bandwidth_bytes_per_s={"dram": 2.9e12}).save(gpu_cache_path("NVIDIA H100 80GB HBM3"))
    found = local_machine()
    assert (found.name, found.source) == ("H100 measured", "measured")
