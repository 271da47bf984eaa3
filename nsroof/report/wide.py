"""One wide row per kernel: the report's per-level rows (kernel × level) pivoted into columns, with the
verdict where the kernel's time floor is set. The HTML table, `nsroof analyze --json/--csv` and the Python
API's Report.kernels() read this one table."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from nsroof.report import chart_data
from nsroof.schema import LEVELS, LINK_LEVEL, kernel_key

LEDGER_COLUMNS: tuple[str, ...] = ("ledger_op", "expected_flops", "min_bytes", "flop_ratio", "excess_traffic",
                                   "ideal_time_s", "headroom")
PER_LEVEL: tuple[str, ...] = ("bound", "intensity", "ridge", "roof_fraction", "time_floor_s", "achieved_flop_per_s",
                              "achieved_bytes_per_s", "bytes")
#: the columns of `nsroof analyze --json/--csv`, in order (per level: PER_LEVEL + "_" + level)
# the levels a kernel's rows may stand at: the memory levels, and a collective's link row (in place of its dram
# row); --json/--csv print the memory levels' columns, the limiting level's bound and fraction cover the link
ROW_LEVELS: tuple[str, ...] = (*LEVELS, LINK_LEVEL)
SCRIPT_COLUMNS: tuple[str, ...] = (
    "rank", "source", "kernel_id", "step", "function", "kernel_name", "device", "nvtx_path", "launches", "duration_s",
    "time_share", "precision", "flops", "limiting", "bound", "roof_fraction", "time_floor_s", "floor_ratio",
    *(f"{c}_{lv}" for lv in LEVELS for c in PER_LEVEL), "headroom", "above_roof", "missing",
)


def as_float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def kernel_rows(df: pd.DataFrame) -> pd.DataFrame:
    """One row per kernel (longest first) with its per-level verdicts pivoted into columns:
    bound_<level>, intensity_<level>, ridge_<level>, roof_fraction_<level>, time_floor_s_<level>,
    achieved_flop_per_s_<level>, achieved_bytes_per_s_<level>; plus time_floor_s, and the bound and
    roof_fraction at the limiting level ('compute' when the compute floor limits), floor_ratio =
    duration_s / time_floor_s, and the ledger columns (first non-null over the kernel's rows)."""
    k = chart_data.kernels(df)
    key = kernel_key(df)
    rows = df.assign(_key=key.to_numpy())
    first = rows.drop_duplicates("_key").set_index("_key")
    out = k.set_index("key")
    for col in ("launches", "limiting", "above_roof", "op", "module", "missing", "cc", "flops", "step"):
        if col in first.columns:
            out[col] = first[col].reindex(out.index)
    out["above_roof"] = rows.groupby("_key")["above_roof"].agg(lambda s: bool(s.fillna(False).astype(bool).any())) \
        .reindex(out.index).fillna(False).astype(bool)
    out["missing"] = rows.groupby("_key")["missing"].agg(
        lambda s: ", ".join(dict.fromkeys(t.strip() for v in s.astype(str) for t in v.split(",")
                                          if t.strip() and t.strip() not in ("nan", "<NA>")))).reindex(out.index)
    for level in ROW_LEVELS:
        at = rows[rows["level"].astype(str) == level].drop_duplicates("_key").set_index("_key")
        for col in PER_LEVEL:
            out[f"{col}_{level}"] = at[col].reindex(out.index) if col in at.columns else np.nan
        out[f"bound_{level}"] = out[f"bound_{level}"].astype(object).where(out[f"bound_{level}"].notna(), "")
    floors = out[[f"time_floor_s_{lv}" for lv in ROW_LEVELS]].astype("float64")
    out["time_floor_s"] = floors.max(axis=1, skipna=True)
    limiting = out["limiting"].astype(str) if "limiting" in out else pd.Series("", index=out.index)
    at_limiting = [_at_limiting(out.loc[i], lv) for i, lv in zip(out.index, limiting, strict=True)]
    out["bound"] = [b for b, _ in at_limiting]
    out["roof_fraction"] = np.array([f for _, f in at_limiting], dtype="float64")
    with np.errstate(divide="ignore", invalid="ignore"):
        out["floor_ratio"] = out["duration_s"].astype("float64") / out["time_floor_s"]
    for col in LEDGER_COLUMNS:
        if col in rows.columns:
            series = rows[col]
            if col == "ledger_op":
                series = series.astype(object).where(series.astype(str).str.len() > 0)
            out[col] = series.groupby(rows["_key"]).first().reindex(out.index)
        else:
            out[col] = np.nan
    return out.reset_index()


def _at_limiting(row: pd.Series, limiting: str) -> tuple[str, float]:
    """(bound, roof fraction) where the kernel's time floor is set: at the limiting level, or 'compute' when
    the compute floor is the largest (then every level is compute-bound against the same peak, so the
    fraction of the first level known is the kernel's)."""
    if limiting in ROW_LEVELS:
        return str(row[f"bound_{limiting}"] or "unknown"), as_float(row[f"roof_fraction_{limiting}"])
    if limiting == "compute":
        fractions = [as_float(row[f"roof_fraction_{lv}"]) for lv in ROW_LEVELS]
        return "compute", next((f for f in fractions if np.isfinite(f)), float("nan"))
    return "unknown", float("nan")




def script_table(df: pd.DataFrame) -> pd.DataFrame:
    """SCRIPT_COLUMNS of `kernel_rows` (longest kernel first): what --json and --csv print."""
    k = kernel_rows(df)
    return k.reindex(columns=list(SCRIPT_COLUMNS))
