"""NVTX ranges in the ``nsroof`` domain: ``annotate(name)``, ``annotate_modules(model)``, ``step()``.

Ranges are push/pop ranges in their own domain, so ``ncu --nvtx-include "nsroof@NAME/"`` can select them
without interleaving with the default-domain ranges torch's emit_nvtx writes. When no tool is attached the
``nvtx`` package hands out a dummy domain and a range costs two attribute lookups and a list append.
Without the nvtx package the ranges go through torch.cuda.nvtx (a CUDA build of torch), in NVTX's default
domain; ``backend()`` says which is in use (``_domain`` chooses; NSROOF_NVTX_BACKEND forces one).

While a torch.profiler session is recording, every range (but module backward ranges) is also opened in the
profiler under the same name — user ranges as ``record_function``, module ranges as torch's C++
``_RecordFunctionFast`` — so the profiler's op tree carries the same path (nsroof.profile reads it back as
``nvtx_path``; it maps backward ops to their forward op's path through autograd sequence numbers).

Module hooks return at once while Dynamo traces (torch.compile): they never enter a compiled graph, and a
compiled module is named as the module it wraps.

Nothing happens at import: the domain is created on the first range.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from nsroof.collectors.module_names import GlobalNames, original, quiet_compile_warning, range_name

DOMAIN = "nsroof"
BACKWARD_SUFFIX = " (backward)"
_NODE_KEY = "nsroof_backward_ranges"  # a module's backward range: "<qualified name> (backward)"

F = TypeVar("F", bound=Callable[..., Any])

# Range names created by annotate_modules (forward and backward), so collectors can tell module ranges
# from user ranges when they rebuild the path of an op.
MODULE_RANGE_NAMES: set[str] = set()

_local = threading.local()
_step_lock = threading.Lock()
_step_count = 0
_step_listeners: list[Callable[[int], None]] = []


class _NoDomain:
    """Stands in for the nvtx domain when no NVTX backend is there (no nvtx package, no CUDA torch)."""

    name = "none"

    def push_range(self, attributes: Any) -> None:
        return None

    def pop_range(self) -> None:
        return None

    def mark(self, attributes: Any) -> None:
        return None

    def get_event_attributes(self, message: str, *args: Any) -> Any:
        return message


class _TorchDomain:
    """torch.cuda.nvtx behind the nvtx package's domain interface. torch's bindings take no domain, so its
    ranges are in NVTX's default domain (ncu's filter is then "NAME", not "nsroof@NAME"); they are plain
    ASCII messages, so an event's attributes are its name."""

    name = "torch.cuda.nvtx"

    def __init__(self, module: Any) -> None:
        self._nvtx = module

    def push_range(self, attributes: Any) -> None:
        self._nvtx.range_push(attributes)

    def pop_range(self) -> None:
        self._nvtx.range_pop()

    def start_range(self, attributes: Any) -> int:
        return int(self._nvtx.range_start(attributes))

    def end_range(self, range_id: int) -> None:
        self._nvtx.range_end(range_id)

    def mark(self, attributes: Any) -> None:
        self._nvtx.mark(attributes)

    def get_event_attributes(self, message: str, *args: Any) -> Any:
        return message

    def listening(self) -> bool:
        # nvtxRangePushA returns the new range's depth (>= 0) to a tool, and a negative value when no
        # tool is attached (NVTX v3's no-op implementation)
        depth = self._nvtx.range_push("nsroof.probe")
        if depth is not None and depth >= 0:
            self._nvtx.range_pop()
            return True
        return False


BACKEND_ENV = "NSROOF_NVTX_BACKEND"  # nvtx | torch | none: which NVTX binding nsroof's ranges use
BACKENDS: dict[str, str] = {"nvtx": "nvtx", "torch": "torch.cuda.nvtx", "none": "none"}


def _torch_nvtx(required: bool) -> Any:
    """torch.cuda.nvtx when torch is a CUDA build (a CPU build carries a stub that raises), else None.
    torch is imported only when it already is, or when the backend was asked for by name."""
    if "torch" not in sys.modules and not required:
        return None
    try:
        import torch.cuda.nvtx as torch_nvtx
    except ImportError:
        return None
    return torch_nvtx if hasattr(getattr(torch_nvtx, "_nvtx", None), "rangeStartA") else None


