"""The one way to put a file's analytic costs (nsroof.costs.attribution's analytic table) into its quantities
(nsroof.counters.quantities.derive): where the counters left FLOPs or DRAM bytes NaN, with provenance; a
collective's bus bytes go to bytes_link (judged against the interconnect by nsroof.roofs.classify)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from nsroof.frames.columns import text_values, texts
from nsroof.frames.distinct import map_rows, row_codes
from nsroof.schema import ANALYTIC_QUANTITY_FIELDS, KERNEL_KEY, LINK_LEVEL, PRECISIONS, kernel_key


def fill(kernels: pd.DataFrame, quantities: pd.DataFrame, analytic: pd.DataFrame) -> pd.DataFrame:
    """The quantities with the analytic costs put in where the counters left FLOPs or DRAM bytes NaN
    (source '<origin>:<label>' / '<origin>:<formula>'), joined to the kernels by kernel_key; rows without a
    cost keep NaN and get the reason in missing. Adds ANALYTIC_QUANTITY_FIELDS. A kernel table with a
    duration_source column (CPU op rows) names its own."""
    at = _rows_of(kernels, analytic)
    a = analytic if at is None else analytic.iloc[at]
    q = quantities.reset_index(drop=True)  # copy-on-write: the caller's frame stays as it was
    af, ab = (a[c].astype("float64").to_numpy() for c in ("analytic_flops", "analytic_bytes"))
    origin = text_values(a["analytic_origin"], np.nan)
    label, formula = (text_values(a[c], np.nan) for c in ("analytic_label", "analytic_formula"))
    prec, why = text_values(a["analytic_precision"], np.nan), text_values(a["analytic_missing"], np.nan)
    take_f = q["flops"].isna().to_numpy() & ~np.isnan(af)
    for p in PRECISIONS:
        values = q[f"flops_{p}"].astype("float64").to_numpy().copy()
        values[take_f] = np.where(prec[take_f] == p, af[take_f], 0.0)
        q[f"flops_{p}"] = values
    q.loc[take_f, "flops"] = af[take_f]
    q.loc[take_f, "flops_source"] = map_rows(_sourced, origin[take_f], label[take_f])
    q.loc[take_f, "missing_flops"] = ""
    link = text_values(a["analytic_roof"], np.nan) == LINK_LEVEL
    take_b = q["bytes_dram"].isna().to_numpy() & ~np.isnan(ab)
    take_link, take_b = take_b & link, take_b & ~link  # a collective's bus bytes cross the links, not DRAM
    q.loc[take_b, "bytes_dram"] = ab[take_b]
    q.loc[take_b, "bytes_source_dram"] = map_rows(_sourced, origin[take_b], formula[take_b])
    q.loc[take_b, "missing_dram"] = ""
    for quantity, column in (("flops", "missing_flops"), ("bytes_dram", "missing_dram")):
        still = q[quantity].isna().to_numpy() & (why != "")
        q.loc[still, column] = why[still]
    if "duration_source" in kernels.columns:
        own = text_values(kernels["duration_source"], np.nan)
        q["duration_source"] = np.where(own != "", own, text_values(q["duration_source"], np.nan))
    stated = text_values(a["analytic_tensor_dtype"], np.nan)
    added = {"tensor_dtype": np.where(take_f, stated, ""), "ledger_label": np.where(take_f, label, ""),
             "bytes_link": np.where(take_link, ab, np.nan),
             "bytes_source_link": map_rows(lambda o, s, t: _sourced(o, s) if t else "", origin, formula,
                                           take_link)}
    for f in ANALYTIC_QUANTITY_FIELDS:
        q[f.name] = added[f.name] if f.type == pa.float64() else pd.Series(added[f.name], dtype=object)
    return q


def _sourced(origin: str, what: str) -> str:
    """'<origin>:<label or formula>': made once per distinct pair (thousands of launches share a few), the
    rows sharing its str."""
    return f"{origin}:{what}"


def _rows_of(kernels: pd.DataFrame, analytic: pd.DataFrame) -> np.ndarray | None:
    """The analytic row of each kernel, joined by kernel_key (None: row i to row i); a ValueError unless
    exactly one each."""
    if _same_keys(kernels, analytic):  # attribution's own table, row for row: no key strings to build
        return None
    keys = kernel_key(kernels.reset_index(drop=True))
    index = pd.Index(kernel_key(analytic))
    # row positions by Index.get_indexer (a hash join): Series.isin on Arrow strings loops in Python
    at = index.get_indexer(keys) if len(index) == len(keys) and index.is_unique else None
    if at is None or (at < 0).any():
        raise ValueError("the analytic table does not hold exactly one row per kernel (joined by kernel_key)")
    return np.asarray(at)


def _same_keys(kernels: pd.DataFrame, analytic: pd.DataFrame) -> bool:
    """Whether both tables hold the same (source, Int64 kernel_id) row for row, each pair once: then
    kernel_key joins row i to row i."""
    if len(kernels) != len(analytic) or not all(c in t for c in KERNEL_KEY for t in (kernels, analytic)):
        return False
    ids = [t["kernel_id"] for t in (kernels, analytic)]
    if not all(isinstance(i.dtype, pd.Int64Dtype) for i in ids):
        return False
    source = texts(kernels, "source")
    missing = ids[0].isna().to_numpy()
    values = ids[0].to_numpy(dtype="int64", na_value=-1)
    if not ((source == texts(analytic, "source")).all() and (missing == ids[1].isna().to_numpy()).all()
            and (values == ids[1].to_numpy(dtype="int64", na_value=-1)).all()):
        return False
    return len(row_codes(source, values, missing)[1]) == len(kernels)
