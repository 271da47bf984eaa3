"""What Inductor knows of each kernel it generates, recorded while nsroof.profile runs: the post-grad ATen
nodes it fused (op, argument shapes, dtypes and scalars, module path), the buffers it reads and writes.

The hook: with ``torch._inductor.config.cpp.enable_kernel_profile`` on (nsroof.profile turns it on so each
fused C++ kernel is a timed row of its own), Inductor's scheduler calls its wrapper codegen's
``write_kernel_context_guard(kernel_name, node_schedule)`` for every fused kernel it emits, C++
(torch/_inductor/codegen/cpp.py, ``CppScheduling.flush``) and Triton (codegen/simd.py,
``_launch_kernel_and_cleanup``) alike — the place Inductor itself hands a kernel's scheduler nodes to a
profiling hook (the C++ wrapper writes its KernelContextGuard there; the Python wrapper's is a no-op). The
records wrap that method for the run and call the original. Each scheduler node's ``origins`` are the FX
nodes of the post-grad graph it computes (the same set Inductor's provenance tracking,
torch/_inductor/debug.py ``set_kernel_post_grad_provenance_tracing``, writes), with their ``meta['val']``
fake tensors and ``nn_module_stack``.

A kernel is keyed by the name its record function has in the trace: ``graph_<graph_id>_<kernel>`` for the
C++ backend (``cpp.py`` codegen_group), the kernel's own name for Triton. The records are facts, not costs:
the ledger prices them when the report is built (nsroof.costs.fused_kernels), so a saved trace analyzed later
gives the same report.

Nothing here may break a compilation: a record that cannot be read is left out and counted
(``unreadable``), never raised.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

# torch.profiler's names of the dtypes in a trace's "Input type" (what the ledger's readers take)
_PROFILER_DTYPES = {
    "float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
    "float8_e4m3fn": "c10::Float8_e4m3fn", "float8_e5m2": "c10::Float8_e5m2", "int64": "long int",
    "int32": "int", "int8": "signed char", "uint8": "unsigned char", "bool": "bool",
}
# the methods wrapped (module, class, method, what it records): the wrapper codegens' kernel hook (the
# Python wrapper's; the C++ wrapper overrides it) and the scheduler's call of an extern kernel (mm, addmm,
# a fallback op), whose place among the graph's kernel calls gives its FX node's module
_GUARD = "write_kernel_context_guard"
_HOOKS = (("torch._inductor.codegen.wrapper", "PythonWrapperCodegen", _GUARD, "kernel"),
          ("torch._inductor.codegen.cpp_wrapper_cpu", "CppWrapperCpu", _GUARD, "kernel"),
          ("torch._inductor.scheduler", "Scheduler", "codegen_extern_call", "extern"))


class Recorder:
    """The kernels recorded so far (trace name -> record) and the count of those that could not be read."""

    def __init__(self) -> None:
        self.kernels: dict[str, dict[str, Any]] = {}
        self.unreadable = 0
        # per generated graph (graph_key), the ops its wrapper calls in order with their modules
        # ({"op", "root", "module"}): a fused kernel by its trace name (Inductor reuses one kernel for
        # identical code, e.g. each layer's MLP: one name, a call and a module per layer), an extern
        # kernel by its aten op
        self.calls: dict[str, list[dict[str, Any]]] = {}

    def generated(self) -> int:
        """How many kernel calls Inductor generated so far (a graph of extern calls alone counts too)."""
        return sum(len(c) for c in self.calls.values()) + self.unreadable

    def facts(self) -> dict[str, Any]:
        """What goes into the trace's 'nsroof' facts (nsroof.importers.trace.kineto reads it back)."""
        return {"kernels": self.kernels, "calls": self.calls, "unreadable": self.unreadable}

    def kernel(self, _wrapper: Any, kernel_name: str, node_schedule: Any, *_: Any, **__: Any) -> None:
        try:
            from torch._inductor.virtualized import V

            graph = V.graph
            key, record = kernel_record(graph, str(kernel_name), node_schedule)
        except Exception:  # noqa: BLE001 - a record must never break the compilation
            self.unreadable += 1
            return
        before = self.kernels.get(key)
        if before is not None and _ops(before) != _ops(record):
            record["ambiguous"] = True  # two different kernels of one name (a forward's and a backward's)
        self.kernels[key] = record
        self.calls.setdefault(record["graph"], []).append(
            {"op": key, "root": record["root"], "module": record["module"]})

    def extern(self, _scheduler: Any, scheduler_node: Any, *_: Any, **__: Any) -> None:
        try:
            from torch._inductor.virtualized import V

            call = extern_call(scheduler_node.node)
            key = graph_key(V.graph)
        except Exception:  # noqa: BLE001 - a record must never break the compilation
            self.unreadable += 1
            return
        if call is not None:
            self.calls.setdefault(key, []).append(call)


