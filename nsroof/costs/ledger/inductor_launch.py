"""An Inductor Triton kernel's cost from its launch record, when Inductor states none (kernel_flop /
kernel_num_gb: nsroof.costs.attribution's rule 4 takes those): the formulas of nsroof.costs.ledger.inductor
applied to what the trace holds.

Inductor wraps every launch in a record function named by the kernel (pytorch/pytorch
torch/_inductor/runtime/triton_heuristics.py ``CachingAutotuner.run`` / ``get_profiler_kwargs``): its
arguments are the kernel's, in the kernel's order, so kineto records each tensor's shape and dtype
(``Input Dims``, ``Input type``) and each integer's value (``Concrete Inputs``), beside the kernel's
``kernel_kwargs`` (its block sizes, 'XBLOCK=128,R0_BLOCK=64'), ``kernel_file`` and, in older PyTorch, the
``grid`` call ('grid(100,)': its numels). The kernel's arguments are its buffers (in-place, then inputs, then
outputs), then its size symbols, then one numel per range tree — x (and y, z) for the output, r for a
reduction (torch/_inductor/codegen/simd.py, the ``{prefix}numel`` SizeArgs appended last) — so the last
integers are the numels: as many as the block sizes name x/y/z/r dimensions (a persistent reduction drops its
R0_BLOCK from the config and has one r). Newer Triton inserts the block sizes' values after them
(``_get_args_with_constexprs``): a tail equal to them is dropped.

Where the trace points to the generated kernel file and it exists here (a local Inductor cache), the file's
argument names (which buffers are in-place, which integers are numels) and static numels come with the
record (nsroof.importers.trace.inductor_cache) and are used instead of the position rule.

A fact the formula needs and the record lacks raises custom.Missing naming it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from nsroof.costs.ledger import norm, reduction
from nsroof.costs.ledger.aten.args import TORCH_DTYPES
from nsroof.costs.ledger.aten.pointwise import POINTWISE_FLOPS, promoted
from nsroof.costs.ledger.core import DTYPE_BYTES, Operator
from nsroof.costs.ledger.custom import Missing
from nsroof.costs.ledger.inductor import triton_mm, triton_pointwise, triton_reduction

# An Inductor Triton kernel's name: triton_<kind>_fused[_<ops>]_<n>.
KERNEL_NAME = re.compile(r"triton_(?P<kind>[a-z]+)_fused(?:_(?P<ops>\w*?))?_(?P<n>\d+)")
KINDS = {"poi": "pointwise", "red": "reduction", "per": "persistent reduction", "tem": "template",
         "for": "foreach", "spl": "split scan", "unk": "unknown"}
# Inductor lists at most this many ops in a name (torch._inductor.config.kernel_name_max_ops).
NAME_MAX_OPS = 10

_ONE = "1 per element"
_MOVE = "data movement: 0"


def _per_element(formula: Callable[..., Operator], size: str, label: str, **shape: Any) -> tuple[float, str]:
    """A ledger formula's FLOPs per element and their terms: its growth from one element to two along
    `size` (one row), so that per-row terms (a divide, a rsqrt) drop out."""
    one, two = formula(**{size: 1}, **shape), formula(**{size: 2}, **shape)
    terms = [f"{b.name} {b.flops - a.flops:g}" for a, b in zip(one.cost.terms, two.cost.terms, strict=True)
             if b.flops != a.flops]
    return two.flops - one.flops, f"{label}: " + ", ".join(terms)


_LAYERNORM = _per_element(norm.layernorm, "hidden", "layernorm", rows=1)
_LAYERNORM_BACKWARD = _per_element(norm.layernorm_backward, "hidden", "layernorm-backward", rows=1)
_RMSNORM = _per_element(norm.rmsnorm, "hidden", "rmsnorm", rows=1)
_SOFTMAX = _per_element(reduction.softmax, "cols", "softmax", rows=1)
_SOFTMAX_BACKWARD = _per_element(reduction.softmax_backward, "cols", "softmax-backward", rows=1)
_LOG_SOFTMAX_BACKWARD = _per_element(reduction.softmax_backward, "cols", "softmax-backward (log)", rows=1,
                                     log=True)
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
    **dict.fromkeys(("native_layer_norm", "layer_norm"), _LAYERNORM),
    "native_layer_norm_backward": _LAYERNORM_BACKWARD,
    **dict.fromkeys(("rms_norm", "_fused_rms_norm"), _RMSNORM),
    **dict.fromkeys(("_softmax", "softmax", "_log_softmax", "log_softmax"), _SOFTMAX),
    "_softmax_backward_data": _SOFTMAX_BACKWARD, "_log_softmax_backward_data": _LOG_SOFTMAX_BACKWARD,
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


# torch.profiler's dtype strings beyond those the aten readers know (nsroof.costs.ledger.custom's table)
_DTYPES = {**TORCH_DTYPES, "c10::Float8_e4m3fnuz": "fp8", "c10::Float8_e5m2fnuz": "fp8",
           "c10::Float4_e2m1fn_x2": "fp4", "short int": "int32"}
_FLOATING = ("fp64", "fp32", "fp16", "bf16", "fp8", "fp4")
_BLOCK = re.compile(r"\b(?P<dim>[XYZ]|R0_|R1_|R)BLOCK=(?P<value>-?\d+)")
_GRID = re.compile(r"grid\((?P<args>[^()]*)\)")
_NUMEL = re.compile(r"(?:[xyz]|r0_|r1_|r)numel")


@dataclass(frozen=True)
class _Arg:
    shape: tuple[int, ...] | None  # a tensor's shape; None for a scalar
    dtype: str  # a tensor's ledger dtype ('' for a scalar)
    value: Any  # a scalar's recorded value (None for a tensor)
    name: str = ""  # its name in the kernel file's signature, where known

    @property
    def numel(self) -> int:
        return math.prod(self.shape or ())

    @property
    def nbytes(self) -> float:
        return self.numel * DTYPE_BYTES[self.dtype]


def is_launch(op: str) -> bool:
    """Whether an op name is an Inductor Triton kernel's launch record (triton_<kind>_fused…_<n>)."""
    return op.startswith("triton_") and parse_name(op) is not None


