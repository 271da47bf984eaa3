"""Matrix products: gemm and bmm, linear (a fully connected layer), gemm-bias (aten::addmm / baddbmm) and
grouped-gemm (grouped and scaled fp8 matmuls). Their backward is matmuls of the forward's size (aten records
them as mm / bmm calls; torch/utils/flop_counter.py counts them the same way), priced by these formulas.

Sources: the roofline model (Williams, Waterman, Patterson, CACM 2009): gemm's best and worst traffic; NVIDIA
GPU Performance Background User's Guide §4: the 4096×1024 layer on 512 / 1 examples; grouped-gemm counted
from torch._grouped_mm's definition.
"""

from __future__ import annotations

from nsroof.costs.ledger.core import (
    SRC_LAYER,
    SRC_ROOFLINE,
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


def _gemm(name: str, m: int, n: int, k: int, dtype: str, batch: int) -> Operator:
    positive(name, m=m, n=n, k=k, batch=batch)
    dt = canonical_dtype(dtype)
    b = dtype_bytes(dt)
    read_a = Term("read A", bytes=nbytes(batch * m * k, dt), note=f"batch·m·k·{b:g} B")
    write_c = Term("write C", bytes=nbytes(batch * m * n, dt), note=f"batch·m·n·{b:g} B")
    work = Term("2·m·n·k", flops=2.0 * batch * m * n * k,
                note="one multiply-add (2 FLOP) per inner-product term")
    best = Cost(
        (read_a, Term("read B", bytes=nbytes(batch * k * n, dt), note=f"batch·k·n·{b:g} B"), write_c, work),
        ("best case: each matrix streamed from DRAM exactly once",),
    )
    worst = Cost(
        (read_a, Term("re-read B per row of A", bytes=nbytes(batch * m * k * n, dt),
                      note=f"batch·m·k·n·{b:g} B"), write_c, work),
        ("worst case: no reuse, B re-read for every row of A",),
    )
    shape = {"m": m, "n": n, "k": k} | ({"batch": batch} if batch != 1 or name == "bmm" else {})
    return Operator(name, shape, dt, best, Roof("matmul", dt), variants={"worst": worst})


@register("gemm", source=SRC_ROOFLINE)
def gemm(m: int, n: int, k: int, dtype: str = "bf16", batch: int = 1) -> Operator:
    """C[m,n] = A[m,k] @ B[k,n] (batch independent products when batch > 1); best/worst traffic."""
    return _gemm("gemm", m, n, k, dtype, batch)


@register("bmm", source=SRC_ROOFLINE)
def bmm(batch: int, m: int, n: int, k: int, dtype: str = "bf16") -> Operator:
    """Batched GEMM: batch independent C[m,n] = A[m,k] @ B[k,n]."""
    return _gemm("bmm", m, n, k, dtype, batch)


@register("linear", source=SRC_LAYER)
def linear(tokens: int, in_features: int, out_features: int, dtype: str = "fp16",
           bias: bool = False) -> Operator:
    """y[tokens,out] = x[tokens,in] @ W[out,in]^T (+ b): a fully connected layer on a batch of tokens."""
    positive("linear", tokens=tokens, in_features=in_features, out_features=out_features)
    dt = canonical_dtype(dtype)
    b = dtype_bytes(dt)
    items = [
        Term("read weights", bytes=nbytes(out_features * in_features, dt),
             note=f"out·in·{b:g} B, once per batch"),
        Term("read inputs", bytes=nbytes(tokens * in_features, dt), note=f"tokens·in·{b:g} B"),
        Term("write outputs", bytes=nbytes(tokens * out_features, dt), note=f"tokens·out·{b:g} B"),
        Term("2·tokens·in·out", flops=2.0 * tokens * in_features * out_features,
             note="multiply-add = 2 FLOP"),
    ]
    if bias:
        items.insert(3, Term("read bias", bytes=nbytes(out_features, dt), note=f"out·{b:g} B"))
        items.append(Term("bias add", flops=1.0 * tokens * out_features, note="1 add per output"))
    shape = {"tokens": tokens, "in_features": in_features, "out_features": out_features} | (
        {"bias": True} if bias else {})
    return Operator("linear", shape, dt, Cost(tuple(items)), Roof("matmul", dt))


@register("gemm-bias", source=SRC_TORCH)
def gemm_bias(m: int, n: int, k: int, bias_elements: int, dtype: str = "fp32", batch: int = 1) -> Operator:
    """C = bias + A[m,k] @ B[k,n] (aten::addmm / baddbmm): the GEMM plus one bias read and one add per output.
    """
    positive("gemm-bias", m=m, n=n, k=k, bias_elements=bias_elements, batch=batch)
    base = gemm(m=m, n=n, k=k, dtype=dtype, batch=batch)
    dt = base.dtype
    b = dtype_bytes(dt)
    extra = Cost((
        Term("read bias", bytes=nbytes(bias_elements, dt),
             note=f"bias elements·{b:g} B (broadcast rows read once)"),
        Term("add bias", flops=1.0 * batch * m * n, note="1 add per output; alpha = beta = 1 assumed"),
    ))
    shape = {"m": m, "n": n, "k": k, "bias_elements": bias_elements} | (
        {"batch": batch} if batch != 1 else {})
    return Operator("gemm-bias", shape, dt, base.cost + extra, Roof("matmul", dt))


@register("grouped-gemm", source=SRC_SEQ + "; torch._grouped_mm / F.grouped_mm")
def grouped_gemm(rows: int, k: int, n: int, groups: int, dtype: str = "bf16", out_dtype: str = "",
                 scale_bytes: float = 0.0, index_bytes: float = 0.0, b_per_group: bool = True,
                 active_groups: int = 0) -> Operator:
    """Grouped GEMM: `rows` rows of A [rows, k], each multiplied by its group's B [k, n] (a 2-D A split by
    offsets, or `groups` stacked products): 2·rows·k·n FLOP. Bytes: A, the B of every group that receives
    rows once, the output once, the fp8 scales and the offsets. `active_groups`: how many groups receive
    rows, where the offsets' values are known; 0 = not recorded, then at most min(groups, rows) groups do
    (each routed row lands in one group) and the B bytes are that bound, said so in the notes."""
    positive("grouped-gemm", rows=rows, k=k, n=n, groups=groups)
    if not 0 <= active_groups <= groups:
        raise ValueError(f"grouped-gemm: active_groups={active_groups} is not in 0..groups={groups}")
    dt = canonical_dtype(dtype)
    odt = canonical_dtype(out_dtype or dtype)
    notes: tuple[str, ...] = ()
    if not b_per_group:
        read, b_note = 1, "k·n (one B for every group)"
    elif active_groups:
        read, b_note = active_groups, f"{active_groups} of {groups} groups receive rows: {active_groups}·k·n"
    else:
        read = min(groups, rows)
        b_note = f"at most min(groups, rows) = {read} of {groups} groups receive rows: {read}·k·n"
        if groups > 1:
            notes = (f"bound: the weights of at most min(E, T) = {read} of {groups} experts are read "
                     "(each of the T routed rows meets one expert's B); the routing (offsets' values) "
                     "is not recorded",)
    items = [Term("read A", bytes=nbytes(rows * k, dt), note=f"rows·k·{dtype_bytes(dt):g} B"),
             Term("read B", bytes=nbytes(read * k * n, dt), note=b_note),
             Term("write C", bytes=nbytes(rows * n, odt), note=f"rows·n·{dtype_bytes(odt):g} B ({odt})"),
             Term("2·rows·k·n", flops=2.0 * rows * k * n, note="each row of A meets one group's B")]
    if scale_bytes:
        items.append(Term("read scales", bytes=scale_bytes, note="the recorded scale tensors"))
    if index_bytes:
        items.append(Term("read offsets", bytes=index_bytes, note="group offsets"))
    shape: dict[str, object] = {"rows": rows, "k": k, "n": n, "groups": groups} | (
        {"out_dtype": odt} if odt != dt else {})
    if read < groups and b_per_group:  # the label says whose weights were counted, and whether a bound
        shape["groups_read"] = read if active_groups else f"at most {read} (routing not recorded)"
    return Operator("grouped-gemm", shape, dt, Cost(tuple(items), notes), Roof("matmul", dt))