def _ops(record: dict[str, Any]) -> list[str]:
    return [n["op"] for n in record["nodes"]]


def graph_key(graph: Any) -> str:
    """A generated graph's key: Dynamo's graph id (the kernels' graph_<id>_ prefix, shared by a forward and
    its backward) and Inductor's post-grad graph counter (one per GraphLowering)."""
    return f"{getattr(graph, 'graph_id', None)}.{getattr(graph, 'post_grad_graph_id', None)}"


def install(recorder: Recorder) -> Callable[[], None]:
    """Wrap the _HOOKS methods so each kernel is recorded; returns the undo. A module not imported yet is
    wrapped when it is (nsroof.collectors.after_import). A torch without the hooks records nothing (the
    kernels then stay uncosted, with that reason)."""
    from nsroof.collectors.after_import import when_imported

    undo: list[Callable[[], None]] = []
    actions: dict[str, list[Callable[[Any], None]]] = {}
    for module_name, class_name, method, kind in _HOOKS:
        def wrap(module: Any, class_name: str = class_name, method: str = method, kind: str = kind) -> None:
            undo.extend(_wrap(module, class_name, method, getattr(recorder, kind)))
        actions.setdefault(module_name, []).append(wrap)
    stop_waiting = when_imported(actions)

    def restore() -> None:
        stop_waiting()
        for u in reversed(undo):
            u()
        undo.clear()
    return restore


def _wrap(module: Any, class_name: str, method: str, record: Callable[..., None]) -> list[Callable[[], None]]:
    cls: Any = getattr(module, class_name, None)
    original = cls.__dict__.get(method) if cls is not None else None
    if original is None:
        return []

    def hooked(self: Any, *args: Any, **kwargs: Any) -> Any:
        record(self, *args, **kwargs)
        return original(self, *args, **kwargs)

    setattr(cls, method, hooked)
    return [lambda: setattr(cls, method, original)]


def extern_call(node: Any) -> dict[str, Any] | None:
    """An extern kernel's call as the trace records it: the aten op it runs (its FX node's target; a
    fallback's op overload) and its module; None for what runs no op (MultiOutput picks a tuple's item)."""
    if type(node).__name__ in ("MultiOutput", "NoneAsConstantBuffer"):
        return None
    origin = getattr(node, "origin_node", None)
    target = getattr(node, "op_overload", None) or (origin.target if origin is not None else None)
    if target is None:
        return None
    # its own FX node's module; else (a fallback's node is often a tuple's getitem, with no stack) where the
    # nodes it came from meet
    origins = [origin] if origin is not None and _stack(origin) else sorted(
        getattr(node, "origins", ()) or (), key=lambda n: str(n.name))
    root, below = kernel_module([{"op": op_name(n.target), "module": module_of(_stack(n))} for n in origins
                                 if getattr(n, "op", "") == "call_function"])
    return {"op": op_name(target), "root": root, "module": below}


def _stack(node: Any) -> Any:
    return node.meta.get("nn_module_stack") or node.meta.get("fwd_nn_module_stack")


def kernel_record(graph: Any, kernel_name: str, node_schedule: Any) -> tuple[str, dict[str, Any]]:
    """(the kernel's name in the trace, its record): the FX nodes it fused and the buffers it moves."""
    snodes = [s for s in (node_schedule if isinstance(node_schedule, list | tuple) else [node_schedule])
              if hasattr(s, "read_writes")]  # not the EnableReduction/DisableReduction markers
    graph_id = getattr(graph, "graph_id", None)
    cpp = kernel_name.startswith("cpp_")
    key = f"graph_{graph_id}_{kernel_name}" if cpp and graph_id is not None else kernel_name
    extern = extern_origins(graph)
    nodes: dict[str, dict[str, Any]] = {}
    for s in snodes:
        for origin in sorted(getattr(s.node, "origins", ()) or (), key=lambda n: str(n.name)):
            if (getattr(origin, "op", "") == "call_function" and origin.name not in nodes
                    and origin.name not in extern):
                nodes[origin.name] = node_record(origin)
    reads, writes = moved_buffers(graph, snodes)
    root, module = kernel_module(list(nodes.values()))
    return key, {"graph": graph_key(graph), "kernel": kernel_name, "root": root, "module": module,
                 "nodes": list(nodes.values()), "reads": reads, "writes": writes}


