"""aten readers of the matrix products (formulas: nsroof.costs.ledger.matmul): mm, addmm, bmm, baddbmm,
matmul, linear, the transformer fast path's _addmm_activation, and grouped and scaled (fp8) matmuls."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from nsroof.costs.ledger.aten.args import (
    SCALAR_TYPES,
    NoShape,
    Shape,
    Unrecorded,
    arg,
    broadcast,
    dtype_of,
    ledger_op,
    need,
    need_dtype,
    numel,
    recorded,
    register_reader,
)
from nsroof.costs.ledger.core import Cost, Operator, Term


def _mm(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    need(len(s) >= 2 and len(s[0]) == 2 and len(s[1]) == 2, "mm needs two 2-D inputs")
    (m, k), (k2, n) = s[0], s[1]
    need(k == k2, f"mm inner dimensions differ ({k} vs {k2})")
    return ledger_op("gemm", m=m, n=n, k=k, dtype=need_dtype(t, 0))


def _addmm(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    need(len(s) >= 3 and len(s[1]) == 2 and len(s[2]) == 2, "addmm needs a bias and two 2-D inputs")
    (m, k), (k2, n) = s[1], s[2]
    need(k == k2, f"addmm inner dimensions differ ({k} vs {k2})")
    return ledger_op("gemm-bias", m=m, n=n, k=k, bias_elements=max(numel(s[0]), 1), dtype=need_dtype(t, 1))


def _bmm(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    need(len(s) >= 2 and len(s[0]) == 3 and len(s[1]) == 3, "bmm needs two 3-D inputs")
    (b, m, k), (b2, k2, n) = s[0], s[1]
    need(k == k2 and b == b2, f"bmm shapes {s[0]} and {s[1]} do not agree")
    return ledger_op("bmm", batch=b, m=m, n=n, k=k, dtype=need_dtype(t, 0))


def _baddbmm(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    need(len(s) >= 3 and len(s[1]) == 3 and len(s[2]) == 3, "baddbmm needs a bias and two 3-D inputs")
    (b, m, k), (b2, k2, n) = s[1], s[2]
    need(k == k2 and b == b2, f"baddbmm shapes {s[1]} and {s[2]} do not agree")
    return ledger_op("gemm-bias", m=m, n=n, k=k, batch=b, bias_elements=max(numel(s[0]), 1),
                     dtype=need_dtype(t, 1))


def _matmul(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    need(len(s) >= 2 and len(s[0]) >= 1 and len(s[1]) >= 1, "matmul needs two tensor inputs")
    a, b = list(s[0]), list(s[1])
    dt = need_dtype(t, 0)
    # 1-D operands are promoted to matrices as torch.matmul does.
    if len(a) == 1:
        a = [1, a[0]]
    if len(b) == 1:
        b = [b[0], 1]
    m, k = a[-2], a[-1]
    n = b[-1]
    need(b[-2] == k, f"matmul inner dimensions differ ({k} vs {b[-2]})")
    if len(b) == 2:
        # (..., m, k) @ (k, n): torch folds the batch dimensions into m.
        return ledger_op("gemm", m=numel(a[:-1]), n=n, k=k, dtype=dt)
    batch = broadcast(a[:-2], b[:-2])
    return ledger_op("bmm", batch=max(numel(batch), 1), m=m, n=n, k=k, dtype=dt)


def _linear(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    need(len(s) >= 2 and len(s[0]) >= 1 and len(s[1]) == 2, "linear needs an input and a 2-D weight")
    out_f, in_f = s[1]
    # linear(input, weight, bias) records 2 or 3 inputs that agree; sampled production traces hold records
    # with more inputs or disagreeing shapes (HTA's timeline sample): no shape to trust
    need(len(s) <= 3 and s[0][-1] == in_f, f"linear inputs {s} are not (input, weight[, bias])")
    has_bias = len(s) > 2 and len(s[2]) == 1
    return ledger_op("linear", tokens=numel(s[0][:-1]) or 1, in_features=in_f, out_features=out_f,
                     dtype=need_dtype(t, 0), bias=has_bias)


def _with(op: Operator, *items: Term, formula: str = "", shape: dict[str, Any] | None = None) -> Operator:
    return replace(op, cost=op.cost + Cost(tuple(items)), formula=formula or op.formula,
                   shape=dict(op.shape) | (shape or {}))


def _addmm_activation(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # _addmm_activation(bias, mat1, mat2, beta, alpha, use_gelu): relu (1) or gelu (5) per output
    need(len(s) >= 3 and len(s[1]) == 2 and len(s[2]) == 2, "needs a bias and two 2-D inputs")
    (m, k), (_, n) = s[1], s[2]
    gelu = bool(recorded(c, 5, "_addmm_activation use_gelu not recorded"))
    op = ledger_op("gemm-bias", m=m, n=n, k=k, bias_elements=max(numel(s[0]), 1), dtype=need_dtype(t, 1))
    return _with(op, Term("gelu" if gelu else "relu", flops=(5.0 if gelu else 1.0) * m * n,
                          note="per output"),
                 shape={"activation": "gelu" if gelu else "relu"})


def _active_groups(values: Any, groups: int) -> int:
    """How many groups receive rows, from the offsets' values (cumulative row ends, one per group) where the
    trace holds them as a list; 0 where it does not (torch.profiler records a tensor's shape, not its
    values) or they do not fit `groups` ascending."""
    if not isinstance(values, (list, tuple)) or len(values) != groups:
        return 0
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return 0
    ends = [0, *values]
    if any(b < a for a, b in zip(ends, ends[1:], strict=False)):
        return 0
    return sum(b > a for a, b in zip(ends, ends[1:], strict=False))


def _grouped_mm(scaled: bool) -> Any:
    """_grouped_mm(mat_a, mat_b, offs, bias, out_dtype); _scaled_grouped_mm(mat_a, mat_b, scale_a, scale_b,
    offs, bias, scale_result, out_dtype, use_fast_accum). A 2-D [M, K] × 3-D [G, K, N] (rows split by offs),
    3-D × 3-D (G products), or 2-D × 2-D with K split by offs (output [G, M, N]). 2-D × 3-D reads the B of
    the groups the offsets give rows to: counted from their values where recorded, else bounded by
    min(G, M) (see grouped-gemm)."""

    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        need(len(s) >= 2, "needs mat_a and mat_b")
        a, b = s[0], s[1]
        dt = need_dtype(t, 0)
        offs_at, out_at = (4, 7) if scaled else (2, 4)
        if len(c) <= out_at:
            raise Unrecorded("grouped_mm out_dtype not recorded")
        code = arg(c, out_at)
        out_dtype = SCALAR_TYPES.get(code, "") if isinstance(code, int) else ""
        if scaled and not out_dtype:
            out_dtype = "bf16"  # torch._scaled_grouped_mm's only output dtype when none is given
        offs = s[offs_at] if len(s) > offs_at else []
        index_bytes = numel(offs) * 4.0 if offs else 0.0
        scales = sum(numel(x) * 4.0 for x in s[2:4]) if scaled else 0.0
        if len(a) == 2 and len(b) == 3:
            need(a[1] == b[1], f"grouped_mm shapes {a} and {b} do not agree")
            rows, k, n, groups = a[0], a[1], b[2], b[0]
            active = _active_groups(arg(c, offs_at), groups)
        elif len(a) == 3 and len(b) == 3:
            need(a[0] == b[0] and a[2] == b[1], f"grouped_mm shapes {a} and {b} do not agree")
            rows, k, n, groups = a[0] * a[1], a[2], b[2], b[0]
            active = groups  # every group multiplies its own a[1] rows
        elif len(a) == 2 and len(b) == 2:
            need(a[1] == b[0] and bool(offs), f"grouped_mm shapes {a} and {b} do not agree")
            groups = numel(offs)
            op = ledger_op("grouped-gemm", rows=a[0], k=a[1], n=b[1], groups=1, dtype=dt, out_dtype=out_dtype,
                           scale_bytes=scales, index_bytes=index_bytes)
            extra = (groups - 1) * a[0] * b[1]
            return _with(op, Term("write the other groups' outputs",
                                  bytes=extra * op.cost.terms[2].bytes / (a[0] * b[1])))
        else:
            raise NoShape(f"grouped_mm of {len(a)}-D by {len(b)}-D has no formula")
        return ledger_op("grouped-gemm", rows=rows, k=k, n=n, groups=groups, dtype=dt, out_dtype=out_dtype,
                         scale_bytes=scales, index_bytes=index_bytes, active_groups=active)

    return read


def _scaled_mm(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # _scaled_mm(self [M, K], mat2 [K, N], scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum)
    need(len(s) >= 4 and len(s[0]) == 2 and len(s[1]) == 2, "needs two 2-D inputs and their scales")
    (m, k), (k2, n) = s[0], s[1]
    need(k == k2, f"_scaled_mm inner dimensions differ ({k} vs {k2})")
    if len(c) <= 6:
        raise Unrecorded("_scaled_mm out_dtype not recorded")
    code = arg(c, 6)
    out = SCALAR_TYPES.get(code, "") if isinstance(code, int) else ""
    scales = sum(numel(x) * 4.0 for x in s[2:4])
    op = ledger_op("grouped-gemm", rows=m, k=k, n=n, groups=1, dtype=need_dtype(t, 0), out_dtype=out,
                   scale_bytes=scales)
    bias = numel(s[4]) if len(s) > 4 and s[4] else 0
    if bias:
        from nsroof.costs.ledger.core import dtype_bytes

        bias_dt = dtype_of(t, 4) or "bf16"
        op = _with(op, Term("read bias", bytes=bias * dtype_bytes(bias_dt)),
                   Term("add bias", flops=1.0 * m * n))
    return replace(op, formula="scaled-gemm")


register_reader(("mm",), _mm)
register_reader(("addmm",), _addmm)
register_reader(("bmm",), _bmm)
register_reader(("baddbmm",), _baddbmm)
register_reader(("matmul",), _matmul)
register_reader(("linear",), _linear)
register_reader(("_addmm_activation",), _addmm_activation)
register_reader(("_grouped_mm", "grouped_mm"), _grouped_mm(False))
register_reader(("_scaled_grouped_mm",), _grouped_mm(True))
register_reader(("_scaled_mm",), _scaled_mm)
