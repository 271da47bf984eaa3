"""What an Inductor-generated Triton kernel file says of its kernel, read when a trace's launch record points
to one (``kernel_file``) that exists on this machine (a local Inductor cache, e.g. /tmp/torchinductor_$USER).

The file is the kernel's source as Inductor wrote it (pytorch/pytorch torch/_inductor/codegen/triton.py):
a ``@triton_heuristics.<kind>(…, triton_meta={'signature': {name: type, …}, …}, inductor_meta={…})``
decorator over ``def <kernel>(in_out_ptr0, in_ptr0, …, out_ptr0, ks0, xnumel, r0_numel, XBLOCK: tl.constexpr,
…)``, whose body may fix a numel (``xnumel = 1024``: a static shape). Read here, without running it:

* ``arg_names``: the kernel's arguments in order, and ``constexprs`` among them (the block sizes): which
  buffers are in place (``in_out_ptr*``: read and written) and which integers are numels;
* ``numels``: the numels the body fixes;
* ``kernel_flop`` / ``kernel_num_gb``: Inductor's own estimates, when the file's inductor_meta holds them
  (compiled with ``benchmark_kernel`` or ``profile_bandwidth``).

A file that is not there, not Python or not an Inductor kernel gives {}: the launch is costed from the trace
alone.
"""

from __future__ import annotations

import ast
import os
from functools import lru_cache
from typing import Any

# the size a generated kernel file reaches (a few kB; a large template some tens): a bigger file is not one
_MAX_BYTES = 4 << 20
_ESTIMATES = ("kernel_flop", "kernel_num_gb")


def facts(path: Any) -> dict[str, Any]:
    """The facts of the kernel file at `path` ({} when it is not an Inductor Triton kernel file here)."""
    if not isinstance(path, str) or not path.endswith(".py"):
        return {}
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return {}
    if st.st_size > _MAX_BYTES:
        return {}
    return dict(_facts(path, st.st_size, st.st_mtime_ns))


@lru_cache(maxsize=256)
def _facts(path: str, size: int, mtime_ns: int) -> tuple[tuple[str, Any], ...]:
    """Parsed once per file version (a trace launches the same kernels step after step)."""
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename=path)
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError, RecursionError, MemoryError):
        return ()
    kernel = next((node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
                   and any(_heuristic(d) is not None for d in node.decorator_list)), None)
    if kernel is None:
        return ()
    call = next(c for d in kernel.decorator_list if (c := _heuristic(d)) is not None)
    meta = {k.arg: k.value for k in call.keywords if k.arg == "inductor_meta"}
    out: dict[str, Any] = {
        "arg_names": [a.arg for a in kernel.args.args],
        "constexprs": [a.arg for a in kernel.args.args if _is_constexpr(a.annotation)],
        "numels": _static_numels(kernel),
    }
    inductor_meta = meta.get("inductor_meta")
    if isinstance(inductor_meta, ast.Dict):
        for key_node, value_node in zip(inductor_meta.keys, inductor_meta.values, strict=True):
            key = _literal(key_node)
            if key in _ESTIMATES and isinstance(value := _literal(value_node), int | float) \
                    and not isinstance(value, bool):
                out[str(key)] = value
    return tuple(out.items())


def _heuristic(node: ast.expr) -> ast.Call | None:
    """The ``triton_heuristics.<kind>(…)`` decorator call, or None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "triton_heuristics":
        return node
    return None


def _is_constexpr(annotation: ast.expr | None) -> bool:
    return isinstance(annotation, ast.Attribute) and annotation.attr == "constexpr"


def _static_numels(kernel: ast.FunctionDef) -> dict[str, int]:
    out: dict[str, int] = {}
    for stmt in kernel.body:
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and stmt.targets[0].id.endswith("numel") and isinstance(stmt.value, ast.Constant)
                and isinstance(stmt.value.value, int) and not isinstance(stmt.value.value, bool)):
            out[stmt.targets[0].id] = stmt.value.value
    return out


def _literal(node: ast.expr | None) -> Any:
    try:
        return ast.literal_eval(node) if node is not None else None
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return None
