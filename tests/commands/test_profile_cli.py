"""`nsroof profile -o r.parquet -- python script.py`: the report file holds the exact analytic costs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from nsroof.cli import cli
from tests._paths import DATA, REPO

pytest.importorskip("torch")


COLLECTORS = DATA / "collectors"

MM_FLOPS = 2 * 512 * 1024 * 256  # = 268,435,456
MM_BYTES = 4 * (512 * 1024 + 1024 * 256 + 512 * 256)  # = 3,670,016


def test_profile_a_script_end_to_end_gives_exact_costs(cpu_machine_json: Path, repo: Path,
                                                       tmp_path: Path) -> None:
    out = tmp_path / "r.parquet"
    env = {**os.environ, "PYTHONPATH": str(repo)}
    proc = subprocess.run(
        [sys.executable, "-m", "nsroof", "profile", "--machine", str(cpu_machine_json), "-o", str(out),
         "--", "python", str(COLLECTORS / "tiny_mm.py"), "3"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    assert "aten::mm" in proc.stdout and "Coverage:" in proc.stdout

    from nsroof.report.parquet import load, read_metadata

    report = load(out)
    mm = report[report["op"].astype(str) == "aten::mm"]
    assert len(mm) == 3  # one row per call (argv[1] = 3 reached the script)
    assert (mm["flops"] == MM_FLOPS).all() and (mm["bytes"] == MM_BYTES).all()
    assert set(mm["bytes_source"].astype(str)) == {"analytic:gemm"}
    assert set(mm["bound"].astype(str)) == {"compute"}  # 73.1 FLOP/B against a ridge of 10
    meta = read_metadata(out)
    assert meta["collector"] == "torch.profiler"
    assert meta["script"]["name"] == "tiny_mm.py"
    assert meta["ceilings"][0]["name"] == "test-cpu"
    # the chrome trace is kept next to the report, and the report is what `nsroof analyze` makes of it
    trace = tmp_path / "r.trace.json.gz"
    assert meta["inputs"][0]["name"] == trace.name and meta["trace"] == str(trace)
    again = tmp_path / "again.parquet"
    proc = subprocess.run([sys.executable, "-m", "nsroof", "analyze", str(trace), "--machine",
                           str(cpu_machine_json), "-o", str(again)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=240)
    assert proc.returncode == 0, proc.stderr
    replay = load(again)
    for column in ("op", "kernel_name", "input_shapes", "nvtx_path", "flops", "bytes", "duration_s", "bound"):
        assert replay[column].astype(str).tolist() == report[column].astype(str).tolist(), column
    # the op-level rows beside the report, as `nsroof analyze` writes them for the same trace
    ops, replay_ops = load(tmp_path / "r.ops.parquet"), load(tmp_path / "again.ops.parquet")
    assert (ops["op"].astype(str) == "aten::mm").sum() == 3 and (ops["kind"].astype(str) == "op").all()
    for column in ("op", "flops", "bytes", "duration_s", "bound"):
        assert replay_ops[column].astype(str).tolist() == ops[column].astype(str).tolist(), column


def test_a_missing_script_is_a_one_line_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["profile", "-o", str(tmp_path / "r.parquet"), "--", "python",
                                      "nope.py"])
    assert result.exit_code == 2
    assert "nsroof: error: nope.py: no such script" in result.output
    assert not (tmp_path / "r.parquet").exists()


def test_a_failing_script_writes_no_report_and_says_why(cpu_machine_json: Path, tmp_path: Path) -> None:
    script = tmp_path / "boom.py"
    script.write_text("raise ValueError('bad batch size')\n")
    result = CliRunner().invoke(cli, ["profile", "--machine", str(cpu_machine_json),
                                      "-o", str(tmp_path / "r.parquet"), "--", str(script)])
    assert result.exit_code == 1  # python's status for an uncaught exception, not nsroof's usage error 2
    assert "raised ValueError: bad batch size; no report written" in result.output
    assert not (tmp_path / "r.parquet").exists()


def test_script_sees_its_own_argv_and_main(cpu_machine_json: Path, tmp_path: Path) -> None:
    script = tmp_path / "argv.py"
    marker = tmp_path / "seen.txt"
    script.write_text(
        "import sys, torch\n"
        "if __name__ == '__main__':\n"
        f"    open({str(marker)!r}, 'w').write(' '.join(sys.argv))\n"
        "    torch.ones(4).sum()\n"
    )
    result = CliRunner().invoke(cli, ["profile", "--machine", str(cpu_machine_json),
                                      "-o", str(tmp_path / "r.parquet"), "--", "python", str(script),
                                      "--lr", "3"])
    assert result.exit_code == 0, result.output
    assert marker.read_text() == f"{script} --lr 3"
    assert (tmp_path / "r.parquet").exists()


def test_warmup_beyond_the_run_is_reported(cpu_machine_json: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["profile", "--machine", str(cpu_machine_json), "--warmup", "3",
                                      "--steps", "1", "-o", str(tmp_path / "r.parquet"), "--",
                                      str(COLLECTORS / "tiny_mm.py")])
    assert result.exit_code == 2
    assert "no ops recorded in steps 4..4" in result.output


# runpy warns when an earlier test in this process imported the module already; a real CLI run starts fresh.
@pytest.mark.filterwarnings("ignore:.*found in sys.modules after import of package")
def test_python_dash_m_runs_a_module_with_steps(cpu_machine_json: Path, tmp_path: Path) -> None:
    out = tmp_path / "tiny.parquet"
    result = CliRunner().invoke(cli, ["profile", "--machine", str(cpu_machine_json), "--warmup", "1",
                                      "--steps", "1", "-o", str(out), "--", "python", "-m",
                                      "nsroof.examples.train_tiny", "--steps", "3", "--threads", "1"])
    assert result.exit_code == 0, result.output
    assert "Steps: " in result.output and "optimizer steps" in result.output

    from nsroof.report.parquet import load

    report = load(out)
    # one recorded step of a 2-layer model: 2 causal attention calls forward
    assert (report["op"].astype(str) == "aten::scaled_dot_product_attention").sum() == 2


def _profile(tmp_path: Path, script: str, *extra: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path / "r.parquet"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "nsroof", "profile", "--machine", str(COLLECTORS / "test-cpu.json"), *extra,
         "-o", str(out), "--", "python", str(COLLECTORS / script)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=400,
    )
    return proc, out


@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                    reason="Inductor's C++ backend needs a C++ compiler")
def test_a_compiled_training_step_gives_the_original_module_names_and_costs(tmp_path: Path) -> None:
    proc, out = _profile(tmp_path, "compiled_step.py")
    assert proc.returncode == 0, proc.stderr[-3000:]
    from nsroof.report.parquet import load, read_metadata

    report = load(out)
    # the default schedule skips step 1 (it compiles) and keeps steps 2..4, numbered as the `step` column is
    assert "recorded steps 2..4" in proc.stdout
    assert sorted(set(report["step"].dropna().astype(int))) == [2, 3, 4]
    assert read_metadata(out)["default_schedule"] is True
    # the compiled region: the module torch.compile wrapped (never OptimizedModule), and inside it the
    # modules of the FX nodes each call came from
    modules = set(report["module"].astype(str)) - {""}
    assert modules == {"Net", "Net.block", "Net.block.fc1", "Net.block.fc2", "Net.head"}
    addmm = report[report["op"].astype(str) == "aten::addmm"]
    # Inductor calls addmm for each Linear: fc1 (8×16)·(16×32): 2·8·16·32 + 8·32 = 8,448 FLOP;
    # fc2 (8×32)·(32×16): 2·8·32·16 + 8·16 = 8,320; head (8×16)·(16×4): 2·8·16·4 + 8·4 = 1,056 — once
    # per recorded step
    assert sorted(zip(addmm["module"], addmm["flops"], strict=True)) == sorted(
        [("Net.block.fc1", 8448.0), ("Net.block.fc2", 8320.0), ("Net.head", 1056.0)] * 3)
    backward_mm = report[report["op"].astype(str) == "aten::mm"]
    # each Linear's input and weight gradients: two mm per Linear per step
    assert sorted(backward_mm["module"].astype(str).value_counts().to_dict().items()) == [
        ("Net.block.fc1", 3), ("Net.block.fc2", 6), ("Net.head", 6)]
    assert backward_mm["flops"].notna().all()
    assert report["nvtx_path"].astype(str).str.contains("Net (backward)", regex=False).any()
    # Inductor's fused C++ kernels are rows of their own (nsroof profile turns on cpp.enable_kernel_profile),
    # costed from the ATen nodes Inductor fused (nsroof.collectors.inductor_kernels)
    fused = report[report["op"].astype(str).str.contains("cpp_fused_", regex=False)]
    assert fused["flops"].notna().all() and fused["bytes"].notna().all()
    relu = fused[fused["op"] == "graph_0_cpp_fused_relu_0"]
    # relu over fc1's 8×32 output: 256 FLOP; reads that output and writes its own, 2 · 8·32·4 B = 2,048 B
    assert relu["flops"].tolist() == [256.0] * 3 and relu["bytes"].tolist() == [2048.0] * 3
    assert set(relu["module"]) == {"Net.block"}
    assert relu["flops_source"].iloc[0].startswith("analytic:inductor-fused(1 ops via the ledger: relu")
    bias_grad = fused[fused["op"] == "graph_0_cpp_fused_sum_2"]
    # fc1's bias gradient: a sum over the batch of the 8×32 gradient, 256 adds; reads 1,024 B, writes 32·4
    assert (bias_grad["flops"].tolist(), bias_grad["bytes"].tolist()) == ([256.0] * 3, [1152.0] * 3)
    assert set(bias_grad["module"]) == {"Net.block.fc1"}
    # step 1 compiled: warm-up, said in the summary; torch.compile's wrappers are overhead, not op time
    assert "step 1 compiled:" in proc.stdout and "rows left out as warm-up" in proc.stdout
    assert "not op time: torch.compile's wrappers' own time" in proc.stdout


def test_a_script_setting_tf32_through_the_new_api_profiles(tmp_path: Path) -> None:
    proc, out = _profile(tmp_path, "fp32_precision.py", "--all-steps")
    assert proc.returncode == 0, proc.stderr[-3000:]
    from nsroof.report.parquet import load, read_metadata

    facts = read_metadata(out)["trace_facts"]["tf32"]
    assert (facts["matmul"], facts["cudnn"]) == (True, True)
    assert facts["matmul_api"] == "torch.backends.cuda.matmul.fp32_precision"
    report = load(out)
    linear = report[report["op"].astype(str) == "aten::linear"]
    # Linear(32, 32) on 8 rows: 2·8·32·32 + 8·32 = 16,640 FLOP, once per step (3 steps, --all-steps)
    assert linear["flops"].tolist() == [16640.0] * 3
    assert set(linear["module"]) == {"Linear"}


def test_profile_capture_traces_reach_the_report(cpu_machine_json: Path, data_dir: Path,
                                                 tmp_path: Path) -> None:
    # --capture hands the capture traces to the report's import (nsroof.importers.trace.graphs); a CPU run has
    # no graph replay for them to map, and the report says so rather than dropping them silently
    script = tmp_path / "one.py"
    script.write_text("import torch\ntorch.ones(4).sum()\n")
    capture = data_dir / "traces" / "graph_capture.json"
    result = CliRunner().invoke(cli, ["profile", "--all-steps", "--machine", str(cpu_machine_json),
                                      "--capture", str(capture), "-o", str(tmp_path / "r.parquet"), "--",
                                      "python", str(script)])
    assert result.exit_code == 0, result.output
    assert "--capture maps nothing" in result.output
