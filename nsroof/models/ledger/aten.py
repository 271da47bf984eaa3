"""aten op + input shapes + dtypes (+ the scalar arguments torch.profiler records) -> analytic FLOPs and
compulsory bytes, through the ledger registry (nsroof.models.ledger).

`op_cost(name, shapes, dtypes, concrete)` returns an OpCost: either a ledger Operator with its FLOPs, bytes
and report precision, or NaN with `missing` saying why ("no formula for aten::X", "no input shapes
recorded (profile with record_shapes=True)", "conv stride/padding not recorded", ...). Nothing is guessed:
an op whose shape or arguments the formula cannot read gets NaN, never a default argument.

The scalar arguments (stride, padding, dim, ...) come from torch.profiler's "Concrete Inputs": recorded
with record_shapes=True since torch 2.1 (pytorch/pytorch#100593: single scalars and scalar lists of up to 30
elements), absent in 2.0 and earlier and when torch._C._profiler._set_record_concrete_inputs_enabled_val(False)
turned them off. Live profiler events carry them as Python values; chrome traces as strings ('[2, 2]',
'False', '1', '' for a tensor), which `concrete_values` turns back into values.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
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
    roof_kind: str = ""  # the ledger roof: "matmul" or "simt" ('' when unknown)

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
    """A formula could not read the shape it needs: becomes NaN with this message (prefixed by the op)."""


class _Unrecorded(_NoShape):
    """An argument the formula needs was not recorded: NaN with this message as is, so the reason reads the
    same for every op it hits (a report groups its missing texts)."""


NO_SHAPES = "no input shapes recorded (profile with record_shapes=True)"
CONV_ARGS_UNRECORDED = "conv stride/padding not recorded"


def concrete_values(concrete: Sequence[Any] | None) -> list[Any]:
    """The recorded scalar arguments as values: chrome traces write them as text ('[2, 2]', 'True', '1e-05',
    '' for a tensor argument); live events already hold values. Text that is no Python literal stays text."""
    out: list[Any] = []
    for value in concrete or []:
        if isinstance(value, str):
            text = value.strip()
            if not text:
                value = None
            else:
                try:
                    value = ast.literal_eval(text)
                except (ValueError, SyntaxError, MemoryError, RecursionError):
                    value = text
        out.append(value)
    return out


def _recorded(c: Sequence[Any], i: int, what: str = CONV_ARGS_UNRECORDED) -> Any:
    """Argument i, which must have been recorded: no default is assumed in its place."""
    value = _arg(c, i)
    if value is None:
        raise _Unrecorded(what)
    return value


def _need(cond: bool, why: str) -> None:
    if not cond:
        raise _NoShape(why)


def _ledger(name: str, **shape: Any) -> Any:
    from nsroof.models import ledger  # noqa: F401 - registers every formula
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
    (m, k), (k2, n) = s[1], s[2]
    _need(k == k2, f"addmm inner dimensions differ ({k} vs {k2})")
    return _ledger("gemm-bias", m=m, n=n, k=k, bias_elements=max(numel(s[0]), 1), dtype=_need_dtype(t, 1))


def _bmm(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    _need(len(s) >= 2 and len(s[0]) == 3 and len(s[1]) == 3, "bmm needs two 3-D inputs")
    (b, m, k), (b2, k2, n) = s[0], s[1]
    _need(k == k2 and b == b2, f"bmm shapes {s[0]} and {s[1]} do not agree")
    return _ledger("bmm", batch=b, m=m, n=n, k=k, dtype=_need_dtype(t, 0))


def _baddbmm(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    _need(len(s) >= 3 and len(s[1]) == 3 and len(s[2]) == 3, "baddbmm needs a bias and two 3-D inputs")
    (b, m, k), (b2, k2, n) = s[1], s[2]
    _need(k == k2 and b == b2, f"baddbmm shapes {s[1]} and {s[2]} do not agree")
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
    # linear(input, weight, bias) records 2 or 3 inputs that agree; sampled production traces hold records
    # with more inputs or disagreeing shapes (HTA's timeline sample): no shape to trust
    _need(len(s) <= 3 and s[0][-1] == in_f, f"linear inputs {s} are not (input, weight[, bias])")
    has_bias = len(s) > 2 and len(s[2]) == 1
    return _ledger("linear", tokens=numel(s[0][:-1]) or 1, in_features=in_f, out_features=out_f,
                   dtype=_need_dtype(t, 0), bias=has_bias)


def _conv_reader(stride_at: int, padding_at: int, dilation_at: int, bias: bool = True,
                 transposed_at: int | None = None) -> Reader:
    """Forward 2-D convolution; the argument positions differ per aten op:
    conv2d(input, weight, bias, stride, padding, dilation, groups);
    convolution / _convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, …);
    mkldnn_convolution(input, weight, bias, padding, stride, dilation, groups);
    cudnn_convolution(input, weight, padding, stride, dilation, groups, benchmark, deterministic, allow_tf32).
    The output size depends on stride, padding and dilation, which only the recorded Concrete Inputs give;
    groups = C / the weight's second dimension."""

    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        _need(len(s) >= 2 and len(s[0]) == 4 and len(s[1]) == 4,
              "only 2-D convolutions (4-D input and weight) have a formula")
        if not bias:
            # cudnn_convolution lost its bias argument in torch 1.8: an older trace has a tensor here
            _need(len(t) > 2 and t[2] in ("ScalarList", ""), "argument layout of this cudnn_convolution not recognised")
        n, cin, h, w = s[0]
        cout, cin_per_group, kh, kw = s[1]
        _need(kh == kw, f"the conv2d formula needs a square kernel, got {kh}×{kw}")
        _need(cin_per_group > 0 and cin % cin_per_group == 0,
              f"input channels {cin} are not a multiple of the weight's {cin_per_group}")
        if transposed_at is not None:
            _need(not bool(_recorded(c, transposed_at)), "transposed convolutions have no formula")
        stride, padding, dilation = (_square(_recorded(c, i), name) for i, name in
                                     ((stride_at, "stride"), (padding_at, "padding"), (dilation_at, "dilation")))
        has_bias = bias and len(s) > 2 and len(s[2]) == 1
        return _ledger("conv2d", batch=n, in_channels=cin, height=h, width=w, out_channels=cout, kernel_size=kh,
                       stride=stride, padding=padding, dilation=dilation, groups=cin // cin_per_group,
                       dtype=_need_dtype(t, 0), bias=has_bias)

    return read


