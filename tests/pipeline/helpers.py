"""Builders for small kernel tables and quantity frames, in the shapes the importers and derive() produce."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from nsroof.roofs.machines import Machine

A100ISH = Machine(
    name="Test A100",
    aliases=("test-a100",),
    peak_flop_per_s={"fp64": 19.5e12, "fp32": 19.5e12, "fp16": 312e12, "bf16": 312e12},
    simt_flop_per_s={"fp64": 9.7e12, "fp32": 19.5e12, "fp16": 78e12},
    bandwidth_bytes_per_s={"dram": 1.555e12, "l2": 7.0e12},
    sources={"peak_flop_per_s.fp32": "test"},
)


def kernels(n: int, **columns: Any) -> pd.DataFrame:
    base: dict[str, Any] = {
        "source": ["t.csv"] * n,
        "kernel_id": list(range(n)),
        "device": ["NVIDIA Test"] * n,
        "cc": ["8.0"] * n,
        "kernel_name": [f"void k{i}<float>(float*)" for i in range(n)],
        "function": [f"k{i}" for i in range(n)],
        "nvtx_path": [""] * n,
    }
    base.update(columns)
    return pd.DataFrame(base)


def quantities(n: int, **columns: Any) -> pd.DataFrame:
    nan = [np.nan] * n
    base: dict[str, Any] = {
        "duration_s": nan, "duration_source": ["gpu__time_duration.sum"] * n,
        "flops_fp64": [0.0] * n, "flops_fp32": nan, "flops_fp16": [0.0] * n, "flops_tensor": [0.0] * n,
        "flops_source": ["sass"] * n, "flops_estimated": [False] * n,
        "bytes_dram": nan, "bytes_l2": nan, "bytes_l1": nan,
        "bytes_source_dram": ["dram__bytes.sum"] * n, "bytes_source_l2": [""] * n,
        "bytes_source_l1": [""] * n, "missing_duration": [""] * n, "missing_flops": [""] * n,
        "tensor_metric": [""] * n,
        "missing_dram": [""] * n, "missing_l2": ["lts__t_bytes.sum"] * n,
        "missing_l1": ["l1tex__t_bytes.sum"] * n,
    }
    for p in ("fp64", "fp32", "fp16", "tensor"):
        base[f"peak_flop_per_s_{p}"] = nan
        base[f"ceiling_source_{p}"] = [""] * n
    for lv in ("dram", "l2", "l1"):
        base[f"bandwidth_bytes_per_s_{lv}"] = nan
        base[f"ceiling_source_{lv}"] = [""] * n
    base.update(columns)
    q = pd.DataFrame(base)
    prec = q[["flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor"]]
    q["flops"] = prec.sum(axis=1, min_count=4)
    return q
