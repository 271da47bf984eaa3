"""A trace's GPU identified in the pipeline (nsroof.roofs.gpu_identity.label_devices): the report of a ROCm
trace that names no GPU, and --machine on a ROCm trace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nsroof import pipeline
from tests._rocm_trace import ROCM_DEVICE, rocm_trace


def _write(tmp_path: Path, data: Any, name: str = "rocm.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_unnamed_rocm_gpu_is_inferred_and_its_kernels_get_the_mi300x_roofs(tmp_path: Path) -> None:
    before = rocm_trace([{**ROCM_DEVICE, "numSms": 0, "totalGlobalMem": 0, "warpSize": 0}])
    r0 = pipeline.analyze(_write(tmp_path, before))
    # no CU count, memory or runtime recorded: the Cijk_ kernel says an AMD GPU ran, not which
    assert r0.frame["peak_flop_per_s"].isna().all()
    data = rocm_trace([ROCM_DEVICE], roctracer_version="4.1")
    report = pipeline.analyze(_write(tmp_path, data))
    k = report.frame[report.frame["kind"] == "kernel"].iloc[0]
    assert k["device"] == "MI300X [inferred from the device's properties: GFXIP 9.4, 304 CUs, 192.0 GiB]"
    # the MI300X datasheet's dense BF16 matrix rate, 1307.4 TFLOP/s (= 304 CUs x 2100 MHz x 2048)
    assert k["peak_flop_per_s"] == pytest.approx(1307.4e12)
    assert k["ceiling_source"].startswith("spec:MI300X")
    assert any("GPU identity" in w and "MI300X inferred from" in w for w in report.warnings)
    assert not any("ncu --metrics" in str(h) for h in report.hints)


def test_machine_on_a_rocm_trace_is_a_gpu_what_if(tmp_path: Path) -> None:
    # a name no entry has and no CU count: the device stays 'AMD Radeon Graphics', a GPU all the same
    radeon = {**ROCM_DEVICE, "name": "AMD Radeon Graphics", "computeMinor": 0, "numSms": 0}
    trace = _write(tmp_path, rocm_trace([radeon], roctracer_version="4.1"))
    report = pipeline.analyze(trace, machine="mi250")
    assert not any("ran on the CPU" in w for w in report.warnings)
    assert set(report.frame["device"]) == {"AMD Radeon Graphics"}
    k = report.frame[report.frame["kind"] == "kernel"].iloc[0]
    # one MI250 GCD: 104 CUs x 1700 MHz x 1024 FLOP/clock/CU = 181.0 TFLOP/s (362.1 / 2)
    assert k["peak_flop_per_s"] == pytest.approx(362.1e12 / 2)