def extern_origins(graph: Any) -> frozenset[str]:
    """The FX nodes this graph runs as extern kernels (mm, addmm, convolution, a fallback op): they are op
    calls of their own in the trace, costed there; a fused kernel that reads one of their outputs through a
    view lists them among its origins too, and must not count them again."""
    cached = getattr(graph, "_nsroof_extern_origins", None)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    names: set[str] = set()
    for s in getattr(getattr(graph, "scheduler", None), "nodes", ()) or ():
        if type(s).__name__ != "ExternKernelSchedulerNode":
            continue
        origin = getattr(s.node, "origin_node", None)
        found = [origin] if origin is not None else list(getattr(s.node, "origins", ()) or ())
        names.update(str(n.name) for n in found)
    out = frozenset(names)
    try:
        graph._nsroof_extern_origins = out
    except AttributeError:
        pass
    return out


def node_record(node: Any) -> dict[str, Any]:
    """One FX node as torch.profiler records an op call: its name, each schema argument's shape, dtype and
    scalar value (kineto's 'Input Dims', 'Input type', 'Concrete Inputs'), and its module stack."""
    target = node.target
    schema = getattr(target, "_schema", None)
    values = _schema_arguments(node, schema)
    return {"name": str(node.name), "op": op_name(target),
            "shapes": [_shape(v) for v in values], "dtypes": [_dtype(v) for v in values],
            "concrete": [_concrete(v) for v in values],
            "module": module_of(_stack(node))}


def op_name(target: Any) -> str:
    """aten.mm.default -> 'aten::mm'; aten.add.Tensor -> 'aten::add' (the name torch.profiler records)."""
    schema = getattr(target, "_schema", None)
    if schema is not None:
        return str(schema.name)
    return str(getattr(target, "__name__", target))


def _schema_arguments(node: Any, schema: Any) -> list[Any]:
    """The node's argument values in schema order, defaults filled in (as the dispatcher's stack holds them,
    which is what torch.profiler records)."""
    args, kwargs = list(node.args), dict(node.kwargs)
    if schema is None:
        return args + list(kwargs.values())
    out = []
    for i, a in enumerate(schema.arguments):
        if a.kwarg_only:
            out.append(kwargs.get(a.name, a.default_value if a.has_default_value() else None))
        elif i < len(args):
            out.append(args[i])
        else:
            out.append(kwargs.get(a.name, a.default_value if a.has_default_value() else None))
    return out


def _value(v: Any) -> Any:
    """An FX argument's value: a node's fake tensor (meta['val']), else the argument itself."""
    return v.meta.get("val") if hasattr(v, "meta") else v


def _shape(v: Any) -> list[Any]:
    v = _value(v)
    if hasattr(v, "shape") and hasattr(v, "dtype"):
        return [_int(d) for d in v.shape]
    if isinstance(v, list | tuple) and v and all(hasattr(_value(x), "shape") for x in v):
        return [[_int(d) for d in _value(x).shape] for x in v]
    return []


def _dtype(v: Any) -> str:
    v = _value(v)
    if hasattr(v, "shape") and hasattr(v, "dtype"):
        return _PROFILER_DTYPES.get(str(v.dtype).removeprefix("torch."), str(v.dtype))
    if isinstance(v, bool | int | float):
        return "Scalar"
    if isinstance(v, list | tuple) and v:  # a tensor list of one dtype: that dtype (else a mixed list: '')
        kinds = {_dtype(x) for x in v}
        return kinds.pop() if len(kinds) == 1 else ""
    return ""


def _concrete(v: Any) -> str:
    """A scalar argument as kineto writes it ('' for a tensor or what it does not record)."""
    v = _value(v)
    if hasattr(v, "shape") or v is None:
        return ""
    if isinstance(v, bool | int | float):
        return repr(_int(v) if not isinstance(v, bool | float) else v)
    if isinstance(v, list | tuple) and all(isinstance(_value(x), int | float) for x in v):
        return repr([_int(_value(x)) if not isinstance(_value(x), float) else _value(x) for x in v])
    return ""


def _int(d: Any) -> Any:
    """A size as an int (a symbolic size by its hint; -1 when it has none)."""
    try:
        return int(d)
    except (TypeError, ValueError):
        hint = getattr(getattr(d, "node", None), "hint", None)
        return int(hint) if hint is not None else -1


