"""The op-formula registry for ops outside aten: engine custom ops (vLLM `_C::`, `_C_cache_ops::`, `vllm::`,
SGLang `sgl_kernel::`), collectives, and your own (`@nsroof.formula("mylib::op")`, `--formulas FILE.py`).

A formula is a function whose parameters are the op's recorded arguments, in schema order, each annotated:
`Tensor` (its recorded shape and dtype), `list[Tensor]`, `int`, `float`, `bool` or `str` (a scalar argument
recorded in the trace's Concrete Inputs); a keyword-only `context: OpContext` parameter receives the facts
from outside the call (the engine's step annotation, the --model-config, the process-group size). It returns
the ledger terms (`Term(name, flops=…, bytes=…, note=…)`) of one call. The same checks as the built-in
ledger registry apply: every parameter annotated, a name registered once (nor shadowing a built-in op).

    import nsroof
    from nsroof import Tensor, Term

    @nsroof.formula("mylib::scale_add", source="y = a·x + b: 2 FLOP per element")
    def scale_add(x: Tensor, b: Tensor, a: float) -> list[Term]:
        return [Term("read x, b", bytes=x.nbytes + b.nbytes), Term("write y", bytes=x.nbytes),
                Term("a·x + b", flops=2 * x.numel)]

A fact a formula needs but the call does not carry is `raise Missing("the fact")`: the op's cost is NaN and
the report's `missing` names it.
"""

from __future__ import annotations

import inspect
import math
import re
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from nsroof.costs.ledger.core import DTYPE_BYTES, Cost, LedgerError, Operator, Roof, Term

# torch.profiler's dtype strings -> ledger dtypes (kept here and in aten.args.TORCH_DTYPES; this module
# imports nothing from the aten readers so that they may import it)
_TORCH_DTYPES: dict[str, str] = {
    "float": "fp32", "double": "fp64", "c10::Half": "fp16", "c10::BFloat16": "bf16",
    "c10::Float8_e4m3fn": "fp8", "c10::Float8_e5m2": "fp8", "c10::Float8_e4m3fnuz": "fp8",
    "c10::Float8_e5m2fnuz": "fp8", "c10::Float4_e2m1fn_x2": "fp4", "long int": "int64", "int": "int32",
    "signed char": "int8", "unsigned char": "int8", "bool": "int8", "short int": "int32",
}


class Missing(Exception):
    """Raised by a formula: a fact it needs is absent (the message names it)."""


@dataclass(frozen=True)
class Tensor:
    """One tensor argument as the trace recorded it."""

    shape: tuple[int, ...]
    dtype: str  # ledger dtype (bf16, fp8, int64, …)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> float:
        return DTYPE_BYTES[self.dtype]

    @property
    def nbytes(self) -> float:
        return self.numel * self.itemsize


@dataclass(frozen=True)
class OpContext:
    """Facts about a call from outside its arguments. step: the engine's step annotation (nsroof.costs.
    ledger.engine.Step) enclosing the call; model: the --model-config (ModelConfig); ordinal: how many calls
    of the same op came before this one in the same step (its layer index, for per-layer facts);
    world_size: the process group's size as the trace records it (distributedInfo); a call replayed from a
    captured CUDA graph takes the step annotation enclosing its replay."""

    step: Any = None
    model: Any = None
    ordinal: int = -1
    world_size: int = 0
    args: Mapping[str, Any] = field(default_factory=dict)  # the event's other attributes (record_param_comms)
    # the calls recorded inside this one (its descendant ops), for a formula registered with inside=True: an
    # engine op whose sizes are not its arguments (vllm::moe_forward) reads them from what it calls
    inside: tuple[Call, ...] = field(default=(), compare=False)
    # the calls inside the other calls of the same op with the same recorded arguments (another capture of
    # the same layer may have recorded what this one did not)
    peer_inside: tuple[Call, ...] = field(default=(), compare=False)
    # the names of the kernels the call and the calls inside it launched (the trace's, inside=True)
    kernels: tuple[str, ...] = field(default=(), compare=False)
    # what a formula found worth a warning (a --model-config fact the trace contradicts), gathered by the
    # attribution into the report's warnings
    warnings: list[str] = field(default_factory=list, compare=False)
    # the sizes a formula derived beyond the arguments (a MoE's experts, top-k, FFN width), put in its label
    # (the report's flops_source) so that the number says what it was computed from
    label: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class Call:
    """One op call recorded inside another: its name and arguments as the trace recorded them."""

    name: str
    shapes: Sequence[Any]
    dtypes: Sequence[Any]
    concrete: Sequence[Any]


NO_CONTEXT = OpContext()
ArgKind = Literal["tensor", "tensors", "int", "float", "bool", "str"]
_KINDS: dict[Any, ArgKind] = {Tensor: "tensor", "Tensor": "tensor", list[Tensor]: "tensors",
                              "list[Tensor]": "tensors", int: "int", "int": "int", float: "float",
                              "float": "float", bool: "bool", "bool": "bool", str: "str", "str": "str"}
