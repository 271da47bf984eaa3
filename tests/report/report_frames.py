"""Build small, valid report frames (nsroof.schema order) for the chart and HTML tests.

The derived columns are computed here from their textbook definitions (not with nsroof's own code),
so the tests compare the chart against numbers worked out independently."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from nsroof.schema import COLUMNS, FIELD_BY_NAME, LEVELS

# A made-up device with round roofs: fp32 20 TFLOP/s; DRAM 2 TB/s, L2 5 TB/s, L1 20 TB/s.
# Ridges: 20e12 / 2e12 = 10, 20e12 / 5e12 = 4, 20e12 / 20e12 = 1 FLOP/byte.
GPU_A = {"device": "GPU-A", "peak_flop_per_s": 20e12, "bandwidth": {"dram": 2e12, "l2": 5e12, "l1": 20e12},
         "ceiling_source": "spec:GPU-A"}


def kernel(kernel_id: int, function: str, duration_s: float, flops: float, bytes_: dict[str, float], *,
           machine: dict[str, Any] = GPU_A, precision: str = "fp32", nvtx_path: str = "", missing: str = "",
           kernel_name: str | None = None, source: str = "run.csv", **extra: Any) -> dict[str, Any]:
    return {"kernel_id": kernel_id, "function": function, "duration_s": duration_s, "flops": flops,
            "bytes": bytes_, "machine": machine, "precision": precision, "nvtx_path": nvtx_path,
            "missing": missing, "kernel_name": kernel_name or f"void {function}(float*, int)",
            "source": source, **extra}


def make_report(kernels: list[dict[str, Any]]) -> pd.DataFrame:
    rows = []
    for k in kernels:
        m = k["machine"]
        d, w = k["duration_s"], k["flops"]
        floors = {}
        for level in LEVELS:
            q = k["bytes"].get(level, np.nan)
            p, b = m["peak_flop_per_s"], m["bandwidth"][level]
            with np.errstate(divide="ignore", invalid="ignore"):
                i = np.nan if (q == 0 and w == 0) else np.float64(w) / np.float64(q)
            ridge = p / b
            floors[level] = max(w / p, q / b) if not (np.isnan(w) or np.isnan(q)) else np.nan
            ach_f, ach_b = w / d, q / d
            row = {c: _empty(c) for c in COLUMNS}
            row.update({
                "source": k["source"], "kernel_id": k["kernel_id"], "launches": 1,
                "kernel_name": k["kernel_name"], "function": k["function"], "device": m["device"],
                "cc": "9.0", "nvtx_path": k["nvtx_path"], "duration_s": d,
                "duration_source": "gpu__time_duration.sum",
                "flops": w, f"flops_{k['precision']}": w, "precision": k["precision"] if w and w > 0 else "",
                "peak_flop_per_s": p, "level": level, "bytes": q, "bytes_source": f"{level}__bytes.sum",
                "bandwidth_bytes_per_s": b, "intensity": i, "ridge": ridge,
                "attainable_flop_per_s": min(p, i * b) if not np.isnan(i) else np.nan,
                "achieved_flop_per_s": ach_f, "achieved_bytes_per_s": ach_b,
                "bound": "unknown" if np.isnan(i) else ("memory" if i < ridge else "compute"),
                "time_floor_s": floors[level],
                "above_roof": bool(ach_f > 1.05 * p or ach_b > 1.05 * b),
                "ceiling_source": m["ceiling_source"], "missing": k["missing"],
            })
            row["roof_fraction"] = ((ach_f / row["attainable_flop_per_s"]) if row["attainable_flop_per_s"]
                                    else np.nan)
            for name in ("ledger_op", "expected_flops", "min_bytes", "flop_ratio", "excess_traffic",
                         "ideal_time_s", "headroom", "category", "phase", "op", "input_shapes", "kind",
                         "module"):
                if name in k:
                    row[name] = k[name]
            rows.append(row)
        known = {lv: f for lv, f in floors.items() if not np.isnan(f)}
        limiting = max(known, key=known.__getitem__) if known else ""
        for row in rows[-len(LEVELS):]:
            row["limiting"] = limiting
    frame = pd.DataFrame(rows, columns=COLUMNS)
    for f in FIELD_BY_NAME.values():
        t = str(f.type)
        if t == "double":
            frame[f.name] = frame[f.name].astype("float64")
        elif t == "int64":
            frame[f.name] = frame[f.name].astype("Int64")
        elif t == "bool":
            frame[f.name] = frame[f.name].astype(bool)
        else:
            frame[f.name] = frame[f.name].astype(object)
    return frame


def _empty(name: str) -> Any:
    t = str(FIELD_BY_NAME[name].type)
    return np.nan if t == "double" else (pd.NA if t == "int64" else (False if t == "bool" else ""))


def five_kernels() -> pd.DataFrame:
    """The standard test run: total time 1.0 + 0.5 + 0.2 + 0.2 + 0.1 = 2.0 ms.

    A gemm     1.0 ms, 10 GFLOP, DRAM 1 GB / L2 2 GB / L1 5 GB  -> 1e13 FLOP/s; I = 10, 5, 2; share 0.5
    B copy     0.5 ms, 0 FLOP                                   -> intensity 0: not on log axes; share 0.25
    C mystery  0.2 ms, FLOPs unknown (missing sm__sass counter) -> not plotted; share 0.1
    D softmax  0.2 ms, 0.1 GFLOP, DRAM 0.1 GB, L2 unknown, L1 0.4 GB -> 5e11 FLOP/s; I = 1, NaN, 0.25
    E bogus    0.1 ms, 3 GFLOP, DRAM 1 GB / L2 1.5 GB / L1 3 GB -> 3e13 FLOP/s > 1.05 x 20e12: above roof
    """
    return make_report([
        kernel(0, "gemm", 1.0e-3, 10e9, {"dram": 1e9, "l2": 2e9, "l1": 5e9}, nvtx_path="model/layer1"),
        kernel(1, "copy", 0.5e-3, 0.0, {"dram": 0.5e9, "l2": 0.5e9, "l1": 0.5e9}, nvtx_path="model/layer1"),
        kernel(2, "mystery", 0.2e-3, np.nan, {"dram": 1e8, "l2": 1e8, "l1": 1e8},
               missing="sm__sass_thread_inst_executed_op_ffma_pred_on.sum", nvtx_path="model/layer2"),
        kernel(3, "softmax<float>", 0.2e-3, 1e8, {"dram": 1e8, "l2": np.nan, "l1": 4e8},
               missing="lts__t_bytes.sum", nvtx_path="model/layer2",
               kernel_name="void softmax<float>(float const*, float*, int) [with T=<float> & X]"),
        kernel(4, "bogus", 0.1e-3, 3e9, {"dram": 1e9, "l2": 1.5e9, "l1": 3e9}),
    ])