@functools.lru_cache(maxsize=1)
def _domain() -> Any:
    """The NVTX backend: the nvtx package's `nsroof` domain; without it torch.cuda.nvtx (default domain);
    without either a no-op. NSROOF_NVTX_BACKEND=nvtx|torch|none picks one (`nsroof ncu` sets it for the
    profiled process, so its NVTX filter names the right domain); a backend asked for by name that is not
    there is an error, never a silent no-op."""
    import os

    from nsroof.errors import NsroofError

    choice = os.environ.get(BACKEND_ENV, "").strip().lower()
    if choice and choice not in BACKENDS:
        raise NsroofError(f"{BACKEND_ENV}={choice}: use one of {', '.join(BACKENDS)}")
    if choice in ("", "nvtx"):
        try:
            import nvtx
        except ImportError:
            if choice == "nvtx":
                raise NsroofError(f"{BACKEND_ENV}=nvtx but the nvtx package is not installed "
                                  "(pip install nvtx)") from None
        else:
            domain = nvtx.get_domain(DOMAIN)
            if hasattr(domain, "push_range"):
                return domain
            from nsroof.collectors.nvtx_legacy import LegacyDomain

            return LegacyDomain(nvtx, DOMAIN)
    if choice in ("", "torch"):
        module = _torch_nvtx(required=choice == "torch")
        if module is not None:
            return _TorchDomain(module)
        if choice == "torch":
            raise NsroofError(f"{BACKEND_ENV}=torch but torch.cuda.nvtx is not usable here "
                              "(a CPU build of torch)")
    return _NoDomain()


@functools.lru_cache(maxsize=1)
def _is_dummy(domain_id: int) -> bool:
    try:
        from nvtx._lib import dummy_domain
    except ImportError:
        # nvtx <= 0.2.11 hands out no dummy domain: its ranges reach a tool whenever one is injected
        import os

        return not os.environ.get("NVTX_INJECTION64_PATH")
    return domain_id == id(dummy_domain)


@functools.lru_cache(maxsize=8192)
def _attributes(name: str) -> Any:
    # Registered strings, created once per name: the fast path the nvtx package recommends.
    return _domain().get_event_attributes(name, None, None, None)


def _nvtx() -> Any:
    """The domain to push to, or None when no NVTX tool listens (decided once per process, like the nvtx
    package itself decides)."""
    state = _STATE.get("nvtx", _UNSET)
    if state is _UNSET:
        domain = _domain()
        if isinstance(domain, _NoDomain):
            listening = False
        elif isinstance(domain, _TorchDomain):
            listening = domain.listening()
        else:
            listening = not _is_dummy(id(domain))
        state = _STATE["nvtx"] = domain if listening else None
    return state


def backend() -> tuple[str, bool]:
    """(the NVTX backend in use: 'nvtx', 'torch.cuda.nvtx' or 'none'; whether a tool listens to it)."""
    domain = _domain()
    name = domain.name if isinstance(domain, (_NoDomain, _TorchDomain)) else "nvtx"
    return name, _nvtx() is not None


_UNSET = object()
_STATE: dict[str, Any] = {}


def _stack() -> list[tuple[str, Any]]:
    st: list[tuple[str, Any]] | None = getattr(_local, "stack", None)
    if st is None:
        st = []
        _local.stack = st
    return st


def _torch_profiler_recording() -> bool:
    # Only look when torch is already imported: nsroof never imports torch for a range.
    prof = sys.modules.get("torch.autograd.profiler")
    return bool(prof is not None and getattr(prof, "_is_profiler_enabled", False))


def _push(name: str, record_in_profiler: bool = True, fast: bool = False) -> None:
    """Open range `name` in NVTX and, while torch.profiler records, as ``record_function`` (a
    ``user_annotation``) or with `fast` (module ranges) as the C++ ``_RecordFunctionFast``, a tenth of the
    cost (a ``cpu_op`` named by the module; the trace's ``module_ranges`` fact makes the importer read it as
    a range)."""
    domain = _nvtx()
    process_id = None
    if domain is not None:
        domain.push_range(_attributes(name))
        if name in PROCESS_WIDE:
            process_id = domain.start_range(_attributes(name))
    record = None
    if record_in_profiler and _torch_profiler_recording():
        record = _recorders()[fast](name)
        record.__enter__()
    _stack().append((name, (record, process_id)))


