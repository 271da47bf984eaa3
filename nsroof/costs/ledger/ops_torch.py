"""Ledger formulas for the aten ops a PyTorch training step runs that the core formulas do not cover:
matmuls with a bias, n-ary pointwise ops, and the backward kernels of attention, LayerNorm, softmax and
embedding. Same convention as the core (nsroof.costs.ledger.core): inputs read once, outputs written once,
a basic op or a transcendental is 1 FLOP, a multiply-add 2.

Sources: the ledger's accounting convention (nsroof.costs.ledger.core); the backward passes are derived from
the forward algebra (the derivation is in each docstring), as torch/utils/flop_counter.py does for
matmuls (backward of a matmul = two matmuls of the same size).
"""

from __future__ import annotations

from nsroof.costs.ledger.core import (
    Cost,
    LedgerError,
    Operator,
    Roof,
    Term,
    canonical_dtype,
    dtype_bytes,
    nbytes,
)
from nsroof.costs.ledger.formulas import LOWER_RIGHT, causal_pairs, causal_shape, gemm
from nsroof.costs.ledger.registry import register

SRC_TORCH = "nsroof ops_torch (ledger convention; backward derived from the forward algebra)"

_LOW_PRECISION = ("fp16", "bf16", "fp8", "tf32")


def _positive(formula: str, **values: float) -> None:
    for name, value in values.items():
        if not value > 0:
            raise LedgerError(f"{formula}: {name} must be > 0, got {value}")


@register("gemm-bias", source=SRC_TORCH)
def gemm_bias(m: int, n: int, k: int, bias_elements: int, dtype: str = "fp32", batch: int = 1) -> Operator:
    """C = bias + A[m,k] @ B[k,n] (aten::addmm / baddbmm): the GEMM plus one bias read and one add per output."""
    _positive("gemm-bias", m=m, n=n, k=k, bias_elements=bias_elements, batch=batch)
    base = gemm(m=m, n=n, k=k, dtype=dtype, batch=batch)
    dt = base.dtype
    b = dtype_bytes(dt)
    extra = Cost((
        Term("read bias", bytes=nbytes(bias_elements, dt), note=f"bias elements·{b:g} B (broadcast rows read once)"),
        Term("add bias", flops=1.0 * batch * m * n, note="1 add per output; alpha = beta = 1 assumed"),
    ))
    shape = {"m": m, "n": n, "k": k, "bias_elements": bias_elements} | ({"batch": batch} if batch != 1 else {})
    return Operator("gemm-bias", shape, dt, base.cost + extra, Roof("matmul", dt))


@register("pointwise", source=SRC_TORCH)
def pointwise(n: int, read_elements: int, flops_per_element: float, dtype: str = "fp32", op: str = "",
              other_read_bytes: float = 0.0) -> Operator:
    """An n-ary elementwise op: read every input element once (broadcast inputs at their own size), write
    the n outputs once, `flops_per_element` FLOPs per output. Inputs of another dtype than the data (a
    bool mask, an index tensor) come in as `other_read_bytes`."""
    _positive("pointwise", n=n)
    if read_elements < 0 or flops_per_element < 0 or other_read_bytes < 0:
        raise LedgerError("pointwise: read_elements, flops_per_element and other_read_bytes must be >= 0")
    dt = canonical_dtype(dtype)
    b = dtype_bytes(dt)
    items = [
        Term("read inputs", bytes=nbytes(read_elements, dt), note=f"sum of input elements·{b:g} B"),
        Term("write output", bytes=nbytes(n, dt), note=f"n·{b:g} B"),
        Term(op or "arithmetic", flops=flops_per_element * n, note=f"{flops_per_element:g} per output element"),
    ]
    if other_read_bytes:
        items.insert(1, Term("read inputs of other dtypes", bytes=float(other_read_bytes), note="elements·their own size"))
    shape = {"n": n, "read_elements": read_elements, "flops_per_element": flops_per_element} | (
        {"op": op} if op else {}) | ({"other_read_bytes": other_read_bytes} if other_read_bytes else {})
    roof_dtype = "fp64" if dt == "fp64" else "fp32"
    return Operator("pointwise", shape, dt, Cost(tuple(items)), Roof("simt", roof_dtype))


@register("reduction", source=SRC_TORCH)
def reduction(n: int, outputs: int, dtype: str = "fp32", divide_per_output: float = 0.0, op: str = "sum") -> Operator:
    """Reduce n input elements to `outputs` values: one add per input element (n − outputs exactly; n
    on the ledger), plus `divide_per_output` FLOPs per output (1 for a mean)."""
    _positive("reduction", n=n, outputs=outputs)
    dt = canonical_dtype(dtype)
    b = dtype_bytes(dt)
    items = (
        Term("read input", bytes=nbytes(n, dt), note=f"n·{b:g} B"),
        Term("write output", bytes=nbytes(outputs, dt), note=f"outputs·{b:g} B"),
        Term(f"{op}: accumulate", flops=1.0 * n, note="1 add per input element"),
        Term("per-output scale", flops=divide_per_output * outputs, note=f"{divide_per_output:g} per output"),
    )
    roof_dtype = "fp64" if dt == "fp64" else "fp32"
    return Operator("reduction", {"n": n, "outputs": outputs, "op": op}, dt, Cost(items), Roof("simt", roof_dtype))


