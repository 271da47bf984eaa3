"""Normalizations, forward and backward: rmsnorm, layernorm and layernorm-backward, batchnorm and
batchnorm-backward, and norm-rope-quant (QK-norm fused with RoPE and fp8 quantization). Group and instance
norm are priced by the aten map with the layernorm and batchnorm formulas.

Sources: the ledger convention (nsroof.costs.ledger.core): rmsnorm, layernorm, the fused norm+rope+quant;
batch norm counted from its definition; the backward passes derived from the forward algebra (the
arithmetic is in each docstring).
"""

from __future__ import annotations

from nsroof.costs.ledger.core import (
    SRC_CNN,
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
    non_negative,
    positive,
    simt_roof,
)
from nsroof.costs.ledger.registry import register

_WEIGHT_MODES = ("once", "resident", "per-row")


def _weight_term(name: str, mode: str, rows: int, hidden: int, dt: str, formula: str) -> Term:
    b = dtype_bytes(dt)
    if mode == "once":
        return Term(name, bytes=nbytes(hidden, dt), note=f"hidden·{b:g} B: read once (ledger convention)")
    if mode == "resident":
        return Term(name, bytes=0.0,
                    note="0: already resident in L2 from an earlier op (the seed's weight_in_l2)")
    if mode == "per-row":
        return Term(name, bytes=nbytes(rows * hidden, dt), note=f"rows·hidden·{b:g} B: re-read for every row")
    raise LedgerError(f"{formula}: weight must be one of {', '.join(_WEIGHT_MODES)}, got {mode!r}")


@register("rmsnorm", source=SRC_LEDGER)
def rmsnorm(rows: int, hidden: int, dtype: str = "fp16", weight: str = "once") -> Operator:
    """RMSNorm y = x·rsqrt(mean(x²) + eps)·w, one pass over each row; weight once, resident or per row."""
    positive("rmsnorm", rows=rows, hidden=hidden)
    dt = canonical_dtype(dtype)
    b = dtype_bytes(dt)
    items = (
        Term("read x", bytes=nbytes(rows * hidden, dt), note=f"rows·hidden·{b:g} B"),
        Term("write y", bytes=nbytes(rows * hidden, dt), note=f"rows·hidden·{b:g} B"),
        _weight_term("read w", weight, rows, hidden, dt, "rmsnorm"),
        Term("sum of squares (FMA)", flops=2.0 * rows * hidden, note="2 per element"),
        Term("rsqrt", flops=1.0 * rows, note="1 per row"),
        Term("scale by rsqrt(mean)+eps", flops=2.0 * rows, note="2 per row"),
        Term("multiply by w", flops=2.0 * rows * hidden, note="x·rstd·w: 2 per element"),
    )
    return Operator("rmsnorm", {"rows": rows, "hidden": hidden, "weight": weight}, dt, Cost(items),
                    Roof("simt", "fp32"))


@register("layernorm", source=SRC_LEDGER)
def layernorm(rows: int, hidden: int, dtype: str = "fp16", affine: bool = True,
              weight: str = "once") -> Operator:
    """LayerNorm y = (x - mean)·rsqrt(var + eps)·γ + β over each row of `hidden` elements."""
    positive("layernorm", rows=rows, hidden=hidden)
    dt = canonical_dtype(dtype)
    b = dtype_bytes(dt)
    n = rows * hidden
    items = [
        Term("read x", bytes=nbytes(n, dt), note=f"rows·hidden·{b:g} B"),
        Term("write y", bytes=nbytes(n, dt), note=f"rows·hidden·{b:g} B"),
        Term("mean: sum", flops=1.0 * n, note="1 add per element"),
        Term("variance: (x-mean)² accumulate", flops=3.0 * n, note="subtract 1 + FMA 2 per element"),
        Term("per row: 2 divides, +eps, rsqrt", flops=4.0 * rows, note="4 per row"),
        Term("normalize (x-mean)·rstd", flops=2.0 * n, note="2 per element"),
    ]
    if affine:
        items.insert(2, _weight_term("read γ", weight, rows, hidden, dt, "layernorm"))
        items.insert(3, _weight_term("read β", weight, rows, hidden, dt, "layernorm"))
        items.append(Term("affine γ·x̂ + β (FMA)", flops=2.0 * n, note="2 per element"))
    shape = {"rows": rows, "hidden": hidden} | ({"weight": weight} if affine else {"affine": False})
    return Operator("layernorm", shape, dt, Cost(tuple(items)), Roof("simt", "fp32"))