_OPTIONAL_KINDS = {f"{k} | None": v for k, v in list(_KINDS.items()) if isinstance(k, str)}


@dataclass(frozen=True)
class OpFormula:
    name: str  # the op, as the trace names it: "mylib::op"
    fn: Callable[..., Iterable[Term]]
    args: tuple[tuple[str, ArgKind, bool], ...]  # (parameter, kind, optional)
    wants_context: bool
    roof: str  # "simt", "matmul" or "link"
    source: str
    user: bool = False  # registered by the user (--formulas), not built in
    roof_dtype: str = ""  # the matmul roof's dtype; '' = the first floating tensor argument's
    inside: bool = False  # its context carries the calls recorded inside it (OpContext.inside)

    def cost(self, shapes: Sequence[Any], dtypes: Sequence[str], concrete: Sequence[Any],
             context: OpContext = NO_CONTEXT) -> Operator:
        values = [self._value(i, p, kind, opt, shapes, dtypes, concrete)
                  for i, (p, kind, opt) in enumerate(self.args)]
        context = replace(context, label={})  # this call's own: what the formula derives, it writes there
        kwargs = {"context": context} if self.wants_context else {}
        items = tuple(self.fn(*values, **kwargs))
        if not items or not all(isinstance(t, Term) for t in items):
            raise LedgerError(f"formula for {self.name} must return Term objects, got {items!r}")
        tensors = [v for v in values if isinstance(v, Tensor)]
        floating = [v.dtype for v in tensors if v.dtype in ("fp64", "fp32", "fp16", "bf16", "fp8", "fp4")]
        dt = self.roof_dtype or (floating[0] if floating else "fp32")
        roof = (Roof("matmul", dt) if self.roof == "matmul"
                else Roof("simt", "fp64" if dt == "fp64" else "fp32"))
        shape = {p: (list(v.shape) if isinstance(v, Tensor) else v)
                 for (p, _, _), v in zip(self.args, values, strict=True)
                 if isinstance(v, Tensor | int | float | str) and not isinstance(v, bool)}
        label_shape = {k: "x".join(map(str, v)) if isinstance(v, list) else v for k, v in shape.items()}
        label_shape |= context.label
        # a collective's bytes cross the GPU's links: its roof is the interconnect
        # (nsroof.roofs.machines.interconnect)
        facts = {"link_roof": 1.0} if self.roof == "link" else {}
        return Operator(self.name, label_shape, dt, Cost(items), roof, facts=facts)

    def _value(self, i: int, name: str, kind: ArgKind, optional: bool, shapes: Sequence[Any],
               dtypes: Sequence[str], concrete: Sequence[Any]) -> Any:
        if kind == "tensor":
            dt = _TORCH_DTYPES.get(str(dtypes[i])) if i < len(dtypes) else None
            shape = shapes[i] if i < len(shapes) else None
            if dt is None or not isinstance(shape, list | tuple) or any(isinstance(x, list) for x in shape):
                if optional:
                    return None
                raise Missing(f"{self.name}: tensor argument {name} (#{i}) not recorded")
            return Tensor(tuple(int(x) for x in shape), dt)
        if kind == "tensors":
            dt = dtypes[i] if i < len(dtypes) else ""
            shape = shapes[i] if i < len(shapes) else None
            if not isinstance(shape, list) or not all(isinstance(x, list) for x in shape) or not shape:
                raise Missing(f"{self.name}: tensor list {name} (#{i}) not recorded")
            return [Tensor(tuple(x), _TORCH_DTYPES.get(str(dt), "fp32")) for x in shape]
        value = concrete[i] if i < len(concrete) else None
        if value is None:
            if optional:
                return None
            raise Missing(f"{self.name}: argument {name} (#{i}) not recorded")
        return {"int": int, "float": float, "bool": bool, "str": str}[kind](value)


_OPS: dict[str, OpFormula] = {}
_LOADED: dict[str, list[str]] = {}  # --formulas files already run, by real path
_BUILTIN_NAMES: list[Callable[[str], bool]] = []  # tests whether a name has a built-in aten reader