@register("attention-backward", source=SRC_TORCH)
def attention_backward(batch_heads: int, sq: int, skv: int, d: int, dtype: str = "fp16", causal: bool = False,
                       causal_align: str = LOWER_RIGHT) -> Operator:
    """Fused (flash-style) attention backward: recompute S = QK^T, then dV = P^T·dO, dP = dO·V^T,
    dQ = dS·K, dK = dS^T·Q: five matmuls of 2·scores·d FLOP each (10·scores·d, 2.5× the forward's 4·scores·d).
    Softmax backward: exp of the recomputed scores (2 per score: subtract the saved log-sum-exp, exp),
    dS = P∘(dP − D) (2 per score), D = rowsum(dO∘O) (2 per query element).
    Minimum traffic: read Q, K, V, O, dO and the fp32 log-sum-exp, write dQ, dK, dV.
    A causal mask counts its visible scores only, its diagonal where `causal_align` says (formulas.causal_pairs)."""
    _positive("attention-backward", batch_heads=batch_heads, sq=sq, skv=skv, d=d)
    dt = canonical_dtype(dtype)
    b = dtype_bytes(dt)
    bh = batch_heads
    shape = {"batch_heads": bh, "sq": sq, "skv": skv, "d": d} | causal_shape(sq, skv, causal, causal_align)
    scores = causal_pairs(sq, skv, causal_align) if causal else sq * skv
    items = (
        Term("read Q, O, dO", bytes=3 * nbytes(bh * sq * d, dt), note=f"3·bh·sq·d·{b:g} B"),
        Term("read K, V", bytes=2 * nbytes(bh * skv * d, dt), note=f"2·bh·skv·d·{b:g} B"),
        Term("read log-sum-exp", bytes=nbytes(bh * sq, "fp32"), note="bh·sq·4 B"),
        Term("write dQ", bytes=nbytes(bh * sq * d, dt), note=f"bh·sq·d·{b:g} B"),
        Term("write dK, dV", bytes=2 * nbytes(bh * skv * d, dt), note=f"2·bh·skv·d·{b:g} B"),
        Term("5 matmuls", flops=10.0 * bh * scores * d, note="S recompute, dV, dP, dQ, dK: 2·scores·d each"),
        Term("softmax backward", flops=4.0 * bh * scores + 2.0 * bh * sq * d,
             note="P recompute 2 + dS 2 per score; D = rowsum(dO∘O) 2 per query element"),
    )
    return Operator("attention-backward", shape, dt, Cost(items), Roof("matmul", dt), facts={"scores_per_head": scores})


@register("layernorm-backward", source=SRC_TORCH)
def layernorm_backward(rows: int, hidden: int, dtype: str = "fp32", affine: bool = True) -> Operator:
    """LayerNorm backward from the saved mean and rstd: x̂ = (x − mean)·rstd (2), g = dy·γ (1),
    the row sums of g and g·x̂ (3), dx = rstd·(g − mean(g) − x̂·mean(g·x̂)) (4): 10 per element;
    with affine, dγ += dy·x̂ (2) and dβ += dy (1) per element."""
    _positive("layernorm-backward", rows=rows, hidden=hidden)
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


@register("softmax-backward", source=SRC_TORCH)
def softmax_backward(rows: int, cols: int, dtype: str = "fp32", log: bool = False) -> Operator:
    """Softmax backward dx = y∘(dy − Σ dy∘y) (dot 2, subtract 1, multiply 1: 4 per element); log-softmax
    backward dx = dy − exp(y)·Σdy (sum 1, exp 1, multiply-subtract 2: 4 per element)."""
    _positive("softmax-backward", rows=rows, cols=cols)
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


@register("embedding-backward", source=SRC_TORCH)
def embedding_backward(tokens: int, hidden: int, num_embeddings: int, dtype: str = "fp32",
                       index_dtype: str = "int64") -> Operator:
    """Dense embedding backward: zero the gradient table, then add each token's output gradient into its row."""
    _positive("embedding-backward", tokens=tokens, hidden=hidden, num_embeddings=num_embeddings)
    dt = canonical_dtype(dtype)
    idt = canonical_dtype(index_dtype)
    b = dtype_bytes(dt)
    items = (
        Term("read indices", bytes=nbytes(tokens, idt), note=f"tokens·{dtype_bytes(idt):g} B"),
        Term("read output gradient", bytes=nbytes(tokens * hidden, dt), note=f"tokens·hidden·{b:g} B"),
        Term("write gradient table", bytes=nbytes(num_embeddings * hidden, dt), note=f"num_embeddings·hidden·{b:g} B"),
        Term("scatter-add", flops=1.0 * tokens * hidden, note="1 add per gradient element"),
    )
    return Operator("embedding-backward", {"tokens": tokens, "hidden": hidden, "num_embeddings": num_embeddings},
                    dt, Cost(items), Roof("simt", "fp32"))


def report_precision(op: Operator) -> str:
    """The report's precision column for an operator: matmuls of 16-bit and narrower dtypes run on
    tensor cores; everything else under the CUDA-core (or CPU vector) roof of its dtype."""
    if op.roof.kind == "matmul":
        if op.roof.dtype in _LOW_PRECISION:
            return "tensor"
        return "fp64" if op.roof.dtype == "fp64" else "fp32"
    return {"fp64": "fp64", "fp16": "fp16", "bf16": "fp16"}.get(op.roof.dtype, "fp32")