@register("layernorm-backward", source=SRC_TORCH)
def layernorm_backward(rows: int, hidden: int, dtype: str = "fp32", affine: bool = True) -> Operator:
    """LayerNorm backward from the saved mean and rstd: x̂ = (x − mean)·rstd (2), g = dy·γ (1),
    the row sums of g and g·x̂ (3), dx = rstd·(g − mean(g) − x̂·mean(g·x̂)) (4): 10 per element;
    with affine, dγ += dy·x̂ (2) and dβ += dy (1) per element."""
    positive("layernorm-backward", rows=rows, hidden=hidden)
    dt = canonical_dtype(dtype)
    b = dtype_bytes(dt)
    n = rows * hidden
    items = [
        Term("read dy, x", bytes=2 * nbytes(n, dt), note=f"2·rows·hidden·{b:g} B"),
        Term("read mean, rstd", bytes=2 * nbytes(rows, "fp32"), note="2·rows·4 B"),
        Term("write dx", bytes=nbytes(n, dt), note=f"rows·hidden·{b:g} B"),
        Term("dx", flops=10.0 * n, note="10 per element"),
    ]
    if affine:
        items += [
            Term("read γ", bytes=nbytes(hidden, dt), note=f"hidden·{b:g} B"),
            Term("write dγ, dβ", bytes=2 * nbytes(hidden, dt), note=f"2·hidden·{b:g} B"),
            Term("dγ, dβ", flops=3.0 * n, note="3 per element"),
        ]
    shape = {"rows": rows, "hidden": hidden} | ({} if affine else {"affine": False})
    return Operator("layernorm-backward", shape, dt, Cost(tuple(items)), Roof("simt", "fp32"))


@register("batchnorm", source=SRC_CNN)
def batchnorm(batch: int, channels: int, spatial: int, dtype: str = "fp32", training: bool = True,
              affine: bool = True) -> Operator:
    """Batch norm over N·spatial values per channel. Training: Σx (1) and Σx² (2) per element for the
    batch statistics, then y = (x − mean)·invstd (2) per element; affine adds ·γ + β (2). Per channel:
    mean, var = E[x²] − mean², invstd = rsqrt(var + eps) (5), and the running-stat updates (4, two
    multiply-adds each) are counted. Evaluation: the running statistics are read, not computed."""
    positive("batchnorm", batch=batch, channels=channels, spatial=spatial)
    dt = canonical_dtype(dtype)
    b = dtype_bytes(dt)
    n = batch * channels * spatial
    per_element = 2 + (3 if training else 0) + (2 if affine else 0)
    items = [
        Term("read x", bytes=nbytes(n, dt), note=f"N·C·spatial·{b:g} B"),
        Term("write y", bytes=nbytes(n, dt), note=f"N·C·spatial·{b:g} B"),
        Term("normalize", flops=float(per_element) * n,
             note=f"{per_element} per element: " + ", ".join(
                 (["Σx, Σx² (3)"] if training else []) + ["(x − mean)·invstd (2)"]
                 + (["·γ + β (2)"] if affine else []))),
    ]
    # running mean and var: read in evaluation; read and written back in training
    stat_vectors = 4 if training else 2
    items.append(Term("running mean, var", bytes=stat_vectors * nbytes(channels, dt),
                      note=f"{'read + write' if training else 'read'} 2 C-vectors·{b:g} B"))
    if training:
        items += [
            Term("write saved mean, invstd", bytes=2 * nbytes(channels, "fp32"), note="2·C·4 B"),
            Term("per-channel statistics", flops=9.0 * channels,
                 note="mean, var, rsqrt (5) + running updates (4)"),
        ]
    if affine:
        items.append(Term("read γ, β", bytes=2 * nbytes(channels, dt), note=f"2·C·{b:g} B"))
    shape = {"batch": batch, "channels": channels, "spatial": spatial} | (
        {} if training else {"training": False}) | ({} if affine else {"affine": False})
    return Operator("batchnorm", shape, dt, Cost(tuple(items)), simt_roof(dt))