def launch_operator(name: str, shapes: Sequence[Any], dtypes: Sequence[Any], concrete: Sequence[Any],
                    facts: Mapping[str, Any]) -> tuple[Operator, str]:
    """The kernel's Operator and, where its FLOPs are NaN, why (else ''); custom.Missing when the record
    lacks a fact the formula needs. `facts`: the launch record's other attributes (kernel_kwargs, grid, the
    kernel file's facts) as the importer kept them."""
    parsed = parse_name(name)
    assert parsed is not None
    kind, ops, unknown = parsed
    args = _args(name, shapes, dtypes, concrete, facts)
    tensors = [a for a in args if a.shape is not None]
    if not tensors:
        raise Missing(f"{name}: the trace records no kernel_flop/kernel_num_gb and no tensor shapes of the "
                      "launch (profile with record_shapes=True)")
    if kind == "tem":
        return _template(name, ops, unknown, tensors), ""
    if kind not in ("poi", "red", "per"):
        raise Missing(f"{name}: a Triton {KINDS.get(kind, kind)} kernel: nsroof costs Inductor's pointwise, "
                      "reduction and GEMM-template kernels only")
    x, r = _numels(name, kind, args, facts)
    iteration = math.prod(x) * math.prod(r)
    # Inductor's estimate_kernel_num_bytes: a buffer larger than the iteration space is read in part
    buffer_bytes = math.fsum(min(t.numel, iteration) * DTYPE_BYTES[t.dtype] * (2 if _in_place(t) else 1)
                             for t in tensors)
    dtype = _data_dtype(tensors)
    flops, why = _fused_flops(name, ops, unknown)
    label_ops = "+".join(ops + unknown) + ("…" if len(ops) + len(unknown) >= NAME_MAX_OPS else "")
    common = {"buffer_bytes": buffer_bytes, "flops_per_element": flops if not why else 0.0,
              "ops": label_ops, "dtype": dtype, "flops_known": not why}
    if kind == "poi":
        return triton_pointwise(n=max(iteration, 1), **common), why
    return triton_reduction(outputs=max(math.prod(x), 1), reduced=max(math.prod(r), 1), **common), why


