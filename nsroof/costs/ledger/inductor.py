"""Inductor's generated Triton kernels: pointwise (``triton_poi_fused_*``), reductions
(``triton_red_fused_*``) and persistent reductions (``triton_per_fused_*``), and GEMM templates
(``triton_tem_fused_mm`` / ``addmm`` / ``bmm`` …), each costed from what a trace records of its launch
(nsroof.costs.ledger.inductor_launch reads it).

What the name says. Inductor names a fused kernel ``triton_<kind>_fused_<ops>_<n>`` where ``<ops>`` is the
sorted set of the original ATen ops it fused, each named once however often the graph applies it, at most
``kernel_name_max_ops`` (10) of them (pytorch/pytorch torch/_inductor/utils.py ``get_fused_kernel_name``,
config ``triton.descriptive_names = "original_aten"``; ``<kind>`` is the first three letters of
torch/_inductor/wrapper_benchmark.py ``get_kernel_category_by_source_code``).

The conventions (the ledger's: nsroof.costs.ledger.core):

* FLOPs of a pointwise or reduction kernel = the elements of its iteration space (x·r) × the FLOPs per
  element of each op its name lists (``FLOPS_PER_OP``: a basic op, a compare or a transcendental 1; a
  composite the per-element terms of its own ledger formula; data movement 0), each op once. A graph that
  applies an op twice counts it once, and an op that runs once per output row (a mean's divide) counts per
  element: the name holds no more. An op without an entry leaves the FLOPs NaN with its name given.
* Bytes = every tensor argument once, each at most the kernel's iteration space (a buffer larger than it is
  read in part: a gather, a slice), in-place buffers twice where the kernel file says which they are: the
  rule of Inductor's own estimate (torch/_inductor/codegen/simd.py ``SIMDKernel.estimate_kernel_num_bytes``,
  which caps a buffer at the kernel's numel).
* A GEMM template: 2·M·N·K per batch (the ledger's gemm) plus its epilogue's ops once per output element;
  bytes = every tensor argument whole (A, B, the output, a bias or epilogue input: a template's own
  estimate, TritonTemplateKernel.estimate_kernel_num_bytes, counts its inputs and output whole).
"""

from __future__ import annotations

import math
import re
from functools import lru_cache

from nsroof.costs.ledger.aten.pointwise import POINTWISE_FLOPS
from nsroof.costs.ledger.core import (
    Cost,
    LedgerError,
    Operator,
    Roof,
    Term,
    canonical_dtype,
    non_negative,
    positive,
    simt_roof,
)
from nsroof.costs.ledger.registry import register

SRC_INDUCTOR = ("Inductor's kernel name (torch/_inductor/utils.py get_fused_kernel_name: the fused ATen ops, "
                "each once) and byte estimate (torch/_inductor/codegen/simd.py estimate_kernel_num_bytes: "
                "each buffer at most the kernel's numel); FLOPs per op: the ledger convention")

# An Inductor Triton kernel's name: triton_<kind>_fused[_<ops>]_<n>.
KERNEL_NAME = re.compile(r"triton_(?P<kind>[a-z]+)_fused(?:_(?P<ops>\w*?))?_(?P<n>\d+)")
KINDS = {"poi": "pointwise", "red": "reduction", "per": "persistent reduction", "tem": "template",
         "for": "foreach", "spl": "split scan", "unk": "unknown"}
# Inductor lists at most this many ops in a name (torch._inductor.config.kernel_name_max_ops).
NAME_MAX_OPS = 10