def _recorders() -> tuple[Any, Any]:  # (record_function, _RecordFunctionFast), imported once
    found = _STATE.get("recorders")
    if found is None:
        from torch._C._profiler import _RecordFunctionFast
        from torch.autograd.profiler import record_function

        found = _STATE["recorders"] = (record_function, _RecordFunctionFast)
    return found  # type: ignore[no-any-return]


def _pop_top() -> str:
    st = _stack()
    name, (record, process_id) = st.pop()
    if record is not None:
        record.__exit__(None, None, None)
    domain = _nvtx()
    if domain is not None:
        domain.pop_range()
        if process_id is not None:
            domain.end_range(process_id)
    return name


# Names whose annotate() range is also opened as a process-wide start/end range in the nsroof domain.
# Push/pop ranges belong to one thread, so kernels launched from autograd's backward threads or a data
# loader's threads are outside them; a start/end range holds every kernel of the process launched while it
# is open, which is what `ncu --nvtx-include "nsroof@NAME"` (no trailing '/': start/end syntax) selects.
PROCESS_WIDE: set[str] = set()


class process_range:  # noqa: N801 - used like a function: `with process_range("nsroof.run"):`
    """A start/end NVTX range in the nsroof domain, open on every thread until closed (see PROCESS_WIDE)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._id: Any = None
        self._domain: Any = None

    def __enter__(self) -> process_range:
        self._domain = _nvtx()
        if self._domain is not None:
            self._id = self._domain.start_range(_attributes(self.name))
        return self

    def __exit__(self, *exc: object) -> None:
        if self._domain is not None and self._id is not None:
            self._domain.end_range(self._id)
        self._id = None


def _pop(name: str) -> None:
    """Close the innermost open range called `name`, closing any range opened inside it first, so the
    NVTX stack stays balanced even when a hook fires out of order."""
    st = _stack()
    if st and st[-1][0] == name:
        _pop_top()
        return
    for depth in range(len(st) - 1, -1, -1):
        if st[depth][0] == name:
            while len(st) > depth:
                _pop_top()
            return


def current_path() -> list[str]:
    """Names of the nsroof ranges open on this thread, outermost first."""
    return [name for name, _ in _stack()]


class annotate:  # noqa: N801 - used like a function: `with nsroof.annotate("attn"):`
    """An NVTX push/pop range in the ``nsroof`` domain; a context manager and a decorator.

    >>> with annotate("forward"):
    ...     pass
    >>> @annotate("loss")
    ... def loss(x): ...
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("annotate() needs a non-empty range name")
        if '"' in name:
            # ncu does not escape quotes inside range names: one breaks the CSV row it exports.
            raise ValueError(f"range name {name!r} contains '\"', which ncu cannot export; "
                             "use another character")
        self.name = name

    def __enter__(self) -> annotate:
        _push(self.name)
        return self

    def __exit__(self, *exc: object) -> None:
        _pop(self.name)

    def __call__(self, func: F) -> F:
        name = self.name

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            _push(name)
            try:
                return func(*args, **kwargs)
            finally:
                _pop(name)

        return wrapper  # type: ignore[return-value]


def step() -> int:
    """Mark the end of a training step; returns the number of steps marked so far.

    Emits an NVTX mark ``step N`` in the nsroof domain and tells an active ``nsroof.profile`` session,
    which counts warm-up and recorded steps from these marks."""
    global _step_count
    with _step_lock:
        _step_count += 1
        n = _step_count
    domain = _nvtx()
    if domain is not None:
        domain.mark(domain.get_event_attributes(f"step {n}", None, None, None))
    for listener in list(_step_listeners):
        listener(n)
    return n


def add_step_listener(listener: Callable[[int], None]) -> Callable[[], None]:
    """Call `listener(step_number)` on every step(); returns a function that removes it."""
    _step_listeners.append(listener)

    def remove() -> None:
        if listener in _step_listeners:
            _step_listeners.remove(listener)

    return remove


