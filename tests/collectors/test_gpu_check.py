"""`make gpu-check` offline: the script refuses cleanly without CUDA, and its report writer turns a run's
outputs into a docs/measurements.md entry with the device and date (fed here with a report built from a
small trace and a machine profile written for the test)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_without_cuda_the_check_says_so_and_exits_2(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: `make gpu-check` is the real thing")
    proc = subprocess.run(["bash", str(REPO / "scripts" / "gpu_check.sh")], capture_output=True, text=True,
                          env={**os.environ, "PYTHON": sys.executable, "OUT": str(tmp_path)}, timeout=120)
    assert proc.returncode == 2
    assert "sees no CUDA device; nothing to check" in proc.stderr


def test_the_report_writer_records_device_date_steps_and_reports(tmp_path: Path) -> None:
    from nsroof.models.machines import Machine
    from nsroof.pipeline import analyze

    sys.path.insert(0, str(REPO / "tests" / "importers"))
    try:
        from test_torch_trace_replay import _training_trace
    finally:
        sys.path.pop(0)
    out = tmp_path / "out"
    out.mkdir()
    trace = tmp_path / "run.trace.json"
    trace.write_text(json.dumps(_training_trace({"module_ranges": ["Net.fc"], "tf32": {"matmul": True, "cudnn": True}})))
    h100 = Machine(name="test-h100", source="file", peak_flop_per_s={"fp32": 6.7e13, "tf32": 4.95e14},
                   simt_flop_per_s={"fp32": 6.7e13}, bandwidth_bytes_per_s={"dram": 3.35e12})
    analyze([trace], machine=h100).write(out / "profile.parquet")
    (out / "machine.json").write_text(json.dumps({
        "environment": {"device_name": "NVIDIA H200", "compute_capability": "9.0", "sm_count": 132,
                        "device_uuid": "GPU-1234", "driver_version": "560.35", "measured_at": "2026-12-01T15:00:00+00:00"},
        "peak_flop_per_s": {"bf16": 7.5e14}, "bandwidth_bytes_per_s": {"dram": 4.3e12}}))
    (out / "steps.tsv").write_text("pytest\t0\t61\nprofile\t0\t20\nncu\tskipped\t0\nmeasure\t0\t140\n")
    (out / "pytest.txt").write_text("....\n4 passed in 60.1s\n")
    doc = tmp_path / "measurements.md"
    doc.write_text("# Measurements\n\nintro\n\n## GPU runs\n\n### an older run\n\nold\n")
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "gpu_check_report.py"), str(out), str(doc)],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    text = doc.read_text()
    new, old = text.index(": `make gpu-check`"), text.index("### an older run")
    assert new < old  # newest first, under "GPU runs"
    assert "NVIDIA H200 (CC 9.0, 132 SMs, uuid GPU-1234), driver 560.35" in text
    assert "| pytest | 0 | 61 | 4 passed in 60.1s |" in text and "| ncu | skipped | 0 |" in text
    assert "- peak bf16: 750.0 TFLOP/s" in text and "- bandwidth dram: 4.30 TB/s" in text
    # the profile report: 5 rows (3 kernels, a memcpy, a memset); the two kernels launched in the backward
    # node (the mm and the one linked by enclosure) are under 'Net.fc (backward)'
    assert "nsroof profile (examples/train_tiny.py, CUDA): 5 rows on NVIDIA H100 80GB HBM3; 2 under a backward range" in text
    assert "nsroof ncu (examples/train_tiny.py, --set minimal): no report written (ncu.parquet missing)" in text
    assert (out / "measurements-entry.md").is_file()
