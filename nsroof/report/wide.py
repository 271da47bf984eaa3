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
PER_LEVEL: tuple[str, ...] = ("bound", "intensity", "ridge", "roof_fraction", "time_floor_s",
                              "achieved_flop_per_s", "achieved_bytes_per_s", "bytes")
#: the columns of `nsroof analyze --json/--csv`, in order (per level: PER_LEVEL + "_" + level)
# the levels a kernel's rows may stand at: the memory levels, and a collective's link row (in place of
# its dram row); --json/--csv print the memory levels' columns, the limiting level's bound and fraction
# cover the link
ROW_LEVELS: tuple[str, ...] = (*LEVELS, LINK_LEVEL)
SCRIPT_COLUMNS: tuple[str, ...] = (
    "rank", "source", "kernel_id", "step", "function", "kernel_name", "category", "phase", "device",
    "nvtx_path", "launches",
    "duration_s", "time_share", "precision", "flops", "limiting", "bound", "roof_fraction", "time_floor_s",
    "floor_ratio", *(f"{c}_{lv}" for lv in LEVELS for c in PER_LEVEL), "headroom", "above_roof", "missing",
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
    # each frame reindexed once, all its columns together (a report has hundreds of thousands of
    # keys to look up)
    firsts = [c for c in ("launches", "limiting", "above_roof", "op", "module", "missing", "cc", "flops",
                          "step", "category", "phase", "input_shapes", "kind") if c in first.columns]
    aligned = first[firsts].reindex(out.index)
    for col in firsts:
        out[col] = aligned[col]
    out["above_roof"] = rows["above_roof"].fillna(False).astype(bool).groupby(rows["_key"]).any() \
        .reindex(out.index).fillna(False).astype(bool)
    out["missing"] = _missing_names(rows["_key"], rows["missing"].astype(str)).reindex(out.index)
    for level in ROW_LEVELS:
        at = rows[rows["level"].astype(str) == level].drop_duplicates("_key").set_index("_key")
        aligned = at[[c for c in PER_LEVEL if c in at.columns]].reindex(out.index)
        for col in PER_LEVEL:
            out[f"{col}_{level}"] = aligned[col] if col in aligned.columns else np.nan
        out[f"bound_{level}"] = out[f"bound_{level}"].astype(object).where(out[f"bound_{level}"].notna(), "")
    floors = out[[f"time_floor_s_{lv}" for lv in ROW_LEVELS]].astype("float64")
    out["time_floor_s"] = floors.max(axis=1, skipna=True)
    limiting = out["limiting"].astype(str) if "limiting" in out else pd.Series("", index=out.index)
    out["bound"], out["roof_fraction"] = _at_limiting(out, limiting.to_numpy(dtype=object))
    with np.errstate(divide="ignore", invalid="ignore"):
        out["floor_ratio"] = out["duration_s"].astype("float64") / out["time_floor_s"]
    ledger = {c: rows[c] for c in LEDGER_COLUMNS if c in rows.columns}
    if "ledger_op" in ledger:
        op = ledger["ledger_op"]
        ledger["ledger_op"] = op.astype(object).where(op.astype(str).str.len() > 0)
    firsts_over_rows = (pd.DataFrame(ledger).groupby(rows["_key"]).first().reindex(out.index) if ledger
                        else None)
    for col in LEDGER_COLUMNS:
        out[col] = firsts_over_rows[col] if firsts_over_rows is not None and col in ledger else np.nan
    return out.reset_index()


def _missing_names(keys: pd.Series, texts: pd.Series) -> pd.Series:
    """Per kernel key (sorted, as a groupby's), the metric names its rows' `missing` texts list, each once in
    the order first met ('nan'/'<NA>' are no names)."""
    key_code, key_names = pd.factorize(keys.to_numpy(dtype=object))
    text_code, distinct = pd.factorize(texts.to_numpy(dtype=object))
    parsed = [[t.strip() for t in str(text).split(",") if t.strip() and t.strip() not in ("nan", "<NA>")]
              for text in distinct]
    # a kernel whose rows all say the same (most: one text per report) takes that text's names as they are
    order = np.argsort(key_code, kind="stable")  # each key's rows together, in row order
    by_key, by_text = key_code[order], text_code[order]
    starts = (np.flatnonzero(np.r_[True, by_key[1:] != by_key[:-1]]) if len(order)
              else np.empty(0, dtype=np.int64))
    first_text = by_text[starts]
    mixed = np.zeros(len(key_names), dtype=bool)
    changes = np.flatnonzero((by_key[1:] == by_key[:-1]) & (by_text[1:] != by_text[:-1]))
    mixed[by_key[changes + 1]] = True
    joined = [", ".join(dict.fromkeys(names)) for names in parsed]
    values = [joined[t] for t in first_text.tolist()]
    ends = np.r_[starts[1:], len(order)].tolist()
    for k in np.flatnonzero(mixed).tolist():
        seen: dict[str, None] = {}
        for t in by_text[starts[k]:ends[k]].tolist():
            seen.update(dict.fromkeys(parsed[t]))
        values[k] = ", ".join(seen)
    by_name = np.argsort(key_names, kind="stable")  # groupby's sorted keys
    return pd.Series([values[k] for k in by_name.tolist()], index=pd.Index(key_names[by_name], dtype=object))


def _floats(values: pd.Series) -> np.ndarray:
    """as_float of each value (NaN where there is no number)."""
    try:
        return values.to_numpy(dtype="float64", na_value=np.nan)
    except (TypeError, ValueError):
        return np.array([as_float(v) for v in values.tolist()], dtype="float64")


def _at_limiting(out: pd.DataFrame, limiting: np.ndarray) -> tuple[list[str], np.ndarray]:
    """(bound, roof fraction) of each kernel where its time floor is set: at the limiting level, or 'compute'
    when the compute floor is the largest (then every level is compute-bound against the same peak, so the
    fraction of the first level known is the kernel's); 'unknown' and NaN otherwise."""
    n = len(out)
    bound = np.full(n, "unknown", dtype=object)
    fraction = np.full(n, np.nan)
    fractions = np.column_stack([_floats(out[f"roof_fraction_{lv}"]) for lv in ROW_LEVELS]) if n else \
        np.empty((0, len(ROW_LEVELS)))
    for j, lv in enumerate(ROW_LEVELS):
        at = limiting == lv
        bound[at] = [str(b or "unknown") for b in out[f"bound_{lv}"].to_numpy(dtype=object)[at]]
        fraction[at] = fractions[at, j]
    compute = limiting == "compute"
    finite = np.isfinite(fractions)
    first = (np.where(finite.any(axis=1), fractions[np.arange(n), finite.argmax(axis=1)], np.nan) if n
             else fraction)
    bound[compute] = "compute"
    fraction[compute] = first[compute]
    return bound.tolist(), fraction


def script_table(df: pd.DataFrame) -> pd.DataFrame:
    """SCRIPT_COLUMNS of `kernel_rows` (longest kernel first): what --json and --csv print."""
    k = kernel_rows(df)
    return k.reindex(columns=list(SCRIPT_COLUMNS))
