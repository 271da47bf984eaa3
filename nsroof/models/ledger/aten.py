"""aten op + input shapes + dtypes (+ the scalar arguments torch.profiler records) -> analytic FLOPs and
compulsory bytes, through the ledger registry (nsroof.models.ledger).

`op_cost(name, shapes, dtypes, concrete)` returns an OpCost: either a ledger Operator with its FLOPs, bytes
and report precision, or NaN with `missing` saying why ("no formula for aten::X", "no input shapes
recorded", ...). Nothing is guessed: an op whose shape the formula cannot read gets NaN.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

Shape = list[int]

# torch.profiler's dtype strings (c10 scalar type names) -> ledger dtype names.
TORCH_DTYPES: dict[str, str] = {
    "float": "fp32",
    "double": "fp64",
    "c10::Half": "fp16",
    "c10::BFloat16": "bf16",
    "c10::Float8_e4m3fn": "fp8",
    "c10::Float8_e5m2": "fp8",
    "long int": "int64",
    "int": "int32",
    "signed char": "int8",
    "unsigned char": "int8",
    "bool": "int8",
}

# FLOPs per output element of pointwise ops (ledger convention: a basic op or a transcendental = 1).
POINTWISE_FLOPS: dict[str, tuple[float, str]] = {
    "add": (1, "1 add"), "sub": (1, "1 subtract"), "mul": (1, "1 multiply"), "div": (1, "1 divide"),
    "rsub": (1, "1 subtract"), "neg": (1, "1 negate"), "reciprocal": (1, "1 divide"),
    "exp": (1, "1 exp"), "log": (1, "1 log"), "sqrt": (1, "1 sqrt"), "rsqrt": (1, "1 rsqrt"),
    "sin": (1, "1 sin"), "cos": (1, "1 cos"), "tanh": (1, "1 tanh"), "abs": (1, "1 abs"),
    "pow": (1, "1 pow"), "square": (1, "1 multiply"), "relu": (1, "1 max"), "clamp": (2, "max + min"),
    "maximum": (1, "1 max"), "minimum": (1, "1 min"), "where": (1, "1 select"),
    "sigmoid": (3, "exp, add, divide"),
    "silu": (4, "x/(1+exp(-x)): negate, exp, add, divide"),
    "gelu": (5, "x·0.5·(1+erf(x/√2)): divide, erf, add, 2 multiplies"),
    "lerp": (3, "a + w·(b − a): subtract, multiply-add"),
    "addcmul": (3, "a + v·b·c: 2 multiplies, 1 add"),
    "addcdiv": (3, "a + v·b/c: divide, multiply, add"),
    "threshold_backward": (1, "1 select"),
    "gelu_backward": (8, "dy·(Φ(x) + x·φ(x)): erf, exp and 6 basic ops"),
    "silu_backward": (6, "dy·σ(x)·(1 + x·(1 − σ(x))): sigmoid 3 + 3 basic ops"),
    "sigmoid_backward": (3, "dy·y·(1 − y)"),
    "tanh_backward": (3, "dy·(1 − y²)"),
    "copy": (0, "data movement only"),
    "clone": (0, "data movement only"),
    "fill": (0, "write only"),
    "zero": (0, "write only"),
}

_FLOATING = ("fp64", "fp32", "fp16", "bf16", "fp8")

# Pointwise ops whose inputs are all the tensors passed (no output tensor among them).
_WRITE_ONLY = {"fill", "zero"}


@dataclass(frozen=True)
class OpCost:
    flops: float
    bytes: float
    formula: str  # ledger formula name ('' when none)
    label: str  # e.g. gemm(m=512, n=256, k=1024, dtype=fp32)
    precision: str  # report precision: fp64, fp32, fp16, tensor ('' when unknown)
    missing: str  # why flops/bytes are NaN ('' when known)
    tensor_dtype: str = ""  # for precision "tensor": the dtype whose dense tensor peak is the roof

    @property
    def known(self) -> bool:
        return not self.missing


def unknown(reason: str) -> OpCost:
    return OpCost(math.nan, math.nan, "", "", "", reason)


def base_name(op: str) -> str:
    """'aten::add_' -> 'add'; 'aten::addmm' -> 'addmm' (in-place and out variants share a formula)."""
    name = op.split("::", 1)[1] if "::" in op else op
    name = name.split(".", 1)[0]
    if name.endswith("_") and not name.startswith("_"):
        name = name[:-1]
    return name


def numel(shape: Sequence[int]) -> int:
    return math.prod(int(s) for s in shape)


def _dtype(dtypes: Sequence[str], i: int) -> str | None:
    if i >= len(dtypes):
        return None
    return TORCH_DTYPES.get(str(dtypes[i]))


def _arg(concrete: Sequence[Any], i: int, default: Any = None) -> Any:
    if i < len(concrete) and concrete[i] is not None:
        return concrete[i]
    return default


class _NoShape(Exception):
    """A formula could not read the shape it needs: becomes NaN with this message."""


def _need(cond: bool, why: str) -> None:
    if not cond:
        raise _NoShape(why)


def _ledger(name: str, **shape: Any) -> Any:
    from nsroof.models.ledger import ops_torch  # noqa: F401 - registers the torch formulas
    from nsroof.models.ledger.registry import operator

    return operator(name, **shape)


# --------------------------------------------------------------------------- per-op shape readers
# Each takes (shapes, dtypes, concrete) and returns a ledger Operator or raises _NoShape.

Reader = Callable[[list[Shape], list[str], list[Any]], Any]


def _mm(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    _need(len(s) >= 2 and len(s[0]) == 2 and len(s[1]) == 2, "mm needs two 2-D inputs")
    (m, k), (k2, n) = s[0], s[1]
    _need(k == k2, f"mm inner dimensions differ ({k} vs {k2})")
    return _ledger("gemm", m=m, n=n, k=k, dtype=_need_dtype(t, 0))


def _addmm(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    _need(len(s) >= 3 and len(s[1]) == 2 and len(s[2]) == 2, "addmm needs a bias and two 2-D inputs")
    (m, k), (_, n) = s[1], s[2]
    return _ledger("gemm-bias", m=m, n=n, k=k, bias_elements=max(numel(s[0]), 1), dtype=_need_dtype(t, 1))


def _bmm(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    _need(len(s) >= 2 and len(s[0]) == 3 and len(s[1]) == 3, "bmm needs two 3-D inputs")
    (b, m, k), (_, _, n) = s[0], s[1]
    return _ledger("bmm", batch=b, m=m, n=n, k=k, dtype=_need_dtype(t, 0))


def _baddbmm(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    _need(len(s) >= 3 and len(s[1]) == 3 and len(s[2]) == 3, "baddbmm needs a bias and two 3-D inputs")
    (b, m, k), (_, _, n) = s[1], s[2]
    return _ledger("gemm-bias", m=m, n=n, k=k, batch=b, bias_elements=max(numel(s[0]), 1), dtype=_need_dtype(t, 1))


def _matmul(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    _need(len(s) >= 2 and len(s[0]) >= 1 and len(s[1]) >= 1, "matmul needs two tensor inputs")
    a, b = list(s[0]), list(s[1])
    dt = _need_dtype(t, 0)
    # 1-D operands are promoted to matrices as torch.matmul does.
    if len(a) == 1:
        a = [1, a[0]]
    if len(b) == 1:
        b = [b[0], 1]
    m, k = a[-2], a[-1]
    n = b[-1]
    _need(b[-2] == k, f"matmul inner dimensions differ ({k} vs {b[-2]})")
    if len(b) == 2:
        # (..., m, k) @ (k, n): torch folds the batch dimensions into m.
        return _ledger("gemm", m=numel(a[:-1]), n=n, k=k, dtype=dt)
    batch = _broadcast(a[:-2], b[:-2])
    return _ledger("bmm", batch=max(numel(batch), 1), m=m, n=n, k=k, dtype=dt)


def _linear(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    _need(len(s) >= 2 and len(s[0]) >= 1 and len(s[1]) == 2, "linear needs an input and a 2-D weight")
    out_f, in_f = s[1]
    has_bias = len(s) > 2 and len(s[2]) == 1
    return _ledger("linear", tokens=numel(s[0][:-1]) or 1, in_features=in_f, out_features=out_f,
                   dtype=_need_dtype(t, 0), bias=has_bias)


def _conv(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    _need(len(s) >= 2 and len(s[0]) == 4 and len(s[1]) == 4, "only 2-D convolutions (4-D input and weight) have a formula")
    n, cin, h, w = s[0]
    cout, _, kh, kw = s[1]
    _need(kh == kw, f"the conv2d formula needs a square kernel, got {kh}×{kw}")
    stride, padding, dilation = (_square(_arg(c, i, [d]), name) for i, d, name in
                                 ((3, 1, "stride"), (4, 0, "padding"), (5, 1, "dilation")))
    # aten::convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    # aten::conv2d(input, weight, bias, stride, padding, dilation, groups)
    groups_at = 8 if len(c) > 8 else 6
    transposed = len(c) > 8 and bool(_arg(c, 6, False))
    _need(not transposed, "transposed convolutions have no formula")
    groups = int(_arg(c, groups_at, 1))
    has_bias = len(s) > 2 and len(s[2]) == 1
    return _ledger("conv2d", batch=n, in_channels=cin, height=h, width=w, out_channels=cout, kernel_size=kh,
                   stride=stride, padding=padding, dilation=dilation, groups=groups, dtype=_need_dtype(t, 0),
                   bias=has_bias)


def _square(value: Any, name: str) -> int:
    values = list(value) if isinstance(value, list | tuple) else [value]
    _need(len(set(values)) == 1, f"the conv2d formula needs equal {name} on both axes, got {values}")
    return int(values[0])


def _attention_reader(q_at: int, causal_at: int, backward: bool) -> Reader:
    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        _need(len(s) > q_at + 1 and len(s[q_at]) == 4 and len(s[q_at + 1]) == 4,
              "attention needs 4-D (batch, heads, seq, dim) query and key")
        b, h, sq, d = s[q_at]
        skv = s[q_at + 1][2]
        causal = bool(_arg(c, causal_at, False))
        return _ledger("attention-backward" if backward else "attention", batch_heads=b * h, sq=sq, skv=skv, d=d,
                       dtype=_need_dtype(t, q_at), causal=causal)

    return read


def _layer_norm(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    hidden, rows = _norm_rows(s, c, 1)
    affine = len(s) > 2 and len(s[2]) >= 1
    return _ledger("layernorm", rows=rows, hidden=hidden, dtype=_need_dtype(t, 0), affine=affine)


def _rms_norm(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    hidden, rows = _norm_rows(s, c, 1)
    return _ledger("rmsnorm", rows=rows, hidden=hidden, dtype=_need_dtype(t, 0))


def _layer_norm_backward(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask)
    _need(len(s) >= 2 and len(s[1]) >= 1, "layer_norm backward needs the input shape")
    normalized = _arg(c, 2)
    _need(isinstance(normalized, list) and len(normalized) >= 1, "normalized_shape was not recorded")
    hidden = numel(normalized)
    affine = len(s) > 5 and len(s[5]) >= 1
    return _ledger("layernorm-backward", rows=numel(s[1]) // hidden, hidden=hidden, dtype=_need_dtype(t, 1),
                   affine=affine)


def _norm_rows(s: list[Shape], c: list[Any], at: int) -> tuple[int, int]:
    _need(len(s) >= 1 and len(s[0]) >= 1, "norm needs the input shape")
    normalized = _arg(c, at)
    _need(isinstance(normalized, list) and len(normalized) >= 1, "normalized_shape was not recorded")
    hidden = numel(normalized)
    return hidden, numel(s[0]) // hidden


def _softmax(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    rows, cols = _softmax_rows(s, c, 0, 1)
    return _ledger("softmax", rows=rows, cols=cols, dtype=_need_dtype(t, 0))


def _softmax_backward(log: bool) -> Reader:
    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        # _softmax_backward_data(grad_output, output, dim, input_dtype)
        rows, cols = _softmax_rows(s, c, 0, 2)
        return _ledger("softmax-backward", rows=rows, cols=cols, dtype=_need_dtype(t, 0), log=log)

    return read


def _softmax_rows(s: list[Shape], c: list[Any], x_at: int, dim_at: int) -> tuple[int, int]:
    _need(len(s) > x_at and len(s[x_at]) >= 1, "softmax needs the input shape")
    shape = s[x_at]
    dim = _arg(c, dim_at)
    _need(isinstance(dim, int), "softmax dim was not recorded")
    cols = shape[dim % len(shape)]
    return numel(shape) // cols, cols


def _embedding(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    _need(len(s) >= 2 and len(s[0]) == 2, "embedding needs a 2-D weight and the indices")
    _, hidden = s[0]
    return _ledger("embedding", tokens=max(numel(s[1]), 1), hidden=hidden, dtype=_need_dtype(t, 0),
                   index_dtype=_dtype(t, 1) or "int64")


def _embedding_backward(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq)
    _need(len(s) >= 2 and len(s[0]) >= 1, "embedding backward needs the gradient shape")
    num_weights = _arg(c, 2)
    _need(isinstance(num_weights, int), "num_weights was not recorded")
    hidden = s[0][-1]
    return _ledger("embedding-backward", tokens=max(numel(s[1]), 1), hidden=hidden, num_embeddings=num_weights,
                   dtype=_need_dtype(t, 0), index_dtype=_dtype(t, 1) or "int64")


def _pointwise(kind: str) -> Reader:
    flops_per_element, note = POINTWISE_FLOPS[kind]

    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        tensors = [(shape, i) for i, shape in enumerate(s) if _dtype(t, i) is not None]
        _need(bool(tensors), "no tensor input shapes recorded")
        out_shape: list[int] = []
        for shape, _ in tensors:
            out_shape = _broadcast(out_shape, shape)
        n = numel(out_shape)
        read_from = tensors[1:] if kind == "copy" else tensors  # copy_(self, src) overwrites self unread
        # The data's dtype: the first floating input (where(cond, a, b) starts with a bool mask).
        floating = [i for _, i in tensors if _dtype(t, i) in _FLOATING]
        dtype = _need_dtype(t, floating[0] if floating else tensors[0][1])
        reads, other_bytes = 0, 0.0
        if kind not in _WRITE_ONLY:
            from nsroof.models.ledger.core import dtype_bytes

            for shape, i in read_from:
                if _dtype(t, i) == dtype:
                    reads += numel(shape)
                else:
                    other_bytes += numel(shape) * dtype_bytes(_need_dtype(t, i))
        return _ledger("pointwise", n=n, read_elements=reads, flops_per_element=float(flops_per_element),
                       dtype=dtype, op=f"{kind}: {note}", other_read_bytes=other_bytes)

    return read


def _reduction(kind: str) -> Reader:
    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        # sum/mean(input, dim=None, keepdim=False, dtype=None): one add per input element (+1 divide per
        # output for mean)
        _need(len(s) >= 1 and _dtype(t, 0) is not None, "reduction needs the input shape")
        shape = s[0]
        dims = _arg(c, 1)
        if isinstance(dims, int):
            dims = [dims]
        if not dims or not shape:
            out = 1
        else:
            reduced = {d % len(shape) for d in dims}
            out = numel([n for i, n in enumerate(shape) if i not in reduced])
        n = max(numel(shape), 1)
        per_output = 1.0 if kind == "mean" else 0.0
        return _ledger("reduction", n=n, outputs=out, dtype=_need_dtype(t, 0), divide_per_output=per_output, op=kind)

    return read


def _broadcast(a: Sequence[int], b: Sequence[int]) -> list[int]:
    out: list[int] = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        _need(x == y or x == 1 or y == 1, f"shapes {list(a)} and {list(b)} do not broadcast")
        out.append(max(x, y))
    return out[::-1]


def _need_dtype(t: Sequence[str], i: int) -> str:
    dt = _dtype(t, i)
    _need(dt is not None, f"input dtype {t[i] if i < len(t) else '(not recorded)'!r} has no byte size")
    assert dt is not None
    return dt


READERS: dict[str, Reader] = {
    "mm": _mm,
    "addmm": _addmm,
    "bmm": _bmm,
    "baddbmm": _baddbmm,
    "matmul": _matmul,
    "linear": _linear,
    "convolution": _conv,
    "_convolution": _conv,
    "conv2d": _conv,
    "scaled_dot_product_attention": _attention_reader(0, 5, False),
    "_scaled_dot_product_flash_attention": _attention_reader(0, 4, False),
    "_scaled_dot_product_flash_attention_for_cpu": _attention_reader(0, 4, False),
    "_scaled_dot_product_efficient_attention": _attention_reader(0, 6, False),
    "_scaled_dot_product_cudnn_attention": _attention_reader(0, 6, False),
    "_scaled_dot_product_flash_attention_for_cpu_backward": _attention_reader(1, 7, True),
    "_scaled_dot_product_flash_attention_backward": _attention_reader(1, 11, True),
    "_scaled_dot_product_efficient_attention_backward": _attention_reader(1, 11, True),
    "layer_norm": _layer_norm,
    "native_layer_norm": _layer_norm,
    "native_layer_norm_backward": _layer_norm_backward,
    "rms_norm": _rms_norm,
    "_fused_rms_norm": _rms_norm,
    "softmax": _softmax,
    "_softmax": _softmax,
    "log_softmax": _softmax,
    "_log_softmax": _softmax,
    "_softmax_backward_data": _softmax_backward(False),
    "_log_softmax_backward_data": _softmax_backward(True),
    "embedding": _embedding,
    "embedding_dense_backward": _embedding_backward,
    "sum": _reduction("sum"),
    "mean": _reduction("mean"),
    **{kind: _pointwise(kind) for kind in POINTWISE_FLOPS},
}


def has_formula(op: str) -> bool:
    return op.startswith("aten::") and base_name(op) in READERS


def op_cost(op: str, shapes: Sequence[Any] | None, dtypes: Sequence[Any] | None,
            concrete: Sequence[Any] | None = None) -> OpCost:
    """Analytic cost of one aten op call; NaN with the reason in `missing` when it has none."""
    if not has_formula(op):
        return unknown(f"no formula for {op}")
    shape_list = [list(x) if isinstance(x, list | tuple) else [] for x in (shapes or [])]
    # A 0-dim tensor has shape [] too: it is told from a missing shape by its recorded dtype.
    if not any(shape_list) and not any(str(d) in TORCH_DTYPES for d in (dtypes or [])):
        return unknown(f"no input shapes recorded for {op} (profile with record_shapes=True)")
    try:
        operator = READERS[base_name(op)](shape_list, [str(d) for d in (dtypes or [])], list(concrete or []))
    except _NoShape as exc:
        return unknown(f"{op}: {exc}")
    except Exception as exc:  # a LedgerError from a degenerate shape (e.g. a zero-sized tensor)
        from nsroof.errors import NsroofError

        if not isinstance(exc, NsroofError):
            raise
        return unknown(f"{op}: {exc}")
    from nsroof.models.ledger.ops_torch import report_precision

    precision = report_precision(operator)
    tensor_dtype = operator.roof.dtype if precision == "tensor" else ""
    return OpCost(operator.flops, operator.bytes, operator.formula, operator.label, precision, "", tensor_dtype)