def _args(name: str, shapes: Sequence[Any], dtypes: Sequence[Any], concrete: Sequence[Any],
          facts: Mapping[str, Any]) -> list[_Arg]:
    """The launch's arguments in order, named by the kernel file's signature where it matches them."""
    n = max(len(shapes), len(dtypes))
    out: list[_Arg] = []
    for i in range(n):
        shape = shapes[i] if i < len(shapes) else None
        dtype = str(dtypes[i]) if i < len(dtypes) else ""
        value = concrete[i] if i < len(concrete) else None
        if dtype in _DTYPES and isinstance(shape, list) and all(isinstance(d, int) for d in shape):
            out.append(_Arg(tuple(shape), _DTYPES[dtype], None))
        elif dtype and dtype not in ("Scalar", "int", "long int") and isinstance(shape, list) and shape:
            raise Missing(f"{name}: tensor argument #{i} of dtype {dtype!r} has no byte size in nsroof")
        else:
            out.append(_Arg(None, "", value))
    names = _signature(facts, len(out))
    return [_Arg(a.shape, a.dtype, a.value, nm) for a, nm in zip(out, names, strict=True)] if names else out


def _signature(facts: Mapping[str, Any], count: int) -> list[str]:
    """The kernel file's argument names for `count` recorded arguments: its signature without the
    block-size constexprs (the record's arguments in older Triton), or with them (newer Triton)."""
    names = [str(x) for x in (facts.get("kernel_file_facts") or {}).get("arg_names") or []]
    constexprs = set((facts.get("kernel_file_facts") or {}).get("constexprs") or [])
    plain = [x for x in names if x not in constexprs]
    return plain if len(plain) == count else names if len(names) == count else []


def _in_place(t: _Arg) -> bool:
    return t.name.startswith("in_out_ptr")  # read and written: Inductor's estimate counts it twice


def _numels(name: str, kind: str, args: list[_Arg], facts: Mapping[str, Any]) -> tuple[list[int], list[int]]:
    """(x/y/z numels, r numels) of the launch: by name from the kernel file, else by position."""
    file_facts = facts.get("kernel_file_facts") or {}
    static = {str(k): int(v) for k, v in (file_facts.get("numels") or {}).items()}
    named = {a.name: a.value for a in args if _NUMEL.fullmatch(a.name) and isinstance(a.value, int)}
    by_name = static | named
    if any(k.startswith(("x", "y", "z")) for k in by_name):
        x = [v for k, v in by_name.items() if k[0] in "xyz"]
        r = [v for k, v in by_name.items() if k.startswith("r")]
        if kind == "poi" or r:
            return x, r
    ints = [a.value for a in args if a.shape is None and isinstance(a.value, int)
            and not isinstance(a.value, bool)]
    kwargs = str(facts.get("kernel_kwargs") or "")
    blocks = [(m.group("dim"), int(m.group("value"))) for m in _BLOCK.finditer(kwargs)]
    if blocks:
        values = [v for _, v in blocks]
        if len(ints) > len(values) and ints[-len(values):] == values:
            ints = ints[:-len(values)]  # newer Triton passes the block sizes after the numels
        n_x = max(1, sum(1 for d, _ in blocks if d in "XYZ"))
        n_r = 0 if kind == "poi" else max(1, sum(1 for d, _ in blocks if d.startswith("R")))
        return _tail(name, ints, n_x, n_r, _scalars_unrecorded(args))
    grid = _GRID.fullmatch(str(facts.get("grid") or "").strip())
    if grid:  # older Inductor: grid(xnumel[, ...]) names the output numels; a reduction's r numel is last
        x = [int(v) for v in grid.group("args").replace(" ", "").split(",") if v]
        if kind == "poi":
            return x, []
        if ints:
            return x, [ints[-1]]
        raise Missing(f"{name}: the launch records no integer arguments, so its reduction's r numel is "
                      "unknown")
    raise Missing(f"{name}: the trace records neither the launch's kernel_kwargs nor its grid, so which of "
                  "its integer arguments are the kernel's numels is unknown")


