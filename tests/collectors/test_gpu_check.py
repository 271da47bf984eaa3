"""`make gpu-check` offline: the script refuses loudly without CUDA or torch; with GPU_CHECK_FAKE=1 its whole
control flow runs here (simulated device, stand-in ncu) and leaves the files a lent GPU machine returns;
its report writer turns a run's outputs into a docs/measurements.md entry with the device and date (fed
here with a report built from a small trace and a machine profile written for the test)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def test_without_cuda_the_check_says_so_and_exits_2(repo: Path, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: `make gpu-check` is the real thing")
    proc = subprocess.run(["bash", str(repo / "scripts" / "gpu_check.sh")], capture_output=True, text=True,
                          env={**os.environ, "PYTHON": sys.executable, "OUT": str(tmp_path)}, timeout=120)
    assert proc.returncode == 2
    assert "sees no CUDA device; nothing to check" in proc.stderr


def test_the_report_writer_records_device_date_steps_and_reports(repo: Path, tmp_path: Path) -> None:
    from nsroof.pipeline import analyze
    from nsroof.roofs.machines import Machine
    from tests.importers.trace.test_kineto_replay import _training_trace

    out = tmp_path / "out"
    out.mkdir()
    trace = tmp_path / "run.trace.json"
    trace.write_text(json.dumps(_training_trace({"module_ranges": ["Net.fc"],
                                                 "tf32": {"matmul": True, "cudnn": True}})))
    h100 = Machine(name="test-h100", source="file", peak_flop_per_s={"fp32": 6.7e13, "tf32": 4.95e14},
                   simt_flop_per_s={"fp32": 6.7e13}, bandwidth_bytes_per_s={"dram": 3.35e12})
    analyze([trace], machine=h100).write(out / "profile.parquet")
    (out / "machine.json").write_text(json.dumps({
        "environment": {"device_name": "NVIDIA H200", "compute_capability": "9.0", "sm_count": 132,
                        "device_uuid": "GPU-1234", "driver_version": "560.35",
                        "measured_at": "2026-12-01T15:00:00+00:00"},
        "peak_flop_per_s": {"bf16": 7.5e14}, "bandwidth_bytes_per_s": {"dram": 4.3e12}}))
    (out / "steps.tsv").write_text("pytest\t0\t61\t110\nmeasure\t0\t140\t140\nprofile\t0\t20\t50\n"
                                   "ncu\t1\t3\t120\n")
    (out / "pytest.txt").write_text("....\n4 passed in 60.1s\n")
    (out / "speed.jsonl").write_text(
        '{"name": "DRAM copy / datasheet", "value": 0.8958, "target": ">= 0.85", "met": true, '
        '"detail": "4.30 TB/s of H200"}\n'
        'not a figure\n'
        '{"name": "ladder L2 / DRAM", "value": 1.1, "target": "> 1.3", "met": false, "detail": ""}\n')
    returned = tmp_path / "returned"
    script = str(repo / "scripts" / "gpu_check_report.py")
    env = {**os.environ, "PYTHONPATH": str(repo)}
    proc = subprocess.run([sys.executable, script, str(out), str(returned), "--elapsed", "230"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in returned.iterdir()) == ["logs.txt", "machine.json", "measurements-entry.md",
                                                          "profile.parquet", "summary.txt"]
    summary = (returned / "summary.txt").read_text()
    assert summary.startswith("gpu-check FAILED\nelapsed 230 s of a 480 s budget")  # ncu exited 1
    assert "ncu          1        3     120" in summary
    # the speed figures the GPU tests recorded: printed with their targets, never part of the verdict
    assert ("- speed: DRAM copy / datasheet = 0.896, target >= 0.85: met (4.30 TB/s of H200)\n"
            "- speed: ladder L2 / DRAM = 1.1, target > 1.3: MISSED\n") in summary
    doc = tmp_path / "measurements.md"
    doc.write_text("# Measurements\n\nintro\n\n## GPU runs\n\n### an older run\n\nold\n")
    proc = subprocess.run([sys.executable, script, "--insert", str(returned / "measurements-entry.md"),
                           str(doc)], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    text = doc.read_text()
    new, old = text.index(": `make gpu-check`"), text.index("### an older run")
    assert new < old  # newest first, under "GPU runs"
    assert "NVIDIA H200 (CC 9.0, 132 SMs, uuid GPU-1234), driver 560.35" in text
    assert ("| pytest | 0 | 61 | 110 | 4 passed in 60.1s |" in text
            and "| ncu | 1 | 3 | 120 | (no log) |" in text)
    assert "- peak bf16: 750.0 TFLOP/s" in text and "- bandwidth dram: 4.30 TB/s" in text
    assert "- speed: ladder L2 / DRAM = 1.1, target > 1.3: MISSED" in text
    # the profile report: 5 rows (3 kernels, a memcpy, a memset); the two kernels launched in the backward
    # node (the mm and the one linked by enclosure) are under 'Net.fc (backward)'
    assert ("nsroof profile (examples/train_tiny.py): 5 rows on NVIDIA H100 80GB HBM3; "
            "2 under a backward range") in text
    assert ("nsroof ncu (examples/train_tiny.py, one step, --clock-control none): "
            "no report written (ncu.parquet missing)") in text
    assert "GPU_CHECK_FAKE" not in text


def test_without_torch_the_check_fails_loudly_before_any_step(repo: Path, tmp_path: Path) -> None:
    block = tmp_path / "block"
    block.mkdir()
    (block / "sitecustomize.py").write_text(
        "import sys\nsys.modules['torch'] = None  # import torch -> ImportError\n")
    out = tmp_path / "out"
    proc = subprocess.run(["bash", str(repo / "scripts" / "gpu_check.sh")], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHON": sys.executable, "OUT": str(out),
                                            "PYTHONPATH": str(block)})
    assert proc.returncode == 2
    assert "FAILED before any step" in proc.stderr and "has no torch" in proc.stderr
    assert [p.name for p in out.iterdir()] == ["summary.txt"]


def test_gpu_check_fake_runs_the_whole_control_flow_and_returns_at_most_8_files(repo: Path,
                                                                                tmp_path: Path) -> None:
    """`GPU_CHECK_FAKE=1 OUT=DIR make gpu-check` (no venv: the Makefile target is the script), with this
    interpreter as the machine's python3: every step runs, measure before ncu, within budget, and OUT holds
    only what a lent machine returns: at most 8 files, names of letters, digits, '.', '_' and '-'."""
    pytest.importorskip("torch")
    out = tmp_path / "out"
    env = {**os.environ, "GPU_CHECK_FAKE": "1", "OUT": str(out), "PYTHON": sys.executable}
    env.pop("NSROOF_NCU", None)
    make = shutil.which("make")
    cmd = ([make, "-s", "-C", str(repo), "gpu-check"] if make
           else ["bash", str(repo / "scripts" / "gpu_check.sh")])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    files = sorted(p.name for p in out.iterdir())
    assert files == ["logs.txt", "machine.json", "measurements-entry.md", "ncu.parquet", "points.csv",
                     "profile.parquet", "summary.txt"]
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+", f) and (out / f).is_file() for f in files)
    started = [line.split("] ")[1].split(":")[0] for line in proc.stderr.splitlines()
               if "gpu-check: [" in line]
    assert started == ["pytest", "measure", "profile", "ncu", "report"]  # measure before ncu
    assert re.search(r"\[2/5\] measure: budget 140 s \(\d+ s of 480 used\)", proc.stderr)
    summary = (out / "summary.txt").read_text()
    assert summary.startswith("gpu-check PASSED (GPU_CHECK_FAKE: simulated device)")
    entry = (out / "measurements-entry.md").read_text()
    assert "(GPU_CHECK_FAKE: a simulated device and a stand-in ncu; not a measurement)" in entry
    assert "- speed: none recorded (the GPU tests skipped, or did not run)" in entry  # no CUDA: they skip
    # a GH100: the FP64 tensor roof
    assert "- device: NVIDIA H100 80GB HBM3 (CC 9.0, 132 SMs" in entry and "- peak fp64_tensor: " in entry
    from nsroof.report.parquet import read_metadata

    meta = read_metadata(out / "ncu.parquet")
    assert meta["ncu_clock_control"] == "none" and meta["ncu_selection"]["launch_count"] == 120
    assert meta["ncu_selection"]["mode"] == "step" and meta["ncu_selection"]["profiled_kernels"] == 2
    logs = (out / "logs.txt").read_text()
    assert "nsroof: NVTX backend " in logs and "===== ncu.log" in logs
