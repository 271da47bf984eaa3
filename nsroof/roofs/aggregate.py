"""--aggregate: merge repeated launches of the same kernel under the same NVTX path.

Works on the per-kernel quantities before classification, so the report's derived columns are
recomputed from the merged totals rather than averaged (an average of intensities is not the
intensity of the sum)."""

from __future__ import annotations

import numpy as np
import pandas as pd

GROUP_KEYS: tuple[str, ...] = ("source", "device", "kernel_name", "nvtx_path")


def _is_additive(column: str) -> bool:
    """Totals that add over launches: duration, FLOPs (per precision too) and bytes per level."""
    if column in ("duration_s", "flops", "tensor_inst", "tensor_cycles_active"):
        return True
    return column.startswith(("flops_", "bytes_")) and not column.startswith(
        ("flops_source", "flops_estimated", "flops_partial", "bytes_source"))


def aggregate(kernels: pd.DataFrame, quantities: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return (kernels, quantities) with one row per group of GROUP_KEYS, in first-launch order.

    Totals (duration, FLOPs, bytes) are summed — NaN if any launch lacks them, never a partial sum;
    ceilings are duration-weighted means (ncu measures the clock per launch); provenance and
    identity come from the first launch; `launches` counts the merged rows."""
    k = kernels.reset_index(drop=True)
    q = quantities.reset_index(drop=True)
    keys = [c for c in GROUP_KEYS if c in k.columns]
    key = k[keys].astype(str).agg("\x00".join, axis=1) if keys else pd.Series(np.arange(len(k)).astype(str))
    codes, _uniques = pd.factorize(key, sort=False)

    out_k = k.groupby(codes, sort=True).first()
    out_k["kernel_id"] = k["kernel_id"].groupby(codes, sort=True).min().to_numpy()
    out_k["launches"] = pd.Series(codes).value_counts().sort_index().to_numpy()
    if "start_us" in out_k:  # merged launches have no one start (the GPU's busy time then stays unknown)
        out_k["start_us"] = out_k["start_us"].astype("float64").where(out_k["launches"].to_numpy() == 1)

    out_q = q.groupby(codes, sort=True).first()
    weights = q["duration_s"].astype("float64") if "duration_s" in q else pd.Series(np.ones(len(q)))
    for col in q.columns:
        if _is_additive(col) and q[col].dtype.kind == "f":
            values = q[col].astype("float64")
            total = values.groupby(codes, sort=True).sum()
            any_nan = values.isna().groupby(codes, sort=True).any()
            out_q[col] = total.where(~any_nan, np.nan).to_numpy()
        elif col.startswith(("peak_flop_per_s_", "bandwidth_bytes_per_s_", "clock_hz_")):
            values = q[col].astype("float64")
            wsum = (values * weights).groupby(codes, sort=True).sum(min_count=1)
            wtot = weights.where(values.notna()).groupby(codes, sort=True).sum(min_count=1)
            plain = values.groupby(codes, sort=True).mean()
            out_q[col] = (wsum / wtot).fillna(plain).to_numpy()
    return out_k.reset_index(drop=True), out_q.reset_index(drop=True)