class ModuleRanges:
    """Handle returned by annotate_modules: `.remove()` (or leaving a `with` block) removes every hook."""

    def __init__(self, handles: list[Any], names: dict[str, str]) -> None:
        self._handles = handles
        self.names = names  # qualified module name -> range name

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def __enter__(self) -> ModuleRanges:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def module_range_names(model: Any, root: str | None = None) -> dict[str, str]:
    """Qualified module name -> range name: the root is named by its class, children by their path. A
    torch.compile'd module (OptimizedModule) is named as the module it wraps (see module_names.range_name)."""
    root_name = root or type(original(model)).__name__
    return {qual: range_name(root_name, qual) for qual, _ in model.named_modules()}


def _compiling() -> Callable[[], bool]:
    """torch.compiler.is_compiling, true while Dynamo traces (it folds the call to a constant): module hooks
    return at once then, so they never enter or break a compiled graph; the compiled region is attributed to
    the module whose call entered it (its hooks run outside the graph)."""
    import torch

    return torch.compiler.is_compiling


def annotate_modules(model: Any, *, backward: bool = True, root: str | None = None) -> ModuleRanges:
    """Open a range around every nn.Module's forward (and backward), named by its qualified name.

    Backward ranges use autograd node and tensor hooks rather than full module backward hooks: those wrap
    outputs in a view and then forbid in-place ops on them (``ReLU(inplace=True)`` would fail). A backward
    range opens when the module's last forward node is about to run and closes once the gradients of all
    its inputs exist; ranges still open when a backward pass ends (modules whose inputs need no gradient)
    are closed then."""
    names = module_range_names(model, root)
    compiling = _compiling()
    handles: list[Any] = []
    for qual, module in model.named_modules():
        name = names[qual]
        _register_range_name(name, backward)

        def pre(module: Any, args: Any, name: str = name) -> None:
            if not compiling():
                _enter_module(name, args, backward)

        def post(module: Any, args: Any, output: Any, name: str = name) -> None:
            if not compiling():
                _exit_module(name, output, backward)

        handles.append(module.register_forward_pre_hook(pre))
        handles.append(module.register_forward_hook(post, always_call=True))
    return ModuleRanges(handles, names)


def _register_range_name(name: str, backward: bool) -> None:
    MODULE_RANGE_NAMES.add(name)
    if backward:
        MODULE_RANGE_NAMES.add(name + BACKWARD_SUFFIX)


def annotate_all_modules(*, backward: bool = True) -> ModuleRanges:
    """annotate_modules for every nn.Module of the process, through torch's global module hooks: what
    nsroof.profile and the ncu bootstrap use when they cannot know the model."""
    from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

    names = GlobalNames(lambda name: _register_range_name(name, backward))
    if not backward and _nvtx() is None:  # the profile's path: a profiler range only
        pre, post = _profiler_module_hooks(names)
    else:
        pre, post = _module_hooks(names, backward)
    handles = [register_module_forward_pre_hook(pre), register_module_forward_hook(post, always_call=True),
               quiet_compile_warning(), names]  # the names last: the hooks that read them go first
    return ModuleRanges(handles, {})


def _module_hooks(names: GlobalNames, backward: bool) -> tuple[Callable[..., None], Callable[..., None]]:
    """Global hooks opening an NVTX range (and a profiler range while torch.profiler records) per call."""
    known = names.names
    compiling = _compiling()

    def pre(module: Any, args: Any) -> None:
        if not compiling():
            _enter_module(known.get(id(module)) or names.of(module), args, backward)

    def post(module: Any, args: Any, output: Any) -> None:
        name = known.get(id(module))
        if name is not None and not compiling():
            _exit_module(name, output, backward)

    return pre, post


