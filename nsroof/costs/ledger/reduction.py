"""Reductions along rows: sums and means (reduction), softmax and its backward (softmax-backward, log-softmax
too), sorting and top-k (sort).

Sources: the ledger convention (nsroof.costs.ledger.core): softmax's FLOPs; the backward derived from the
forward algebra; sort counted from a comparison sort's depth.
"""

from __future__ import annotations

import math

from nsroof.costs.ledger.core import (
    SRC_LEDGER,
    SRC_SEQ,
    SRC_TORCH,
    Cost,
    Operator,
    Roof,
    Term,
    canonical_dtype,
    dtype_bytes,
    nbytes,
    positive,
)
from nsroof.costs.ledger.registry import register


@register("reduction", source=SRC_TORCH)
def reduction(n: int, outputs: int, dtype: str = "fp32", divide_per_output: float = 0.0,
              op: str = "sum", per_element: float = 1.0) -> Operator:
    """Reduce n input elements to `outputs` values: one add per input element (n − outputs exactly; n
    on the ledger; `per_element` where each element takes more: 4 for a variance with its mean),
    plus `divide_per_output` FLOPs per output (1 for a mean)."""
    positive("reduction", n=n, outputs=outputs)
    dt = canonical_dtype(dtype)
    b = dtype_bytes(dt)
    items = (
        Term("read input", bytes=nbytes(n, dt), note=f"n·{b:g} B"),
        Term("write output", bytes=nbytes(outputs, dt), note=f"outputs·{b:g} B"),
        Term(f"{op}: accumulate", flops=per_element * n,
             note="1 add per input element" if per_element == 1 else f"{per_element:g} per input element"),
        Term("per-output scale", flops=divide_per_output * outputs, note=f"{divide_per_output:g} per output"),
    )
    roof_dtype = "fp64" if dt == "fp64" else "fp32"
    shape = {"n": n, "outputs": outputs, "op": op} | (
        {"per_element": per_element} if per_element != 1 else {})
    return Operator("reduction", shape, dt, Cost(items),
                    Roof("simt", roof_dtype))


@register("softmax", source=SRC_LEDGER)
def softmax(rows: int, cols: int, dtype: str = "fp16") -> Operator:
    """Row softmax over `cols` elements: max, subtract, exp, sum, divide."""
    positive("softmax", rows=rows, cols=cols)
    dt = canonical_dtype(dtype)
    b = dtype_bytes(dt)
    items = (
        Term("read x", bytes=nbytes(rows * cols, dt), note=f"rows·cols·{b:g} B"),
        Term("write y", bytes=nbytes(rows * cols, dt), note=f"rows·cols·{b:g} B"),
        Term("max, subtract, exp, sum, divide", flops=5.0 * rows * cols, note="5 per element"),
    )
    return Operator("softmax", {"rows": rows, "cols": cols}, dt, Cost(items), Roof("simt", "fp32"))


@register("softmax-backward", source=SRC_TORCH)
def softmax_backward(rows: int, cols: int, dtype: str = "fp32", log: bool = False) -> Operator:
    """Softmax backward dx = y∘(dy − Σ dy∘y) (dot 2, subtract 1, multiply 1: 4 per element); log-softmax
    backward dx = dy − exp(y)·Σdy (sum 1, exp 1, multiply-subtract 2: 4 per element)."""
    positive("softmax-backward", rows=rows, cols=cols)
    dt = canonical_dtype(dtype)
    b = dtype_bytes(dt)
    n = rows * cols
    items = (
        Term("read dy, y", bytes=2 * nbytes(n, dt), note=f"2·rows·cols·{b:g} B"),
        Term("write dx", bytes=nbytes(n, dt), note=f"rows·cols·{b:g} B"),
        Term("dx", flops=4.0 * n, note="4 per element"),
    )
    shape = {"rows": rows, "cols": cols} | ({"log": True} if log else {})
    return Operator("softmax-backward", shape, dt, Cost(items), Roof("simt", "fp32"))


@register("sort", source=SRC_SEQ)
def sort(rows: int, cols: int, k: int = 0, dtype: str = "fp32") -> Operator:
    """Sort (k = 0) or top-k along rows of `cols`: cols·⌈log2 cols⌉ compares per row for a sort, cols·⌈log2 k⌉
    (a k-heap) for top-k, at least one per element; writes the values and their int64 indices."""
    positive("sort", rows=rows, cols=cols)
    dt = canonical_dtype(dtype)
    kept = k or cols
    depth = max(math.ceil(math.log2(max(kept, 2))), 1)
    items = (Term("read x", bytes=nbytes(rows * cols, dt)),
             Term("write values + int64 indices",
                  bytes=nbytes(rows * kept, dt) + nbytes(rows * kept, "int64")),
             Term("compares", flops=1.0 * rows * cols * depth,
                  note=f"cols·⌈log2 {kept}⌉ = {depth} per element"))
    return Operator("sort", {"rows": rows, "cols": cols} | ({"k": k} if k else {}), dt, Cost(items),
                    Roof("simt", "fp32"))
