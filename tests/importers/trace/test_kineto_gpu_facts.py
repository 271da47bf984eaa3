"""What a trace records of its GPUs (kineto deviceProperties, roctracer / CUPTI versions) for GPU identity
(nsroof.roofs.gpu_identity); the report it gives: tests/pipeline/test_pipeline_gpu_identity.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nsroof import importers

GIB = 2**30
# kineto's ROCm deviceProperties (as in the TraceLens vLLM decode trace): an empty name, GFXIP 9.4, 304 CUs
ROCM_DEVICE = {"id": 0, "name": "", "totalGlobalMem": 192 * GIB - 16 * 2**20, "computeMajor": 9,
               "computeMinor": 4, "warpSize": 64, "numSms": 304}


def _x(cat: str, name: str, ts: float, dur: float, pid: Any = 1, tid: Any = 1, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _trace(devices: list[dict[str, Any]], **top: Any) -> dict[str, Any]:
    """aten::mm launches one hipBLASLt kernel: 256 x 512 x 1024 bf16."""
    return {
        "schemaVersion": 1, "deviceProperties": devices, **top,
        "traceEvents": [
            _x("cpu_op", "aten::mm", 100.0, 20.0, **{"External id": 10,
                                                      "Input Dims": [[256, 1024], [1024, 512]],
                                                      "Input type": ["c10::BFloat16", "c10::BFloat16"]}),
            _x("cuda_runtime", "hipLaunchKernel", 101.0, 2.0, correlation=5, **{"External id": 10}),
            _x("kernel", "Cijk_Alik_Bljk_BBS_BH_MT128x128x64_MI16x16x1", 110.0, 20.0, pid=2, tid=3, device=2,
               correlation=5, grid=[64, 1, 1], block=[256, 1, 1], **{"External id": 10}),
        ],
    }


def _write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "rocm.json"
    path.write_text(json.dumps(data))
    return path


def test_gpu_facts_and_platform_are_recorded_once_per_model(tmp_path: Path) -> None:
    data = _trace([ROCM_DEVICE, {**ROCM_DEVICE, "id": 1}], roctracer_version="4.1",
                  hip_runtime_version=60342134)
    _, facts = importers.read(_write(tmp_path, data))
    assert facts.extra["gpu_platform"] == "rocm"
    assert facts.extra["gpus"] == [{"name": "", "cc": "9.4", "sm_count": 304,
                                    "memory_bytes": 192 * GIB - 16 * 2**20, "warp_size": 64}]


def test_a_property_of_another_type_is_not_recorded_and_refuses_nothing(tmp_path: Path) -> None:
    device = {**ROCM_DEVICE, "numSms": "304", "totalGlobalMem": -1, "warpSize": None}
    kernels, facts = importers.read(_write(tmp_path, _trace([device], cupti_version=18)))
    assert len(kernels) == 1 and facts.extra["gpu_platform"] == "cuda"
    assert facts.extra["gpus"][0] == {"name": "", "cc": "9.4", "sm_count": 0, "memory_bytes": 0,
                                           "warp_size": 0}
