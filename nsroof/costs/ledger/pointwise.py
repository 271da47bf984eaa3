"""Elementwise ops: a chain of unary ops fused in one kernel or run eagerly (elementwise), and an n-ary op
over broadcast inputs (pointwise: what the aten map prices every elementwise op, their backward ops and
pure data movement with).

Sources: the ledger convention (nsroof.costs.ledger.core).
"""

from __future__ import annotations

from nsroof.costs.ledger.core import (
    SRC_LEDGER,
    SRC_TORCH,
    Cost,
    LedgerError,
    Operator,
    Roof,
    Term,
    canonical_dtype,
    dtype_bytes,
    nbytes,
    positive,
)
from nsroof.costs.ledger.registry import register


@register("elementwise", source=SRC_LEDGER)
def elementwise(n: int, dtype: str = "fp16", chain: str = "cos,sin", fused: bool = True) -> Operator:
    """A chain of unary ops over n elements (default y = sin(cos(x))), fused in one kernel or eager."""
    positive("elementwise", n=n)
    dt = canonical_dtype(dtype)
    ops = [o.strip() for o in chain.split(",") if o.strip()]
    if not ops:
        raise LedgerError("elementwise: chain must name at least one op, e.g. --chain cos,sin")
    b = dtype_bytes(dt)
    rx = nbytes(n, dt)
    items: list[Term] = []
    if fused:
        items += [
            Term("read x", bytes=rx, note=f"n·{b:g} B"),
            Term("write y", bytes=rx, note=f"n·{b:g} B"),
            Term("+".join(ops), flops=float(len(ops)) * n,
                 note=f"{len(ops)} per element; intermediates stay in registers"),
        ]
    else:
        # Eager: every op is its own kernel, so each intermediate makes a DRAM round trip.
        names = ["x"] + [chr(ord("a") + i) for i in range(len(ops))]
        for i, op in enumerate(ops):
            items += [
                Term(f"read {names[i]}", bytes=rx, note=f"n·{b:g} B"),
                Term(f"write {names[i + 1]}", bytes=rx, note=f"n·{b:g} B"),
                Term(op, flops=1.0 * n, note="1 per element"),
            ]
    shape = {"n": n, "chain": ",".join(ops), "fused": fused}
    return Operator("elementwise", shape, dt, Cost(tuple(items)), Roof("simt", "fp32"))


@register("pointwise", source=SRC_TORCH)
def pointwise(n: int, read_elements: int, flops_per_element: float, dtype: str = "fp32", op: str = "",
              other_read_bytes: float = 0.0) -> Operator:
    """An n-ary elementwise op: read every input element once (broadcast inputs at their own size), write
    the n outputs once, `flops_per_element` FLOPs per output. Inputs of another dtype than the data (a
    bool mask, an index tensor) come in as `other_read_bytes`."""
    positive("pointwise", n=n)
    if read_elements < 0 or flops_per_element < 0 or other_read_bytes < 0:
        raise LedgerError("pointwise: read_elements, flops_per_element and other_read_bytes must be >= 0")
    dt = canonical_dtype(dtype)
    b = dtype_bytes(dt)
    items = [
        Term("read inputs", bytes=nbytes(read_elements, dt), note=f"sum of input elements·{b:g} B"),
        Term("write output", bytes=nbytes(n, dt), note=f"n·{b:g} B"),
        Term(op or "arithmetic", flops=flops_per_element * n,
             note=f"{flops_per_element:g} per output element"),
    ]
    if other_read_bytes:
        items.insert(1, Term("read inputs of other dtypes", bytes=float(other_read_bytes),
                             note="elements·their own size"))
    shape = {"n": n, "read_elements": read_elements, "flops_per_element": flops_per_element} | (
        {"op": op} if op else {}) | ({"other_read_bytes": other_read_bytes} if other_read_bytes else {})
    roof_dtype = "fp64" if dt == "fp64" else "fp32"
    return Operator("pointwise", shape, dt, Cost(tuple(items)), Roof("simt", roof_dtype))