_ONE = "1 per element"
_MOVE = "data movement: 0"
# FLOPs per element of the iteration space, by ATen op (overload packet) name, with the arithmetic.
FLOPS_PER_OP: dict[str, tuple[float, str]] = {
    **{k: (v, n) for k, (v, n) in POINTWISE_FLOPS.items()},
    **{k: (1.0, f"1 {k}") for k in (
        "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "logical_not",
        "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift",
        "bitwise_right_shift", "__and__", "__or__", "__xor__", "__lshift__", "__rshift__", "isnan", "isinf",
        "sign", "sgn", "floor", "ceil", "round", "trunc", "frac", "erf", "erfc", "erfinv", "exp2", "expm1",
        "log1p", "log2", "log10", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh",
        "atan2", "fmod", "masked_fill", "true_divide", "fmax", "fmin", "signbit", "nan_to_num",
        "scalar_tensor")},
    "hardtanh": (2.0, "max + min"), "leaky_relu": (2.0, "compare, multiply"),
    "softplus": (3.0, "exp, add, log"), "mish": (5.0, "softplus 3, tanh, multiply"),
    "hardsigmoid": (3.0, "add, clamp (2)"), "hardswish": (4.0, "hardsigmoid 3, multiply"),
    "elu": (3.0, "compare, exp, multiply-subtract"),
    # reductions: one accumulate per input element (nsroof.costs.ledger.reduction)
    **{k: (1.0, "1 accumulate per input element") for k in (
        "sum", "mean", "amax", "amin", "max", "min", "argmax", "argmin", "prod", "any", "all", "cumsum",
        "cumprod", "logsumexp", "nansum", "count_nonzero")},
    **{k: (4.0, "mean 1, (x−mean)² accumulate 3: the layernorm formula's statistics") for k in (
        "var", "var_mean", "std", "std_mean")},
    # composites: the per-element terms of their ledger formulas (nsroof.costs.ledger.norm, .reduction)
    "native_layer_norm": (8.0, "layernorm: mean 1, variance 3, normalize 2, affine 2"),
    "layer_norm": (8.0, "layernorm: mean 1, variance 3, normalize 2, affine 2"),
    "native_layer_norm_backward": (13.0, "layernorm-backward: dx 10, dγ and dβ 3"),
    "rms_norm": (4.0, "rmsnorm: sum of squares 2, multiply by w 2"),
    "_fused_rms_norm": (4.0, "rmsnorm: sum of squares 2, multiply by w 2"),
    "_softmax": (5.0, "softmax: max, subtract, exp, sum, divide"),
    "softmax": (5.0, "softmax: max, subtract, exp, sum, divide"),
    "_log_softmax": (5.0, "softmax's 5 per element"), "log_softmax": (5.0, "softmax's 5 per element"),
    "_softmax_backward_data": (4.0, "softmax-backward: 4 per element"),
    "_log_softmax_backward_data": (4.0, "softmax-backward (log): 4 per element"),
    "embedding_dense_backward": (1.0, "1 add per gradient element"),
    "index_add": (1.0, "1 add"), "scatter_add": (1.0, "1 add"), "index_put": (0.0, _MOVE),
    **{k: (0.0, _MOVE) for k in (
        "_to_copy", "to", "copy", "clone", "view", "_unsafe_view", "reshape", "permute", "transpose", "t",
        "expand", "expand_as", "unsqueeze", "squeeze", "slice", "select", "narrow", "index", "_unsafe_index",
        "gather", "index_select", "embedding", "cat", "stack", "constant_pad_nd", "pad", "split",
        "split_with_sizes", "unbind", "as_strided", "full", "full_like", "zeros", "zeros_like", "ones",
        "ones_like", "empty", "empty_like", "empty_strided", "new_zeros", "new_ones", "new_empty", "new_full",
        "fill", "zero", "arange", "iota", "repeat", "repeat_interleave", "flip", "roll", "alias", "detach",
        "lift_fresh_copy", "slice_scatter", "select_scatter", "as_strided_scatter", "scatter", "unfold",
        "diagonal", "view_as", "convert_element_type", "_unsafe_view", "contiguous", "flatten",
        "unflatten", "movedim", "split_copy", "view_copy", "permute_copy", "lift_fresh")},
    "clamp_min": (1.0, "1 max"), "clamp_max": (1.0, "1 min"),
    "native_dropout": (2.0, "compare against p, scale"),
}
# The GEMM ops a template kernel runs, and which of the ledger's matmul formulas names them.
GEMM_OPS = ("mm", "addmm", "bmm", "baddbmm", "_scaled_mm", "_int_mm", "_addmm_activation")


def parse_name(name: str) -> tuple[str, list[str], list[str]] | None:
    """(kind, the fused ops known to FLOPS_PER_OP or GEMM_OPS, the words no known op name covers) of an
    Inductor kernel name; None for any other name. The ops are read longest name first ('bitwise_and'
    before 'bitwise'), as joined by '_'."""
    parsed = _parsed(name)
    return None if parsed is None else (parsed[0], list(parsed[1]), list(parsed[2]))


@lru_cache(maxsize=4096)
def _parsed(name: str) -> tuple[str, tuple[str, ...], tuple[str, ...]] | None:
    """parse_name, once per name (a trace launches a few hundred kernels thousands of times)."""
    m = KERNEL_NAME.fullmatch(name)
    if m is None:
        return None
    text = m.group("ops") or ""
    known: list[str] = []
    unknown: list[str] = []
    i, after_unknown = 0, False
    while i < len(text):
        word = _longest_op(text, i)
        if word is None:  # no op name starts here: an unknown op, up to the next separator
            end = text.find("_", i + 1 if text[i] == "_" else i)
            word = text[i:] if end < 0 else text[i:end]
            if after_unknown:  # words no op name covers, in a row: one op ('moe_forward'), as best told
                unknown[-1] += "_" + word
            else:
                unknown.append(word)
        else:
            known.append(word)
        after_unknown = word not in known[-1:]
        i += len(word) + 1
    return m.group("kind"), tuple(known), tuple(unknown)