def formula(name: str, *, source: str = "", roof: str = "simt", roof_dtype: str = "", inside: bool = False,
            _user: bool = True) -> Callable[[Callable[..., Iterable[Term]]], Callable[..., Iterable[Term]]]:
    """Register `fn` as the formula of op `name` ("namespace::op", the name the trace records, no overload).
    Every parameter must be annotated Tensor, list[Tensor], int, float, bool or str (a `| None` makes it
    optional); a keyword-only `context` parameter receives the OpContext (with `inside=True`, holding the
    calls recorded inside this one: OpContext.inside). Registering a name twice, or a
    name the built-in ledger already costs, is an error."""

    def decorate(fn: Callable[..., Iterable[Term]]) -> Callable[..., Iterable[Term]]:
        if (not isinstance(name, str) or not ("::" in name or name == "record_param_comms")
                or name.endswith(":")):
            raise LedgerError(f"op formula name must be 'namespace::op' as the trace records it, "
                              f"got {name!r}")
        if name in _OPS:
            raise LedgerError(f"op {name!r} already has a formula "
                              f"({_OPS[name].fn.__module__}.{_OPS[name].fn.__name__})")
        if any(test(name) for test in _BUILTIN_NAMES):
            raise LedgerError(f"op {name!r} already has a built-in formula")
        if roof not in ("simt", "matmul", "link"):
            raise LedgerError(f"op formula {name!r}: roof must be simt, matmul or link, got {roof!r}")
        _OPS[name] = OpFormula(name, fn, *_signature(name, fn), roof,
                               source or (inspect.getdoc(fn) or "").split("\n")[0], _user, roof_dtype,
                               inside)
        return fn

    return decorate


def _signature(name: str, fn: Callable[..., Any]) -> tuple[tuple[tuple[str, ArgKind, bool], ...], bool]:
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001 - a forward reference that does not resolve: read the raw annotations
        hints = {}
    args: list[tuple[str, ArgKind, bool]] = []
    wants_context = False
    for p in inspect.signature(fn).parameters.values():
        if p.kind is p.KEYWORD_ONLY and p.name == "context":
            wants_context = True
            continue
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.POSITIONAL_ONLY):
            raise LedgerError(f"op formula {name!r}: parameter {p.name!r} must be positional (one per op "
                              "argument)")
        kind, optional = _kind(hints.get(p.name, p.annotation))
        if kind is None:
            raise LedgerError(f"op formula {name!r}: parameter {p.name!r} needs a Tensor, list[Tensor], int, "
                              "float, bool or str annotation")
        args.append((p.name, kind, optional or p.default is None))
    return tuple(args), wants_context


def _kind(annotation: Any) -> tuple[ArgKind | None, bool]:
    if isinstance(annotation, str):
        text = annotation.replace(" ", "")
        if text.endswith("|None"):
            return _KINDS.get(text.removesuffix("|None")), True
        return _KINDS.get(text), False
    args = typing.get_args(annotation)
    if type(None) in args and len(args) == 2:
        inner = next(a for a in args if a is not type(None))
        return _KINDS.get(inner), True
    try:
        return _KINDS.get(annotation), False
    except TypeError:
        return None, False


def unregister(name: str) -> None:
    """For tests that register throw-away formulas."""
    _OPS.pop(name, None)


# TraceLens's kernel_shape_profiler records an SGLang launcher function as
# `sglang_profiler::<module>_<fn>_<n>`, n a per-run counter (AMD-AGI/TraceLens strips it the same way): the
# formula is the function's
_NUMBERED = re.compile(r"(sglang_profiler::\w+?)_\d+$")


def get(name: str) -> OpFormula | None:
    """The formula of op `name` (an overload suffix '.out' is ignored, and the counter suffix of a
    `sglang_profiler::…_N` op), or None."""
    key = name.split(".", 1)[0] if "::" in name else name
    found = _OPS.get(key)
    if found is None and (numbered := _NUMBERED.fullmatch(key)):
        found = _OPS.get(numbered.group(1))
    return found


def op_names(*, user: bool | None = None) -> list[str]:
    return sorted(n for n, f in _OPS.items() if user is None or f.user == user)


def load_file(path: str) -> list[str]:
    """Run a --formulas FILE.py (its @nsroof.formula decorators register its ops); the names it added."""
    import os
    import runpy

    from nsroof.errors import NsroofError

    key = os.path.realpath(path)
    if key in _LOADED:  # a second command in the same process (tests, notebooks) loads it once
        return _LOADED[key]
    before = set(_OPS)
    try:
        runpy.run_path(path, run_name="nsroof_formulas")
    except LedgerError as exc:
        raise NsroofError(f"{path}: {exc}") from None
    except (OSError, SyntaxError) as exc:
        raise NsroofError(f"{path}: cannot load formulas ({exc}); give a Python file of @nsroof.formula "
                          "functions") from None
    _LOADED[key] = sorted(set(_OPS) - before)
    return _LOADED[key]


def loaded_files() -> list[str]:
    """The --formulas files this process has run (real paths, first loaded first): what a worker process
    must load again to cost the same ops (nsroof.dataset)."""
    return list(_LOADED)


def add_builtin_test(test: Callable[[str], bool]) -> None:
    _BUILTIN_NAMES.append(test)


_MODEL: ContextVar[Any] = ContextVar("nsroof_model_config", default=None)


def default_model() -> Any:
    """The --model-config the running command set (None when none)."""
    return _MODEL.get()


@contextmanager
def using_model(model: Any) -> Iterator[None]:
    """Cost the ops inside with this ModelConfig as the default model facts."""
    token = _MODEL.set(model)
    try:
        yield
    finally:
        _MODEL.reset(token)

