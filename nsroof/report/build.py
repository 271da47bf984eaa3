"""Build the report: one row per (kernel, memory level), classified against its roofs.

Inputs are the normalized kernel table (nsroof.importers.kernel_table) and the per-kernel
quantities (nsroof.models.quantities.derive contract). Roofs come, per kernel and per quantity,
from the export itself when it holds them (ceiling_source 'ncu:…'), else from the machine given
with --machine, else from the datasheet entry matched from the device name ('spec:<name>').
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from nsroof.models import roofline
from nsroof.models.machines import Machine
from nsroof.report.schema import COLUMNS, FIELD_BY_NAME, LEVELS, PRECISIONS

# Machine-table key giving the roof of each report precision, in order of preference. FLOPs that
# ncu counts from SASS FADD/FMUL/FFMA run on CUDA cores, so their roof is the SIMT rate; tensor
# FLOPs are compared with the dense fp16/bf16 tensor rate (the counters do not name the dtype).
PEAK_KEYS: dict[str, tuple[tuple[str, str], ...]] = {
    "fp64": (("simt_flop_per_s", "fp64"), ("peak_flop_per_s", "fp64")),
    "fp32": (("simt_flop_per_s", "fp32"), ("peak_flop_per_s", "fp32")),
    "fp16": (("simt_flop_per_s", "fp16"),),
    "tensor": (("peak_flop_per_s", "fp16"), ("peak_flop_per_s", "bf16")),
}

MachineResolver = Callable[[str], "Machine | None"]


def default_resolver(machine: Machine | None) -> MachineResolver:
    """--machine wins for every kernel; otherwise match each device name in the datasheet table."""
    if machine is not None:
        return lambda _device: machine

    from nsroof.models import machines

    cache: dict[str, Machine | None] = {}

    def resolve(device: str) -> Machine | None:
        if device not in cache:
            cache[device] = machines.lookup_device(device) if device else None
        return cache[device]

    return resolve


def _machine_peak(m: Machine | None, precision: str) -> tuple[float, str]:
    if m is None:
        return np.nan, ""
    for table, key in PEAK_KEYS.get(precision, ()):
        value = getattr(m, table).get(key)
        if value:
            return float(value), f"{m.label}#{table}.{key}"
    return np.nan, ""


def _machine_bandwidth(m: Machine | None, level: str) -> tuple[float, str]:
    if m is None:
        return np.nan, ""
    value = m.bandwidth_bytes_per_s.get(level)
    if value:
        return float(value), f"{m.label}#bandwidth_bytes_per_s.{level}"
    return np.nan, ""


def dominant_precision(q: pd.DataFrame) -> pd.Series:
    """The precision carrying most FLOPs per kernel; '' when the kernel has no known FLOPs."""
    cols = [f"flops_{p}" for p in PRECISIONS]
    values = q.reindex(columns=cols).astype("float64").fillna(0.0).to_numpy()
    best = values.argmax(axis=1) if len(values) else np.array([], dtype=int)
    names = np.array(PRECISIONS, dtype=object)[best] if len(values) else np.array([], dtype=object)
    has_flops = values.max(axis=1) > 0 if len(values) else np.array([], dtype=bool)
    return pd.Series(np.where(has_flops, names, ""), index=q.index, dtype=object)


def _join(*parts: str) -> str:
    seen: list[str] = []
    for p in parts:
        for token in (t.strip() for t in str(p).split(",")):
            if token and token not in seen:
                seen.append(token)
    return ", ".join(seen)


def _col(q: pd.DataFrame, name: str, default: object = np.nan) -> pd.Series:
    if name in q.columns:
        return q[name]
    return pd.Series([default] * len(q), index=q.index)


def build_report(
    kernels: pd.DataFrame,
    quantities: pd.DataFrame,
    machine: Machine | None = None,
    *,
    levels: Sequence[str] = LEVELS,
    resolver: MachineResolver | None = None,
) -> pd.DataFrame:
    """Classify every kernel at every level. Rows come out kernel-major, levels in `levels` order."""
    if len(kernels) != len(quantities):
        raise ValueError("kernels and quantities must describe the same rows")
    kernels = kernels.reset_index(drop=True)
    q = quantities.reset_index(drop=True)
    resolve = resolver or default_resolver(machine)
    n = len(kernels)

    devices = kernels["device"].fillna("").astype(str) if "device" in kernels else pd.Series([""] * n)
    machine_of = [resolve(d) for d in devices]

    precision = dominant_precision(q)
    # A kernel without FLOPs is placed under the fp32 roof: its intensity is 0 whatever the roof.
    roof_precision = precision.where(precision != "", "fp32")

    peak = np.full(n, np.nan)
    peak_src = np.full(n, "", dtype=object)
    ncu_peak = {p: _col(q, f"peak_flop_per_s_{p}").astype("float64").to_numpy() for p in PRECISIONS}
    ncu_peak_src = {p: _col(q, f"ceiling_source_{p}", "").fillna("").astype(str).to_numpy() for p in PRECISIONS}
    for i in range(n):
        p = roof_precision.iat[i]
        if not np.isnan(ncu_peak[p][i]):
            peak[i], peak_src[i] = ncu_peak[p][i], ncu_peak_src[p][i] or "ncu"
        else:
            peak[i], peak_src[i] = _machine_peak(machine_of[i], p)

    flops_cols = [f"flops_{p}" for p in PRECISIONS]
    base = pd.DataFrame(
        {
            "source": kernels.get("source", pd.Series([""] * n)).astype(object),
            "kernel_id": kernels.get("kernel_id", pd.Series(range(n))).astype("Int64"),
            "launches": kernels.get("launches", pd.Series([1] * n)).astype("Int64"),
            "kernel_name": kernels.get("kernel_name", pd.Series([""] * n)),
            "function": kernels.get("function", pd.Series([""] * n)),
            "op": kernels.get("op", pd.Series([""] * n)),
            "input_shapes": kernels.get("input_shapes", pd.Series([""] * n)),
            "module": kernels.get("module", pd.Series([""] * n)),
            "device": devices,
            "cc": kernels.get("cc", pd.Series([""] * n)),
            "host": kernels.get("host", pd.Series([""] * n)),
            "process_id": kernels.get("process_id", pd.Series([pd.NA] * n)).astype("Int64"),
            "grid": kernels.get("grid", pd.Series([""] * n)),
            "block": kernels.get("block", pd.Series([""] * n)),
            "stream": kernels.get("stream", pd.Series([pd.NA] * n)).astype("Int64"),
            "nvtx_path": kernels.get("nvtx_path", pd.Series([""] * n)),
            "duration_s": _col(q, "duration_s").astype("float64"),
            "duration_source": _col(q, "duration_source", ""),
            "flops": _col(q, "flops").astype("float64"),
            **{c: _col(q, c).astype("float64") for c in flops_cols},
            "flops_source": _col(q, "flops_source", ""),
            "precision": precision,
            "peak_flop_per_s": peak,
        }
    )
    for name in ("kernel_name", "function", "op", "input_shapes", "module", "cc", "host", "grid", "block",
                 "nvtx_path", "source", "duration_source", "flops_source"):
        base[name] = base[name].astype(object).where(base[name].notna(), "").astype(str)

    frames = []
    for level in levels:
        bytes_ = _col(q, f"bytes_{level}").astype("float64").to_numpy()
        bw = _col(q, f"bandwidth_bytes_per_s_{level}").astype("float64").to_numpy().copy()
        bw_src = _col(q, f"ceiling_source_{level}", "").fillna("").astype(str).to_numpy().copy()
        for i in range(n):
            if np.isnan(bw[i]):
                bw[i], bw_src[i] = _machine_bandwidth(machine_of[i], level)
            elif not bw_src[i]:
                bw_src[i] = "ncu"
        frame = base.copy()
        frame["level"] = level
        frame["bytes"] = bytes_
        frame["bytes_source"] = _col(q, f"bytes_source_{level}", "").fillna("").astype(str).to_numpy()
        frame["bandwidth_bytes_per_s"] = bw
        frame["ceiling_source"] = [_ceiling_source(ps, bs) for ps, bs in zip(peak_src, bw_src, strict=True)]
        missing = []
        for i in range(n):
            extra = []
            if np.isnan(peak[i]):
                extra.append(f"peak_flop_per_s[{roof_precision.iat[i]}] (no ncu peak metric; device "
                             f"{devices.iat[i]!r} not in the machine table: pass --machine)")
            if np.isnan(bw[i]):
                extra.append(f"bandwidth_bytes_per_s[{level}] (no ncu peak metric or machine figure)")
            missing.append(_join(
                str(_col(q, "missing_duration", "").iat[i] or ""),
                str(_col(q, "missing_flops", "").iat[i] or ""),
                str(_col(q, f"missing_{level}", "").iat[i] or ""),
                *extra,
            ))
        frame["missing"] = missing
        frames.append(frame)

    report = pd.concat(frames, ignore_index=True) if frames else base.iloc[0:0].copy()
    # kernel-major order: all levels of kernel 0, then kernel 1, ...
    order = np.argsort(np.tile(np.arange(n), len(levels)), kind="stable")
    report = report.iloc[order].reset_index(drop=True)
    return classify(report)


def _ceiling_source(peak_src: str, bw_src: str) -> str:
    if not peak_src and not bw_src:
        return "unknown"
    # both roofs from the same machine profile: name the profile once
    if peak_src.split("#")[0] == bw_src.split("#")[0] and peak_src.startswith(("spec:", "measured:", "file:")):
        return peak_src.split("#")[0]
    return f"compute={peak_src or 'unknown'}; memory={bw_src or 'unknown'}"


def classify(report: pd.DataFrame) -> pd.DataFrame:
    """Fill the derived columns from flops, bytes, duration and the roofs. Pure: recomputes from scratch,
    so it also serves after aggregation or a join."""
    r = report
    w, qb, d = r["flops"].to_numpy(float), r["bytes"].to_numpy(float), r["duration_s"].to_numpy(float)
    p, b = r["peak_flop_per_s"].to_numpy(float), r["bandwidth_bytes_per_s"].to_numpy(float)
    i = roofline.intensity(w, qb)
    rg = roofline.ridge(p, b)
    att = roofline.attainable_flop_per_s(i, p, b)
    ach_f = roofline.rate(w, d)
    ach_b = roofline.rate(qb, d)
    r["intensity"] = i
    r["ridge"] = rg
    r["attainable_flop_per_s"] = att
    r["achieved_flop_per_s"] = ach_f
    r["achieved_bytes_per_s"] = ach_b
    r["bound"] = roofline.bound(i, rg)
    r["time_floor_s"] = roofline.time_floor_s(w, qb, p, b)
    r["roof_fraction"] = roofline.roof_fraction(w, ach_f, att, ach_b, b)
    r["above_roof"] = roofline.above_roof(ach_f, p, ach_b, b)
    r["limiting"] = limiting_level(r)
    for name in COLUMNS:
        if name not in r.columns:
            r[name] = _empty(name, len(r))
    return r[COLUMNS]


def _empty(name: str, n: int) -> object:
    t = str(FIELD_BY_NAME[name].type)
    if t == "double":
        return np.full(n, np.nan)
    if t == "int64":
        return pd.array([pd.NA] * n, dtype="Int64")
    if t == "bool":
        return np.zeros(n, dtype=bool)
    return [""] * n


def kernel_key(report: pd.DataFrame) -> pd.Series:
    """Identifies a kernel row group (all levels of one launch or aggregated launch group)."""
    return report["source"].astype(str) + "\x00" + report["kernel_id"].astype(str)


def limiting_level(report: pd.DataFrame) -> pd.Series:
    """Per kernel, the level with the largest time floor ('' when no level has one)."""
    key = kernel_key(report)
    floors = report["time_floor_s"].astype("float64")
    best = floors.fillna(-1.0).groupby(key, sort=False).transform("max")
    is_best = (floors == best) & floors.notna()
    level_of_best = report["level"].where(is_best).groupby(key, sort=False).transform("first")
    return level_of_best.fillna("").astype(object)