def _longest_op(text: str, i: int) -> str | None:
    best = None
    for word in (*FLOPS_PER_OP, *GEMM_OPS):
        end = i + len(word)
        if text.startswith(word, i) and (end == len(text) or text[end] == "_") and (
                best is None or len(word) > len(best)):
            best = word
    return best


def per_element(ops: list[str]) -> tuple[float, str]:
    """FLOPs per element of the listed ops (each once) and the arithmetic: (3, 'add 1 + cos 1 + sin 1')."""
    total = math.fsum(FLOPS_PER_OP[o][0] for o in ops)
    return total, " + ".join(f"{o} {FLOPS_PER_OP[o][0]:g}" for o in ops) or "no ops named"


def _flop_term(iteration: int, flops_per_element: float, ops: str, flops_known: bool) -> Term:
    if not flops_known:
        return Term(f"fused ops ({ops or 'unnamed'})", flops=math.nan,
                    note="FLOPs per element unknown: an op its name lists has no entry")
    return Term(f"fused ops ({ops or 'none named'})", flops=flops_per_element * iteration,
                note=f"{flops_per_element:g} per element of the iteration space (each listed op once)")


def _buffers(buffer_bytes: float) -> Term:
    return Term("read and write the launch's tensors", bytes=buffer_bytes,
                note="Σ over its tensor arguments of min(numel, iteration space)·itemsize")


@register("triton-pointwise", source=SRC_INDUCTOR)
def triton_pointwise(n: int, buffer_bytes: float, flops_per_element: float = 0.0, ops: str = "",
                     dtype: str = "fp32", flops_known: bool = True) -> Operator:
    """An Inductor pointwise kernel over n elements: its listed ops' FLOPs per element × n; its tensors once
    each, each at most n elements (flops_known=False: FLOPs NaN, an op has no entry)."""
    positive("triton-pointwise", n=n)
    non_negative("triton-pointwise", buffer_bytes=buffer_bytes, flops_per_element=flops_per_element)
    dt = canonical_dtype(dtype)
    items = (_buffers(buffer_bytes), _flop_term(n, flops_per_element, ops, flops_known))
    shape = {"n": n, "ops": ops or "-"} | ({"flops_per_element": flops_per_element} if flops_known else {})
    return Operator("triton-pointwise", shape, dt, Cost(items), simt_roof(dt))


@register("triton-reduction", source=SRC_INDUCTOR)
def triton_reduction(outputs: int, reduced: int, buffer_bytes: float, flops_per_element: float = 0.0,
                     ops: str = "", dtype: str = "fp32", flops_known: bool = True) -> Operator:
    """An Inductor reduction (or persistent reduction) of `reduced` elements into each of `outputs`: its
    listed ops' FLOPs per element × outputs·reduced; its tensors once each, each at most outputs·reduced
    elements."""
    positive("triton-reduction", outputs=outputs, reduced=reduced)
    non_negative("triton-reduction", buffer_bytes=buffer_bytes, flops_per_element=flops_per_element)
    dt = canonical_dtype(dtype)
    items = (_buffers(buffer_bytes), _flop_term(outputs * reduced, flops_per_element, ops, flops_known))
    shape = {"outputs": outputs, "reduced": reduced, "ops": ops or "-"} | (
        {"flops_per_element": flops_per_element} if flops_known else {})
    return Operator("triton-reduction", shape, dt, Cost(items), simt_roof(dt))


@register("triton-mm", source=SRC_INDUCTOR)
def triton_mm(m: int, n: int, k: int, buffer_bytes: float, batch: int = 1, epilogue_per_output: float = 0.0,
              ops: str = "mm", dtype: str = "fp16") -> Operator:
    """An Inductor GEMM template: 2·m·n·k per batch (one multiply-add per product) plus its epilogue's ops
    once per output element; its tensors (A, B, the output, a bias or epilogue input) read or written once,
    whole."""
    positive("triton-mm", m=m, n=n, k=k, batch=batch)
    non_negative("triton-mm", buffer_bytes=buffer_bytes, epilogue_per_output=epilogue_per_output)
    dt = canonical_dtype(dtype)
    if dt in ("int32", "int64"):
        raise LedgerError(f"triton-mm: no matmul roof for {dt}")
    items = (Term("read A, B (and the epilogue's inputs), write C", bytes=buffer_bytes,
                  note="Σ over its tensor arguments of numel·itemsize"),
             Term("multiply-add", flops=2.0 * batch * m * n * k, note="2·batch·m·n·k"),
             Term("epilogue", flops=epilogue_per_output * batch * m * n,
                  note=f"{epilogue_per_output:g} per output element"))
    shape = {"m": m, "n": n, "k": k} | ({"batch": batch} if batch != 1 else {}) | {"ops": ops}
    return Operator("triton-mm", shape, dt, Cost(items), Roof("matmul", dt))
