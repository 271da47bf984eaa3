"""aten op + input shapes + dtypes (+ the scalar arguments torch.profiler records) -> analytic FLOPs and
compulsory bytes, through the ledger registry (nsroof.costs.ledger).

`op_cost(name, shapes, dtypes, concrete)` returns an OpCost: either a ledger Operator with its FLOPs, bytes
and report precision, or NaN with `missing` saying why ("no formula for aten::X", "no input shapes
recorded (profile with record_shapes=True)", "conv stride/padding not recorded", ...). Nothing is guessed:
an op whose shape or arguments the formula cannot read gets NaN, never a default argument.

The scalar arguments (stride, padding, dim, ...) come from torch.profiler's "Concrete Inputs": recorded
with record_shapes=True since torch 2.1 (pytorch/pytorch#100593: single scalars and scalar lists of up to 30
elements), absent in 2.0 and earlier and when
torch._C._profiler._set_record_concrete_inputs_enabled_val(False) turned them off. Live profiler events carry
them as Python values; chrome traces as strings ('[2, 2]', 'False', '1', '' for a tensor), which
`concrete_values` turns back into values.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

# c10d, symm_mem and record_param_comms collectives; vLLM / SGLang custom ops
from nsroof.costs.ledger import collectives as _collectives  # noqa: F401
from nsroof.costs.ledger import custom
from nsroof.costs.ledger import engine as _engine  # noqa: F401
from nsroof.costs.ledger import engine_moe as _engine_moe  # noqa: F401

# The aten readers register on import, one module per op family (its formulas: nsroof.costs.ledger.<family>;
# data movement, priced by the pointwise formula: movement).
from nsroof.costs.ledger.aten import attention as _attention  # noqa: F401
from nsroof.costs.ledger.aten import conv as _conv  # noqa: F401
from nsroof.costs.ledger.aten import embedding as _embedding  # noqa: F401
from nsroof.costs.ledger.aten import matmul as _matmul  # noqa: F401
from nsroof.costs.ledger.aten import movement as _movement  # noqa: F401
from nsroof.costs.ledger.aten import norm as _norm  # noqa: F401
from nsroof.costs.ledger.aten import pointwise as _pointwise  # noqa: F401
from nsroof.costs.ledger.aten import recurrent as _recurrent  # noqa: F401
from nsroof.costs.ledger.aten import reduction as _reduction  # noqa: F401
from nsroof.costs.ledger.aten import resample as _resample  # noqa: F401
from nsroof.costs.ledger.aten.args import (
    CONV_ARGS_UNRECORDED,
    NO_SHAPES,
    READERS,
    TORCH_DTYPES,
    NoShape,
    Unrecorded,
    base_name,
    concrete_values,
    numel,
    register_reader,
)
from nsroof.costs.ledger.aten.pointwise import POINTWISE_FLOPS
from nsroof.costs.ledger.core import Operator
from nsroof.costs.ledger.custom import OpContext

__all__ = ["CONV_ARGS_UNRECORDED", "DTYPE_UNRECORDED", "NOT_RECORDED", "NO_SHAPES", "POINTWISE_FLOPS",
           "READERS", "TORCH_DTYPES", "TORCH_NAMES", "OpContext", "OpCost", "assumed_dtypes", "base_name",
           "concrete_values", "family", "has_formula", "numel", "on_kernel", "op_cost", "register_reader",
           "unknown", "with_dtype"]


@dataclass(frozen=True)
class OpCost:
    flops: float
    bytes: float
    formula: str  # ledger formula name ('' when none)
    label: str  # e.g. gemm(m=512, n=256, k=1024, dtype=fp32)
    precision: str  # report precision: fp64, fp32, fp16, tensor ('' when unknown)
    missing: str  # why flops and/or bytes are NaN ('' when both are known)
    tensor_dtype: str = ""  # for precision "tensor": the dtype whose dense tensor peak is the roof
    # the ledger roof: "matmul", "simt" or "link" (bytes over the interconnect: a collective)
    roof_kind: str = ""
    # why flops alone is NaN where the bytes are known (an Inductor kernel whose fused ops lack a FLOP count)
    flops_missing: str = ""

    @property
    def known(self) -> bool:
        """A formula priced the call: its FLOPs and bytes, or (DTYPE_UNRECORDED) its FLOPs alone."""
        return bool(self.formula)


def unknown(reason: str) -> OpCost:
    return OpCost(math.nan, math.nan, "", "", "", reason)


def family(op: str) -> str:
    """The op family whose module reads the op's shape ('matmul' for aten::addmm: the reader lives in
    costs/ledger/aten/matmul.py); '' when no reader does. The report's category reads it
    (nsroof.names.categories.FAMILY_CATEGORY)."""
    reader = READERS.get(base_name(op) if op.startswith("aten::") else op.split(".", 1)[0])
    return str(getattr(reader, "__module__", "")).rpartition(".")[2] if reader is not None else ""


# A call recorded with its shapes and no dtypes (PyTorch's emit_nvtx ranges write sizes only; a trace recorded
# without types): the FLOPs of a matmul, conv, attention or elementwise op follow from the shapes alone, the
# bytes and the tensor-core roof do not. One text for every op it hits (a report groups its missing texts).
DTYPE_UNRECORDED = ("input dtype not recorded: FLOPs from the shapes; bytes and the compute roof need the "
                    "dtype (torch.profiler records it with record_shapes=True, emit_nvtx ranges do not)")
NOT_RECORDED = "not recorded"  # the dtype in the label of a cost priced without one
# ledger dtypes -> the torch.profiler type names the readers take (TORCH_DTYPES' inverse, one name each)
TORCH_NAMES = {"fp32": "float", "fp64": "double", "fp16": "c10::Half", "bf16": "c10::BFloat16",
               "fp8": "c10::Float8_e4m3fn", "int8": "signed char"}
# the dtypes a call without recorded ones is priced at: FLOPs that differ between them depend on the dtype
_PROBES = ("fp32", "bf16")


def assumed_dtypes(shapes: Sequence[Any], dtype: str) -> list[str]:
    """Type names for a call recorded without them: `dtype` (a ledger dtype) for each input with a shape,
    none for the inputs recorded as `[]` (a scalar argument, as emit_nvtx and torch.profiler write it)."""
    name = TORCH_NAMES[dtype]
    return [name if isinstance(x, list | tuple) and len(x) else "" for x in shapes]


def has_formula(op: str) -> bool:
    if op.startswith("aten::"):
        return base_name(op) in READERS
    return op.split(".", 1)[0] in READERS or custom.get(op) is not None or _is_inductor_launch(op)


def _is_inductor_launch(op: str) -> bool:
    # imported here: nsroof.costs.ledger.inductor reads this package's pointwise table
    from nsroof.costs.ledger.inductor_launch import is_launch

    return op.startswith("triton_") and is_launch(op)


def op_cost(op: str, shapes: Sequence[Any] | None, dtypes: Sequence[Any] | None,
            concrete: Sequence[Any] | None = None, *, context: OpContext | None = None) -> OpCost:
    """Analytic cost of one op call (aten, an engine's custom op, a collective, a user formula); NaN with the
    reason in `missing` when it has none. `context`: facts from outside the call (step annotation, model
    config, call order, process-group size, the event's attributes); the model defaults to --model-config.

    A profile without shapes gets one reason for every aten op (NO_SHAPES), formula or not: recording the
    shapes is the fix either way, and only then can "no formula for aten::X" be told apart."""
    shape_list = [list(x) if isinstance(x, list | tuple) else [] for x in (shapes or [])]
    # Without record_shapes a trace has no "Input Dims" (None) and a live event empty lists; with it, every
    # argument has an entry (a scalar's is []), so an empty list with no types means nothing was recorded.
    if op.startswith("aten::") and not shape_list and not dtypes:
        return unknown(NO_SHAPES)
    if not has_formula(op):
        return unknown(no_formula_reason(op))
    try:
        operator, flops_missing = _priced(op, shape_list, [str(d) for d in (dtypes or [])], concrete, context)
    except _Unpriced as exc:
        if shape_list and not dtypes:
            return _from_shapes(op, shape_list, concrete, context, str(exc))
        return unknown(str(exc))
    return _op_cost(operator, flops_missing)


class _Unpriced(Exception):
    """A formula could not price the call: the reason as `missing` says it."""


def _priced(op: str, shapes: list[Any], dtypes: list[str], concrete: Sequence[Any] | None,
            context: OpContext | None) -> tuple[Operator, str]:
    """The formula's Operator for the call and why its FLOPs alone are unknown ('' when known)."""
    try:
        if _is_inductor_launch(op):  # an Inductor Triton kernel's launch record
            from nsroof.costs.ledger.inductor_launch import launch_operator

            found: tuple[Operator, str] = launch_operator(op, shapes, dtypes, concrete_values(concrete),
                                                          (context or OpContext()).args)
            return found
        return cast(Operator, _operator(op, shapes, dtypes, concrete_values(concrete), context)), ""
    except (custom.Missing, Unrecorded) as exc:
        raise _Unpriced(str(exc)) from exc
    except NoShape as exc:
        raise _Unpriced(f"{op}: {exc}") from exc
    except Exception as exc:  # a LedgerError from a degenerate shape (e.g. a zero-sized tensor)
        from nsroof.errors import NsroofError

        if not isinstance(exc, NsroofError):
            raise
        raise _Unpriced(f"{op}: {exc}") from exc


def _from_shapes(op: str, shapes: list[Any], concrete: Sequence[Any] | None, context: OpContext | None,
                 reason: str) -> OpCost:
    """A call recorded without dtypes: its FLOPs where the formula gives the same at every probed dtype (a
    formula whose FLOPs follow the dtype stays NaN), its bytes NaN (DTYPE_UNRECORDED)."""
    try:
        probes = [_priced(op, shapes, assumed_dtypes(shapes, d), concrete, context)[0] for d in _PROBES]
    except _Unpriced:
        return unknown(reason)
    flops = {p.flops for p in probes}
    if len(flops) != 1 or not all(math.isfinite(f) for f in flops):
        return unknown(reason)
    operator = replace(probes[0], dtype=NOT_RECORDED)
    return OpCost(operator.flops, math.nan, operator.formula, operator.label, "", DTYPE_UNRECORDED,
                  roof_kind="link" if operator.facts.get("link_roof") else operator.roof.kind)


def with_dtype(op: str, shapes: Sequence[Any] | None, dtype: str, concrete: Sequence[Any] | None = None,
               *, how: str) -> OpCost:
    """The cost of a call recorded without dtypes at `dtype` (a ledger dtype) read elsewhere, the label
    saying where (`how`): every input with a shape at that dtype."""
    shape_list = [list(x) if isinstance(x, list | tuple) else [] for x in (shapes or [])]
    cost = op_cost(op, shape_list, assumed_dtypes(shape_list, dtype), concrete)
    return replace(cost, label=f"{cost.label} [{how}]") if cost.known else cost


def _op_cost(operator: Operator, flops_missing: str) -> OpCost:
    precision = report_precision(operator)
    tensor_dtype = operator.roof.dtype if precision == "tensor" else ""
    roof_kind = "link" if operator.facts.get("link_roof") else operator.roof.kind
    return OpCost(operator.flops, operator.bytes, operator.formula, operator.label, precision, "",
                  tensor_dtype, roof_kind, flops_missing)


_LOW_PRECISION = ("fp16", "bf16", "fp8", "tf32")


def report_precision(op: Operator) -> str:
    """The report's precision column for an operator: matmuls of 16-bit and narrower dtypes run on
    tensor cores; everything else under the CUDA-core (or CPU vector) roof of its dtype."""
    if op.roof.kind == "matmul":
        if op.roof.dtype in _LOW_PRECISION:
            return "tensor"
        return "fp64" if op.roof.dtype == "fp64" else "fp32"
    return {"fp64": "fp64", "fp16": "fp16", "bf16": "fp16"}.get(op.roof.dtype, "fp32")


# Ops that move no data: a view shares its input's storage; an allocation writes nothing.
VIEWS = frozenset({
    "view", "reshape", "t", "transpose", "permute", "as_strided", "slice", "select", "narrow", "unsqueeze",
    "squeeze", "expand", "expand_as", "flatten", "unflatten", "split", "split_with_sizes", "unsafe_split",
    "unbind", "chunk", "detach", "alias", "contiguous", "_unsafe_view", "view_as", "movedim", "resolve_conj",
    "resolve_neg", "lift_fresh", "empty", "empty_like", "empty_strided", "resize", "to", "_reshape_alias",
    "numpy_T", "matrix_H", "item", "_local_scalar_dense", "is_nonzero", "result_type", "set"})
VIEW_REASON = "a view or allocation: moves no data, nothing to cost"
BOOKKEEPING_REASON = ("autograd engine bookkeeping around a backward node (its ops are costed on their own "
                      "rows)")
# The host time a composite op (aten::cross_entropy_loss calling log_softmax and nll_loss) spends outside the
# ops it calls: dispatch, not arithmetic; its work is on those ops' rows.
COMPOSITE_REASON = "a composite op's own time: its work is costed on the ops it calls"
# A fused kernel of Inductor's C++ (CPU) backend, recorded under its name when torch._inductor.config.cpp.
# enable_kernel_profile was on at compile time (nsroof profile turns it on): Inductor states no FLOP or byte
# count for it (its Triton kernels' estimates, kernel_flop / kernel_num_gb, have no CPU counterpart).
INDUCTOR_CPU_KERNEL = re.compile(r"(?:graph_\d+_)?cpp_fused_\w+")
# A CUDA/HIP graph replay's kernels have the launch as their op until a capture trace maps them
# (nsroof.importers.trace.graphs; its warning says more, and what an Nsight Systems export can do instead);
# short enough for the coverage line to show whole.
GRAPH_REPLAY_REASON = "graph replay, op recorded at capture: torch traces take --capture FILE"
INDUCTOR_CPU_REASON = ("an Inductor C++ kernel (a fused region of the compiled graph) whose source ops were "
                       "not recorded (compiled before nsroof profile started, or loaded from Inductor's "
                       "cache): profile the run that compiles it")

# torch.compile's wrappers around a compiled region's kernels: Dynamo's guard check (TorchDynamo Cache
# Lookup, Torch-Compiled Region: <frame>/<recompile>, the frame's pre-graph bytecode) and AOTAutograd's
# runtime wrappers (CompiledFunction,
# CompiledFunctionBackward, the runtime wrapper prologue). Containers: the kernels and extern ops inside them
# are rows of their own, costed there; their own time is Python and dispatch overhead, never op work.
COMPILED_WRAPPER = re.compile(r"(?:autograd::engine::evaluate_function: )?CompiledFunction(?:Backward)?|"
                              r"TorchDynamo Cache Lookup|Pregraph bytecode|"
                              r"Torch-Compiled Region: \d+/\d+|AOTDispatcher Runtime Wrapper Prologue")
COMPILED_WRAPPER_REASON = ("torch.compile's wrapper around a compiled region: its own time is overhead "
                           "(guards, AOTAutograd's runtime wrapper), its kernels are costed on their own "
                           "rows")

# A kernel no recorded op encloses has its runtime/driver launch call as its op (trace rule 5): the call
# (cudaLaunchKernel_v7000 in an Nsight Systems export, cuLaunchKernelEx, cudaMemcpyAsync) does no work
# of its own.
RUNTIME_CALL = re.compile(r"(?:cuda|cu|hip)\w*(?:Launch|Memcpy|Memset)\w*")
RUNTIME_CALL_REASON = ("no op recorded around the launch (its op is the runtime call): record the ops, "
                       "torch.profiler or, under Nsight Systems, emit_nvtx(record_shapes=True)")


def no_formula_reason(op: str) -> str:
    """Why an op has no cost, naming the real cause: a view moves nothing; an autograd wrapper's own time is
    the engine's, not an operator's; otherwise the op lacks a formula (add one with @nsroof.formula)."""
    if (op.startswith("aten::") or "::" not in op) and base_name(op) in VIEWS:  # ('detach': autograd's own)
        return VIEW_REASON
    if COMPILED_WRAPPER.fullmatch(op):  # (before the engine's bookkeeping: it wraps CompiledFunctionBackward)
        return COMPILED_WRAPPER_REASON
    if (op.startswith("autograd::engine::evaluate_function: ") or op == "torch::autograd::AccumulateGrad"
            or re.fullmatch(r"\w+Backward\d+", op)):
        return BOOKKEEPING_REASON
    if INDUCTOR_CPU_KERNEL.fullmatch(op):
        return INDUCTOR_CPU_REASON
    from nsroof.importers.trace.op_tree import is_graph_launch

    if is_graph_launch(op):  # (before RUNTIME_CALL, which its name matches too)
        return GRAPH_REPLAY_REASON
    if RUNTIME_CALL.fullmatch(op):
        return RUNTIME_CALL_REASON
    if "::" in op and not op.startswith("aten::"):
        return (f"no formula for {op} (add one with @nsroof.formula(\"{op.split('.', 1)[0]}\"), "
                "--formulas FILE.py)")
    return f"no formula for {op}"


def _operator(op: str, shapes: list[Any], dtypes: list[str], concrete: list[Any],
              context: OpContext | None) -> Any:
    if op.startswith("aten::"):
        raw = op.split("::", 1)[1].split(".", 1)[0]  # an in-place op's own reader ('add_'), else the base one
        return READERS[raw if raw in READERS else base_name(op)](shapes, dtypes, concrete)
    if op.split(".", 1)[0] in READERS:  # flash_attn:: and other non-aten ops read like aten ones
        return READERS[op.split(".", 1)[0]](shapes, dtypes, concrete)
    found = custom.get(op)
    assert found is not None
    ctx = context or OpContext()
    if ctx.model is None and custom.default_model() is not None:
        ctx = replace(ctx, model=custom.default_model())
    return found.cost(shapes, dtypes, concrete, ctx)


# Kernel names of fp32 matmuls and convolutions run on TF32 tensor cores: cuBLAS / cuDNN name the math
# ("sm80_xmma_gemm_f32f32_tf32f32_f32…", "…implicit_gemm_tf32f32…", cutlass 3 "…tf32gemm…"), CUTLASS 2 sm80
# kernels the instruction ("tensorop_s1688gemm": fp32 data through the 16×8×8 TF32 MMA).
_TF32_KERNEL = re.compile(r"tf32|tensorop_s1688|tensorop_s16816", re.IGNORECASE)


def on_kernel(cost: OpCost, kernel_name: str) -> OpCost:
    """The cost of an op as run by one of its kernels. An fp32 matmul's roof depends on torch's TF32 switch
    (torch.backends.cuda.matmul.allow_tf32, cudnn.allow_tf32), which no trace records: the kernel's name
    does, so a TF32 kernel puts the op under the TF32 tensor roof instead of the fp32 one."""
    if (cost.known and cost.roof_kind == "matmul" and cost.precision == "fp32"
            and _TF32_KERNEL.search(kernel_name)):
        return replace(cost, precision="tensor", tensor_dtype="tf32",
                       label=f"{cost.label} on TF32 tensor cores")
    return cost


custom.add_builtin_test(lambda name: (base_name(name) if name.startswith("aten::")
                                      else name.split(".", 1)[0]) in READERS)
