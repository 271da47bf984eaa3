"""aten readers of the elementwise ops (formula: nsroof.costs.ledger.pointwise): arithmetic, activations and
their backward, copies, fills and random draws, each output sized at torch's promoted dtype."""

from __future__ import annotations

from typing import Any

from nsroof.costs.ledger.aten.args import (
    FLOATING,
    Reader,
    Shape,
    broadcast,
    dtype_of,
    ledger_op,
    need,
    need_dtype,
    numel,
    register_reader,
)

# FLOPs per output element of pointwise ops (ledger convention: a basic op or a transcendental = 1).
POINTWISE_FLOPS: dict[str, tuple[float, str]] = {
    "add": (1, "1 add"), "sub": (1, "1 subtract"), "mul": (1, "1 multiply"), "div": (1, "1 divide"),
    "rsub": (1, "1 subtract"), "neg": (1, "1 negate"), "reciprocal": (1, "1 divide"),
    "exp": (1, "1 exp"), "log": (1, "1 log"), "sqrt": (1, "1 sqrt"), "rsqrt": (1, "1 rsqrt"),
    "erf": (1, "1 erf"),
    "sin": (1, "1 sin"), "cos": (1, "1 cos"), "tanh": (1, "1 tanh"), "abs": (1, "1 abs"),
    "pow": (1, "1 pow"), "square": (1, "1 multiply"), "relu": (1, "1 max"), "clamp": (2, "max + min"),
    "maximum": (1, "1 max"), "minimum": (1, "1 min"), "where": (1, "1 select"),
    "masked_fill": (1, "1 select (mask ? value : x)"),
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
    "floor_divide": (1, "1 divide (+ floor)"), "remainder": (2, "divide, multiply-subtract"),
    "copy": (0, "data movement only"),
    "clone": (0, "data movement only"),
    "fill": (0, "write only"),
    "zero": (0, "write only"),
    "normal": (3, "Box–Muller: log, sqrt, cos and scale per value (the generator's integer work is not "
                  "counted)"),
    "uniform": (2, "scale + shift of the generator's value"),
    "bernoulli": (1, "1 compare against p"),
    # comparisons and logic: a bool output (what Inductor's decompositions of masks, clamps and the loss's
    # ignore_index leave in a compiled graph)
    "eq": (1, "1 compare"), "ne": (1, "1 compare"), "lt": (1, "1 compare"), "le": (1, "1 compare"),
    "gt": (1, "1 compare"), "ge": (1, "1 compare"),
    "bitwise_and": (1, "1 and"), "bitwise_or": (1, "1 or"), "bitwise_xor": (1, "1 xor"),
    "bitwise_not": (1, "1 not"), "logical_and": (1, "1 and"), "logical_or": (1, "1 or"),
    "logical_not": (1, "1 not"),
}

# Pointwise ops whose output is bool (stored as one byte: int8 in the ledger's dtypes).
_BOOL_OUT = {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_not"}


# Pointwise ops whose inputs are all the tensors passed (no output tensor among them).
_WRITE_ONLY = {"fill", "zero", "normal", "uniform", "bernoulli"}


# The functional overload's argument count (tensors and scalars): one more, a tensor, is `out=`.
_ARITY: dict[str, int] = {"add": 3, "sub": 3, "rsub": 3, "div": 3, "clamp": 3, "where": 3, "lerp": 3,
                          "addcmul": 4, "addcdiv": 4, "threshold_backward": 3, "gelu_backward": 3, "copy": 3,
                          "mul": 2, "pow": 2, "maximum": 2, "minimum": 2, "silu_backward": 2,
                          "sigmoid_backward": 2, "tanh_backward": 2, "clone": 2, "fill": 2, "gelu": 2,
                          "floor_divide": 2, "remainder": 2, "eq": 2, "ne": 2, "lt": 2, "le": 2, "gt": 2,
                          "ge": 2, "bitwise_and": 2, "bitwise_or": 2, "bitwise_xor": 2, "logical_and": 2,
                          "logical_or": 2, "masked_fill": 3}


_RANK = {"fp8": 0, "fp16": 1, "bf16": 1, "fp32": 2, "fp64": 3}


def promoted(dtypes: list[str]) -> str:
    """torch's type promotion among floating tensors: the widest; fp16 with bf16 gives fp32."""
    best = max(dtypes, key=lambda d: _RANK.get(d, -1))
    if {"fp16", "bf16"} <= set(dtypes) and _RANK[best] == 1:
        return "fp32"
    return best


def _pointwise(kind: str, inplace: bool = False) -> Reader:
    """An elementwise op: output dtype after type promotion (in place: self's; out=: the out tensor's); an
    `out=` tensor and the overwritten self of copy_/fill_/zero_ are written, not read."""
    flops_per_element, note = POINTWISE_FLOPS[kind]

    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        tensors = [(shape, i) for i, shape in enumerate(s) if dtype_of(t, i) is not None]
        need(bool(tensors), "no tensor input shapes recorded")
        out_at = tensors[-1][1] if (len(s) > _ARITY.get(kind, 1) and tensors[-1][1] == len(s) - 1
                                    and len(tensors) > 1) else None
        inputs = [x for x in tensors if x[1] != out_at]
        out_shape: list[int] = []
        for shape, _ in inputs:
            out_shape = broadcast(out_shape, shape)
        n = numel(out_shape)
        read_from = inputs[1:] if kind == "copy" else inputs  # copy_(self, src) overwrites self unread
        floating = [need_dtype(t, i) for shape, i in inputs if dtype_of(t, i) in FLOATING]
        dense = [need_dtype(t, i) for shape, i in inputs if dtype_of(t, i) in FLOATING and len(shape) > 0]
        if out_at is not None:
            dtype = need_dtype(t, out_at)
        elif inplace or kind == "copy" or kind in _WRITE_ONLY:
            dtype = need_dtype(t, tensors[0][1])
        elif kind in _BOOL_OUT:
            dtype = "int8"
        elif floating:
            dtype = promoted(dense or floating)
        else:
            dtype = need_dtype(t, tensors[0][1])
        reads, other_bytes = 0, 0.0
        if kind not in _WRITE_ONLY:
            from nsroof.costs.ledger.core import dtype_bytes

            for shape, i in read_from:
                if dtype_of(t, i) == dtype:
                    reads += numel(shape)
                else:
                    other_bytes += numel(shape) * dtype_bytes(need_dtype(t, i))
        what = f"{kind}{'_' if inplace else ''}{' (out=)' if out_at is not None else ''}: {note}"
        return ledger_op("pointwise", n=n, read_elements=reads, flops_per_element=float(flops_per_element),
                         dtype=dtype, op=what, other_read_bytes=other_bytes)

    return read


for _kind in POINTWISE_FLOPS:
    register_reader((_kind,), _pointwise(_kind))
    if _kind not in ("copy", *_WRITE_ONLY):  # (their readers already treat self as the output)
        register_reader((_kind + "_",), _pointwise(_kind, inplace=True))
