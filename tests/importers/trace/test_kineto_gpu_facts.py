"""What a trace records of its GPUs (kineto deviceProperties, roctracer / CUPTI versions) for GPU identity
(nsroof.roofs.gpu_identity); the report it gives: tests/pipeline/test_pipeline_gpu_identity.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nsroof import importers
from tests._rocm_trace import GIB, ROCM_DEVICE, rocm_trace


def _write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "rocm.json"
    path.write_text(json.dumps(data))
    return path


def test_gpu_facts_and_platform_are_recorded_once_per_model(tmp_path: Path) -> None:
    data = rocm_trace([ROCM_DEVICE, {**ROCM_DEVICE, "id": 1}], roctracer_version="4.1",
                  hip_runtime_version=60342134)
    _, facts = importers.read(_write(tmp_path, data))
    assert facts.extra["gpu_platform"] == "rocm"
    assert facts.extra["gpus"] == [{"name": "", "cc": "9.4", "sm_count": 304,
                                    "memory_bytes": 192 * GIB - 16 * 2**20, "warp_size": 64}]


def test_a_property_of_another_type_is_not_recorded_and_refuses_nothing(tmp_path: Path) -> None:
    device = {**ROCM_DEVICE, "numSms": "304", "totalGlobalMem": -1, "warpSize": None}
    kernels, facts = importers.read(_write(tmp_path, rocm_trace([device], cupti_version=18)))
    assert len(kernels) == 1 and facts.extra["gpu_platform"] == "cuda"
    assert facts.extra["gpus"][0] == {"name": "", "cc": "9.4", "sm_count": 0, "memory_bytes": 0,
                                           "warp_size": 0}
