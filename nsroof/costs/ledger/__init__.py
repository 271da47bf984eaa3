"""Analytic cost ledger: what an operator *has* to do (FLOPs, compulsory DRAM bytes), next to what
the counters say it did.

Call API (stable; shape parameters are keywords, names as in `nsroof ledger OP --help`):

    from nsroof.costs import ledger

    c = ledger.cost("gemm", m=64, n=256, k=128, dtype="fp32")   # -> Cost
    c.flops, c.bytes, c.intensity, c.terms                      # terms: (Term(name, flops, bytes, note), ...)
    op = ledger.operator("linear", tokens=512, in_features=1024, out_features=4096, dtype="fp16")
    op.cost, op.roof, op.variants["worst"], op.label            # Operator = formula, shape, dtype, cost, roof
    ledger.names()                                              # registered formula names
    ledger.get("gemm").params                                   # the accepted parameters, types, defaults

An Operator against a Machine (times, bound, ridge, other roofs) is roofline maths:
nsroof.roofs.ledger_analysis.

Formulas (each `dtype` is one of DTYPE_BYTES: fp64 fp32 tf32 bf16 fp16 fp8 int8 int32 int64 fp4):
    gemm(m, n, k, dtype, batch=1)            bmm(batch, m, n, k, dtype)
    linear(tokens, in_features, out_features, dtype, bias=False)
    conv2d(batch, in_channels, height, width, out_channels, kernel_size, stride, padding, dilation, groups,
           dtype, bias)
    attention(batch_heads, sq, skv, d, dtype, causal=False, causal_align="lower_right"|"upper_left")
    attention-traffic(sq, skv, d, block_m=128, block_n=128, dtype, batch_heads=1)
    decode(params, batch=1, dtype, compute_dtype="bf16", context=0, layers, heads, kv_heads, head_dim,
           kv_dtype)
    rmsnorm(rows, hidden, dtype, weight="once"|"resident"|"per-row")
    layernorm(rows, hidden, dtype, affine, weight)
    softmax(rows, cols, dtype)
    embedding(tokens, hidden, dtype, index_dtype="int64", unique_tokens=0)
    elementwise(n, dtype, chain="cos,sin", fused=True)
    norm-rope-quant(tokens, q_heads, kv_heads, head_dim, in_dtype="bf16", out_dtype="fp8",
                    rope_table_per_head=False)

Accounting convention: each distinct input read once, each output written once, intermediates
never; a basic op and a transcendental are 1 FLOP; a multiply-add is 2. Unknown names, shapes or
dtypes raise LedgerError (an NsroofError) that lists what is accepted.

New formulas: decorate a function of keyword parameters annotated int/float/bool/str returning an
Operator with `@ledger.register("name", source="...")`; registering a name twice is an error. A built-in
formula goes in the module of its op family (matmul, conv, attention, norm, pointwise, reduction,
embedding, recurrent, resample, decode), its backward beside it; the aten ops it prices are read in
aten/<family>.py.
"""

from __future__ import annotations

from typing import Any

# The built-in formulas register on import, one module per op family, forward and backward side by side.
from nsroof.costs.ledger import attention as _attention  # noqa: F401
from nsroof.costs.ledger import conv as _conv  # noqa: F401
from nsroof.costs.ledger import decode as _decode  # noqa: F401
from nsroof.costs.ledger import embedding as _embedding  # noqa: F401
from nsroof.costs.ledger import inductor as _inductor  # noqa: F401
from nsroof.costs.ledger import matmul as _matmul  # noqa: F401
from nsroof.costs.ledger import norm as _norm  # noqa: F401
from nsroof.costs.ledger import pointwise as _pointwise  # noqa: F401
from nsroof.costs.ledger import recurrent as _recurrent  # noqa: F401
from nsroof.costs.ledger import reduction as _reduction  # noqa: F401
from nsroof.costs.ledger import resample as _resample  # noqa: F401
from nsroof.costs.ledger.core import (
    DTYPE_BYTES,
    Cost,
    LedgerError,
    Operator,
    Roof,
    Term,
    canonical_dtype,
    dtype_bytes,
)
from nsroof.costs.ledger.registry import Formula, Param, formulas, get, names, operator, register


def cost(name: str, **shape: Any) -> Cost:
    """ledger.cost("gemm", m=…, n=…, k=…, dtype="fp32") -> Cost (the compulsory, best-case cost)."""
    return operator(name, **shape).cost


__all__ = [
    "DTYPE_BYTES",
    "Cost",
    "Formula",
    "LedgerError",
    "Operator",
    "Param",
    "Roof",
    "Term",
    "canonical_dtype",
    "cost",
    "dtype_bytes",
    "formulas",
    "get",
    "names",
    "operator",
    "register",
]