def _square(value: Any, name: str) -> int:
    values = list(value) if isinstance(value, list | tuple) else [value]
    _need(len(values) >= 1 and all(isinstance(v, int) and not isinstance(v, bool) for v in values),
          f"{name} {value!r} is not a list of integers")
    _need(len(set(values)) == 1, f"the conv2d formula needs equal {name} on both axes, got {values}")
    return int(values[0])


def _conv_backward(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
    # output_padding, groups, output_mask): dY's shape gives the output size, so no stride is needed
    _need(len(s) >= 3 and all(len(x) == 4 for x in s[:3]), "only 2-D convolutions (4-D dY, input, weight) have a formula")
    _need(not bool(_recorded(c, 7, "conv transposed flag not recorded")), "transposed convolutions have no formula")
    mask = _recorded(c, 10, "conv backward output_mask not recorded")
    _need(isinstance(mask, list | tuple) and len(mask) == 3, f"output_mask {mask!r} is not three flags")
    return _conv_grads(s[0], s[1], s[2], _need_dtype(t, 0), bool(mask[0]), bool(mask[1]), bool(mask[2]))


def _cudnn_conv_backward(which: str) -> Reader:
    """cudnn_convolution_backward_input(self_size, grad_output, weight, padding, stride, dilation, groups, …)
    and cudnn_convolution_backward_weight(weight_size, grad_output, self, …) (torch ≤ 1.10): the missing
    tensor's shape is the recorded size list."""

    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        size = _recorded(c, 0, f"cudnn conv backward {which} size not recorded")
        _need(isinstance(size, list | tuple) and len(size) == 4, f"{which} size {size!r} is not 4-D")
        _need(len(s) >= 3 and len(s[1]) == 4 and len(s[2]) == 4, "needs 4-D grad_output and weight/input")
        x, w = (list(size), s[2]) if which == "input" else (s[2], list(size))
        return _conv_grads(s[1], x, w, _need_dtype(t, 1), which == "input", which == "weight", False)

    return read


def _conv_grads(dy: Shape, x: Shape, w: Shape, dtype: str, dx: bool, dw: bool, db: bool) -> Any:
    n, cin, h, wd = x
    _, cout, p, q = dy
    k, cin_per_group, r, s2 = w
    _need(r == s2, f"the conv2d-backward formula needs a square kernel, got {r}×{s2}")
    _need(k == cout and cin_per_group > 0 and cin % cin_per_group == 0, f"shapes dY {dy}, X {x}, W {w} do not agree")
    return _ledger("conv2d-backward", batch=n, in_channels=cin, height=h, width=wd, out_channels=cout, out_height=p,
                   out_width=q, kernel_size=r, groups=cin // cin_per_group, dtype=dtype, input_grad=dx,
                   weight_grad=dw, bias_grad=db)


def _batch_norm(training_at: int | None) -> Reader:
    """batch_norm / _batch_norm_impl_index / native_batch_norm / cudnn_batch_norm / miopen_batch_norm
    (input, weight, bias, running_mean, running_var, training, …); training_at None: always evaluation
    (_native_batch_norm_legit_no_training)."""

    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        n, channels, spatial = _nc_spatial(s)
        training = False if training_at is None else _recorded(c, training_at, "batch norm training flag not recorded")
        _need(isinstance(training, bool), f"batch norm training flag {training!r} is not a boolean")
        affine = len(s) > 2 and len(s[1]) == 1 and len(s[2]) == 1
        return _ledger("batchnorm", batch=n, channels=channels, spatial=spatial, dtype=_need_dtype(t, 0),
                       training=training, affine=affine)

    return read


def _nc_spatial(s: list[Shape], at: int = 0) -> tuple[int, int, int]:
    _need(len(s) > at and len(s[at]) >= 2, "batch norm needs an (N, C, …) input")
    shape = s[at]
    return shape[0], shape[1], max(numel(shape[2:]), 1)


def _batch_norm_backward(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd,
    # train, eps, output_mask)
    n, channels, spatial = _nc_spatial(s, 1)
    training = _recorded(c, 7, "batch norm training flag not recorded")
    mask = _recorded(c, 9, "batch norm backward output_mask not recorded")
    _need(isinstance(mask, list | tuple) and len(mask) == 3, f"output_mask {mask!r} is not three flags")
    return _ledger("batchnorm-backward", batch=n, channels=channels, spatial=spatial, dtype=_need_dtype(t, 0),
                   training=bool(training), input_grad=bool(mask[0]), affine_grad=bool(mask[1] or mask[2]))


def _cudnn_batch_norm_backward(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # cudnn_batch_norm_backward(input, grad_output, weight, running_mean, running_var, save_mean, save_var,
    # epsilon, reserveSpace): training mode, all three gradients
    n, channels, spatial = _nc_spatial(s, 0)
    return _ledger("batchnorm-backward", batch=n, channels=channels, spatial=spatial, dtype=_need_dtype(t, 0),
                   training=True)


def _pool(mode: str, indices: bool) -> Reader:
    """max_pool2d[_with_indices](input, kernel_size, stride, padding, dilation, ceil_mode);
    avg_pool2d(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)."""

    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        _need(len(s) >= 1 and len(s[0]) == 4, "only batched 2-D pooling (a 4-D input) has a formula")
        what = "pool kernel/stride/padding not recorded"
        kernel = _square(_recorded(c, 1, what), "kernel_size")
        stride_value = _recorded(c, 2, what)
        # an empty stride list is torch's "same as the kernel"
        stride = kernel if stride_value in ([], ()) else _square(stride_value, "stride")
        padding = _square(_recorded(c, 3, what), "padding")
        dilation = _square(_recorded(c, 4, what), "dilation") if mode == "max" else 1
        ceil_mode = _recorded(c, 5 if mode == "max" else 4, what)
        n, ch, h, w = s[0]
        return _ledger("pool2d", batch=n, channels=ch, height=h, width=w, kernel_size=kernel, stride=stride,
                       padding=padding, dilation=dilation, ceil_mode=bool(ceil_mode), mode=mode,
                       dtype=_need_dtype(t, 0), indices=indices)

    return read


def _pool_backward(mode: str) -> Reader:
    """max_pool2d_with_indices_backward(grad_output, input, kernel_size, …, indices) and
    avg_pool2d_backward(grad_output, input, kernel_size, …): dY's shape is the output size."""

    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        _need(len(s) >= 2 and len(s[0]) == 4 and len(s[1]) == 4, "only batched 2-D pooling (4-D dY and input) has a formula")
        kernel = _square(_recorded(c, 2, "pool kernel/stride/padding not recorded"), "kernel_size")
        n, ch, h, w = s[1]
        return _ledger("pool2d-backward", batch=n, channels=ch, height=h, width=w, out_height=s[0][2],
                       out_width=s[0][3], kernel_size=kernel, mode=mode, dtype=_need_dtype(t, 0))

    return read


def _adaptive_avg_pool(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # _adaptive_avg_pool2d(input, output_size): with sizes that divide the input, disjoint windows, i.e. a
    # mean over each window (global average pooling is output_size [1, 1])
    _need(len(s) >= 1 and len(s[0]) == 4, "only batched 2-D pooling (a 4-D input) has a formula")
    size = _recorded(c, 1, "adaptive pool output_size not recorded")
    _need(isinstance(size, list | tuple) and len(size) == 2 and all(isinstance(v, int) and v > 0 for v in size),
          f"output_size {size!r} is not two positive integers")
    n, ch, h, w = s[0]
    _need(h % size[0] == 0 and w % size[1] == 0, f"output {size} does not divide the {h}×{w} input (overlapping windows)")
    return _ledger("reduction", n=max(numel(s[0]), 1), outputs=n * ch * size[0] * size[1], dtype=_need_dtype(t, 0),
                   divide_per_output=1.0, op="adaptive_avg_pool2d")


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
    # embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq);
    # embedding_backward(…, sparse) adds the sparse flag: a sparse gradient is no dense table write
    _need(len(s) >= 2 and len(s[0]) >= 1, "embedding backward needs the gradient shape")
    _need(not bool(_arg(c, 5, False)), "sparse embedding gradients have no formula")
    num_weights = _recorded(c, 2, "embedding num_weights not recorded")
    _need(isinstance(num_weights, int) and not isinstance(num_weights, bool), f"num_weights {num_weights!r} is not an integer")
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
        # sum(input, dtype) has no dims; sum.dim_IntList(input, dim, …) records them as a ScalarList
        if dims is None and len(t) > 1 and t[1] == "ScalarList":
            raise _Unrecorded("reduction dims not recorded")
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


READERS: dict[str, Reader] = {}


def register_reader(names: Iterable[str], reader: Reader) -> None:
    """Map aten ops (base names, see `base_name`) to a shape reader. An op mapped twice is an error, as a
    formula registered twice is in the ledger registry: two readers for one op would make its cost depend
    on the order of this table."""
    from nsroof.models.ledger.core import LedgerError

    for name in names:
        if name in READERS:
            raise LedgerError(f"aten op {name!r} already has a shape reader ({READERS[name].__qualname__})")
        READERS[name] = reader


register_reader(("mm",), _mm)
register_reader(("addmm",), _addmm)
register_reader(("bmm",), _bmm)
register_reader(("baddbmm",), _baddbmm)
register_reader(("matmul",), _matmul)
register_reader(("linear",), _linear)
register_reader(("conv2d",), _conv_reader(3, 4, 5))
register_reader(("convolution", "_convolution"), _conv_reader(3, 4, 5, transposed_at=6))
register_reader(("mkldnn_convolution",), _conv_reader(4, 3, 5))
register_reader(("cudnn_convolution",), _conv_reader(3, 2, 4, bias=False))
register_reader(("convolution_backward",), _conv_backward)
register_reader(("cudnn_convolution_backward_input",), _cudnn_conv_backward("input"))
register_reader(("cudnn_convolution_backward_weight",), _cudnn_conv_backward("weight"))
register_reader(("batch_norm", "_batch_norm_impl_index", "native_batch_norm", "cudnn_batch_norm",
                 "miopen_batch_norm"), _batch_norm(5))
register_reader(("_native_batch_norm_legit_no_training",), _batch_norm(None))
register_reader(("native_batch_norm_backward",), _batch_norm_backward)
register_reader(("cudnn_batch_norm_backward", "miopen_batch_norm_backward"), _cudnn_batch_norm_backward)
register_reader(("max_pool2d",), _pool("max", False))
register_reader(("max_pool2d_with_indices",), _pool("max", True))
register_reader(("avg_pool2d",), _pool("avg", False))
register_reader(("max_pool2d_with_indices_backward",), _pool_backward("max"))
register_reader(("avg_pool2d_backward",), _pool_backward("avg"))
register_reader(("adaptive_avg_pool2d", "_adaptive_avg_pool2d"), _adaptive_avg_pool)
register_reader(("scaled_dot_product_attention",), _attention_reader(0, 5, False))
register_reader(("_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_for_cpu"),
                _attention_reader(0, 4, False))
register_reader(("_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention"),
                _attention_reader(0, 6, False))
register_reader(("_scaled_dot_product_flash_attention_for_cpu_backward",), _attention_reader(1, 7, True))
register_reader(("_scaled_dot_product_flash_attention_backward", "_scaled_dot_product_efficient_attention_backward"),
                _attention_reader(1, 11, True))
register_reader(("layer_norm", "native_layer_norm"), _layer_norm)
register_reader(("native_layer_norm_backward",), _layer_norm_backward)
register_reader(("rms_norm", "_fused_rms_norm"), _rms_norm)
register_reader(("softmax", "_softmax", "log_softmax", "_log_softmax"), _softmax)
register_reader(("_softmax_backward_data",), _softmax_backward(False))
register_reader(("_log_softmax_backward_data",), _softmax_backward(True))
register_reader(("embedding",), _embedding)
register_reader(("embedding_dense_backward", "embedding_backward"), _embedding_backward)
register_reader(("sum",), _reduction("sum"))
register_reader(("mean",), _reduction("mean"))
for _kind in POINTWISE_FLOPS:
    register_reader((_kind,), _pointwise(_kind))


def has_formula(op: str) -> bool:
    return op.startswith("aten::") and base_name(op) in READERS


def op_cost(op: str, shapes: Sequence[Any] | None, dtypes: Sequence[Any] | None,
            concrete: Sequence[Any] | None = None) -> OpCost:
    """Analytic cost of one aten op call; NaN with the reason in `missing` when it has none.

    A profile without shapes gets one reason for every aten op (NO_SHAPES), formula or not: recording the
    shapes is the fix either way, and only then can "no formula for aten::X" be told apart."""
    shape_list = [list(x) if isinstance(x, list | tuple) else [] for x in (shapes or [])]
    # Without record_shapes a trace has no "Input Dims" (None) and a live event empty lists; with it, every
    # argument has an entry (a scalar's is []), so an empty list with no types means nothing was recorded.
    if op.startswith("aten::") and not shape_list and not dtypes:
        return unknown(NO_SHAPES)
    if not has_formula(op):
        return unknown(f"no formula for {op}")
    try:
        operator = READERS[base_name(op)](shape_list, [str(d) for d in (dtypes or [])], concrete_values(concrete))
    except _Unrecorded as exc:
        return unknown(str(exc))
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
    return OpCost(operator.flops, operator.bytes, operator.formula, operator.label, precision, "", tensor_dtype,
                  operator.roof.kind)


# Kernel names of fp32 matmuls and convolutions run on TF32 tensor cores: cuBLAS / cuDNN name the math
# ("sm80_xmma_gemm_f32f32_tf32f32_f32…", "…implicit_gemm_tf32f32…", cutlass 3 "…tf32gemm…"), CUTLASS 2 sm80
# kernels the instruction ("tensorop_s1688gemm": fp32 data through the 16×8×8 TF32 MMA).
_TF32_KERNEL = re.compile(r"tf32|tensorop_s1688|tensorop_s16816", re.IGNORECASE)


def on_kernel(cost: OpCost, kernel_name: str) -> OpCost:
    """The cost of an op as run by one of its kernels. An fp32 matmul's roof depends on torch's TF32 switch
    (torch.backends.cuda.matmul.allow_tf32, cudnn.allow_tf32), which no trace records: the kernel's name
    does, so a TF32 kernel puts the op under the TF32 tensor roof instead of the fp32 one."""
    if cost.known and cost.roof_kind == "matmul" and cost.precision == "fp32" and _TF32_KERNEL.search(kernel_name):
        return replace(cost, precision="tensor", tensor_dtype="tf32", label=f"{cost.label} on TF32 tensor cores")
    return cost
