"""Helpers that build the normalized kernel table every importer's `read(path)` returns as
`(kernels, facts)`; the table (IDENTITY_COLUMNS) and the file facts (FileFacts) are declared in
nsroof.schema.

One row per kernel launch (or per op call for analytic sources). Identity columns are listed in
IDENTITY_COLUMNS; every other column whose name contains "__" is a profiler metric under its own
ncu name (e.g. ``dram__bytes.sum``), converted to SI base units as float64 (bytes, seconds,
Hz, FLOP, cycles, instructions, sectors ...). String-valued metrics stay strings (object dtype).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np
import pandas as pd

from nsroof.frames.arrays import all_missing
from nsroof.schema import IDENTITY_COLUMNS


def is_metric_column(name: str) -> bool:
    return "__" in name and name not in IDENTITY_COLUMNS


def metric_columns(df: pd.DataFrame) -> list[str]:
    return [c for c in df.columns if is_metric_column(str(c))]


def empty_identity(n: int, filled: Collection[str] = ()) -> dict[str, Any]:
    """Default identity values for n rows (used by importers to fill what an input lacks); None for the
    columns the caller fills itself, `filled` (a list per row for nvtx_ranges is a fifth of a second per
    200,000 rows), so each keeps its place."""
    out: dict[str, Any] = {}
    for name, (dtype, _) in IDENTITY_COLUMNS.items():
        if name in filled:
            out[name] = None
        elif dtype == "object":
            out[name] = [[] for _ in range(n)] if name == "nvtx_ranges" else [""] * n
        else:  # "int64" / "Int64": a nullable integer column, all <NA>
            out[name] = all_missing(n)
    return out


def fill_launch_identity(frame: pd.DataFrame) -> None:
    """device/grid/block/cc from device__/launch__ metric columns where the input lacks the identity
    (text output and --metrics exports print `Device 0` but not its name). In place."""
    if "device__attribute_display_name" in frame.columns and frame["device"].eq("").all():
        frame["device"] = pd.Series(
            [v if isinstance(v, str) else "" for v in frame["device__attribute_display_name"]],
            index=frame.index, dtype=object)
    for ident, prefix in (("grid", "launch__grid_dim_"), ("block", "launch__block_dim_")):
        dims = [f"{prefix}{a}" for a in "xyz"]
        if frame[ident].eq("").all() and all(d in frame.columns for d in dims):
            vals = frame[dims].to_numpy(dtype=np.float64)
            frame[ident] = pd.Series(
                ["" if np.isnan(r).any() else "(" + ", ".join(str(int(x)) for x in r) + ")" for r in vals],
                index=frame.index, dtype=object)
    cc_cols = ["device__attribute_compute_capability_major", "device__attribute_compute_capability_minor"]
    if frame["cc"].eq("").all() and all(c in frame.columns for c in cc_cols):
        vals = frame[cc_cols].to_numpy(dtype=np.float64)
        frame["cc"] = pd.Series(["" if np.isnan(r).any() else f"{int(r[0])}.{int(r[1])}" for r in vals],
                                index=frame.index, dtype=object)


def assemble(identity: pd.DataFrame, columns: dict[str, Any]) -> pd.DataFrame:
    """The kernel table from identity columns and metric arrays (float64, or object for string metrics).
    A metric named like an identity column keeps its values under '<name> (metric)'."""
    clash = [c for c in columns if c in identity.columns]
    for c in clash:
        columns[f"{c} (metric)"] = columns.pop(c)
    metrics = pd.DataFrame(
        {c: (pd.array(v, dtype="float64") if v.dtype != object else pd.array(v, dtype=object))
         for c, v in columns.items()},
        index=identity.index,
    )
    frame = pd.concat([identity, metrics], axis=1) if len(metrics.columns) else identity
    for c, v in columns.items():
        if v.dtype == object and frame[c].dtype != object:
            frame[c] = frame[c].astype(object)  # pandas 3 infers `str`; the contract is plain objects
    return frame
