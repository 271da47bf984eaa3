"""A small ROCm kineto trace for the GPU identity tests (tests/importers/trace/test_kineto_gpu_facts.py,
tests/pipeline/test_pipeline_gpu_identity.py): one aten::mm launching one hipBLASLt kernel."""

from __future__ import annotations

from typing import Any

GIB = 2**30
# kineto's ROCm deviceProperties (as in the TraceLens vLLM decode trace): an empty name, GFXIP 9.4, 304 CUs
ROCM_DEVICE = {"id": 0, "name": "", "totalGlobalMem": 192 * GIB - 16 * 2**20, "computeMajor": 9,
               "computeMinor": 4, "warpSize": 64, "numSms": 304}


def event(cat: str, name: str, ts: float, dur: float, pid: Any = 1, tid: Any = 1,
          **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def rocm_trace(devices: list[dict[str, Any]], **top: Any) -> dict[str, Any]:
    """aten::mm launches one hipBLASLt kernel: 256 x 512 x 1024 bf16."""
    return {
        "schemaVersion": 1, "deviceProperties": devices, **top,
        "traceEvents": [
            event("cpu_op", "aten::mm", 100.0, 20.0, **{"External id": 10,
                                                         "Input Dims": [[256, 1024], [1024, 512]],
                                                         "Input type": ["c10::BFloat16", "c10::BFloat16"]}),
            event("cuda_runtime", "hipLaunchKernel", 101.0, 2.0, correlation=5, **{"External id": 10}),
            event("kernel", "Cijk_Alik_Bljk_BBS_BH_MT128x128x64_MI16x16x1", 110.0, 20.0, pid=2, tid=3,
                  device=2, correlation=5, grid=[64, 1, 1], block=[256, 1, 1], **{"External id": 10}),
        ],
    }

