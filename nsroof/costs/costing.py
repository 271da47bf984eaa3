"""The one way to fill a file's analytic costs: its roofline quantities (nsroof.counters.quantities.derive)
with the costs of the ops that launched its kernels filled in (nsroof.costs.attribution, for the formats that
have ops: traces). An export without ops (Nsight Compute) is derived alone, and the ledger and the
attribution rule are not imported for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from nsroof.schema import ANALYTIC_QUANTITY_FIELDS, OP_LEVEL_KERNEL_COLUMNS, QUANTITY_FIELDS


@dataclass
class Costed:
    """A file's kernel table and its quantities with the analytic costs in, and the same for its op-level
    view (empty for formats without ops): what nsroof.roofs.classify classifies."""

    kernels: pd.DataFrame
    quantities: pd.DataFrame
    op_kernels: pd.DataFrame
    op_quantities: pd.DataFrame
    facts: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def costed(kernels: pd.DataFrame, ops: pd.DataFrame | None, *,
           tf32: tuple[bool | None, bool | None] = (None, None)) -> Costed:
    """derive(kernels) with the analytic costs of `attribute` filled in (a table without ops: derive
    alone)."""
    from nsroof.counters.quantities import derive

    if ops is None and "op_id" not in kernels.columns:
        none = pd.DataFrame({c: [] for c in OP_LEVEL_KERNEL_COLUMNS})
        quantities = pd.DataFrame({f.name: [] for f in (*QUANTITY_FIELDS, *ANALYTIC_QUANTITY_FIELDS)})
        return Costed(kernels, derive(kernels), none, quantities)
    from nsroof.costs.analytic_fill import fill
    from nsroof.costs.attribution import attribute

    a = attribute(kernels, ops, tf32=tf32)
    return Costed(a.kernels, fill(a.kernels, derive(a.kernels), a.analytic), a.op_kernels,
                  fill(a.op_kernels, derive(a.op_kernels), a.op_analytic), a.facts, a.warnings)