# the first component of an nn_module_stack path: the compiled frame's local or global the module was
# reached from (L['self'], L['model'], G['net'], or a plain name in older torch)
_ROOT = re.compile(r"^(?:[LG]\[['\"][^'\"]*['\"]\]|[A-Za-z_]\w*)")


def module_of(stack: Any) -> list[str]:
    """A node's innermost module as [root class, path below the root] from its nn_module_stack ({key:
    (path, type)}, outermost first; paths like ``L['self'].layers[0].mlp``). The root class is '' when the
    root is the compiled module itself (its name is the compiled module's range in the trace); [] without a
    stack."""
    if not isinstance(stack, dict) or not stack:
        return []
    entries = [(str(v[0]), v[1]) for v in stack.values() if isinstance(v, tuple | list) and len(v) >= 2]
    if not entries:
        return []
    path = entries[-1][0]
    found = _ROOT.match(path)
    root = found.group(0) if found else ""
    classes = {p: (k if isinstance(k, str) else getattr(k, "__name__", str(k))).rsplit(".", 1)[-1]
               for p, k in entries}
    below = re.sub(r"\[['\"]?([^'\"\]]+)['\"]?\]", r".\1", path[len(root):]).strip(".")
    below = ".".join(p for p in below.split(".") if p and p != "_orig_mod")
    return [classes.get(root, ""), below]


def kernel_module(nodes: list[dict[str, Any]]) -> tuple[str, str]:
    """(root class, path below it) of a fused kernel: its nodes' innermost module when they share one, else
    their longest common prefix. Views and reshapes are left out (Inductor folds a consumer's view of a
    Linear's output into the consumer: its module is the consumer's)."""
    from nsroof.costs.ledger.aten import VIEWS, base_name

    modules = [n["module"] for n in nodes if n["module"] and base_name(n["op"]) not in VIEWS]
    if not modules:
        modules = [n["module"] for n in nodes if n["module"]]
    if not modules:
        return "", ""
    roots = {m[0] for m in modules}
    parts = [m[1].split(".") if m[1] else [] for m in modules]
    common: list[str] = []
    for level in zip(*parts, strict=False):
        if len(set(level)) != 1:
            break
        common.append(level[0])
    return (roots.pop() if len(roots) == 1 else ""), ".".join(common)


def moved_buffers(graph: Any, snodes: list[Any]) -> tuple[dict[str, float], dict[str, float]]:
    """The bytes of each buffer the kernel reads from outside it and of each it writes that outlives it
    (read by a later kernel, or an output of the graph): the fused intermediates move nothing."""
    inside = {s.get_name() for s in snodes}
    produced: dict[str, Any] = {}
    for s in snodes:
        for out in s.get_outputs():
            produced[out.get_name()] = out
    reads: dict[str, float] = {}
    for s in snodes:
        for dep in s.read_writes.reads:
            name = str(dep.name)
            if name not in produced and name not in reads:
                reads[name] = buffer_bytes(graph, name)
    writes: dict[str, float] = {}
    outputs = set(graph.get_output_names()) if hasattr(graph, "get_output_names") else set()
    for name, out in produced.items():
        users = [u for u in getattr(out, "users", []) if not getattr(u, "is_weak", False)]
        outside = any(u.get_name() not in inside for u in users)
        if outside or name in outputs or not users:
            writes[name] = buffer_bytes(graph, name)
    for s in snodes:  # an in-place update of a buffer made elsewhere (a mutated input): written, and read
        for dep in s.read_writes.writes:
            name = str(dep.name)
            if name not in produced and name not in writes:
                writes[name] = buffer_bytes(graph, name)
    return reads, writes


def buffer_bytes(graph: Any, name: str) -> float:
    """numel × element size of a buffer or graph input (NaN when its size has no hint)."""
    try:
        buf = graph.get_buffer(name)
        numel = _hint(graph, buf.get_numel())
        size = buf.get_dtype().itemsize
    except Exception:  # noqa: BLE001 - an unreadable size is NaN, said by the costing
        return math.nan
    return float(numel * size) if numel >= 0 else math.nan


def _hint(graph: Any, expr: Any) -> int:
    """A size's value at this compilation (-1 when it has none): sizevars.optimization_hint (torch 2.13),
    size_hint before it."""
    sizevars = graph.sizevars
    hint = getattr(sizevars, "optimization_hint", None) or sizevars.size_hint
    return int(hint(expr, fallback=-1))