def _profiler_module_hooks(names: GlobalNames) -> tuple[Callable[..., None], Callable[..., None]]:
    """Global hooks for when no NVTX tool listens (decided once per process, see _nvtx): a C++
    ``_RecordFunctionFast`` per module call while torch.profiler records, nothing else. They run on every
    module call of a launch-bound step, so what they read is looked up once here; the per-thread range
    stack is the one the other ranges use (_stack)."""
    known = names.names
    compiling = _compiling()
    fast, profiler = _recorders()[1], sys.modules["torch.autograd.profiler"]

    def pre(module: Any, args: Any) -> None:
        if not profiler._is_profiler_enabled or compiling():
            return
        name = known.get(id(module)) or names.of(module)
        record = fast(name)
        record.__enter__()
        try:
            _local.stack.append((name, (record, None)))
        except AttributeError:
            _local.stack = [(name, (record, None))]

    def post(module: Any, args: Any, output: Any) -> None:
        name = known.get(id(module))
        if name is None or compiling():
            return
        st = getattr(_local, "stack", None)
        if st and st[-1][0] == name:
            record = st.pop()[1][0]
            if record is not None:
                record.__exit__(None, None, None)
        else:
            _pop(name)  # out of order: close it with what was opened inside it

    return pre, post


def _tensors_requiring_grad(values: Any) -> list[Any]:
    import torch
    from torch.utils._pytree import tree_flatten

    flat, _ = tree_flatten(values)
    return [t for t in flat if isinstance(t, torch.Tensor) and t.requires_grad]


def listening() -> bool:
    """Whether anything would see a range now: an NVTX tool, or a torch.profiler session recording."""
    return _nvtx() is not None or _torch_profiler_recording()


def _enter_module(name: str, args: Any, backward: bool) -> None:
    if not listening():
        return  # nothing listens: no range, no backward hooks (the exit then finds nothing to close)
    _push(name, fast=True)
    # Backward ranges are NVTX only (see _node_prehook), so they need an NVTX tool.
    if backward and _nvtx() is not None:
        inputs = _tensors_requiring_grad(args)
        if inputs:
            import torch

            bw_name = name + BACKWARD_SUFFIX
            # Fires once the gradients of all inputs are computed: this module's backward is done.
            torch.autograd.graph.register_multi_grad_hook(inputs, lambda grads: _pop(bw_name), mode="all")


def _exit_module(name: str, output: Any, backward: bool) -> None:
    st = _stack()
    if st and st[-1][0] == name:
        _pop_top()
    else:
        _pop(name)
    if backward and _nvtx() is not None:
        nodes = {id(t.grad_fn): t.grad_fn for t in _tensors_requiring_grad(output) if t.grad_fn is not None}
        if nodes:
            _open_backward_on_first(name + BACKWARD_SUFFIX, list(nodes.values()))


def _open_backward_on_first(bw_name: str, nodes: list[Any]) -> None:
    # A node pre-hook runs after the tensor hooks of the same step, so the consumer's "backward done"
    # (a tensor hook) closes before this producer's backward opens: ranges nest like the forward.
    # Modules that return the same tensor (a container and its last child) share one node: their names
    # queue on the node's metadata and open outermost first, i.e. in reverse registration order.
    opened = [False]
    for node in nodes:
        queue: list[tuple[str, list[bool]]] | None = node.metadata.get(_NODE_KEY)
        if queue is None:
            queue = []
            node.metadata[_NODE_KEY] = queue
            node.register_prehook(_node_prehook(queue))
        queue.append((bw_name, opened))


def _node_prehook(queue: list[tuple[str, list[bool]]]) -> Callable[[Any], None]:
    def prehook(grad_outputs: Any) -> None:
        for bw_name, opened in reversed(queue):
            if not opened[0]:
                opened[0] = True
                _ensure_backward_cleanup()
                # NVTX only: a backward range spans several autograd nodes and would not nest inside the
                # profiler's op tree; nsroof.profile attributes backward ops through sequence numbers.
                _push(bw_name, record_in_profiler=False)
        queue.clear()

    return prehook


def _ensure_backward_cleanup() -> None:
    import torch

    task = torch._C._current_graph_task_id()
    if getattr(_local, "cleanup_task", None) == task:
        return
    _local.cleanup_task = task
    stack = _stack()
    depth_at_start = sum(1 for n, _ in stack if not n.endswith(BACKWARD_SUFFIX))

    def close_leftovers() -> None:
        _local.cleanup_task = None
        while len(stack) > depth_at_start and stack[-1][0].endswith(BACKWARD_SUFFIX):
            _pop_top()

    torch.autograd.Variable._execution_engine.queue_callback(close_leftovers)

