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
    assert argv[:4] == ["--nvtx", "--nvtx-include", "nsroof@nsroof.run/", "--metrics"]
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
    assert argv[argv.index("--nvtx-include") + 1] == "nsroof@train_step/"
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
