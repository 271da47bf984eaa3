"""The rows of an analytic table (nsroof.schema.ANALYTIC_COLUMNS) under construction, a column per field, and
the table they make: each distinct OpCost's fields read once and spread back to its rows (a profile's kernels
share a few thousand costs)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from nsroof.costs.ledger.aten import OpCost, unknown
from nsroof.frames.arrays import nonnegative_or_missing, row_numbers
from nsroof.frames.columns import texts
from nsroof.frames.distinct import row_codes
from nsroof.schema import ANALYTIC_COLUMNS, LINK_LEVEL

_UNSET = unknown("")


@dataclass
class Row:
    """One row of an analytic table under construction."""

    op_id: int = -1
    role: str = ""
    # frozen: one shared placeholder (every kernel row's cost is set or the row replaced)
    cost: OpCost = _UNSET
    share: float = 1.0
    note: str = ""
    origin: str = "analytic"


class Rows:
    """The rows of an analytic table under construction, a column (array) per Row field."""

    def __init__(self, n: int) -> None:
        self.op_id = np.full(n, -1, dtype="int64")
        self.role = np.full(n, "", dtype=object)
        self.cost = np.full(n, _UNSET, dtype=object)
        self.share = np.ones(n, dtype="float64")
        self.note = np.full(n, "", dtype=object)
        self.origin = np.full(n, "analytic", dtype=object)

    @classmethod
    def of(cls, rows: list[Row]) -> Rows:
        out = cls(len(rows))
        for i, row in enumerate(rows):
            out.put(i, row)
        return out

    def put(self, i: int, row: Row) -> None:
        self.op_id[i], self.role[i], self.cost[i] = row.op_id, row.role, row.cost
        self.share[i], self.note[i], self.origin[i] = row.share, row.note, row.origin


class Distinct:
    """The distinct objects (by identity) of an object array of OpCost and each element's code: a field of
    every element read once per distinct object."""

    def __init__(self, costs: np.ndarray) -> None:
        self.codes, first = row_codes(np.fromiter(map(id, costs), dtype=np.uint64, count=len(costs)))
        self.objects: list[OpCost] = costs[first].tolist()

    def of(self, value: Callable[[OpCost], Any], dtype: Any = object) -> np.ndarray:
        """value(cost) of each element."""
        return np.array([value(c) for c in self.objects], dtype=dtype)[self.codes]


def per_cost(costs: np.ndarray, value: Callable[[OpCost], Any], dtype: Any = object) -> np.ndarray:
    """value(cost) of each OpCost of `costs` (an object array), computed once per distinct object."""
    return Distinct(costs).of(value, dtype)


def analytic_table(kernels: pd.DataFrame, rows: Rows) -> pd.DataFrame:
    """The analytic table (ANALYTIC_COLUMNS) of `rows`, keyed like `kernels`; each distinct cost read once."""
    cost = rows.cost

    def label(c: OpCost, share: float, note: str) -> str:
        if not c.known:
            return ""
        return c.label + (f" ×{share:.4g} ({note})" if share != 1.0 or note else "")

    distinct = Distinct(cost)
    known = distinct.of(lambda c: c.known, bool)
    codes, first = row_codes(distinct.codes, rows.share, rows.note)
    labels = np.array([label(c, s, n) for c, s, n in zip(cost[first].tolist(), rows.share[first].tolist(),
                                                          rows.note[first].tolist(), strict=True)],
                      dtype=object)
    columns: dict[str, Any] = {
        "source": texts(kernels, "source"),
        "kernel_id": pd.array(kernels["kernel_id"], dtype="Int64") if "kernel_id" in kernels
        else row_numbers(len(kernels)),
        "analytic_op_id": nonnegative_or_missing(rows.op_id),
        "analytic_role": rows.role,
        "analytic_flops": distinct.of(lambda c: c.flops, "float64") * rows.share,
        "analytic_bytes": distinct.of(lambda c: c.bytes, "float64") * rows.share,
        "analytic_precision": distinct.of(lambda c: c.precision),
        "analytic_tensor_dtype": distinct.of(lambda c: c.tensor_dtype),
        "analytic_formula": distinct.of(lambda c: c.formula),
        "analytic_label": labels[codes],
        "analytic_missing": distinct.of(lambda c: c.missing or c.flops_missing),
        "analytic_origin": np.where(known, rows.origin, ""),
        "analytic_roof": np.where(known & distinct.of(lambda c: c.roof_kind == LINK_LEVEL, bool), LINK_LEVEL,
                                  ""),
    }
    out = pd.DataFrame({c: (pd.Series(v, dtype=object) if isinstance(v, list | np.ndarray) and
                            ANALYTIC_COLUMNS[c][0] == "object" else v) for c, v in columns.items()})
    return out[list(ANALYTIC_COLUMNS)]


def objects(values: list[Any]) -> np.ndarray:
    """A 1-D object array of `values` (numpy would unpack sequences)."""
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def ints(frame: pd.DataFrame, name: str) -> np.ndarray:
    if name not in frame:
        return np.full(len(frame), -1, dtype="int64")
    return frame[name].astype("Int64").fillna(-1).to_numpy(dtype="int64")