def _scalars_unrecorded(args: list[_Arg]) -> bool:
    return any(a.shape is None and a.value is None for a in args)


def _tail(name: str, ints: list[int], n_x: int, n_r: int, unrecorded: bool) -> tuple[list[int], list[int]]:
    k = n_x + n_r
    if len(ints) < k:
        why = ("its scalar arguments' values are not recorded (Concrete Inputs: PyTorch 2.1 or later with "
               "record_shapes=True)" if unrecorded else
               "its numels are compiled into the kernel (static shapes, or a combo kernel) and its kernel "
               "file is not here to read them from")
        raise Missing(f"{name}: the launch passes {len(ints)} integer argument(s) for its {k} numel(s): "
                      f"{why}")
    tail = ints[len(ints) - k:]
    return tail[:n_x], tail[n_x:]


def _data_dtype(tensors: list[_Arg]) -> str:
    floating = [t.dtype for t in tensors if t.dtype in _FLOATING and t.dtype != "fp4"]
    return promoted(floating) if floating else tensors[0].dtype


def _fused_flops(name: str, ops: list[str], unknown: list[str]) -> tuple[float, str]:
    if unknown:
        return math.nan, (f"{name}: its fused op(s) {', '.join(unknown)} have no FLOPs per element in "
                          "nsroof's table (nsroof.costs.ledger.inductor_launch.FLOPS_PER_OP)")
    if not ops:
        return math.nan, (f"{name}: Inductor's name lists no fused ops (descriptive_names off, or a combo "
                          "kernel): FLOPs per element unknown")
    gemm = [o for o in ops if o in GEMM_OPS]
    if gemm:  # the GEMM ran in an external kernel (cuBLAS): this one does a part its name does not tell
        return math.nan, (f"{name}: it names {', '.join(gemm)}, which Inductor runs as an external kernel: "
                          "which part of it this kernel does (a bias add, a layout copy) the name does not "
                          "say")
    return per_element(ops)[0], ""


def _template(name: str, ops: list[str], unknown: list[str], tensors: list[_Arg]) -> Operator:
    """A GEMM template: A[…, M, K]·B[…, K, N] = the first two tensors in argument order that multiply and
    whose product's shape another (later) tensor has, the output."""
    gemm = [o for o in ops if o in GEMM_OPS]
    if not gemm:
        fused = "+".join(ops + unknown) or "-"
        raise Missing(f"{name}: a Triton template that is not a GEMM (fused ops: {fused}): nsroof costs the "
                      "mm/addmm/bmm templates from their launch's shapes only")
    for i in range(len(tensors) - 1):
        a, b = tensors[i].shape or (), tensors[i + 1].shape or ()
        if len(a) != len(b) or len(a) not in (2, 3) or a[-1] != b[-2] or a[:-2] != b[:-2]:
            continue
        out = (*a[:-1], b[-1])
        if not any(t.shape == out for t in tensors[i + 2:]):
            continue
        epilogue = [o for o in ops if o not in GEMM_OPS]
        per_output = math.fsum(FLOPS_PER_OP[o][0] for o in epilogue) + sum(
            1.0 for o in gemm if o in ("addmm", "baddbmm", "_addmm_activation"))  # the bias add
        label = "+".join(ops) + (f" (not counted: {'+'.join(unknown)})" if unknown else "")
        return triton_mm(m=a[-2], n=b[-1], k=a[-1], batch=a[0] if len(a) == 3 else 1,
                         buffer_bytes=math.fsum(t.nbytes for t in tensors), epilogue_per_output=per_output,
                         ops=label, dtype=tensors[i].dtype)
    raise Missing(f"{name}: no two recorded tensor arguments multiply as A[…, M, K]·B[…, K, N] beside an "
                  f"output [M, N] (shapes {[list(t.shape or ()) for t in tensors]})")