@register("batchnorm-backward", source=SRC_CNN)
def batchnorm_backward(batch: int, channels: int, spatial: int, dtype: str = "fp32", training: bool = True,
                       input_grad: bool = True, affine_grad: bool = True) -> Operator:
    """Batch norm backward from the saved mean and invstd: x̂ = (x − mean)·invstd (2), Σdy (1) and Σdy·x̂ (2)
    per element give dβ and dγ; training: dx = γ·invstd·(dy − mean(dy) − x̂·mean(dy·x̂)) (4 per element);
    evaluation: dx = dy·(γ·invstd) (1 per element, the statistics being constants)."""
    positive("batchnorm-backward", batch=batch, channels=channels, spatial=spatial)
    if not (input_grad or affine_grad):
        raise LedgerError("batchnorm-backward: no gradient asked for (input_grad and affine_grad both off)")
    dt = canonical_dtype(dtype)
    b = dtype_bytes(dt)
    n = batch * channels * spatial
    # the sums are needed for dγ, dβ, and in training for dx too
    sums = affine_grad or training
    items = [
        Term("read dy", bytes=nbytes(n, dt), note=f"N·C·spatial·{b:g} B"),
        Term("read saved mean, invstd", bytes=2 * nbytes(channels, "fp32"), note="2·C·4 B"),
    ]
    if sums:
        items += [
            Term("read x", bytes=nbytes(n, dt), note=f"N·C·spatial·{b:g} B"),
            Term("x̂, Σdy, Σdy·x̂", flops=5.0 * n, note="5 per element"),
        ]
    if input_grad:
        items += [
            Term("read γ", bytes=nbytes(channels, dt), note=f"C·{b:g} B"),
            Term("write dx", bytes=nbytes(n, dt), note=f"N·C·spatial·{b:g} B"),
            Term("dx", flops=(4.0 if training else 1.0) * n, note=f"{4 if training else 1} per element"),
        ]
    if affine_grad:
        items.append(Term("write dγ, dβ", bytes=2 * nbytes(channels, dt), note=f"2·C·{b:g} B"))
    shape = {"batch": batch, "channels": channels, "spatial": spatial} | (
        {} if training else {"training": False}) | ({} if input_grad else {"input_grad": False}) | (
        {} if affine_grad else {"affine_grad": False})
    return Operator("batchnorm-backward", shape, dt, Cost(tuple(items)), simt_roof(dt))


@register("norm-rope-quant", source=SRC_LEDGER)
def norm_rope_quant(
    tokens: int,
    q_heads: int,
    kv_heads: int,
    head_dim: int,
    in_dtype: str = "bf16",
    out_dtype: str = "fp8",
    rope_table_per_head: bool = False,
) -> Operator:
    """Fused QK-Norm + RoPE + fp8 quantization over the q and k heads of `tokens` tokens."""
    positive("norm-rope-quant", tokens=tokens, q_heads=q_heads, head_dim=head_dim)
    non_negative("norm-rope-quant", kv_heads=kv_heads)
    if head_dim % 2:
        raise LedgerError(f"norm-rope-quant: head_dim must be even (RoPE rotates pairs), got {head_dim}")
    idt, odt = canonical_dtype(in_dtype), canonical_dtype(out_dtype)
    heads = q_heads + kv_heads
    rows = tokens * heads
    elems = rows * head_dim
    rope_reads = heads if rope_table_per_head else 1
    items = (
        Term("read q,k", bytes=nbytes(elems, idt),
             note=f"tokens·(q_heads+kv_heads)·head_dim·{dtype_bytes(idt):g} B"),
        Term("write q8,k8", bytes=nbytes(elems, odt), note=f"same elements at {dtype_bytes(odt):g} B"),
        Term("write per-row scales", bytes=nbytes(rows, "fp32"), note="one fp32 scale per row"),
        Term("read norm weights (q,k)", bytes=nbytes(2 * head_dim, idt),
             note="resident in cache, counted once"),
        Term("read RoPE table", bytes=rope_reads * nbytes(2 * tokens * head_dim, "fp32"),
             note="cos/sin at fp32, " + (f"re-read by each of the {heads} heads" if rope_table_per_head
                                         else "counted once for the whole layer")),
        Term("norm: sum of squares", flops=2.0 * elems, note="2 per element"),
        Term("norm: rsqrt + 2 scales", flops=3.0 * rows, note="3 per row"),
        Term("norm: multiply by weight", flops=2.0 * elems, note="2 per element"),
        Term("RoPE: 4 mul + 2 add per pair", flops=6.0 * (head_dim // 2) * rows,
             note="6 per pair of elements"),
        Term("quant: absmax reduction", flops=1.0 * elems, note="1 per element"),
        Term("quant: scale + convert", flops=2.0 * elems, note="2 per element"),
    )
    shape = {"tokens": tokens, "q_heads": q_heads, "kv_heads": kv_heads, "head_dim": head_dim,
             "out_dtype": odt} | ({"rope_table_per_head": True} if rope_table_per_head else {})
    return Operator("norm-rope-quant", shape, idt, Cost(items), Roof("simt", "fp32"))
